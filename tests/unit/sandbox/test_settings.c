/* Built-in settings, the settings hash, and the names of modes, sync modes
 * and failure kinds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

static void test_defaults_are_hardened(void **state) {
  (void)state;
  sm_sandbox_settings s;
  sm_sandbox_settings_defaults(&s);
  assert_int_equal(s.mode, SM_MODE_NONE);
  assert_string_equal(s.image, "sandman/minimal:latest");
  assert_string_equal(s.network, "none");
  assert_string_equal(s.runtime, "");
  assert_int_equal(s.pids, 256);
  assert_int_equal(s.memory, 512LL << 20);
  assert_int_equal(s.disk, 1LL << 30);
  assert_int_equal(s.tmpfs, 64LL << 20);
  assert_int_equal(s.nofile, 1024);
  assert_true(s.cpu == 1.0);
  assert_true(s.timeout_s == 120.0);
  assert_int_equal(s.stdout_cap, 1 << 20);
  assert_int_equal(s.stderr_cap, 1 << 20);
  assert_true(s.read_only_root && s.no_new_privileges && s.drop_all_caps && s.init);
}

static void test_request_init_uses_defaults(void **state) {
  (void)state;
  sm_run_request req;
  sm_run_request_init(&req);
  sm_sandbox_settings s;
  sm_sandbox_settings_defaults(&s);
  assert_memory_equal(&req.settings, &s, sizeof s);
  assert_int_equal(req.sync, SM_SYNC_DEFAULT);
  assert_null(req.argv);
}

static void test_hash_is_stable(void **state) {
  (void)state;
  sm_sandbox_settings a, b;
  sm_sandbox_settings_defaults(&a);
  sm_sandbox_settings_defaults(&b);
  char ha[65], hb[65];
  sm_sandbox_settings_hash(&a, ha);
  sm_sandbox_settings_hash(&b, hb);
  assert_int_equal(strlen(ha), 64);
  assert_string_equal(ha, hb);
  /* The same settings hash the same across releases (a new sandman must
   * not replace every running sandbox), unless sandman's own spec changed
   * on purpose (the version at the hash's start): pinned value. */
  assert_string_equal(ha, "379104e96f9f3c1361f6e45427993ba65d3123240e9925e3b22aeba8bb2ab946");
}

static void test_hash_ignores_per_call_settings(void **state) {
  (void)state;
  sm_sandbox_settings a, b;
  sm_sandbox_settings_defaults(&a);
  b = a;
  b.timeout_s = 5;
  b.stdout_cap = 10;
  b.stderr_cap = 10;
  b.idle_timeout_s = 99;
  b.mode = SM_MODE_PER_RUN;
  sm_string_list_add(&b.env_passthrough, "FOO_*", NULL);
  sm_string_list_add(&b.excludes, "*.o", NULL);
  char ha[65], hb[65];
  sm_sandbox_settings_hash(&a, ha);
  sm_sandbox_settings_hash(&b, hb);
  assert_string_equal(ha, hb);
}

static void test_hash_changes_with_container_settings(void **state) {
  (void)state;
  sm_sandbox_settings base;
  sm_sandbox_settings_defaults(&base);
  char h0[65], h1[65];
  sm_sandbox_settings_hash(&base, h0);
  sm_sandbox_settings v[10];
  for (int i = 0; i < 10; i++) v[i] = base;
  snprintf(v[0].image, sizeof v[0].image, "other:1");
  snprintf(v[1].network, sizeof v[1].network, "bridge");
  snprintf(v[2].runtime, sizeof v[2].runtime, "runsc");
  v[3].memory = 64 << 20;
  v[4].pids = 64;
  v[5].disk = 10 << 20;
  v[6].cpu = 0.5;
  v[7].read_only_root = 0;
  v[8].init = 0;
  snprintf(v[9].user, sizeof v[9].user, "1001:1001");
  for (int i = 0; i < 10; i++) {
    sm_sandbox_settings_hash(&v[i], h1);
    assert_string_not_equal(h0, h1);
  }
}

static void test_mode_names(void **state) {
  (void)state;
  const char *names[] = {"none", "per_tool", "per_run", "per_worker"};
  for (int i = 0; i < 4; i++) {
    sm_mode m;
    assert_string_equal(sm_mode_name((sm_mode)i), names[i]);
    assert_int_equal(sm_mode_parse(names[i], &m, NULL), 0);
    assert_int_equal(m, i);
  }
  sm_mode m;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mode_parse("per-run", &m, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "per_run"));
  assert_int_equal(sm_mode_parse(NULL, &m, &err), SM_EINVAL);
}

static void test_sync_and_failure_names(void **state) {
  (void)state;
  sm_sync_mode s;
  assert_int_equal(sm_sync_mode_parse("none", &s, NULL), 0);
  assert_int_equal(s, SM_SYNC_NONE);
  assert_int_equal(sm_sync_mode_parse("in", &s, NULL), 0);
  assert_int_equal(s, SM_SYNC_IN);
  assert_int_equal(sm_sync_mode_parse("inout", &s, NULL), 0);
  assert_int_equal(s, SM_SYNC_INOUT);
  assert_int_equal(sm_sync_mode_parse("out", &s, NULL), SM_EINVAL);
  assert_null(sm_failure_kind_name(SM_FAIL_NONE));
  assert_string_equal(sm_failure_kind_name(SM_FAIL_TOOL), "tool");
  assert_string_equal(sm_failure_kind_name(SM_FAIL_TIMEOUT), "timeout");
  assert_string_equal(sm_failure_kind_name(SM_FAIL_POLICY), "policy");
  assert_string_equal(sm_failure_kind_name(SM_FAIL_SANDBOX), "sandbox");
  assert_string_equal(sm_failure_kind_name(SM_FAIL_ENGINE), "engine");
}

static void test_string_list_caps(void **state) {
  (void)state;
  sm_string_list l;
  memset(&l, 0, sizeof l);
  char big[SM_NAME_MAX + 1];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(sm_string_list_add(&l, big, NULL), SM_EINVAL);
  for (int i = 0; i < SM_LIST_MAX; i++) assert_int_equal(sm_string_list_add(&l, "x", NULL), 0);
  assert_int_equal(sm_string_list_add(&l, "x", NULL), SM_EINVAL);
  assert_int_equal(l.n, SM_LIST_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_are_hardened),
      cmocka_unit_test(test_request_init_uses_defaults),
      cmocka_unit_test(test_hash_is_stable),
      cmocka_unit_test(test_hash_ignores_per_call_settings),
      cmocka_unit_test(test_hash_changes_with_container_settings),
      cmocka_unit_test(test_mode_names),
      cmocka_unit_test(test_sync_and_failure_names),
      cmocka_unit_test(test_string_list_caps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
