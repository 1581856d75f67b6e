/* A small bounded pool for the removals of reap and rm: each removal waits
 * on the engine for tens of milliseconds, so a handful at once cuts the
 * wall time without loading the engine much more. The caller's thread works
 * too (with the caller's client); every other worker gets its own client,
 * since an sm_engine is not thread-safe. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <sandman/log.h>

#include "common/thread.h"
#include "ops/parallel.h"

typedef struct pool {
  size_t n;
  atomic_size_t next;
  atomic_int stop;
  ops_job_fn fn;
  void *ctx;
} pool;

typedef struct worker {
  pool *p;
  sm_engine *engine;
  pthread_t tid;
  int started;
} worker;

static void work(pool *p, sm_engine *engine) {
  for (;;) {
    if (atomic_load(&p->stop)) return;
    size_t i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n) return;
    if (p->fn(p->ctx, engine, i) != 0) atomic_store(&p->stop, 1);
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  work(w->p, w->engine);
  return NULL;
}

void ops_parallel(sm_engine *engine, size_t n, size_t max_workers, ops_job_fn fn,
                  void *ctx) {
  pool p = {.n = n, .fn = fn, .ctx = ctx};
  atomic_init(&p.next, 0);
  atomic_init(&p.stop, 0);
  size_t extra = max_workers > 1 ? max_workers - 1 : 0;
  if (extra > n - (n > 0)) extra = n > 0 ? n - 1 : 0;
  worker *ws = extra ? calloc(extra, sizeof *ws) : NULL;
  if (ws == NULL) extra = 0;
  for (size_t k = 0; k < extra; k++) {
    sm_error e = SM_ERROR_INIT;
    ws[k].p = &p;
    if (sm_engine_clone(&ws[k].engine, engine, &e) != 0) {
      /* Fewer workers is slower, not wrong. */
      sm_log(SM_LOG_DEBUG, "removing with %zu workers: %s", k + 1, e.message);
      break;
    }
    if (common_thread_start(&ws[k].tid, NULL, worker_main, &ws[k]) != 0) {
      sm_engine_free(ws[k].engine);
      ws[k].engine = NULL;
      break;
    }
    ws[k].started = 1;
  }
  work(&p, engine);
  for (size_t k = 0; k < extra; k++) {
    if (ws[k].started) pthread_join(ws[k].tid, NULL);
    sm_engine_free(ws[k].engine);
  }
  free(ws);
}
