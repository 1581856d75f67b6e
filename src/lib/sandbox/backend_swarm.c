/* The swarm backend (backend.h): a sandbox is a swarm service of one task
 * (backend_swarm_box.c), made from the same hardened container config as the docker
 * backend's; the call then runs on the task's node, over its engine. */
#include <stdio.h>
#include <string.h>

#include <sandman/log.h>

#include "sandbox/acquire.h"
#include "sandbox/backend.h"
#include "sandbox/lifecycle.h"
#include "sandbox/pool.h"
#include "sandbox/backend_swarm_box.h"

/* A ready sandbox of the warm pool for this per_tool call (1), or none (0:
 * the call makes its own). One that cannot be taken is removed. */
static int take_pooled_swarm(const sandbox_ctx *ctx, sandbox_swarm *sw, sm_engine *m,
                             const sm_run_request *req, sandbox_box *sb, double lease_s) {
  sandbox_pool_item item;
  if (!sandbox_pool_take(ctx->pool, req, sb->hash, &item)) return 0;
  sm_error err = SM_ERROR_INIT;
  if (sandbox_swarm_take(sw, m, &item.swarm, lease_s, &sb->swarm, &err) != 0) {
    sm_log(SM_LOG_INFO, "%s: the call makes a sandbox of its own", err.message);
    sandbox_pool_call_done(ctx->pool, item.pool_key);
    sm_error ignore = SM_ERROR_INIT;
    sandbox_swarm_remove(m, item.swarm.name, 1, &ignore);
    return 0;
  }
  sandbox_from_pool(sb, &item);
  sb->reused = 0;
  return 1;
}

/* Ends the call's hold on a swarm sandbox (a per_tool one goes). */
static void swarm_release(const sandbox_ctx *ctx, sm_engine *m, const sm_run_request *req,
                          sandbox_box *sb) {
  if (sb->mode == SM_MODE_PER_TOOL && sb->swarm.lease[0])
    sandbox_audit(ctx, "sandbox.removed", req, sb, "a per_tool sandbox goes after its call");
  if (sb->pool_key[0]) {
    sandbox_pool_call_done(ctx->pool, sb->pool_key);
    sb->pool_key[0] = '\0';
  }
  sandbox_swarm_release(ctx->swarm, m, &sb->swarm);
}

/* m: the manager; *node: the task's node's engine. */
static int swarm_acquire(const sandbox_ctx *ctx, sm_engine *m, const sm_run_request *req,
                         sandbox_box *sb, sm_engine **node, sm_error *err) {
  sandbox_swarm *sw = ctx->swarm;
  const char *net = req->settings.network;
  if (strcmp(net, "none") != 0 && strcmp(net, "bridge") != 0)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "network '%s' is not available on the swarm backend: use none (a network "
                        "of the sandbox's own that reaches nothing) or bridge (docs/scale-out.md)",
                        net);
  double timeout = req->settings.timeout_s;
  if (sb->mode == SM_MODE_PER_TOOL) {
    if (take_pooled_swarm(ctx, sw, m, req, sb, timeout > 0 ? timeout + 600 : 24 * 3600.0)) {
      *node = sb->swarm.node;
      return 0;
    }
    int rc = sandbox_fresh_names(ctx, "tool", sb, err);
    if (rc) return rc;
  }
  char service[SM_SWARM_SERVICE_NAME_MAX + 1];
  sandbox_swarm_service_name(sb->name, service);
  sandbox_swarm_config_ud cu = {ctx, req, sb};
  const char *project = req->project && *req->project ? req->project : "default";
  sandbox_swarm_want w = {
      .name = service,
      .instance = ctx->instance,
      .hash = sb->hash,
      .project = sb->mode == SM_MODE_PER_WORKER ? project : NULL,
      .principal = req->principal,
      .per_tool = sb->mode == SM_MODE_PER_TOOL,
      /* Past the call's timeout and its clean-up; a dead runner's lease
       * ends there. A call with no timeout holds it for a day. */
      .lease_s = timeout > 0 ? timeout + 600 : 0,
      .config = sandbox_swarm_config,
      .config_ud = &cu,
  };
  int rc = sandbox_swarm_acquire(sw, m, &w, &sb->swarm, err);
  if (rc) return rc;
  snprintf(sb->id, sizeof sb->id, "%s", sb->swarm.container_id);
  sb->uid = sb->swarm.uid;
  sb->gid = sb->swarm.gid;
  sb->reused = sb->swarm.reused;
  if (!sb->reused) sandbox_audit(ctx, "sandbox.created", req, sb, NULL);
  *node = sb->swarm.node;
  return 0;
}

/* A pooled per_tool service on the swarm, made like a call's and holding
 * the pool's lease; its node checks are done, so a call taking it runs at
 * once. */
