/* The audit events: sandman's event names mapped to OCSF classes and
 * activities, and one event turned into its JSON object. Pure: no files. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sandman/audit.h>
#include <sandman/util.h>
#include <sandman/version.h>

#include "audit/audit_internal.h"

/* OCSF schema version the field names follow. */
#define OCSF_VERSION "1.1.0"

enum { DISP_NONE = 0, DISP_ALLOWED = 1, DISP_BLOCKED = 2 };

typedef struct event_kind {
  const char *name;
  int class_uid;
  const char *class_name;
  int activity_id;
  const char *activity_name;
  int disposition; /* DISP_*: whether the event is a decision */
  int failure;     /* status Failure (else Success) */
} event_kind;

/* One row per event sandman records. Append rows; never change a row's
 * class or activity (a SIEM's rules depend on them). Classes: 1007 Process
 * Activity, 3002 Authentication, 3003 Authorize Session, 3004 Entity
 * Management, 4001 Network Activity, 6003 API Activity. */
static const event_kind kinds[] = {
    {"call.allowed", 1007, "Process Activity", 1, "Launch", DISP_ALLOWED, 0},
    {"call.refused", 1007, "Process Activity", 1, "Launch", DISP_BLOCKED, 1},
    {"sandbox.created", 3004, "Entity Management", 1, "Create", DISP_NONE, 0},
    {"sandbox.replaced", 3004, "Entity Management", 3, "Update", DISP_NONE, 0},
    {"sandbox.removed", 3004, "Entity Management", 4, "Delete", DISP_NONE, 0},
    {"sandbox.reaped", 3004, "Entity Management", 4, "Delete", DISP_NONE, 0},
    {"lease.created", 3004, "Entity Management", 1, "Create", DISP_NONE, 0},
    {"lease.used", 3003, "Authorize Session", 1, "Assign Privileges", DISP_ALLOWED, 0},
    {"lease.refused", 3003, "Authorize Session", 1, "Assign Privileges", DISP_BLOCKED, 1},
    {"token.refused", 3002, "Authentication", 1, "Logon", DISP_BLOCKED, 1},
    {"egress.allowed", 4001, "Network Activity", 1, "Open", DISP_ALLOWED, 0},
    {"egress.denied", 4001, "Network Activity", 5, "Refuse", DISP_BLOCKED, 1},
    {"egress.failed", 4001, "Network Activity", 4, "Fail", DISP_ALLOWED, 1},
    {"host_tool.list", 6003, "API Activity", 2, "Read", DISP_NONE, 0},
    {"host_tool.allowed", 1007, "Process Activity", 1, "Launch", DISP_ALLOWED, 0},
    {"host_tool.call", 1007, "Process Activity", 99, "Other", DISP_NONE, 0},
    {"host_tool.refused", 1007, "Process Activity", 1, "Launch", DISP_BLOCKED, 1},
    {"host_tool.approval", 3003, "Authorize Session", 1, "Assign Privileges", DISP_NONE, 0},
    {"lease.restored", 3004, "Entity Management", 3, "Update", DISP_NONE, 0},
    {"code.run", 1007, "Process Activity", 99, "Other", DISP_ALLOWED, 0},
    {"code.refused", 1007, "Process Activity", 1, "Launch", DISP_BLOCKED, 1},
    {"code.context", 3004, "Entity Management", 99, "Other", DISP_NONE, 0},
    {"terminal.created", 1007, "Process Activity", 1, "Launch", DISP_ALLOWED, 0},
    {"terminal.refused", 1007, "Process Activity", 1, "Launch", DISP_BLOCKED, 1},
    {"terminal.attached", 1007, "Process Activity", 99, "Other", DISP_ALLOWED, 0},
    {"terminal.ended", 1007, "Process Activity", 2, "Terminate", DISP_NONE, 0},
    {"sandbox.frozen", 3004, "Entity Management", 3, "Update", DISP_NONE, 0},
    {"sandbox.stopped", 3004, "Entity Management", 3, "Update", DISP_NONE, 0},
    {"sandbox.hibernated", 3004, "Entity Management", 3, "Update", DISP_NONE, 0},
    {"sandbox.resumed", 3004, "Entity Management", 3, "Update", DISP_NONE, 0},
    {"snapshot.created", 3004, "Entity Management", 1, "Create", DISP_NONE, 0},
    {"snapshot.removed", 3004, "Entity Management", 4, "Delete", DISP_NONE, 0},
    {"sandbox.forked", 3004, "Entity Management", 1, "Create", DISP_NONE, 0},
    {"sandbox.rolled_back", 3004, "Entity Management", 3, "Update", DISP_NONE, 0},
    {"port.opened", 4001, "Network Activity", 1, "Open", DISP_ALLOWED, 0},
    {"port.failed", 4001, "Network Activity", 4, "Fail", DISP_ALLOWED, 1},
};

