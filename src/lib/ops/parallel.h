/* Engine work spread over a few threads (parallel.c). */
#ifndef SANDMAN_OPS_PARALLEL_H
#define SANDMAN_OPS_PARALLEL_H

#include <stddef.h>

#include <sandman/engine.h>

/* How many removals reap and rm run at once. */
#define OPS_REMOVE_WORKERS 8

/* Runs fn(ctx, engine, i) for i in [0, n) on up to max_workers threads
 * (the caller's among them, with engine; the others with clones of it).
 * fn must only touch what belongs to index i, plus atomics; a nonzero
 * return stops handing out further indices. Returns when all have run. */
typedef int (*ops_job_fn)(void *ctx, sm_engine *engine, size_t i);
void ops_parallel(sm_engine *engine, size_t n, size_t max_workers, ops_job_fn fn, void *ctx);

#endif
