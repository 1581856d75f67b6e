/* The audit: section of the configuration: values, defaults, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "support/config_errors.h"

static int load(const char *text, sm_config **cfg, sm_error *err) {
  return sm_config_load_string(cfg, "t.yaml", text, strlen(text), err);
}

static void test_values_and_defaults(void **state) {
  (void)state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  sm_config_audit ca;
  assert_int_equal(load("version: 1\n", &cfg, &err), 0);
  sm_config_audit_get(cfg, &ca);
  assert_int_equal(ca.enabled, -1);
  assert_null(ca.file);
  assert_int_equal(ca.to_stderr, -1);
  assert_int_equal(ca.keep, -1);
  assert_int_equal(ca.max_bytes, 0);
  sm_config_free(cfg);
  assert_int_equal(load("audit:\n  enabled: false\n  file: /var/log/sm/audit.jsonl\n  stderr: true\n"
                        "  max_size: 1m\n  keep: 0\n",
                        &cfg, &err),
                   0);
  sm_config_audit_get(cfg, &ca);
  assert_int_equal(ca.enabled, 0);
  assert_string_equal(ca.file, "/var/log/sm/audit.jsonl");
  assert_int_equal(ca.to_stderr, 1);
  assert_int_equal(ca.keep, 0);
  assert_int_equal(ca.max_bytes, 1024 * 1024);
  sm_config_free(cfg);
  assert_int_equal(load("audit:\n  file: \"\"\n", &cfg, &err), 0);
  sm_config_audit_get(cfg, &ca);
  assert_string_equal(ca.file, "");
  sm_config_free(cfg);
}

static void test_errors(void **state) {
  (void)state;
  static const tc_config_error cases[] = {
      {"audit:\n  keep: 101\n", "t.yaml:2:9: audit.keep: expected a whole number from 0 to 100"},
      {"audit:\n  max_size: 1k\n", "t.yaml:2:13: audit.max_size: expected a size of at least 4k"},
      {"audit:\n  file: audit.jsonl\n", "t.yaml:2:9: audit.file: 'audit.jsonl' is not an absolute path"},
      {"audit:\n  enabled: maybe\n", "t.yaml:2:12: audit.enabled:"},
      {"audit:\n  rotate: 3\n", "t.yaml:2:3: audit.rotate: unknown key"},
      {"audit: [a]\n", "t.yaml:1:8: audit: expected a mapping"},
  };
  tc_config_errors(cases, sizeof cases / sizeof cases[0]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_and_defaults),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
