/* The lifecycle's levels (sm_config_lifecycle): a worker's entry over
 * workers."*" over the agent's over the defaults, key by key; "never"
 * turns a step off; and the snapshots: setting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/sandman.h>

static const char yaml[] =
    "version: 1\n"
    "defaults:\n"
    "  lifecycle: {freeze_after: 10m, stop_after: 2h, remove_after: 7d}\n"
    "agents:\n"
    "  coder:\n"
    "    lifecycle: {stop_after: never, remove_after: 30d}\n"
    "  plain: {}\n"
    "workers:\n"
    "  w1:\n"
    "    lifecycle: {freeze_after: 1m}\n"
    "  \"*\":\n"
    "    lifecycle: {remove_after: 3d}\n"
    "snapshots: {older_than: 14d, keep: 20}\n";

static void lc(const sm_config *c, const char *agent, const char *worker, double f, double s,
               double r) {
  sm_lifecycle l;
  sm_config_lifecycle(c, agent, worker, &l);
  assert_true(l.freeze_after_s == f);
  assert_true(l.stop_after_s == s);
  assert_true(l.remove_after_s == r);
}

static void test_levels(void **state) {
  (void)state;
  sm_config *c = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&c, "t.yaml", yaml, strlen(yaml), &err), 0);
  assert_true(sm_config_lifecycle_any(c));
  /* No agent, no worker entry: the defaults. */
  lc(c, NULL, NULL, 600, 7200, 604800);
  lc(c, "plain", "", 600, 7200, 604800);
  /* The agent's, key by key; never is off. */
  lc(c, "coder", NULL, 600, 0, 30 * 86400.0);
  /* Any worker: "*"'s remove_after over the agent's. */
  lc(c, "coder", "w9", 600, 0, 3 * 86400.0);
  /* w1: its own freeze_after over everything, the rest from below. */
  lc(c, "coder", "w1", 60, 0, 3 * 86400.0);
  lc(c, NULL, "w1", 60, 7200, 3 * 86400.0);
  double older = 0;
  size_t keep = 0;
  sm_config_snapshot_reap(c, &older, &keep);
  assert_true(older == 14 * 86400.0);
  assert_int_equal(keep, 20);
  sm_config_free(c);
}

static void test_none(void **state) {
  (void)state;
  static const char plain[] = "version: 1\ndefaults: {mode: per_run}\n";
  sm_config *c = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&c, "t.yaml", plain, strlen(plain), &err), 0);
  assert_false(sm_config_lifecycle_any(c));
  lc(c, "x", "y", 0, 0, 0);
  double older = 1;
  size_t keep = 1;
  sm_config_snapshot_reap(c, &older, &keep);
  assert_true(older == 0);
  assert_int_equal(keep, 0);
  sm_config_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_levels),
      cmocka_unit_test(test_none),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
