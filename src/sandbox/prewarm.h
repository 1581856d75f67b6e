/* Internal to src/sandbox: what the warm pool (pool.c) asks of the backend:
 * make a ready per_tool sandbox, discard one, and on how many nodes to keep
 * the pool's size. Both backends (the docker engine, the swarm). */
#ifndef SANDMAN_SANDBOX_PREWARM_H
#define SANDMAN_SANDBOX_PREWARM_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>

#include "sandbox/context.h"
#include "sandbox/swarm.h"

/* A ready container, as the pool hands it to a call. */
typedef struct sm_pool_item {
  char id[SM_ENGINE_ID_MAX];
  char name[SM_NAME_MAX];
  char volume[SM_NAME_MAX + 8];
  char scope_key[64];
  char pool_key[65];   /* the configuration's pool (sm_pool_call_done) */
  int uid, gid;
  sandbox_swarm_box swarm; /* on a swarm: the service, its node, the pool's lease */
} sm_pool_item;

/* Creates and starts a per_tool container for req's settings and project,
 * labelled io.sandman.pool=true, named sandman-<instance>-pool-<random>. */
int sm_sandbox_prewarm(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       sm_pool_item *out, sm_error *err);
/* Removes a container and its volume, or on a swarm the service named
 * `name`, whatever lease it holds (e is then the manager). */
int sm_sandbox_discard(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                       const char *volume, sm_error *err);
/* How many nodes the pool keeps its size on: a swarm's ready nodes, else 1
 * (may ask the engine e: call without the pool's lock). */
unsigned sm_sandbox_pool_width(const sandbox_ctx *ctx, sm_engine *e);

#endif
