/* Snapshots on the runner (snapshots_route.h, docs/http-api.md#snapshots).
 *
 * Owner rules as for the sandboxes routes: the control token reaches every
 * snapshot of the runner's instance (or, naming a worker_key, acts for that
 * worker); a worker reaches only its own: the snapshots of its own
 * sandboxes, which it alone may fork, roll back to, compare with or
 * remove. Another's snapshot or sandbox is answered exactly as a missing
 * one (404). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "server/preview_route.h"
#include "server/sandbox_owner.h"
#include "server/server_internal.h"
#include "server/snapshots_route.h"

#define FORK_MAX 64

static int copy_name(char *out, size_t len, const char *v) {
  if (!server_name_valid(v, len - 1)) return -1;
  snprintf(out, len, "%s", v);
  return 0;
}

int server_snapshot_arg(server_snapshot_args *s, server_sandboxes_op op, const char *key,
                        const char *value, int *rc) {
  if (strcmp(key, "name") == 0 && op == SM_SANDBOXES_SNAPSHOT) {
    *rc = copy_name(s->name, sizeof s->name, value);
  } else if (strcmp(key, "memory") == 0 && op == SM_SANDBOXES_SNAPSHOT) {
    s->memory = strcmp(value, "1") == 0 || strcmp(value, "true") == 0;
    *rc = s->memory || strcmp(value, "0") == 0 || strcmp(value, "false") == 0 ? 0 : -1;
  } else if (strcmp(key, "snapshot") == 0 &&
             (op == SM_SANDBOXES_FORK || op == SM_SANDBOXES_ROLLBACK || op == SM_SANDBOXES_DIFF)) {
    *rc = copy_name(s->snapshot, sizeof s->snapshot, value);
  } else if (strcmp(key, "prefix") == 0 && op == SM_SANDBOXES_FORK) {
    *rc = copy_name(s->prefix, sizeof s->prefix, value);
  } else if (strcmp(key, "count") == 0 && op == SM_SANDBOXES_FORK) {
    char *end = NULL;
    long n = strtol(value, &end, 10);
    *rc = end && *end == '\0' && n >= 1 && n <= FORK_MAX ? 0 : -1;
    s->count = *rc == 0 ? (int)n : 0;
  } else {
    return 0;
  }
  return 1;
}

/* "worker:<key>" when acting for a worker; NULL (any owner) for the control token. */
static const char *owner_of(const server_snapshot_args *s, char *buf, size_t len) {
  if (s->worker_key == NULL) return NULL;
  snprintf(buf, len, "worker:%s", s->worker_key);
  return buf;
}

static void fail(server_answer *a, const sm_error *err) {
  /* Busy, or a tier (a memory snapshot's checkpoint) the engine cannot
   * give: 409, as the pause route answers. */
  if (err->code == SM_EBUSY || err->code == SM_EUNSUPPORTED)
    server_answer_error(a, 409, "policy", "%s", err->message);
  else server_answer_error_code(a, err->code, err->message);
}

/* The keyed sandbox of the route's {id} as the caller may see it. */
static int target(sm_server *srv, const server_snapshot_args *s, sm_ops_sandbox *sb,
                  server_answer *a) {
  sm_error err = SM_ERROR_INIT;
  int rc = server_sandbox_find(srv, s->id, s->worker_key, 1, sb, &err);
  if (rc == SM_ENOTFOUND) server_answer_error(a, 404, "policy", "no such keyed sandbox: %s", s->id);
  else if (rc) server_answer_error_code(a, rc, err.message);
  return rc;
}

static void take(sm_server *srv, const server_snapshot_args *s, server_answer *a) {
  sm_ops_sandbox sb;
  if (target(srv, s, &sb, a) != 0) return;
  sm_snapshot_options o = SM_SNAPSHOT_OPTIONS_INIT;
  o.name = s->name[0] ? s->name : NULL;
  o.no_wait = s->no_wait;
  o.memory = s->memory;
  sm_snapshot snap;
  sm_error err = SM_ERROR_INIT;
  server_port_tunnels_end_sandbox(srv, sb.id);
  if (sm_sandbox_snapshot(srv->opts.runner, sb.name, &o, &snap, &err) != 0) return fail(a, &err);
  /* Its preview URLs end: what forks are made from is this snapshot. */
  server_preview_revoke(srv, sb.id);
  a->status = 200;
  a->body = sm_snapshot_to_json(&snap, sm_now());
}

static void rollback(sm_server *srv, const server_snapshot_args *s, server_answer *a) {
  char buf[SM_PRINCIPAL_MAX];
  sm_ops_sandbox sb;
  if (!s->snapshot[0])
    return server_answer_error(a, 400, "policy", "rollback needs ?snapshot=NAME");
  if (target(srv, s, &sb, a) != 0) return;
  sm_rest_report rep;
  sm_error err = SM_ERROR_INIT;
  server_port_tunnels_end_sandbox(srv, sb.id);
  if (sm_sandbox_rollback(srv->opts.runner, sb.name, s->snapshot, owner_of(s, buf, sizeof buf), &rep,
                          &err) != 0)
    return fail(a, &err);
  server_preview_revoke(srv, sb.id); /* it is another sandbox now */
  a->status = 200;
  a->body = sm_rest_report_to_json(&rep);
}

static void diff(sm_server *srv, const server_snapshot_args *s, server_answer *a) {
  char buf[SM_PRINCIPAL_MAX];
  sm_ops_sandbox sb;
  if (!s->snapshot[0]) return server_answer_error(a, 400, "policy", "diff needs ?snapshot=NAME");
  if (target(srv, s, &sb, a) != 0) return;
  json_object *d = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_sandbox_diff(srv->opts.runner, sb.name, s->snapshot, owner_of(s, buf, sizeof buf), &d, &err) != 0)
    return fail(a, &err);
  a->status = 200;
  a->body = d;
}

