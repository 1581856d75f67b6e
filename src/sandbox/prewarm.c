/* The backend's side of the warm pool (prewarm.h): a ready per_tool
 * sandbox made ahead of its call, on the engine or as a swarm service. */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "sandbox/lifecycle.h"
#include "sandbox/prewarm.h"

/* A pooled per_tool service on the swarm, made like a call's and holding
 * the pool's lease; its node checks are done, so a call taking it runs at
 * once. */
static int prewarm_swarm(const sandbox_ctx *ctx, sandbox_swarm *sw, sm_engine *manager,
                         const sm_run_request *req, sandbox_box *sb, sm_pool_item *out,
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

int sm_sandbox_prewarm(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       sm_pool_item *out, sm_error *err) {
  sandbox_box sb;
  memset(&sb, 0, sizeof sb);
  memset(out, 0, sizeof *out);
  sb.mode = SM_MODE_PER_TOOL;
  sb.pooled = 1;
  sm_sandbox_settings_hash(&req->settings, sb.hash);
  int rc = sandbox_fresh_names(ctx, "pool", &sb, err);
  if (rc) return rc;
  sandbox_swarm *sw = ctx->swarm;
  rc = sw ? prewarm_swarm(ctx, sw, e, req, &sb, out, err) : sandbox_create(ctx, e, req, &sb, err);
  if (rc == SM_ECONFLICT)
    return sm_error_set(err, SM_ESANDBOX, "sandbox name %s is taken", sb.name);
  if (rc) return rc;
  snprintf(out->id, sizeof out->id, "%s", sb.id);
  snprintf(out->name, sizeof out->name, "%s", sb.name);
  snprintf(out->volume, sizeof out->volume, "%s", sb.volume);
  snprintf(out->scope_key, sizeof out->scope_key, "%s", sb.scope_key);
  out->uid = sb.uid;
  out->gid = sb.gid;
  return 0;
}

int sm_sandbox_discard(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                       const char *volume, sm_error *err) {
  if (ctx->swarm == NULL)
    return sandbox_remove(e, ctx->state_dir, name, volume, err);
  int rc = sandbox_swarm_remove(e, name, 1, err);
  return rc == SM_ENOTFOUND ? 0 : rc;
}

unsigned sm_sandbox_pool_width(const sandbox_ctx *ctx, sm_engine *e) {
  sandbox_swarm *sw = ctx->swarm;
  return sw ? sandbox_swarm_ready_nodes(sw, e) : 1;
}
