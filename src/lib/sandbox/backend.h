/* Internal to src/lib/sandbox: the backend seam, what the sandbox layer needs
 * from "where sandboxes live".
 *
 * A backend finds, makes, holds, lets go of and removes sandboxes, and
 * makes the warm pool's. It hands the call the sm_engine of the sandbox
 * (*node in acquire): everything that then happens in the sandbox (the
 * tool's exec or agent stream, the helper execs, the workspace's archive
 * put and get, inspect and path modes) goes through that engine, so
 * exec.c, agent.c, helper.c and the workspace never know the backend.
 *
 * Two implementations: the docker engine the runner talks to
 * (backend_docker.c: a sandbox is a container and a volume, held by a busy
 * lock in the state directory) and a Docker Swarm (backend_swarm.c: a
 * sandbox is a service of one task, held by a lease label; the task's node
 * runs the calls). The runner picks one (sandbox_ctx.backend).
 *
 * Not on the seam yet: listing and reaping by labels (src/lib/ops: reap.c and
 * backend_swarm_box.c choose by sm_ops_scope.backend) and the hardened config itself
 * (lifecycle.c's sandbox_config, which the swarm backend translates into a
 * service spec). */
#ifndef SANDMAN_SANDBOX_BACKEND_H
#define SANDMAN_SANDBOX_BACKEND_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>

#include "sandbox/sandbox_box.h"
#include "sandbox/context.h"
#include "sandbox/backend_swarm_box.h"
#include "sandbox/thaw_job.h"

/* A ready sandbox of the warm pool, as the pool hands it to a call. */
typedef struct sandbox_pool_item {
  char id[SM_ENGINE_ID_MAX];
  char name[SM_NAME_MAX];
  char volume[SM_NAME_MAX + 16];
  char scope_key[64];
  char pool_key[65]; /* the configuration's pool (sandbox_pool_call_done) */
  int uid, gid;
  sandbox_swarm_box swarm; /* on a swarm: the service, its node, the pool's lease */
} sandbox_pool_item;

struct sandbox_backend {
  const char *name; /* "docker", "swarm" (sm_runner_backend) */
  /* Finds, takes from the warm pool, or makes the call's sandbox sb (its
   * mode and hash set; keyed: its name, volume and key too) and holds it.
   * e: the runner's engine; *node: the sandbox's. */
  int (*acquire)(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                 sandbox_box *sb, sm_engine **node, sm_error *err);
  /* The call is over: lets go (a per_tool sandbox goes). */
  void (*release)(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                  sandbox_box *sb);
  /* A step in the sandbox failed with rc: rc as the backend reads it (the
   * swarm: "node lost" when the node stopped answering). */
  int (*failed)(const sandbox_ctx *ctx, sm_engine *e, sandbox_box *sb, int rc, sm_error *err);
  /* 1 when rc says the sandbox went since it was found (a forced reap) and
   * the call may look it up again after release_gone. NULL: never. */
  int (*gone)(const sandbox_box *sb, int rc);
  void (*release_gone)(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       sandbox_box *sb);
  /* Thaws sb, acquired still frozen (sb->thaw_later): 0 or the engine's
   * error. NULL: the backend never leaves a thaw to the call. */
  int (*thaw)(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req, sandbox_box *sb,
              sm_error *err);
  /* The same thaw started beside the call (thaw_job.h), or an error:
   * then the call thaws it with thaw. NULL: never beside. */
  int (*thaw_start)(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                    const sandbox_box *sb, sandbox_thaw_job **out, sm_error *err);
  /* The name of sb's workspace manifest in the state directory. */
  const char *(*state_name)(const sandbox_box *sb);
  int exclusive;          /* a keyed sandbox can be held by one call alone */
  int sessions_at_once;   /* a keyed sandbox's agent session opens on its
                           * first call (else from its second, or ahead) */
  int host_route;         /* a call may have the host-tool route (tool_route.c) */
  /* The warm pool: makes a ready per_tool sandbox for req's settings and
   * project; discards one (whatever holds it; relay: sandbox_remove's);
   * on how many nodes to keep
   * the pool's size (may ask e: call without the pool's lock). */
  int (*prewarm)(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                 sandbox_pool_item *out, sm_error *err);
  int (*discard)(const sandbox_ctx *ctx, sm_engine *e, const char *name, const char *volume,
                 int relay, sm_error *err);
  unsigned (*width)(const sandbox_ctx *ctx, sm_engine *e);
  /* Whether the backend keeps a keyed sandbox's state for operation op
   * ("pause", "stop", "hibernate", "resume", "snapshot", "fork",
   * "rollback", "diff": keep.c, docs/state.md): 0, or SM_EUNSUPPORTED
   * naming the operation and the backend and saying why. NULL: it does
   * them all (on the runner's engine). */
  int (*keeps)(const char *op, sm_error *err);
};

extern const sandbox_backend sandbox_backend_docker; /* backend_docker.c */
extern const sandbox_backend sandbox_backend_swarm;  /* backend_swarm.c */

#endif
