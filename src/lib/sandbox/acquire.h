/* Internal to src/lib/sandbox: a call's hold on its sandbox on the docker
 * backend: a keyed sandbox (per_run, per_worker) found, replaced or
 * created under its key lock; a per_tool one taken from the warm pool or
 * made; and the release after the call. */
#ifndef SANDMAN_SANDBOX_ACQUIRE_H
#define SANDMAN_SANDBOX_ACQUIRE_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/run.h>

#include "sandbox/sandbox_box.h"
#include "sandbox/context.h"
#include "sandbox/backend.h"

/* sb has its mode, hash, name, volume and scope key. On success the call
 * holds the sandbox's busy lock (exclusive for a leased call). */
int sandbox_acquire_keyed(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          sandbox_box *sb, sm_error *err);
/* The thaw of a sandbox acquired still frozen (sb->thaw_later, cleared;
 * sb->resumed too when it was not paused any more): 0, or the engine's
 * error (the sandbox was not thawed by this call). */
int sandbox_acquire_thaw(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                         sandbox_box *sb, sm_error *err);
/* The same thaw beside the call (backend.h thaw_start). */
int sandbox_acquire_thaw_start(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                               const sandbox_box *sb, sandbox_thaw_job **out, sm_error *err);
/* Makes the keyed sandbox sb (its mode, hash, name, volume and key set)
 * under its key lock, holding nothing after: SM_ECONFLICT (sb->id set)
 * when it exists already. */
int sandbox_make_keyed(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       sandbox_box *sb, sm_error *err);
/* sb has its mode and hash; the name comes from the pool's item or is new. */
int sandbox_acquire_per_tool(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                             sandbox_box *sb, sm_error *err);
/* The call's sandbox is the warm pool's item. */
void sandbox_from_pool(sandbox_box *sb, const sandbox_pool_item *item);
/* A sandbox found through the cache or the pool that has gone (or stopped)
 * since (rc of an exec or copy): the call looks once more. */
int sandbox_retry_gone(const sandbox_box *sb, int rc);
/* The call is over: a per_tool sandbox goes (in the background when it
 * can), a keyed one records its last use; the busy lock goes. */
void sandbox_release(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                     sandbox_box *sb);
/* Before looking again: what the cache and the pool knew of sb is
 * forgotten, and sb released. */
void sandbox_release_gone(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          sandbox_box *sb);

#endif
