/* The idle lifecycle's decision (sm_ops_lifecycle_decide): which step a
 * keyed sandbox takes now from its state, its last use and its agent's
 * and worker's lifecycle, with the reason in words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/ops.h>

#define NOW 1000000000.0

static sm_ops_lifecycle_input base(void) {
  sm_ops_lifecycle_input in;
  memset(&in, 0, sizeof in);
  in.mode = "per_run";
  in.state = "running";
  in.created_at = NOW - 3600;
  in.last_used_at = NOW - 30; /* used 30 s ago */
  in.now = NOW;
  in.lifecycle.freeze_after_s = 60;
  in.lifecycle.stop_after_s = 300;
  in.lifecycle.remove_after_s = 3600;
  return in;
}

static sm_ops_move decide(const sm_ops_lifecycle_input *in, char *why) {
  return sm_ops_lifecycle_decide(in, why, 256);
}

static void test_steps_in_order(void **state) {
  (void)state;
  char why[256];
  sm_ops_lifecycle_input in = base();
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  assert_string_equal(why, "running, unused for 30s: no step due");
  in.last_used_at = NOW - 60;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_FREEZE);
  assert_string_equal(why, "lifecycle: unused for 1m (freeze_after 1m)");
  /* Frozen: nothing more until stop_after. */
  in.state = "frozen";
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  in.last_used_at = NOW - 300;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_STOP);
  assert_string_equal(why, "lifecycle: unused for 5m (stop_after 5m)");
  /* Still running at stop_after (a tick missed the freeze): straight to stop. */
  in.state = "running";
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_STOP);
  in.state = "stopped";
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  in.last_used_at = NOW - 3600;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_REMOVE);
  assert_string_equal(why, "lifecycle: stopped, unused for 1h (remove_after 1h)");
  /* Never used: its creation counts. */
  in = base();
  in.last_used_at = -1;
  in.created_at = NOW - 90;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_FREEZE);
  assert_string_equal(why, "lifecycle: never used, made 1m30s (freeze_after 1m)");
}

static void test_never_back(void **state) {
  (void)state;
  char why[256];
  /* A stopped or hibernated sandbox is never frozen, nor stopped again. */
  sm_ops_lifecycle_input in = base();
  in.last_used_at = NOW - 400;
  in.state = "stopped";
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  in.state = "hibernated";
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  /* A frozen one is not frozen again. */
  in.state = "frozen";
  in.last_used_at = NOW - 120;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
}

static void test_off_steps(void **state) {
  (void)state;
  char why[256];
  sm_ops_lifecycle_input in = base();
  /* No lifecycle: nothing ever moves, however long unused. */
  memset(&in.lifecycle, 0, sizeof in.lifecycle);
  in.last_used_at = NOW - 86400 * 30;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  /* Only stop_after: a running sandbox goes straight to stop. */
  in.lifecycle.stop_after_s = 60;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_STOP);
  /* remove_after only: removed from running too (removal stays explicit
   * or by remove_after). */
  in.lifecycle.stop_after_s = 0;
  in.lifecycle.remove_after_s = 600;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_REMOVE);
  assert_string_equal(why, "lifecycle: running, unused for 30d (remove_after 10m)");
}

static void test_never_moved(void **state) {
  (void)state;
  char why[256];
  sm_ops_lifecycle_input in = base();
  in.last_used_at = NOW - 86400;
  in.busy = 1;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  assert_string_equal(why, "busy: a call is in flight");
  in = base();
  in.last_used_at = NOW - 86400;
  in.mode = "per_tool";
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  in.mode = "per_worker";
  in.owned = 1; /* a lease container beside it */
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  in.owned = 0;
  in.pool = 1;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  in.pool = 0;
  in.making = 1;
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  in.making = 0;
  /* Stopped by something else than sandman: the reap's, not ours. */
  in.state = "exited";
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_NONE);
  in.state = "running";
  assert_int_equal(decide(&in, why), SM_OPS_MOVE_REMOVE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steps_in_order),
      cmocka_unit_test(test_never_back),
      cmocka_unit_test(test_off_steps),
      cmocka_unit_test(test_never_moved),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
