/* The warm pool's size from the calls it sees (src/lib/sandbox/pool_demand.c):
 * an agent that thinks between calls keeps the base size, a burst grows it
 * to the number of calls within one making time (and by one for each call
 * that found the pool empty, or to the length of a run of calls back to
 * back that found it empty), within the bounds, and the growth lasts
 * SM_POOL_DEMAND_HOLD_MS after the burst. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "sandbox/pool_demand.h"

static void test_quiet_keeps_base(void **state) {
  (void)state;
  sandbox_pool_demand d;
  sandbox_pool_demand_init(&d);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 0), 2);
  /* One call every 1.5 s: never two within one making time (600 ms). */
  for (int i = 0; i < 20; i++) sandbox_pool_demand_call(&d, 1000.0 + i * 1500.0, 0, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 31000.0), 2);
  assert_int_equal(sandbox_pool_demand_target(&d, 0, 8, 31000.0), 0); /* off */
}

static void test_burst_grows_within_bounds(void **state) {
  (void)state;
  sandbox_pool_demand d;
  sandbox_pool_demand_init(&d);
  for (int i = 0; i < 5; i++) sandbox_pool_demand_call(&d, 1000.0 + i * 10.0, 0, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 1100.0), 5);
  for (int i = 5; i < 30; i++) sandbox_pool_demand_call(&d, 1000.0 + i * 10.0, 0, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 1400.0), 8); /* the maximum */
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 40, 1400.0), 30);
  assert_int_equal(sandbox_pool_demand_target(&d, 3, 1, 1400.0), 3); /* max below base */
}

static void test_peak_held_then_falls_back(void **state) {
  (void)state;
  sandbox_pool_demand d;
  sandbox_pool_demand_init(&d);
  for (int i = 0; i < 6; i++) sandbox_pool_demand_call(&d, 1000.0 + i * 5.0, 0, 2, 0);
  /* Slow calls afterwards do not lower it while the peak is held... */
  sandbox_pool_demand_call(&d, 20000.0, 0, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 30000.0), 6);
  /* ...and once it has aged out, recent calls decide. */
  double later = 1025.0 + SM_POOL_DEMAND_HOLD_MS + 1.0;
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, later), 2);
  sandbox_pool_demand_call(&d, later + 10.0, 0, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, later + 20.0), 2);
}

static void test_making_time_sets_the_window(void **state) {
  (void)state;
  sandbox_pool_demand d;
  sandbox_pool_demand_init(&d);
  /* Calls 300 ms apart: two within the first guess of 600 ms... */
  for (int i = 0; i < 4; i++) sandbox_pool_demand_call(&d, 1000.0 + i * 300.0, 0, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 1, 8, 2000.0), 3);
  /* ...none once containers are made in 100 ms. */
  sandbox_pool_demand d2;
  sandbox_pool_demand_init(&d2);
  for (int i = 0; i < 20; i++) sandbox_pool_demand_made(&d2, 100.0);
  for (int i = 0; i < 4; i++) sandbox_pool_demand_call(&d2, 1000.0 + i * 300.0, 0, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d2, 1, 8, 2000.0), 1);
  sandbox_pool_demand_made(&d2, -5.0); /* nonsense is ignored */
  assert_true(d2.make_ms > 99.0 && d2.make_ms < 120.0);
}

static void test_misses_grow_it(void **state) {
  (void)state;
  sandbox_pool_demand d;
  sandbox_pool_demand_init(&d);
  /* A new pool is empty because it is new: no growth... */
  sandbox_pool_demand_call(&d, 500.0, 1, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 500.0), 2);
  sandbox_pool_demand_made(&d, 600.0);
  /* ...but a client that waits for each container later (one call per
   * making time, each finding the pool empty) grows it. */
  for (int i = 0; i < 5; i++) sandbox_pool_demand_call(&d, 1000.0 + i * 700.0, 1, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 4000.0), 7);
  for (int i = 5; i < 10; i++) sandbox_pool_demand_call(&d, 1000.0 + i * 700.0, 1, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 8000.0), 8);
  /* Calls that find containers ready leave it as it is while held. */
  sandbox_pool_demand_call(&d, 9000.0, 0, 2, 0);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 9000.0), 8);
}

/* One client calling back to back (the guard's bursts): each call waits
 * for its container, so no two fall within one making time; once one of
 * the run found the pool empty, the whole run is what the next burst
 * needs ready. */
static void test_run_back_to_back_counts(void **state) {
  (void)state;
  sandbox_pool_demand d;
  sandbox_pool_demand_init(&d);
  for (int i = 0; i < 4; i++) sandbox_pool_demand_made(&d, 400.0);
  double t = 10000.0;
  /* Two calls find containers ready, six wait 400 ms each for theirs. */
  for (int i = 0; i < 8; i++) {
    sandbox_pool_demand_call(&d, t, i >= 2, 2, 0);
    t += i >= 2 ? 450.0 : 5.0;
    sandbox_pool_demand_done(&d, t);
    t += 1.0; /* the next call follows at once */
  }
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, t), 8);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 6, t), 6); /* within the bounds */
}

/* A run with no call that found the pool empty is no reason to grow, and
 * a pause longer than a making time ends a run. */
static void test_run_needs_a_miss_and_no_pause(void **state) {
  (void)state;
  sandbox_pool_demand d;
  sandbox_pool_demand_init(&d);
  for (int i = 0; i < 4; i++) sandbox_pool_demand_made(&d, 400.0);
  /* Back to back (each within a making time of the last one's end), 450 ms
   * each, never finding the pool empty: the base. */
  double t = 1000.0;
  for (int i = 0; i < 10; i++) {
    sandbox_pool_demand_call(&d, t, 0, 2, 0);
    t += 450.0;
    sandbox_pool_demand_done(&d, t);
    t += 1.0;
  }
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, t), 2);
  /* Calls 1 s after the last one ended (an agent thinking), each finding
   * the pool empty: runs of one, grown only by the one-per-miss rule. */
  sandbox_pool_demand d2;
  sandbox_pool_demand_init(&d2);
  for (int i = 0; i < 4; i++) sandbox_pool_demand_made(&d2, 400.0);
  t = 1000.0;
  for (int i = 0; i < 3; i++) {
    sandbox_pool_demand_call(&d2, t, 1, 2, 0);
    sandbox_pool_demand_done(&d2, t + 450.0);
    t += 1450.0;
  }
  assert_int_equal(d2.run, 1);
  assert_int_equal(sandbox_pool_demand_target(&d2, 2, 8, t), 5);
}

/* Calls that start while others run are one run whatever their spacing
 * (the last one found the pool empty). */
static void test_run_concurrent_calls(void **state) {
  (void)state;
  sandbox_pool_demand d;
  sandbox_pool_demand_init(&d);
  for (int i = 0; i < 4; i++) sandbox_pool_demand_made(&d, 100.0);
  for (int i = 0; i < 6; i++) sandbox_pool_demand_call(&d, 1000.0 + i * 500.0, i == 5, 2, 1);
  assert_int_equal(d.run, 6);
  assert_int_equal(sandbox_pool_demand_target(&d, 2, 8, 4000.0), 6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quiet_keeps_base),
      cmocka_unit_test(test_burst_grows_within_bounds),
      cmocka_unit_test(test_peak_held_then_falls_back),
      cmocka_unit_test(test_making_time_sets_the_window),
      cmocka_unit_test(test_misses_grow_it),
      cmocka_unit_test(test_run_back_to_back_counts),
      cmocka_unit_test(test_run_needs_a_miss_and_no_pause),
      cmocka_unit_test(test_run_concurrent_calls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
