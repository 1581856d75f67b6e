/* The removal pool: every index runs exactly once, on distinct engine
 * clients per thread, with no more threads than asked; a nonzero return
 * stops handing out more work. Needs no engine: clients do not connect
 * until used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/engine.h>

#include "ops/parallel.h"

#include "support/xalloc.h"

#define N 200
#define MAX_ENGINES 16

typedef struct ctx {
  atomic_int runs[N];
  sm_engine *main_engine;
  _Atomic(sm_engine *) engines[MAX_ENGINES];
  atomic_int n_engines;
  int stop_at; /* -1: never */
  atomic_int after_stop;
} ctx;

static void note_engine(ctx *c, sm_engine *e) {
  int n = atomic_load(&c->n_engines);
  for (int k = 0; k < n; k++)
    if (atomic_load(&c->engines[k]) == e) return;
  int slot = atomic_fetch_add(&c->n_engines, 1);
  if (slot < MAX_ENGINES) atomic_store(&c->engines[slot], e);
}

static int job(void *arg, sm_engine *engine, size_t i) {
  ctx *c = arg;
  atomic_fetch_add(&c->runs[i], 1);
  note_engine(c, engine);
  usleep(500); /* let the workers overlap */
  return c->stop_at >= 0 && (int)i == c->stop_at;
}

static sm_engine *new_engine(void) {
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  o.host = "unix:///nonexistent/sandman-test.sock";
  o.tls_verify = 0;
  o.api_version = "1.41";
  assert_int_equal(sm_engine_new(&e, &o, &err), 0);
  return e;
}

static void test_each_index_once(void **state) {
  (void)state;
  ctx *c = xcalloc(1, sizeof *c);
  assert_non_null(c);
  c->stop_at = -1;
  sm_engine *e = new_engine();
  ops_parallel(e, N, 8, job, c);
  for (int i = 0; i < N; i++) assert_int_equal(atomic_load(&c->runs[i]), 1);
  int n = atomic_load(&c->n_engines);
  assert_true(n >= 1 && n <= 8);
  sm_engine_free(e);
  free(c);
}

static void test_one_worker_uses_callers_engine(void **state) {
  (void)state;
  ctx *c = xcalloc(1, sizeof *c);
  assert_non_null(c);
  c->stop_at = -1;
  sm_engine *e = new_engine();
  ops_parallel(e, 10, 1, job, c);
  for (int i = 0; i < 10; i++) assert_int_equal(atomic_load(&c->runs[i]), 1);
  assert_int_equal(atomic_load(&c->n_engines), 1);
  assert_ptr_equal(atomic_load(&c->engines[0]), e);
  sm_engine_free(e);
  free(c);
}

static void test_zero_and_one(void **state) {
  (void)state;
  ctx *c = xcalloc(1, sizeof *c);
  assert_non_null(c);
  c->stop_at = -1;
  sm_engine *e = new_engine();
  ops_parallel(e, 0, 8, job, c);
  assert_int_equal(atomic_load(&c->n_engines), 0);
  ops_parallel(e, 1, 8, job, c);
  assert_int_equal(atomic_load(&c->runs[0]), 1);
  assert_ptr_equal(atomic_load(&c->engines[0]), e); /* no thread for one job */
  sm_engine_free(e);
  free(c);
}

static void test_stop(void **state) {
  (void)state;
  ctx *c = xcalloc(1, sizeof *c);
  assert_non_null(c);
  c->stop_at = 0;
  sm_engine *e = new_engine();
  ops_parallel(e, N, 4, job, c);
  int ran = 0;
  for (int i = 0; i < N; i++) {
    assert_true(atomic_load(&c->runs[i]) <= 1);
    ran += atomic_load(&c->runs[i]);
  }
  assert_true(ran >= 1);
  assert_int_equal(atomic_load(&c->runs[0]), 1);
  /* One worker: nothing after the stop runs at all. */
  memset(c->runs, 0, sizeof c->runs);
  c->stop_at = 3;
  ops_parallel(e, N, 1, job, c);
  ran = 0;
  for (int i = 0; i < N; i++) ran += atomic_load(&c->runs[i]);
  assert_int_equal(ran, 4);
  sm_engine_free(e);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_index_once),
      cmocka_unit_test(test_one_worker_uses_callers_engine),
      cmocka_unit_test(test_zero_and_one),
      cmocka_unit_test(test_stop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