#define N_KINDS (sizeof kinds / sizeof kinds[0])

const char *const *sm_audit_event_names(void) {
  static const char *names[N_KINDS + 1];
  /* Filled on every call with the same values: no race that matters. */
  for (size_t i = 0; i < N_KINDS; i++) names[i] = kinds[i].name;
  names[N_KINDS] = NULL;
  return names;
}

static const event_kind *find_kind(const char *name) {
  if (name == NULL) return NULL;
  for (size_t i = 0; i < N_KINDS; i++)
    if (strcmp(kinds[i].name, name) == 0) return &kinds[i];
  return NULL;
}

static const char *category_name(int category) {
  switch (category) {
    case 1: return "System Activity";
    case 3: return "Identity & Access Management";
    case 4: return "Network Activity";
    case 6: return "Application Activity";
  }
  return "Other";
}

/* Strings from outside (a host name a tool asked for) are capped so that one
 * event stays far below SM_AUDIT_MAX_LINE. json-c escapes them. */
#define FIELD_CAP 1024

static void add_str(json_object *o, const char *key, const char *v) {
  if (v == NULL) return;
  size_t n = strnlen(v, FIELD_CAP + 1);
  json_object_object_add(o, key, json_object_new_string_len(v, (int)(n > FIELD_CAP ? FIELD_CAP : n)));
}

static json_object *obj_or_new(json_object *parent, const char *key) {
  json_object *o = NULL;
  if (json_object_object_get_ex(parent, key, &o)) return o;
  o = json_object_new_object();
  json_object_object_add(parent, key, o);
  return o;
}

static void random_uid(char out[33]) {
  sm_error err = SM_ERROR_INIT;
  /* An id less random is still an id: zeros when the kernel gives none. */
  if (sm_random_hex(out, 16, &err) != 0) snprintf(out, 33, "%032d", 0);
}

void audit_format_time_ms(int64_t epoch_ms, char *buf, size_t len) {
  /* 2026-11-22T01:53:35.123Z */
  time_t secs = (time_t)(epoch_ms / 1000);
  int ms = (int)(epoch_ms % 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, len, "%s.%03dZ", base, ms);
}

/* time, the OCSF class and activity, severity, status, disposition. */
static void add_classification(json_object *o, const event_kind *k, double time) {
  double when = time > 0 ? time : sm_now();
  int64_t when_ms = (int64_t)llround(when * 1000.0);
  char dt[40];
  audit_format_time_ms(when_ms, dt, sizeof dt);
  json_object_object_add(o, "time", json_object_new_int64(when_ms));
  json_object_object_add(o, "time_dt", json_object_new_string(dt));
  int category = k->class_uid / 1000;
  json_object_object_add(o, "category_uid", json_object_new_int(category));
  json_object_object_add(o, "category_name", json_object_new_string(category_name(category)));
  json_object_object_add(o, "class_uid", json_object_new_int(k->class_uid));
  json_object_object_add(o, "class_name", json_object_new_string(k->class_name));
  json_object_object_add(o, "activity_id", json_object_new_int(k->activity_id));
  json_object_object_add(o, "activity_name", json_object_new_string(k->activity_name));
  json_object_object_add(o, "type_uid", json_object_new_int64((int64_t)k->class_uid * 100 + k->activity_id));
  char type_name[128];
  snprintf(type_name, sizeof type_name, "%s: %s", k->class_name, k->activity_name);
  json_object_object_add(o, "type_name", json_object_new_string(type_name));
  /* Refusals are Medium: worth a look, not an incident on their own. */
  json_object_object_add(o, "severity_id", json_object_new_int(k->failure ? 3 : 1));
  json_object_object_add(o, "severity", json_object_new_string(k->failure ? "Medium" : "Informational"));
  json_object_object_add(o, "status_id", json_object_new_int(k->failure ? 2 : 1));
  json_object_object_add(o, "status", json_object_new_string(k->failure ? "Failure" : "Success"));
  if (k->disposition != DISP_NONE) {
    json_object_object_add(o, "disposition_id", json_object_new_int(k->disposition));
    json_object_object_add(o, "disposition",
                           json_object_new_string(k->disposition == DISP_ALLOWED ? "Allowed" : "Blocked"));
  }
}

