/* The runner's decisions in the audit trail (docs/audit.md): a token
 * refused, a call allowed or refused by policy and the rule, a lease made,
 * used or refused; and GET /v1/audit, which only the control token may
 * read. Never a token, a leased value or a whole lease id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include <sandman/egress.h>
#include <sandman/log.h>
#include <sandman/util.h>

#include "server/server_core.h"
#include "server/server_internal.h"

void server_audit(sm_server *srv, sm_audit_event *ev) {
  if (srv->opts.audit == NULL) return;
  if (ev->request_id == NULL) ev->request_id = sm_log_request_id();
  sm_error err = SM_ERROR_INIT;
  if (sm_audit_record(srv->opts.audit, ev, &err) != 0) sm_log(SM_LOG_WARN, "audit: %s", err.message);
}

void server_audit_call(sm_server *srv, const char *event, const server_execute_params *p,
                       const char *mode, const char *rule, const char *message) {
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = event;
  ev.agent = p->agent;
  ev.user = p->user;
  ev.project = p->project ? p->project : srv->project;
  ev.run_id = p->run_id;
  ev.worker = p->worker_key;
  ev.tool = p->tool ? p->tool : "exec";
  ev.mode = mode;
  ev.rule = rule && *rule ? rule : NULL;
  ev.message = message;
  server_audit(srv, &ev);
}

void server_audit_lease(sm_server *srv, const char *event, const char *lease_id, const char *tool,
                        const char *worker, const char *message) {
  /* The id is a capability: only its first characters, as the log has them. */
  char shown[16] = "";
  if (lease_id) snprintf(shown, sizeof shown, "%.6s...", lease_id);
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = event;
  ev.lease_id = lease_id ? shown : NULL;
  ev.tool = tool;
  ev.worker = worker;
  ev.message = message;
  server_audit(srv, &ev);
}

void server_audit_token(sm_server *srv, const char *route, const char *worker,
                        const char *message) {
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = "token.refused";
  ev.worker = worker;
  ev.message = message;
  json_object *d = json_object_new_object();
  if (d) json_object_object_add(d, "route", json_object_new_string(route));
  ev.detail = d;
  server_audit(srv, &ev);
  json_object_put(d);
}

void server_refuse_token(sm_server *srv, const char *route, server_answer *a) {
  server_audit_token(srv, route, NULL, "missing or invalid token");
  server_answer_error(a, 401, "policy", "missing or invalid token");
}

/* ---- GET /v1/audit ---- */

#define AUDIT_LIMIT_DEFAULT 1000
#define AUDIT_LIMIT_MAX 10000

/* The newest `limit` matching events, in a ring. */
typedef struct tail {
  json_object **ring;
  size_t limit, n, next;
  size_t dropped;
} tail;

static int keep_event(void *ud, json_object *ev) {
  tail *t = ud;
  if (t->n == t->limit) {
    json_object_put(t->ring[t->next]);
    t->dropped++;
  } else {
    t->n++;
  }
  t->ring[t->next] = json_object_get(ev);
  t->next = (t->next + 1) % t->limit;
  return 0;
}

/* The proxy's decisions still in its log, into the trail first. */
static void collect_egress(sm_server *srv) {
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  if (srv->opts.runner == NULL || sm_runner_engine(srv->opts.runner, &e, &err) != 0) return;
  sm_egress_settings *st = sm_runner_egress(srv->opts.runner);
  size_t n = 0;
  if (sm_egress_collect(e, sm_egress_settings_options(st), srv->opts.audit, &n, &err) != 0)
    sm_log(SM_LOG_DEBUG, "audit: collecting the egress proxy's decisions: %s", err.message);
  sm_egress_settings_unref(st);
}

static const char *arg(struct MHD_Connection *conn, const char *name) {
  const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
  return v && *v ? v : NULL;
}

/* Query: since (seconds, or a duration: 10m, 2h), agent, run_id, denied
 * (1/true), limit (1..10000, default 1000). */
static int audit_query(struct MHD_Connection *conn, sm_audit_filter *f, size_t *limit, char *why, size_t len) {
  sm_error err = SM_ERROR_INIT;
  double since = 0;
  const char *s = arg(conn, "since"), *lim = arg(conn, "limit"), *den = arg(conn, "denied");
  if (s && sm_parse_duration(s, &since, &err) != 0) {
    snprintf(why, len, "query 'since': %s", err.message);
    return 400;
  }
  if (s) f->since = sm_now() - since;
  f->agent = arg(conn, "agent");
  f->run_id = arg(conn, "run_id");
  f->denied_only = den && (strcmp(den, "1") == 0 || strcmp(den, "true") == 0);
  int64_t n = AUDIT_LIMIT_DEFAULT;
  if (lim && sm_parse_int(lim, 1, AUDIT_LIMIT_MAX, &n, &err) != 0) {
    snprintf(why, len, "query 'limit': %s", err.message);
    return 400;
  }
  *limit = (size_t)n;
  return 0;
}

/* The HTTP status, with *body (200) or the reason in why. */
static int audit_get(sm_server *srv, struct MHD_Connection *conn, json_object **body, char *why,
                     size_t len) {
  *body = NULL;
  if (srv->opts.audit == NULL || sm_audit_file(srv->opts.audit) == NULL) {
    snprintf(why, len, "this runner keeps no audit trail (audit.enabled is false or no audit.file)");
    return 404;
  }
  sm_audit_filter f = SM_AUDIT_FILTER_INIT;
  tail t = {NULL, 0, 0, 0, 0};
  int status = audit_query(conn, &f, &t.limit, why, len);
  if (status != 0) return status;
  collect_egress(srv);
  t.ring = calloc(t.limit, sizeof *t.ring);
  if (t.ring == NULL) {
    snprintf(why, len, "out of memory");
    return 503;
  }
  sm_error err = SM_ERROR_INIT;
  size_t skipped = 0;
  int rc = sm_audit_read(sm_audit_file(srv->opts.audit), -1, &f, keep_event, &t, &skipped, &err);
  json_object *events = json_object_new_array();
  size_t first = t.n < t.limit ? 0 : t.next;
  for (size_t i = 0; i < t.n; i++) json_object_array_add(events, t.ring[(first + i) % t.limit]);
  free(t.ring);
  if (rc != 0) {
    json_object_put(events);
    snprintf(why, len, "reading the audit trail: %s", err.message);
    return 500;
  }
  *body = json_object_new_object();
  json_object_object_add(*body, "events", events);
  json_object_object_add(*body, "truncated", json_object_new_boolean(t.dropped > 0));
  json_object_object_add(*body, "skipped_lines", json_object_new_int64((int64_t)skipped));
  return 200;
}

void server_audit_route(sm_server *srv, struct MHD_Connection *conn, server_answer *a) {
  char why[512];
  json_object *body = NULL;
  int status = audit_get(srv, conn, &body, why, sizeof why);
  if (status == 200) {
    a->status = 200;
    a->body = body;
  } else {
    server_answer_error(a, status, status == 500 || status == 503 ? "sandbox" : "policy", "%s",
                        why);
  }
}
