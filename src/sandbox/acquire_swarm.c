/* A call's hold on its sandbox on the swarm backend (acquire_swarm.h). */
#include <stdio.h>
#include <string.h>

#include <sandman/log.h>

#include "sandbox/acquire.h"
#include "sandbox/acquire_swarm.h"
#include "sandbox/lifecycle.h"
#include "sandbox/pool.h"

/* A ready sandbox of the warm pool for this per_tool call (1), or none (0:
 * the call makes its own). One that cannot be taken is removed. */
static int take_pooled_swarm(const sandbox_ctx *ctx, sandbox_swarm *sw, sm_engine *m,
                             const sm_run_request *req, sandbox_box *sb, double lease_s) {
  sm_pool_item item;
  if (!sm_pool_take(ctx->pool, req, sb->hash, &item)) return 0;
  sm_error err = SM_ERROR_INIT;
  if (sandbox_swarm_take(sw, m, &item.swarm, lease_s, &sb->swarm, &err) != 0) {
    sm_log(SM_LOG_INFO, "%s: the call makes a sandbox of its own", err.message);
    sm_pool_call_done(ctx->pool, item.pool_key);
    sm_error ignore = SM_ERROR_INIT;
    sandbox_swarm_remove(m, item.swarm.name, 1, &ignore);
    return 0;
  }
  sandbox_from_pool(sb, &item);
  sb->reused = 0;
  return 1;
}

/* Ends the call's hold on a swarm sandbox (a per_tool one goes). */
void sandbox_release_swarm(const sandbox_ctx *ctx, sm_engine *m, const sm_run_request *req,
                           sandbox_box *sb) {
  if (sb->mode == SM_MODE_PER_TOOL && sb->swarm.lease[0])
    sandbox_audit(ctx, "sandbox.removed", req, sb, "a per_tool sandbox goes after its call");
  if (sb->pool_key[0]) {
    sm_pool_call_done(ctx->pool, sb->pool_key);
    sb->pool_key[0] = '\0';
  }
  sandbox_swarm_release(ctx->swarm, m, &sb->swarm);
}

int sandbox_acquire_swarm(const sandbox_ctx *ctx, sm_engine *m, const sm_run_request *req,
                          sandbox_box *sb, sm_error *err) {
  sandbox_swarm *sw = ctx->swarm;
  const char *net = req->settings.network;
  if (strcmp(net, "none") != 0 && strcmp(net, "bridge") != 0)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "network '%s' is not available on the swarm backend: use none (a network "
                        "of the sandbox's own that reaches nothing) or bridge (docs/scale-out.md)",
                        net);
  double timeout = req->settings.timeout_s;
  if (sb->mode == SM_MODE_PER_TOOL) {
    if (take_pooled_swarm(ctx, sw, m, req, sb, timeout > 0 ? timeout + 600 : 24 * 3600.0))
      return 0;
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
  return 0;
}
