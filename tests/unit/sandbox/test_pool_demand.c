/* The warm pool's size from the calls it sees (src/sandbox/pool_demand.c):
 * an agent that thinks between calls keeps the base size, a burst grows it
 * to the number of calls within one making time (and by one for each call
 * that found the pool empty), within the bounds, and the growth lasts
 * SM_POOL_DEMAND_HOLD_MS after the burst. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "sandbox/pool_demand.h"

static void test_quiet_keeps_base(void **state) {
  (void)state;
  sm_pool_demand d;
  sm_pool_demand_init(&d);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 0), 2);
  /* One call every 1.5 s: never two within one making time (600 ms). */
  for (int i = 0; i < 20; i++) sm_pool_demand_call(&d, 1000.0 + i * 1500.0, 0, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 31000.0), 2);
  assert_int_equal(sm_pool_demand_target(&d, 0, 8, 31000.0), 0); /* off */
}

static void test_burst_grows_within_bounds(void **state) {
  (void)state;
  sm_pool_demand d;
  sm_pool_demand_init(&d);
  for (int i = 0; i < 5; i++) sm_pool_demand_call(&d, 1000.0 + i * 10.0, 0, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 1100.0), 5);
  for (int i = 5; i < 30; i++) sm_pool_demand_call(&d, 1000.0 + i * 10.0, 0, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 1400.0), 8);  /* the maximum */
  assert_int_equal(sm_pool_demand_target(&d, 2, 40, 1400.0), 30);
  assert_int_equal(sm_pool_demand_target(&d, 3, 1, 1400.0), 3);  /* max below base */
}

static void test_peak_held_then_falls_back(void **state) {
  (void)state;
  sm_pool_demand d;
  sm_pool_demand_init(&d);
  for (int i = 0; i < 6; i++) sm_pool_demand_call(&d, 1000.0 + i * 5.0, 0, 2);
  /* Slow calls afterwards do not lower it while the peak is held... */
  sm_pool_demand_call(&d, 20000.0, 0, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 30000.0), 6);
  /* ...and once it has aged out, recent calls decide. */
  double later = 1025.0 + SM_POOL_DEMAND_HOLD_MS + 1.0;
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, later), 2);
  sm_pool_demand_call(&d, later + 10.0, 0, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, later + 20.0), 2);
}

static void test_making_time_sets_the_window(void **state) {
  (void)state;
  sm_pool_demand d;
  sm_pool_demand_init(&d);
  /* Calls 300 ms apart: two within the first guess of 600 ms... */
  for (int i = 0; i < 4; i++) sm_pool_demand_call(&d, 1000.0 + i * 300.0, 0, 2);
  assert_int_equal(sm_pool_demand_target(&d, 1, 8, 2000.0), 3);
  /* ...none once containers are made in 100 ms. */
  sm_pool_demand d2;
  sm_pool_demand_init(&d2);
  for (int i = 0; i < 20; i++) sm_pool_demand_made(&d2, 100.0);
  for (int i = 0; i < 4; i++) sm_pool_demand_call(&d2, 1000.0 + i * 300.0, 0, 2);
  assert_int_equal(sm_pool_demand_target(&d2, 1, 8, 2000.0), 1);
  sm_pool_demand_made(&d2, -5.0); /* nonsense is ignored */
  assert_true(d2.make_ms > 99.0 && d2.make_ms < 120.0);
}

static void test_misses_grow_it(void **state) {
  (void)state;
  sm_pool_demand d;
  sm_pool_demand_init(&d);
  /* A new pool is empty because it is new: no growth... */
  sm_pool_demand_call(&d, 500.0, 1, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 500.0), 2);
  sm_pool_demand_made(&d, 600.0);
  /* ...but a client that waits for each container later (one call per
   * making time, each finding the pool empty) grows it. */
  for (int i = 0; i < 5; i++) sm_pool_demand_call(&d, 1000.0 + i * 700.0, 1, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 4000.0), 7);
  for (int i = 5; i < 10; i++) sm_pool_demand_call(&d, 1000.0 + i * 700.0, 1, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 8000.0), 8);
  /* Calls that find containers ready leave it as it is while held. */
  sm_pool_demand_call(&d, 9000.0, 0, 2);
  assert_int_equal(sm_pool_demand_target(&d, 2, 8, 9000.0), 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quiet_keeps_base),
      cmocka_unit_test(test_burst_grows_within_bounds),
      cmocka_unit_test(test_peak_held_then_falls_back),
      cmocka_unit_test(test_making_time_sets_the_window),
      cmocka_unit_test(test_misses_grow_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
