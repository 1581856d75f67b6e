/* The warm pool's bookkeeping without an engine: settings, configurations
 * and slots (a caller whose configuration changes drains the old pool),
 * back-off when containers cannot be made, the lookup cache, the last-used
 * throttle, background removal being opt-in, and the reap rule for pool
 * containers. The runner points at a socket nobody listens on, so every
 * creation fails fast. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "sandbox/context.h"
#include "sandbox/host.h"
#include "sandbox/lookup.h"
#include "sandbox/pool.h"

static char state_dir[] = "/tmp/sandman-test-pool-XXXXXX";

static sm_runner *new_runner(void) {
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  o.engine.host = "unix:///nonexistent/sandman-test-pool.sock";
  o.engine.connect_timeout_ms = 200;
  o.state_dir = state_dir;
  o.instance = "unit-pool";
  sm_runner *r = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&r, &o, &err) != 0) fail_msg("runner: %s", err.message);
  return r;
}

static void per_tool(sm_run_request *req, const char *agent, const char *tool) {
  sm_run_request_init(req);
  req->settings.mode = SM_MODE_PER_TOOL;
  req->agent = agent;
  req->tool = tool;
}

static void test_settings(void **state) {
  (void)state;
  sm_runner *r = new_runner();
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_pool_size(r), 0); /* off until set */
  assert_int_equal(sm_runner_pool_set_size(r, SM_POOL_MAX_SIZE + 1, &err), SM_EINVAL);
  assert_int_equal(sm_runner_pool_set_size(r, 3, &err), 0);
  assert_int_equal(sm_runner_pool_size(r), 3);
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = SM_MODE_PER_RUN;
  assert_int_equal(sm_runner_pool_prepare(r, &req, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "per_tool"));
  assert_int_equal(sm_runner_pool_set_size(r, 0, &err), 0);
  sm_pool_stats st;
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.size, 0);
  assert_int_equal(st.configurations, 0);
  /* Nothing to wait for. */
  assert_int_equal(sm_runner_settle(r, 1, &err), 0);
  sm_runner_free(r);
}

static void test_off_takes_nothing(void **state) {
  (void)state;
  sm_runner *r = new_runner();
  sm_run_request req;
  per_tool(&req, NULL, NULL);
  char hash[65];
  sm_sandbox_settings_hash(&req.settings, hash);
  sandbox_pool_item item;
  assert_int_equal(sandbox_pool_take(sandbox_runner_ctx(r)->pool, &req, hash, &item), 0);
  sm_pool_stats st;
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.configurations, 0); /* no pool made while off */
  assert_int_equal(st.missed, 0);
  sm_runner_free(r);
}

static void test_configuration_change_drains(void **state) {
  (void)state;
  sm_runner *r = new_runner();
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_pool_set_size(r, 2, &err), 0);
  sm_run_request a;
  per_tool(&a, "agent-a", "shell");
  assert_int_equal(sm_runner_pool_prepare(r, &a, &err), 0);
  sm_pool_stats st;
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.configurations, 1);

  /* Another caller with the same configuration shares the pool. */
  sm_run_request b;
  per_tool(&b, "agent-b", "shell");
  assert_int_equal(sm_runner_pool_prepare(r, &b, &err), 0);
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.configurations, 1);

  /* agent-a's configuration changes: agent-b still uses the old one. */
  a.settings.memory = 256LL << 20;
  assert_int_equal(sm_runner_pool_prepare(r, &a, &err), 0);
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.configurations, 2);

  /* agent-b follows: nobody uses the old configuration, its pool goes. */
  b.settings.memory = 256LL << 20;
  assert_int_equal(sm_runner_pool_prepare(r, &b, &err), 0);
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.configurations, 1);

  /* Another project is another configuration (the project is a label). */
  b.project = "other";
  assert_int_equal(sm_runner_pool_prepare(r, &b, &err), 0);
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.configurations, 2);

  /* Size 0 drains everything. */
  assert_int_equal(sm_runner_pool_set_size(r, 0, &err), 0);
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.configurations, 0);
  sm_runner_free(r);
}

static void test_failing_engine_backs_off(void **state) {
  (void)state;
  sm_runner *r = new_runner();
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_pool_set_size(r, 2, &err), 0);
  sm_run_request req;
  per_tool(&req, NULL, NULL);
  char hash[65];
  sm_sandbox_settings_hash(&req.settings, hash);
  sandbox_pool_item item;
  /* The first call finds the pool empty and starts it. */
  assert_int_equal(sandbox_pool_take(sandbox_runner_ctx(r)->pool, &req, hash, &item), 0);
  /* Creations fail (no engine): the pool backs off rather than spinning,
   * and counts as settled meanwhile. */
  assert_int_equal(sm_runner_settle(r, 10, &err), 0);
  sm_pool_stats st;
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.configurations, 1);
  assert_int_equal(st.ready, 0);
  assert_true(st.failed >= 1);
  assert_true(st.failed <= 4);
  assert_int_equal(st.missed, 1);
  assert_int_equal(st.taken, 0);
  sleep(1);
  sm_runner_pool_stats(r, &st);
  assert_true(st.failed <= 4); /* still backing off: 2 s, then 4 s... */
  /* Freeing the runner stops the threads promptly. */
  sm_runner_free(r);
}

