/* Internal to src/sandbox: what a runner keeps to make calls fast (pool.c).
 *
 *  - the warm pool: per_tool containers created and started ahead of time,
 *    one pool per configuration (settings hash and project), refilled by
 *    background threads; a container is taken by one call, never reused;
 *  - background removal of per_tool containers once their call is over,
 *    holding the call's busy lock until the container and its volume are
 *    gone (sm_runner_free and the runner's shutdown wait for them);
 *  - a lookup cache of keyed sandboxes (per_run, per_worker), so that a call
 *    in a sandbox this runner already found does not inspect it again: an
 *    exec on a container that is gone or stopped fails, and the caller then
 *    drops the entry and looks again. */
#ifndef SANDMAN_SANDBOX_POOL_H
#define SANDMAN_SANDBOX_POOL_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/state.h>

#include "sandbox/swarm.h"

typedef struct sm_pool sm_pool;

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

/* ---- runner.c ---- */
/* The runner's pool state, made on first use; NULL when out of memory. */
sm_pool *sm_runner_pool(sm_runner *runner);

/* ---- pool.c ---- */
sm_pool *sm_pool_new(sm_runner *runner);
/* Drains every pool, waits for the removals in flight and stops the
 * threads (sm_runner_free, before the runner's engines go). */
void sm_pool_free(sm_pool *pool);

/* A ready container for a per_tool call with settings hash `hash` (1), or
 * none (0): the caller creates one itself. Either way the configuration's
 * pool is (re)filled in the background when a pool size is set. */
int sm_pool_take(sm_runner *runner, const sm_run_request *req, const char *hash,
                 sm_pool_item *out);
/* The call in a container taken from pool `pool_key` is over: the pool
 * may refill now. */
void sm_pool_call_done(sm_runner *runner, const char *pool_key);
/* In a long-running process (background removal on): opens and parks an
 * agent session in keyed sandbox container_id on a background thread, so
 * its next call does not pay for it. Dropped, not waited for, at the end. */
void sm_pool_prepare_agent_later(sm_runner *runner, const char *container_id,
                                 const char *user);
/* A container taken from the pool was gone (an operator's forced reap):
 * the others of its configuration are replaced too, so that the call's
 * second attempt makes its own rather than finding another stale one. */
void sm_pool_forget(sm_runner *runner, const sm_run_request *req, const char *hash);
/* Queues the removal of a per_tool sandbox (container and volume) and the
 * release of its busy lock, which the queue now owns. 0 when queued; -1 when
 * the caller must remove it itself: background removal is off (for a call's
 * container, busy != NULL), out of memory, shutting down. */
int sm_pool_remove_later(sm_runner *runner, const char *name, const char *volume,
                         sm_state_lock *busy);

typedef struct sm_pool_cached {
  char id[SM_ENGINE_ID_MAX];
  char hash[65];
  char project[SM_NAME_MAX];
  int uid, gid;
} sm_pool_cached;

/* 1 and *out when this runner found sandbox `name` running with `hash`
 * before; 0 otherwise. */
int sm_pool_cache_get(sm_runner *runner, const char *name, const char *hash,
                      sm_pool_cached *out);
void sm_pool_cache_put(sm_runner *runner, const char *name, const sm_pool_cached *entry);
void sm_pool_cache_drop(sm_runner *runner, const char *name);
/* 1 when the last-used time of `name` should be written now: not written
 * by this runner within the last second (idle timeouts are minutes; one
 * fsync per call is not worth it). */
int sm_pool_touch_due(sm_runner *runner, const char *name, double now);

/* ---- container.c, for the pool ---- */
/* Creates and starts a per_tool container for req's settings and project,
 * labelled io.sandman.pool=true, named sandman-<instance>-pool-<random>. */
int sm_sandbox_prewarm(sm_runner *runner, sm_engine *e, const sm_run_request *req,
                       sm_pool_item *out, sm_error *err);
/* Removes a container and its volume (what is gone already is fine) and
 * drops its state files. */
int sm_sandbox_remove(sm_engine *e, const char *state_dir, const char *name,
                      const char *volume, sm_error *err);
/* The same for whichever backend the runner has (on a swarm: the service
 * named `name`, whatever lease it holds; e is the manager). */
int sm_sandbox_discard(sm_runner *runner, sm_engine *e, const char *name, const char *volume,
                       sm_error *err);
/* How many nodes the pool keeps its size on: a swarm's ready nodes, else 1
 * (may ask the engine e: call without the pool's lock). */
unsigned sm_sandbox_pool_width(sm_runner *runner, sm_engine *e);

#endif
