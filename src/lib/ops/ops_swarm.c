/* list, reap and rm on the swarm backend: the manager's services of this
 * instance are the sandboxes (labels are the truth, as on one engine), a
 * live lease label is a call in flight, and a removal is the sandbox
 * module's compare-and-swap (sandbox_swarm_remove), so that several runners and
 * operators can reap at once without removing a busy sandbox. Networks a
 * dead runner left behind are swept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "ops/format.h"
#include "ops/ops_swarm.h"
#include "sandbox/backend_swarm_box.h"
#include "sandbox/swarm_spec.h"

/* A network is swept once no service names it and it is older than this
 * (a runner between creating it and creating its service). */
#define NETWORK_GRACE_S 300.0

static json_object *get(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (o == NULL || !json_object_object_get_ex(o, a, &x)) return NULL;
  if (b == NULL) return x;
  return json_object_object_get_ex(x, b, &y) ? y : NULL;
}

static const char *get_str(json_object *o, const char *a, const char *b) {
  json_object *v = get(o, a, b);
  return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

typedef struct swarm_view {
  json_object *services; /* this instance's */
  json_object *tasks;    /* every task */
  json_object *nodes;
} swarm_view;

static void view_dispose(swarm_view *v) {
  json_object_put(v->services);
  json_object_put(v->tasks);
  json_object_put(v->nodes);
  memset(v, 0, sizeof *v);
}

static int view_load(const sm_ops_scope *scope, swarm_view *v, sm_error *err) {
  memset(v, 0, sizeof *v);
  char managed[96], instance[160];
  snprintf(managed, sizeof managed, "%s=true", SM_OPS_LABEL_MANAGED);
  snprintf(instance, sizeof instance, "%s=%s", SM_OPS_LABEL_INSTANCE, sm_ops_scope_instance(scope));
  const char *labels[2] = {managed, instance};
  int rc = engine_service_list(scope->engine, labels, 2, &v->services, err);
  if (rc == 0) rc = sm_engine_request_json(scope->engine, "GET", "/tasks", NULL, NULL, &v->tasks, err);
  if (rc == 0) rc = engine_node_list(scope->engine, &v->nodes, err);
  if (rc) {
    view_dispose(v);
    return sm_error_wrap(err, "listing the swarm's sandboxes of instance '%s'",
                         sm_ops_scope_instance(scope));
  }
  return 0;
}

/* The current task of a service among all tasks. */
static int task_of(const swarm_view *v, const char *service_id, engine_swarm_task *out) {
  json_object *mine = json_object_new_array();
  size_t n = json_object_is_type(v->tasks, json_type_array) ? json_object_array_length(v->tasks) : 0;
  for (size_t i = 0; i < n; i++) {
    json_object *t = json_object_array_get_idx(v->tasks, i);
    const char *sid = get_str(t, "ServiceID", NULL);
    if (sid && strcmp(sid, service_id) == 0) json_object_array_add(mine, json_object_get(t));
  }
  sm_error ignore = SM_ERROR_INIT;
  int rc = engine_swarm_task_current(mine, out, &ignore);
  json_object_put(mine);
  return rc;
}

static int node_named(const swarm_view *v, const char *node_id, engine_swarm_node *out) {
  size_t n = json_object_is_type(v->nodes, json_type_array) ? json_object_array_length(v->nodes) : 0;
  for (size_t i = 0; i < n; i++) {
    sm_error ignore = SM_ERROR_INIT;
    if (engine_swarm_node_parse(json_object_array_get_idx(v->nodes, i), out, &ignore) == 0 &&
        strcmp(out->id, node_id) == 0)
      return 0;
  }
  return -1;
}

/* One service as a listed sandbox: the task's container id (what a call's
 * sandbox_id says), its node, its state (a lost node makes it "dead"). */
static void from_service(const swarm_view *v, json_object *svc, double now, sm_ops_sandbox *sb,
                         int *leased) {
  memset(sb, 0, sizeof *sb);
  json_object *labels = get(get(svc, "Spec", NULL), "Labels", NULL);
  const char *sid = get_str(svc, "ID", NULL);
  ops_copy(sb->name, sizeof sb->name, get_str(get(svc, "Spec", NULL), "Name", NULL));
  ops_sandbox_labels(labels, sb);
  json_object *cs = get(get(get(svc, "Spec", NULL), "TaskTemplate", NULL), "ContainerSpec", NULL);
  ops_copy(sb->image, sizeof sb->image, get_str(cs, "Image", NULL));
  const char *created = ops_label(labels, SM_OPS_LABEL_CREATED);
  sb->created_at = created ? sm_parse_time(created) : -1;
  if (sb->created_at < 0 && get_str(svc, "CreatedAt", NULL))
    sb->created_at = sm_parse_time(get_str(svc, "CreatedAt", NULL));
  const char *used = ops_label(labels, SM_SWARM_LABEL_LAST_USED);
  sb->last_used_at = sb->created_at;
  if (used && strtod(used, NULL) > 0) {
    sb->last_used_at = strtod(used, NULL);
    sb->last_used_recorded = 1;
  }
  const char *pool = ops_label(labels, SM_OPS_LABEL_POOL);
  sb->pool = pool != NULL && strcmp(pool, "true") == 0;
  /* A ready sandbox of a warm pool holds the pool's lease: not a call. */
  sb->busy = sandbox_swarm_busy(labels, now);
  if (leased) *leased = sandbox_swarm_live_leases(labels, now) > 0;
  engine_swarm_task t;
  if (sid && task_of(v, sid, &t) == 0) {
    ops_copy(sb->id, sizeof sb->id, t.container_id[0] ? t.container_id : sid);
    engine_swarm_node node;
    int known = node_named(v, t.node_id, &node) == 0;
    ops_copy(sb->node, sizeof sb->node, known ? node.hostname : t.node_id);
    if (known && strcmp(node.state, "ready") != 0) {
      ops_copy(sb->state, sizeof sb->state, "dead");
      snprintf(sb->status_text, sizeof sb->status_text, "node lost (%s)", node.state);
    } else {
      ops_copy(sb->state, sizeof sb->state,
                   engine_swarm_task_state_final(t.state) ? "exited"
                   : strcmp(t.state, "running") == 0 ? "running"
                                                      : "created");
      snprintf(sb->status_text, sizeof sb->status_text, "task %s", t.state);
    }
  } else {
    ops_copy(sb->id, sizeof sb->id, sid);
    ops_copy(sb->state, sizeof sb->state, "created");
    ops_copy(sb->status_text, sizeof sb->status_text, "no task yet");
  }
  if (ops_label(labels, SM_SWARM_LABEL_REAPING))
    ops_copy(sb->state, sizeof sb->state, "removing");
}

int ops_swarm_list(const sm_ops_scope *scope, int all, sm_ops_sandbox_list *out, sm_error *err) {
  out->n = 0;
  out->items = NULL;
  swarm_view v;
  int rc = view_load(scope, &v, err);
  if (rc) return rc;
  size_t n = json_object_array_length(v.services);
  if (n > OPS_MAX_ITEMS) {
    view_dispose(&v);
    return sm_error_set(err, SM_ETOOBIG, "the swarm lists %zu sandboxes, more than %d", n,
                        OPS_MAX_ITEMS);
  }
  out->items = n ? calloc(n, sizeof *out->items) : NULL;
  if (n && out->items == NULL) {
    view_dispose(&v);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  double now = sm_now();
  for (size_t i = 0; i < n; i++) {
    sm_ops_sandbox *sb = &out->items[out->n];
    from_service(&v, json_object_array_get_idx(v.services, i), now, sb, NULL);
    if (all || strcmp(sb->state, "running") == 0) out->n++;
  }
  view_dispose(&v);
  return 0;
}

static int remove_one(const sm_ops_scope *scope, const sm_ops_sandbox *sb, int force,
                      const char *why, sm_ops_report *out, sm_error *err) {
  sm_error e = SM_ERROR_INIT;
  int rc = sandbox_swarm_remove(scope->engine, sb->name, force, &e);
  if (rc == 0 || rc == SM_ENOTFOUND)
    return ops_report_add(out, 1, SM_OPS_ITEM_SANDBOX, sb->id, sb->name, 0, err, "%s", why);
  if (rc == SM_EBUSY || rc == SM_ECONFLICT)
    return ops_report_add(out, 0, SM_OPS_ITEM_SANDBOX, sb->id, sb->name, 0, err,
                              "busy: a call leased it meanwhile (--force removes it anyway)");
  return ops_report_add(out, 0, SM_OPS_ITEM_SANDBOX, sb->id, sb->name, 1, err,
                            "removing it failed: %s", e.message);
}

/* Networks of this instance's sandboxes that no service names any more. */
static int sweep_networks(const sm_ops_scope *scope, const swarm_view *v, int dry_run,
                          sm_ops_report *out, sm_error *err) {
  char component[96], instance[160];
  snprintf(component, sizeof component, "io.sandman.component=%s", SM_SWARM_NETWORK_COMPONENT);
  snprintf(instance, sizeof instance, "%s=%s", SM_OPS_LABEL_INSTANCE, sm_ops_scope_instance(scope));
  const char *labels[2] = {component, instance};
  cleanup_json json_object *nets = NULL;
  int rc = sm_engine_network_list(scope->engine, labels, 2, &nets, err);
  if (rc) return sm_error_wrap(err, "listing the sandboxes' networks");
  double now = sm_now();
  for (size_t i = 0; rc == 0 && i < json_object_array_length(nets); i++) {
    json_object *net = json_object_array_get_idx(nets, i);
    const char *name = get_str(net, "Name", NULL), *id = get_str(net, "Id", NULL);
    const char *created = get_str(net, "Created", NULL);
    if (name == NULL || id == NULL) continue;
    int used = 0;
    for (size_t j = 0; j < json_object_array_length(v->services) && !used; j++) {
      json_object *sl = get(get(json_object_array_get_idx(v->services, j), "Spec", NULL), "Labels", NULL);
      const char *n = ops_label(sl, SM_SWARM_LABEL_NETWORK);
      used = n && strcmp(n, name) == 0;
    }
    double at = created ? sm_parse_time(created) : -1;
    if (used || at < 0 || now - at < NETWORK_GRACE_S) continue;
    sm_error e = SM_ERROR_INIT;
    if (!dry_run && sm_engine_network_remove(scope->engine, id, &e) != 0 && e.code != SM_ENOTFOUND) {
      /* Still held by a task being torn down: the next reap. */
      continue;
    }
    rc = ops_report_add(out, 1, SM_OPS_ITEM_NETWORK, NULL, name, 0, err,
                            "a sandbox network no sandbox uses");
  }
  return rc;
}

int ops_swarm_reap(const sm_ops_scope *scope, const sm_ops_reap_options *opts,
                       sm_ops_report *out, sm_error *err) {
  swarm_view v;
  int rc = view_load(scope, &v, err);
  if (rc) return rc;
  double now = sm_now();
  for (size_t i = 0; rc == 0 && i < json_object_array_length(v.services); i++) {
    sm_ops_sandbox sb;
    int leased = 0;
    from_service(&v, json_object_array_get_idx(v.services, i), now, &sb, &leased);
    /* A per_tool sandbox lives only with its call (or its runner's warm
     * pool), which leases it from its birth: without a live lease its
     * runner is gone. */
    sm_ops_owner_state owner = SM_OPS_OWNER_NONE;
    if (strcmp(sb.mode, "per_tool") == 0) owner = leased ? SM_OPS_OWNER_ALIVE : SM_OPS_OWNER_GONE;
    sm_ops_reap_input in = {
        .mode = sb.mode,
        .state = sb.state,
        .busy = sb.busy,
        .pool = sb.pool,
        .created_at = sb.created_at,
        .last_used_at = sb.last_used_recorded ? sb.last_used_at : -1,
        .now = now,
        .owner = owner,
        .owner_label = sb.owner,
        .older_than_s = opts->older_than_s,
        .force = opts->force,
        .keep_pool = opts->keep_pool,
    };
    char reason[256];
    if (sm_ops_reap_decide(&in, reason, sizeof reason) == SM_OPS_SPARE)
      rc = ops_report_add(out, 0, SM_OPS_ITEM_SANDBOX, sb.id, sb.name, 0, err, "%s", reason);
    else if (opts->dry_run)
      rc = ops_report_add(out, 1, SM_OPS_ITEM_SANDBOX, sb.id, sb.name, 0, err, "%s", reason);
    else
      rc = remove_one(scope, &sb, opts->force, reason, out, err);
  }
  if (rc == 0) rc = sweep_networks(scope, &v, opts->dry_run, out, err);
  view_dispose(&v);
  return rc;
}

/* 1 when sb is one of the sandboxes asked for; *ref_hit marks which refs hit. */
static int matches(const sm_ops_sandbox *sb, const sm_ops_rm_options *o, char *ref_hit) {
  int hit = 0;
  if (o->run_id && strcmp(sb->run_id, o->run_id) == 0) hit = 1;
  if (o->worker_id && strcmp(sb->worker_id, o->worker_id) == 0) hit = 1;
  for (size_t i = 0; i < o->n_refs; i++) {
    const char *r = o->refs[i];
    if (strcmp(sb->name, r) == 0 || (strlen(r) >= 4 && strncmp(sb->id, r, strlen(r)) == 0)) {
      ref_hit[i] = 1;
      hit = 1;
    }
  }
  return hit;
}

int ops_swarm_rm(const sm_ops_scope *scope, const sm_ops_rm_options *opts, sm_ops_report *out,
                     sm_error *err) {
  sm_ops_sandbox_list all = {0, NULL};
  char *ref_hit = calloc(opts->n_refs + 1, 1);
  if (ref_hit == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  int rc = ops_swarm_list(scope, 1, &all, err);
  for (size_t i = 0; rc == 0 && i < all.n; i++)
    if (matches(&all.items[i], opts, ref_hit))
      rc = remove_one(scope, &all.items[i], opts->force, "removed as asked", out, err);
  for (size_t i = 0; rc == 0 && i < opts->n_refs; i++)
    if (!ref_hit[i])
      rc = ops_report_add(out, 0, SM_OPS_ITEM_SANDBOX, NULL, opts->refs[i], 1, err,
                              "no such sandbox in instance '%s'", sm_ops_scope_instance(scope));
  free(ref_hit);
  sm_ops_sandbox_list_dispose(&all);
  return rc;
}

