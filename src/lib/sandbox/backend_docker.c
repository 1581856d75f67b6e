/* The docker backend (backend.h): sandboxes are containers with a volume on
 * the engine the runner talks to; acquire.c holds them, lifecycle.c makes
 * and removes them. */
#include "sandbox/acquire.h"
#include "sandbox/backend.h"
#include "sandbox/lifecycle.h"

static int docker_acquire(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          sandbox_box *sb, sm_engine **node, sm_error *err) {
  *node = e;
  return sb->mode == SM_MODE_PER_TOOL ? sandbox_acquire_per_tool(ctx, e, req, sb, err)
                                      : sandbox_acquire_keyed(ctx, e, req, sb, err);
}

static int docker_failed(const sandbox_ctx *ctx, sm_engine *e, sandbox_box *sb, int rc,
                         sm_error *err) {
  (void)ctx;
  (void)e;
  (void)sb;
  (void)err;
  return rc;
}

static const char *docker_state_name(const sandbox_box *sb) { return sb->name; }

static int docker_make(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       sandbox_box *sb, sandbox_pool_item *out, sm_error *err) {
  (void)out;
  return sandbox_create(ctx, e, req, sb, err);
}

/* A per_tool container made ahead for the warm pool, labelled
 * io.sandman.pool=true. */
static int docker_prewarm(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          sandbox_pool_item *out, sm_error *err) {
  return sandbox_prewarm(ctx, e, req, docker_make, out, err);
}

static int docker_discard(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                          const char *volume, int relay, sm_error *err) {
  return sandbox_remove(e, ctx->state_dir, name, volume, relay, err);
}

static unsigned docker_width(const sandbox_ctx *ctx, sm_engine *e) {
  (void)ctx;
  (void)e;
  return 1;
}

const sandbox_backend sandbox_backend_docker = {
    .name = "docker",
    .acquire = docker_acquire,
    .release = sandbox_release,
    .thaw = sandbox_acquire_thaw,
    .thaw_start = sandbox_acquire_thaw_start,
    .failed = docker_failed,
    .gone = sandbox_retry_gone,
    .release_gone = sandbox_release_gone,
    .state_name = docker_state_name,
    .exclusive = 1,
    .sessions_at_once = 0,
    .host_route = 1,
    .prewarm = docker_prewarm,
    .discard = docker_discard,
    .width = docker_width,
};
