/* The sandboxes as resources (docs/http-api.md#sandboxes): list them
 * (GET /v1/sandboxes, by label), make one (POST /v1/sandboxes), describe
 * (GET /v1/sandboxes/{id}), keep alive (POST /v1/sandboxes/{id}/keepalive),
 * put to rest and bring back (POST /v1/sandboxes/{id}/pause, /resume:
 * sandman/keep.h, docs/state.md) and remove one (DELETE /v1/sandboxes/{id}).
 *
 * Owner rules as for calls: the control token reaches every sandbox of the
 * runner's instance (or, naming a worker_key, acts for that worker); a
 * worker token names its key (in the query, or the body of a create) and
 * reaches only its own sandboxes: another's is answered exactly as a
 * missing one. What a new sandbox may be (template, image, resources,
 * life) is create_policy.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/keep.h>
#include <sandman/log.h>
#include <sandman/ops.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "server/create_policy.h"
#include "server/preview_route.h"
#include "server/sandbox_owner.h"
#include "server/sandboxes_route.h"
#include "server/snapshots_route.h"
#include "server/server_watch.h"

#define LABEL_FILTERS_MAX 8
#define WATCH_END_WAIT_MS 10000.0 /* for the watches of a sandbox to let go of it */

struct server_sandboxes_req {
  sm_server *srv;
  server_sandboxes_op op;
  char id[SM_NAME_MAX];
  int control;
  char *token;
  char worker_key[SM_SERVER_KEY_MAX + 1]; /* from the query; "" none */
  int all;
  sm_tier tier;                           /* a pause's */
  int no_wait;
  char *labels[LABEL_FILTERS_MAX];        /* "io.sandman.label.k=v" engine filters */
  size_t n_labels;
  server_snapshot_args snap;               /* the snapshot routes' query */
  char bad[128];
};

void server_sandboxes_req_free(server_sandboxes_req *r) {
  if (r == NULL) return;
  if (r->token) {
    memset(r->token, 0, strlen(r->token));
    free(r->token);
  }
  for (size_t i = 0; i < r->n_labels; i++) free(r->labels[i]);
  free(r);
}

/* label=KEY or label=KEY=VALUE: the owner's labels (io.sandman.label.KEY). */
static int add_label_filter(server_sandboxes_req *r, const char *v) {
  if (r->n_labels >= LABEL_FILTERS_MAX) return -1;
  char kv[SM_SANDBOX_LABEL_KEY_MAX + SM_SANDBOX_LABEL_VALUE_MAX + 4];
  snprintf(kv, sizeof kv, "%s%s", v, strchr(v, '=') ? "" : "=");
  if (strlen(v) >= sizeof kv - 1 || sm_sandbox_label_check(kv, NULL) != 0) return -1;
  size_t n = strlen(SM_OPS_LABEL_USER_PREFIX) + strlen(v) + 1;
  char *f = malloc(n);
  if (f == NULL) return -1;
  snprintf(f, n, "%s%s", SM_OPS_LABEL_USER_PREFIX, v);
  r->labels[r->n_labels++] = f;
  return 0;
}

static enum MHD_Result on_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                              const char *value) {
  server_sandboxes_req *r = cls;
  (void)kind;
  const char *v = value ? value : "";
  int rc = 0;
  if (strcmp(key, "worker_key") == 0) {
    rc = server_name_valid(v, SM_SERVER_KEY_MAX) ? 0 : -1;
    if (rc == 0) snprintf(r->worker_key, sizeof r->worker_key, "%s", v);
  } else if (strcmp(key, "all") == 0 && r->op == SM_SANDBOXES_LIST) {
    r->all = strcmp(v, "1") == 0 || strcmp(v, "true") == 0;
  } else if (strcmp(key, "label") == 0 && r->op == SM_SANDBOXES_LIST) {
    rc = add_label_filter(r, v);
  } else if (strcmp(key, "tier") == 0 && r->op == SM_SANDBOXES_PAUSE) {
    sm_error ignore = SM_ERROR_INIT;
    rc = sm_tier_parse(v, &r->tier, &ignore) == 0 ? 0 : -1;
  } else if (strcmp(key, "no_wait") == 0 &&
             (r->op == SM_SANDBOXES_PAUSE || r->op == SM_SANDBOXES_RESUME ||
              r->op == SM_SANDBOXES_SNAPSHOT)) {
    r->no_wait = strcmp(v, "1") == 0 || strcmp(v, "true") == 0;
  } else if (r->op >= SM_SANDBOXES_SNAPSHOT && server_snapshot_arg(&r->snap, r->op, key, v, &rc)) {
    /* taken (rc says whether it was good) */
  } else {
    snprintf(r->bad, sizeof r->bad, "unknown query parameter '%.40s'", key);
    return MHD_NO;
  }
  if (rc) snprintf(r->bad, sizeof r->bad, "bad query parameter '%.40s'", key);
  return rc ? MHD_NO : MHD_YES;
}

