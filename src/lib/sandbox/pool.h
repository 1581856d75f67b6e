/* Internal to src/lib/sandbox: what a runner keeps to make calls fast (pool.c).
 *
 *  - the warm pool: per_tool containers created and started ahead of time,
 *    one pool per configuration (settings hash and project), refilled by
 *    background threads; a container is taken by one call, never reused;
 *  - background removal of per_tool containers once their call is over,
 *    holding the call's busy lock until the container and its volume are
 *    gone (sm_runner_free and the runner's shutdown wait for them);
 *  - agent sessions opened ahead in keyed sandboxes, on the same threads.
 * The runner makes the pool and hands it down (sandbox_ctx.pool); the pool
 * makes and removes containers through the backend (backend.h). */
#ifndef SANDMAN_SANDBOX_POOL_H
#define SANDMAN_SANDBOX_POOL_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/runner.h>
#include <sandman/run.h>
#include <sandman/state.h>

#include "sandbox/context.h"
#include "sandbox/backend.h"

typedef struct sandbox_pool sandbox_pool;

/* ctx: the runner's (kept; it outlives the pool). NULL when out of memory. */
sandbox_pool *sandbox_pool_new(const sandbox_ctx *ctx);
/* Drains every pool, waits for the removals in flight and stops the
 * threads (sm_runner_free, before the runner's engines go). */
void sandbox_pool_free(sandbox_pool *pool);

/* A ready container for a per_tool call with settings hash `hash` (1), or
 * none (0): the caller creates one itself. Either way the configuration's
 * pool is (re)filled in the background when a pool size is set. */
int sandbox_pool_take(sandbox_pool *pool, const sm_run_request *req, const char *hash,
                      sandbox_pool_item *out);
/* The call in a container taken from pool `pool_key` is over: the pool
 * may refill now. */
void sandbox_pool_call_done(sandbox_pool *pool, const char *pool_key);
/* In a long-running process (background removal on): opens and parks an
 * agent session in keyed sandbox container_id (named name) on a background
 * thread, so its next call does not pay for it; never while it rests or
 * goes to rest (pool.c prepare_one). Dropped, not waited for, at the end. */
void sandbox_pool_prepare_agent_later(sandbox_pool *pool, const char *container_id,
                                      const char *name, const char *user);
/* A container taken from the pool was gone (an operator's forced reap):
 * the others of its configuration are replaced too, so that the call's
 * second attempt makes its own rather than finding another stale one. */
void sandbox_pool_forget(sandbox_pool *pool, const sm_run_request *req, const char *hash);
/* Queues the removal of a per_tool sandbox (container and volume; relay:
 * and its egress relay, sandbox_remove's) and the release of its busy
 * lock, which the queue now owns. 0 when queued; -1 when the caller must
 * remove it itself: background removal is off (for a call's container,
 * busy != NULL), out of memory, shutting down. */
int sandbox_pool_remove_later(sandbox_pool *pool, const char *name, const char *volume,
                              sm_state_lock *busy, int relay);

/* The runner's public pool functions (sandbox.h: sm_runner_pool_set_size,
 * sm_runner_pool_set_limits, sm_runner_set_background_removal, sm_runner_pool_size,
 * sm_runner_pool_prepare, sm_runner_pool_drain, sm_runner_settle,
 * sm_runner_pool_stats) on the runner's pool. */
int sandbox_pool_set_size(sandbox_pool *pool, unsigned size, sm_error *err);
int sandbox_pool_set_limits(sandbox_pool *pool, unsigned max_size, unsigned parallel,
                            sm_error *err);
void sandbox_pool_set_background_removal(sandbox_pool *pool, int on);
unsigned sandbox_pool_size(sandbox_pool *pool);
int sandbox_pool_prepare(sandbox_pool *pool, const sm_run_request *req, sm_error *err);
void sandbox_pool_drain(sandbox_pool *pool);
int sandbox_pool_settle(sandbox_pool *pool, double timeout_s, sm_error *err);
void sandbox_pool_stats_get(sandbox_pool *pool, sm_pool_stats *out);

#endif
