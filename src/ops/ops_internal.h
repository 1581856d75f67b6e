/* Shared inside src/ops: report building and label access. */
#ifndef SANDMAN_OPS_INTERNAL_H
#define SANDMAN_OPS_INTERNAL_H

#include <sandman/ops.h>

/* Hard cap on the sandboxes and volumes one call handles: the engine's
 * answer is capped by the client too, this bounds what we allocate. */
#define SM_OPS_MAX_ITEMS 100000

/* Appends an item to report->removed (removed != 0) or report->spared.
 * SM_ENOMEM or SM_ETOOBIG on failure. */
int sm_ops__report_add(sm_ops_report *report, int removed, sm_ops_item_kind kind,
                       const char *id, const char *name, int failed, sm_error *err,
                       const char *fmt, ...) __attribute__((format(printf, 8, 9)));

/* A label's value from an engine Labels object, or NULL. */
const char *sm_ops__label(json_object *labels, const char *key);

/* Copies src into dst (always NUL-terminated; NULL copies ""). */
void sm_ops__copy(char *dst, size_t len, const char *src);

/* Runs fn(ctx, engine, i) for i in [0, n) on up to max_workers threads
 * (the caller's among them, with engine; the others with clones of it).
 * fn must only touch what belongs to index i, plus atomics; a nonzero
 * return stops handing out further indices. Returns when all have run. */
typedef int (*sm_ops__job_fn)(void *ctx, sm_engine *engine, size_t i);
void sm_ops__parallel(sm_engine *engine, size_t n, size_t max_workers, sm_ops__job_fn fn,
                      void *ctx);

/* How many removals reap and rm run at once. */
#define SM_OPS_REMOVE_WORKERS 8

#endif