static json_object *fork_items(const sm_fork_item *items, size_t n) {
  json_object *arr = json_object_new_array();
  for (size_t i = 0; arr && i < n; i++) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "run_id", json_object_new_string(items[i].run_id));
    json_object_object_add(o, "name", items[i].name[0] ? json_object_new_string(items[i].name) : NULL);
    json_object_object_add(o, "id", items[i].id[0] ? json_object_new_string(items[i].id) : NULL);
    json_object_object_add(o, "duration_ms", json_object_new_double(items[i].duration_ms));
    json_object_object_add(o, "error", items[i].error[0] ? json_object_new_string(items[i].error) : NULL);
    json_object_array_add(arr, o);
  }
  json_object *body = json_object_new_object();
  json_object_object_add(body, "forks", arr);
  return body;
}

static void fork_route(sm_server *srv, const server_snapshot_args *s, server_answer *a) {
  char buf[SM_PRINCIPAL_MAX];
  if (!s->snapshot[0]) return server_answer_error(a, 400, "policy", "fork needs ?snapshot=NAME");
  size_t n = s->count > 0 ? (size_t)s->count : 1;
  char ids[FORK_MAX][SM_NAME_MAX];
  const char *ptrs[FORK_MAX];
  sm_error err = SM_ERROR_INIT;
  for (size_t i = 0; i < n; i++) {
    char hex[9];
    if (sm_random_hex(hex, 4, &err) != 0) return fail(a, &err);
    snprintf(ids[i], sizeof ids[i], "%s-%s", s->prefix[0] ? s->prefix : s->snapshot, hex);
    ptrs[i] = ids[i];
  }
  cleanup_free sm_fork_item *items = calloc(n, sizeof *items);
  if (items == NULL) return server_answer_error(a, 503, "sandbox", "out of memory");
  sm_fork_request req = {s->snapshot, owner_of(s, buf, sizeof buf), NULL, ptrs, n};
  if (sm_sandbox_fork(srv->opts.runner, &req, items, &err) != 0) return fail(a, &err);
  a->status = 200;
  a->body = fork_items(items, n);
}

static void list(sm_server *srv, const server_snapshot_args *s, server_answer *a) {
  char buf[SM_PRINCIPAL_MAX];
  sm_snapshot_list l = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_snapshots_list(srv->opts.runner, owner_of(s, buf, sizeof buf), &l, &err) != 0)
    return fail(a, &err);
  double now = sm_now();
  a->status = 200;
  a->body = json_object_new_array();
  for (size_t i = 0; a->body && i < l.n; i++)
    json_object_array_add(a->body, sm_snapshot_to_json(&l.items[i], now));
  sm_snapshot_list_dispose(&l);
}

static void get_or_remove(sm_server *srv, const server_snapshot_args *s, int remove,
                          server_answer *a) {
  char buf[SM_PRINCIPAL_MAX];
  const char *owner = owner_of(s, buf, sizeof buf);
  sm_snapshot snap;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_snapshot_get(srv->opts.runner, s->id, owner, &snap, &err);
  if (rc == 0 && remove) rc = sm_snapshot_remove(srv->opts.runner, snap.key, owner, &err);
  if (rc == SM_ENOTFOUND)
    return server_answer_error(a, 404, "policy", "no such snapshot: %s", s->id);
  if (rc) return fail(a, &err);
  a->status = 200;
  if (!remove) {
    a->body = sm_snapshot_to_json(&snap, sm_now());
    return;
  }
  sm_log(SM_LOG_INFO, "snapshot %s removed on request", snap.name);
  a->body = json_object_new_object();
  json_object_object_add(a->body, "name", json_object_new_string(snap.name));
  json_object_object_add(a->body, "removed", json_object_new_boolean(1));
}

/* A backend that keeps no state (the swarm) refuses these before any
 * sandbox or snapshot is looked up: 409. */
static int kept(sm_server *srv, server_sandboxes_op op, server_answer *a) {
  const char *name = op == SM_SANDBOXES_SNAPSHOT ? "snapshot"
                     : op == SM_SANDBOXES_ROLLBACK ? "rollback"
                     : op == SM_SANDBOXES_DIFF     ? "diff"
                     : op == SM_SANDBOXES_FORK     ? "fork"
                                                   : NULL;
  sm_error err = SM_ERROR_INIT;
  if (name == NULL || srv->opts.runner == NULL || sm_keep_supported(srv->opts.runner, name, &err) == 0)
    return 1;
  server_answer_error(a, 409, "policy", "%s", err.message);
  return 0;
}

void server_snapshot_run(sm_server *srv, server_sandboxes_op op, const server_snapshot_args *s,
                         server_answer *a) {
  if (!kept(srv, op, a)) return;
  switch (op) {
    case SM_SANDBOXES_SNAPSHOT: take(srv, s, a); break;
    case SM_SANDBOXES_ROLLBACK: rollback(srv, s, a); break;
    case SM_SANDBOXES_DIFF: diff(srv, s, a); break;
    case SM_SANDBOXES_FORK: fork_route(srv, s, a); break;
    case SM_SNAPSHOTS_LIST: list(srv, s, a); break;
    case SM_SNAPSHOTS_GET: get_or_remove(srv, s, 0, a); break;
    case SM_SNAPSHOTS_DELETE: get_or_remove(srv, s, 1, a); break;
    default:
      server_answer_error(a, 404, "policy", "no such route");
      break;
  }
}