server_sandboxes_req *server_sandboxes_req_new(sm_server *srv, struct MHD_Connection *conn,
                                               server_sandboxes_op op, const char *id, int control,
                                               const char *token, server_answer *a) {
  server_sandboxes_req *r = calloc(1, sizeof *r);
  if (r == NULL || (token && (r->token = strdup(token)) == NULL)) {
    free(r);
    server_answer_error(a, 503, "sandbox", "out of memory");
    return NULL;
  }
  r->srv = srv;
  r->op = op;
  r->control = control;
  snprintf(r->id, sizeof r->id, "%s", id ? id : "");
  MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, on_arg, r);
  /* Who may ask comes first: a worker token learns nothing else. A create
   * names its worker in the body (checked with it). */
  if (!control && op != SM_SANDBOXES_CREATE &&
      (r->worker_key[0] == '\0' || !server_token_ok(srv, token, r->worker_key))) {
    server_refuse_token(srv, "sandboxes", a);
    server_sandboxes_req_free(r);
    return NULL;
  }
  if (r->bad[0]) {
    server_answer_error(a, 400, "policy", "%s", r->bad);
    server_sandboxes_req_free(r);
    return NULL;
  }
  return r;
}

/* ---- the operations, on a call thread ---- */

static const char *acting_for(const server_sandboxes_req *r) {
  return r->worker_key[0] ? r->worker_key : NULL;
}

static void list(server_sandboxes_req *r, server_answer *a) {
  sm_ops_scope scope;
  sm_ops_sandbox_list l = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  const char *filters[LABEL_FILTERS_MAX + 1];
  size_t n = 0;
  char mine[SM_PRINCIPAL_MAX + 32];
  if (acting_for(r)) {
    snprintf(mine, sizeof mine, "%s=worker:%s", SM_OPS_LABEL_PRINCIPAL, r->worker_key);
    filters[n++] = mine;
  }
  for (size_t i = 0; i < r->n_labels; i++) filters[n++] = r->labels[i];
  if (sm_ops_scope_from_runner(&scope, r->srv->opts.runner, &err) != 0 ||
      sm_ops_list_filtered(&scope, r->all, filters, n, &l, &err) != 0) {
    server_answer_error_code(a, err.code, err.message);
    return;
  }
  a->status = 200;
  a->body = sm_ops_list_to_json(&l);
  sm_ops_sandbox_list_dispose(&l);
}

/* The sandbox of r->id as its caller may see it, or a 404 (the same for
 * another's as for a missing one). */
static int find(server_sandboxes_req *r, sm_ops_sandbox *sb, server_answer *a) {
  sm_error err = SM_ERROR_INIT;
  int rc = server_sandbox_find(r->srv, r->id, acting_for(r), 0, sb, &err);
  if (rc == SM_ENOTFOUND) server_answer_error(a, 404, "policy", "no such sandbox: %s", r->id);
  else if (rc) server_answer_error_code(a, rc, err.message);
  return rc;
}

static void describe(server_sandboxes_req *r, server_answer *a) {
  sm_ops_sandbox sb;
  if (find(r, &sb, a) != 0) return;
  a->status = 200;
  a->body = sm_ops_sandbox_to_json(&sb);
}

/* A use now: its idle timeout counts from here. */
static void keepalive(server_sandboxes_req *r, server_answer *a) {
  sm_ops_sandbox sb;
  if (find(r, &sb, a) != 0) return;
  sm_error err = SM_ERROR_INIT;
  double now = sm_now();
  if (sm_state_touch(sm_runner_state_dir(r->srv->opts.runner), sb.name, now, &err) != 0) {
    server_answer_error(a, 503, "sandbox", "%s", err.message);
    return;
  }
  sb.last_used_at = now;
  sb.last_used_recorded = 1;
  a->status = 200;
  a->body = sm_ops_sandbox_to_json(&sb);
}

/* Put to rest (pause) or brought back (resume): keyed sandboxes only; a
 * worker token reaches only its own (another's is a 404 as a missing one). */