static int prewarm_swarm(const sandbox_ctx *ctx, sandbox_swarm *sw, sm_engine *manager,
                         const sm_run_request *req, sandbox_box *sb, sandbox_pool_item *out,
                         sm_error *err) {
  char service[SM_SWARM_SERVICE_NAME_MAX + 1];
  sandbox_swarm_service_name(sb->name, service);
  char owner[300], node_id[SM_ENGINE_ID_MAX];
  sm_sandbox_owner_label(owner, sizeof owner);
  int rc = sandbox_swarm_pool_node(sw, manager, sb->hash, owner, node_id, err);
  if (rc) return sm_error_wrap(err, "placing a warm pool sandbox");
  sandbox_swarm_config_ud cu = {ctx, req, sb};
  sandbox_swarm_want w = {
      .name = service,
      .instance = ctx->instance,
      .hash = sb->hash,
      .node_id = node_id,
      .per_tool = 1,
      .lease_s = SM_SWARM_POOL_LEASE_S,
      .config = sandbox_swarm_config,
      .config_ud = &cu,
  };
  rc = sandbox_swarm_acquire(sw, manager, &w, &out->swarm, err);
  sandbox_swarm_pool_placed(sw, node_id);
  if (rc) return rc;
  out->swarm.node = NULL; /* this thread's client: a call takes its own */
  snprintf(sb->id, sizeof sb->id, "%s", out->swarm.container_id);
  snprintf(sb->name, sizeof sb->name, "%s", service);
  sb->uid = out->swarm.uid;
  sb->gid = out->swarm.gid;
  return 0;
}

static int swarm_make(const sandbox_ctx *ctx, sm_engine *manager, const sm_run_request *req,
                      sandbox_box *sb, sandbox_pool_item *out, sm_error *err) {
  return prewarm_swarm(ctx, ctx->swarm, manager, req, sb, out, err);
}

static int swarm_prewarm(const sandbox_ctx *ctx, sm_engine *manager, const sm_run_request *req,
                         sandbox_pool_item *out, sm_error *err) {
  return sandbox_prewarm(ctx, manager, req, swarm_make, out, err);
}

/* The service named `name`, whatever lease it holds (manager: e). */
static int swarm_discard(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                         const char *volume, int relay, sm_error *err) {
  (void)ctx;
  (void)volume;
  (void)relay;
  int rc = sandbox_swarm_remove(e, name, 1, err);
  return rc == SM_ENOTFOUND ? 0 : rc;
}

/* The swarm's ready nodes: the pool keeps its size on each. */
static unsigned swarm_width(const sandbox_ctx *ctx, sm_engine *e) {
  return sandbox_swarm_ready_nodes(ctx->swarm, e);
}

static int swarm_failed(const sandbox_ctx *ctx, sm_engine *e, sandbox_box *sb, int rc,
                        sm_error *err) {
  return sandbox_swarm_check_node_lost(ctx->swarm, e, &sb->swarm, rc, err);
}

/* Per container: a sandbox made again elsewhere starts with an empty
 * manifest, so its workspace is copied in whole. */
static const char *swarm_state_name(const sandbox_box *sb) { return sb->swarm.state_name; }

/* A swarm sandbox is a service whose one task swarm places, starts and
 * restarts on a node of its choosing; its state is not kept (docs/state.md
 * "On a swarm"), each operation refused before anything is touched. */
static int swarm_keeps(const char *op, sm_error *err) {
  static const char *const why[][2] = {
      {"pause", "several runners share a swarm sandbox, each with a state directory of its own, "
                "so a frozen one would be known to the runner that froze it alone, and swarm "
                "still counts a paused task as running"},
      {"stop", "swarm restarts or replaces a task whose container stops, so its writable layer "
               "and /workspace would not be kept"},
      {"hibernate", "swarm starts its tasks itself and cannot start one from a checkpoint"},
      {"resume", "no sandbox of the swarm backend is ever at rest, so there is nothing to resume"},
      {"snapshot", "a snapshot's image would be committed on the task's node alone, where no "
                   "other node could start a fork of it (the swarm backend uses no registry)"},
      {"fork", "forks are made from snapshots, which the swarm backend does not take"},
      {"rollback", "a rollback returns to a snapshot, which the swarm backend does not take"},
      {"diff", "a diff compares with a snapshot, which the swarm backend does not take"},
  };
  for (size_t i = 0; i < sizeof why / sizeof why[0]; i++)
    if (strcmp(op, why[i][0]) == 0)
      return sm_error_set(err, SM_EUNSUPPORTED,
                          "%s is refused on the swarm backend: %s; use the docker backend for "
                          "sandboxes that keep their state (docs/state.md)",
                          op, why[i][1]);
  return sm_error_set(err, SM_EUNSUPPORTED, "%s is refused on the swarm backend (docs/state.md)", op);
}

const sandbox_backend sandbox_backend_swarm = {
    .name = "swarm",
    .acquire = swarm_acquire,
    .release = swarm_release,
    .failed = swarm_failed,
    .gone = NULL, /* a node's loss is "node lost", not looked up again */
    .release_gone = NULL,
    .state_name = swarm_state_name,
    /* Several runners share a swarm sandbox and none can hold it alone. */
    .exclusive = 0,
    /* The node is far: a keyed sandbox's session opens on its first call. */
    .sessions_at_once = 1,
    /* Refused, fail closed: the relay is not carried to a node yet. */
    .host_route = 0,
    .prewarm = swarm_prewarm,
    .discard = swarm_discard,
    .width = swarm_width,
    .keeps = swarm_keeps,
};