static void test_background_removal_is_opt_in(void **state) {
  (void)state;
  sm_runner *r = new_runner();
  sm_state_lock *busy = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_state_busy_acquire(state_dir, "sandman-unit-pool-tool-x", &busy, &err), 0);
  /* Off: the caller removes its container itself. */
  assert_int_equal(sandbox_pool_remove_later(sandbox_runner_ctx(r)->pool,
                                             "sandman-unit-pool-tool-x", "v", busy, 0),
                   -1);
  sm_state_unlock(busy);
  sm_runner_set_background_removal(r, 1);
  assert_int_equal(sm_state_busy_acquire(state_dir, "sandman-unit-pool-tool-y", &busy, &err), 0);
  assert_int_equal(sandbox_pool_remove_later(sandbox_runner_ctx(r)->pool,
                                             "sandman-unit-pool-tool-y", "v", busy, 0),
                   0);
  /* The queue holds the busy lock until the removal was tried. */
  sm_runner_free(r);
  assert_int_equal(sm_state_is_busy(state_dir, "sandman-unit-pool-tool-y"), 0);
}

static void test_cache(void **state) {
  (void)state;
  sm_runner *r = new_runner();
  sandbox_lookup *l = sandbox_runner_ctx(r)->lookup;
  sandbox_lookup_entry c, got;
  memset(&c, 0, sizeof c);
  snprintf(c.id, sizeof c.id, "abc123");
  snprintf(c.hash, sizeof c.hash, "h1");
  snprintf(c.project, sizeof c.project, "p");
  c.uid = 1000;
  c.gid = 1001;
  assert_int_equal(sandbox_lookup_get(l, "sb1", "h1", &got), 0);
  sandbox_lookup_put(l, "sb1", &c);
  assert_int_equal(sandbox_lookup_get(l, "sb1", "h1", &got), 1);
  assert_string_equal(got.id, "abc123");
  assert_int_equal(got.gid, 1001);
  /* Another configuration never hits: the sandbox must be looked at. */
  assert_int_equal(sandbox_lookup_get(l, "sb1", "h2", &got), 0);
  assert_int_equal(sandbox_lookup_get(l, "sb2", "h1", &got), 0);
  sandbox_lookup_drop(l, "sb1");
  assert_int_equal(sandbox_lookup_get(l, "sb1", "h1", &got), 0);
  sandbox_lookup_drop(l, "never-there");

  /* Last-used writes: at most one a second per sandbox this runner knows. */
  assert_int_equal(sandbox_lookup_touch_due(l, "unknown", 100.0), 1);
  assert_int_equal(sandbox_lookup_touch_due(l, "unknown", 100.1), 1);
  sandbox_lookup_put(l, "sb1", &c);
  assert_int_equal(sandbox_lookup_touch_due(l, "sb1", 100.0), 1);
  assert_int_equal(sandbox_lookup_touch_due(l, "sb1", 100.5), 0);
  assert_int_equal(sandbox_lookup_touch_due(l, "sb1", 101.2), 1);
  assert_int_equal(sandbox_lookup_touch_due(l, "sb1", 50.0), 1); /* the clock went back */
  sm_runner_free(r);
}

static void test_reap_rule(void **state) {
  (void)state;
  char why[320];
  sm_ops_reap_input in;
  memset(&in, 0, sizeof in);
  in.mode = "per_tool";
  in.state = "running";
  in.now = 1000000;
  in.created_at = in.now - 7200;
  in.last_used_at = -1;
  in.older_than_s = 60;
  in.pool = 1;
  in.keep_pool = 1;
  in.owner = SM_OPS_OWNER_ALIVE;
  in.owner_label = "host:1";
  /* A live runner's pool is kept by idle reaps... */
  assert_int_equal(sm_ops_reap_decide(&in, why, sizeof why), SM_OPS_SPARE);
  assert_string_equal(why, "kept by the warm pool");
  /* ...a dead runner's pool is not. */
  in.owner = SM_OPS_OWNER_GONE;
  assert_int_equal(sm_ops_reap_decide(&in, why, sizeof why), SM_OPS_REMOVE);
  /* An operator's reap: a live owner is still setting up or using it. */
  in.keep_pool = 0;
  in.owner = SM_OPS_OWNER_ALIVE;
  assert_int_equal(sm_ops_reap_decide(&in, why, sizeof why), SM_OPS_SPARE);
  in.force = 1;
  assert_int_equal(sm_ops_reap_decide(&in, why, sizeof why), SM_OPS_REMOVE);
}

static int setup(void **state) {
  (void)state;
  if (mkdtemp(state_dir) == NULL) return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sandbox_remove_tree(state_dir, NULL);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_settings),
      cmocka_unit_test(test_off_takes_nothing),
      cmocka_unit_test(test_configuration_change_drains),
      cmocka_unit_test(test_failing_engine_backs_off),
      cmocka_unit_test(test_background_removal_is_opt_in),
      cmocka_unit_test(test_cache),
      cmocka_unit_test(test_reap_rule),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