static void add_metadata(json_object *o, const char *request_id) {
  json_object *meta = obj_or_new(o, "metadata");
  json_object_object_add(meta, "version", json_object_new_string(OCSF_VERSION));
  json_object *product = obj_or_new(meta, "product");
  json_object_object_add(product, "name", json_object_new_string("sandman"));
  json_object_object_add(product, "vendor_name", json_object_new_string("sandman"));
  json_object_object_add(product, "version", json_object_new_string(sm_version()));
  char uid[33];
  random_uid(uid);
  json_object_object_add(meta, "uid", json_object_new_string(uid));
  json_object_object_add(meta, "log_name", json_object_new_string("sandman-audit"));
  add_str(meta, "correlation_uid", request_id);
}

static void add_resource(json_object *res, const char *type, const char *key, const char *value) {
  json_object *r = json_object_new_object();
  add_str(r, "type", type);
  add_str(r, key, value);
  json_object_array_add(res, r);
}

/* actor, resources, policy: who and what. */
static void add_actor_and_resources(json_object *o, const sm_audit_event *ev) {
  if (ev->user || ev->agent || ev->run_id) {
    json_object *actor = obj_or_new(o, "actor");
    if (ev->user) add_str(obj_or_new(actor, "user"), "name", ev->user);
    add_str(actor, "app_name", ev->agent);
    if (ev->run_id) add_str(obj_or_new(actor, "session"), "uid", ev->run_id);
  }
  if (ev->sandbox || ev->lease_id || ev->tool) {
    json_object *res = json_object_new_array();
    if (ev->sandbox) add_resource(res, "sandbox", "name", ev->sandbox);
    if (ev->lease_id) add_resource(res, "lease", "uid", ev->lease_id);
    if (ev->tool) add_resource(res, "tool", "name", ev->tool);
    json_object_object_add(o, "resources", res);
  }
  if (ev->rule) add_str(obj_or_new(o, "policy"), "name", ev->rule);
}

/* src_endpoint, dst_endpoint, traffic, duration. */
static void add_network(json_object *o, const sm_audit_event *ev) {
  if (ev->src_ip) add_str(obj_or_new(o, "src_endpoint"), "ip", ev->src_ip);
  if (ev->dst_host || ev->dst_ip || ev->dst_port > 0) {
    json_object *d = obj_or_new(o, "dst_endpoint");
    add_str(d, "hostname", ev->dst_host);
    add_str(d, "ip", ev->dst_ip);
    if (ev->dst_port > 0) json_object_object_add(d, "port", json_object_new_int(ev->dst_port));
  }
  if (ev->bytes_in >= 0 || ev->bytes_out >= 0) {
    json_object *t = obj_or_new(o, "traffic");
    if (ev->bytes_in >= 0) json_object_object_add(t, "bytes_in", json_object_new_int64(ev->bytes_in));
    if (ev->bytes_out >= 0) json_object_object_add(t, "bytes_out", json_object_new_int64(ev->bytes_out));
  }
  if (ev->duration_ms >= 0)
    json_object_object_add(o, "duration", json_object_new_int64((int64_t)llround(ev->duration_ms)));
}

/* sandman's own names, flat and stable: what `sandman audit` filters on. */
static void add_unmapped(json_object *o, const event_kind *k, const sm_audit_event *ev) {
  json_object *um = obj_or_new(o, "unmapped");
  add_str(um, "event", k->name);
  add_str(um, "project", ev->project);
  add_str(um, "agent", ev->agent);
  add_str(um, "user", ev->user);
  add_str(um, "run_id", ev->run_id);
  add_str(um, "worker", ev->worker);
  add_str(um, "tool", ev->tool);
  add_str(um, "sandbox", ev->sandbox);
  add_str(um, "mode", ev->mode);
  add_str(um, "lease_id", ev->lease_id);
  add_str(um, "rule", ev->rule);
  if (ev->detail && json_object_is_type(ev->detail, json_type_object)) {
    json_object_object_foreach(ev->detail, key, val) {
      if (json_object_object_get_ex(um, key, NULL)) continue; /* never overwrite the above */
      json_object_object_add(um, key, json_object_get(val));
    }
  }
}

int sm_audit_event_to_json(const sm_audit_event *ev, json_object **out, sm_error *err) {
  *out = NULL;
  if (ev == NULL) return sm_error_set(err, SM_EINVAL, "audit: no event");
  const event_kind *k = find_kind(ev->name);
  if (k == NULL)
    return sm_error_set(err, SM_EINVAL, "audit: unknown event '%s'", ev->name ? ev->name : "");
  json_object *o = json_object_new_object();
  if (o == NULL) return sm_error_set(err, SM_ENOMEM, "audit: out of memory");
  add_classification(o, k, ev->time);
  add_str(o, "message", ev->message);
  add_metadata(o, ev->request_id);
  add_actor_and_resources(o, ev);
  add_network(o, ev);
  add_unmapped(o, k, ev);
  *out = o;
  return 0;
}