static void rest(server_sandboxes_req *r, server_answer *a, int pause) {
  sm_ops_sandbox sb;
  sm_error err = SM_ERROR_INIT;
  /* A backend that keeps no state (the swarm) says so first: 409. */
  const char *op = !pause ? "resume" : r->tier == SM_TIER_FREEZE ? "pause" : sm_tier_name(r->tier);
  if (sm_keep_supported(r->srv->opts.runner, op, &err) != 0) {
    server_answer_error(a, 409, "policy", "%s", err.message);
    return;
  }
  int rc = server_sandbox_find(r->srv, r->id, acting_for(r), 1, &sb, &err);
  if (rc == SM_ENOTFOUND) {
    server_answer_error(a, 404, "policy", "no such keyed sandbox: %s", r->id);
    return;
  }
  sm_rest_options o = SM_REST_OPTIONS_INIT;
  o.tier = r->tier;
  o.no_wait = r->no_wait;
  o.why = "requested (runner)";
  sm_rest_report rep;
  /* Its file events end first (their calls hold the sandbox), each
   * stream's last event saying why. */
  if (rc == 0 && pause) {
    server_watches_end(r->srv->watches, sb.id, sm_tier_state(r->tier), WATCH_END_WAIT_MS);
    server_port_tunnels_end_sandbox(r->srv, sb.id);
  }
  if (rc == 0)
    rc = pause ? sm_sandbox_pause(r->srv->opts.runner, sb.name, &o, &rep, &err)
               : sm_sandbox_resume(r->srv->opts.runner, sb.name, &o, &rep, &err);
  /* Its preview URLs end once it is put to rest. */
  if (pause && rc == 0) server_preview_revoke(r->srv, sb.id);
  if (rc == SM_EBUSY || rc == SM_EUNSUPPORTED) {
    /* Busy, or a tier this engine cannot give: said, nothing changed. */
    server_answer_error(a, 409, "policy", "%s", err.message);
    return;
  }
  if (rc) {
    server_answer_error_code(a, rc, err.message);
    return;
  }
  a->status = 200;
  a->body = sm_rest_report_to_json(&rep);
}

static void remove_one(server_sandboxes_req *r, server_answer *a) {
  sm_ops_sandbox sb;
  if (find(r, &sb, a) != 0) return;
  sm_ops_scope scope;
  sm_error err = SM_ERROR_INIT;
  const char *refs[1] = {sb.name};
  sm_ops_rm_options o = SM_OPS_RM_OPTIONS_INIT;
  o.refs = refs;
  o.n_refs = 1;
  o.force = 1; /* DELETE ends it now: calls in flight there are killed */
  server_preview_revoke(r->srv, sb.id);
  server_port_tunnels_end_sandbox(r->srv, sb.id);
  server_watches_end(r->srv->watches, sb.id, "removed", WATCH_END_WAIT_MS);
  sm_ops_report rep;
  if (sm_ops_scope_from_runner(&scope, r->srv->opts.runner, &err) != 0 ||
      sm_ops_rm(&scope, &o, &rep, &err) != 0) {
    server_answer_error_code(a, err.code, err.message);
    return;
  }
  sm_ops_report_audit(&rep, "sandbox.removed", r->srv->opts.audit);
  int gone = rep.n_failed == 0;
  char why[sizeof rep.spared[0].reason] = "";
  if (!gone && rep.n_spared) snprintf(why, sizeof why, "%s", rep.spared[0].reason);
  sm_ops_report_dispose(&rep);
  if (!gone) {
    server_answer_error(a, 503, "sandbox", "sandbox %s could not be removed: %s", r->id, why);
    return;
  }
  sm_log(SM_LOG_INFO, "sandbox %s removed on request", sb.name);
  a->status = 200;
  a->body = json_object_new_object();
  json_object_object_add(a->body, "id", json_object_new_string(sb.id));
  json_object_object_add(a->body, "name", json_object_new_string(sb.name));
  json_object_object_add(a->body, "removed", json_object_new_boolean(1));
}

void server_sandboxes_run(server_sandboxes_req *r, const char *body, size_t len, server_answer *a) {
  if (r->srv->opts.runner == NULL) {
    server_answer_error(a, 503, "engine", "this runner has no engine");
    return;
  }
  /* A call just answered may have left its sandbox's thaw to end: what
   * follows sees it ended. */
  sm_runner_settle_thaws(r->srv->opts.runner);
  switch (r->op) {
    case SM_SANDBOXES_LIST: list(r, a); break;
    case SM_SANDBOXES_GET: describe(r, a); break;
    case SM_SANDBOXES_KEEPALIVE: keepalive(r, a); break;
    case SM_SANDBOXES_DELETE: remove_one(r, a); break;
    case SM_SANDBOXES_PAUSE: rest(r, a, 1); break;
    case SM_SANDBOXES_RESUME: rest(r, a, 0); break;
    case SM_SANDBOXES_SNAPSHOT:
    case SM_SANDBOXES_ROLLBACK:
    case SM_SANDBOXES_DIFF:
    case SM_SANDBOXES_FORK:
    case SM_SNAPSHOTS_LIST:
    case SM_SNAPSHOTS_GET:
    case SM_SNAPSHOTS_DELETE:
      r->snap.id = r->id;
      r->snap.worker_key = acting_for(r);
      r->snap.no_wait = r->no_wait;
      server_snapshot_run(r->srv, r->op, &r->snap, a);
      break;
    case SM_SANDBOXES_CREATE:
      server_sandbox_create(r->srv, body, len, r->control, r->token, a);
      break;
  }
}
