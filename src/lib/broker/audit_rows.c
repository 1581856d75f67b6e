/* One audit row per decision of the broker. Who comes from the route
 * (sandman's own knowledge of the call), never from the sandbox; argument
 * values marked secret are masked before they get here, and credential
 * values never get here at all. */
#include <sandman/log.h>

#include "broker/audit_rows.h"

static void add(json_object *o, const char *key, const char *v) {
  if (v && v[0]) json_object_object_add(o, key, json_object_new_string(v));
}

void broker_audit(sm_audit *audit, const sm_route_caller *who, const bk_row *row) {
  if (!audit) return;
  json_object *d = json_object_new_object();
  if (!d) return;
  add(d, "host_tool", row->host_tool);
  add(d, "host_call_id", row->host_call);
  add(d, "call_id", who->call_id);
  add(d, "container_id", who->container_id);
  add(d, "principal", who->principal);
  add(d, "runtime", who->runtime);
  /* The process that asked, as the kernel named it to the relay. */
  if (who->peer_pid > 0) json_object_object_add(d, "peer_pid", json_object_new_int64(who->peer_pid));
  if (who->peer_uid >= 0) json_object_object_add(d, "peer_uid", json_object_new_int64(who->peer_uid));
  add(d, "outcome", row->outcome);
  add(d, "reason", row->reason);
  add(d, "approved_by", row->by);
  add(d, "approval_id", row->approval);
  if (row->exit_code >= 0) json_object_object_add(d, "exit_code", json_object_new_int(row->exit_code));
  if (row->count >= 0) json_object_object_add(d, "count", json_object_new_int(row->count));
  if (row->arguments) json_object_object_add(d, "arguments", json_object_get(row->arguments));
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = row->event;
  ev.message = row->message;
  ev.rule = row->rule;
  ev.request_id = who->call_id && who->call_id[0] ? who->call_id : NULL;
  ev.agent = who->agent && who->agent[0] ? who->agent : NULL;
  ev.user = who->user && who->user[0] ? who->user : NULL;
  ev.project = who->project && who->project[0] ? who->project : NULL;
  ev.run_id = who->run_id && who->run_id[0] ? who->run_id : NULL;
  ev.worker = who->worker_id && who->worker_id[0] ? who->worker_id : NULL;
  ev.tool = who->tool && who->tool[0] ? who->tool : NULL;
  ev.sandbox = who->sandbox && who->sandbox[0] ? who->sandbox : NULL;
  ev.mode = who->mode && who->mode[0] ? who->mode : NULL;
  ev.duration_ms = row->duration_ms;
  ev.detail = d;
  sm_error err = SM_ERROR_INIT;
  if (sm_audit_record(audit, &ev, &err) != 0)
    sm_log(SM_LOG_WARN, "audit: %s was not recorded: %s", row->event, err.message);
  json_object_put(d);
}
