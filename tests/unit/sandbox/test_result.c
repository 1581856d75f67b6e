/* The `run --json` object and the capped capture behind it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "sandbox/capture.h"
#include "sandbox/sandbox_result.h"

#include "support/alloc_fail.h"
#include "support/xalloc.h"

static void test_json_has_exactly_the_contract_fields(void **state) {
  (void)state;
  sm_run_result r;
  memset(&r, 0, sizeof r);
  r.ok = 1;
  r.stdout_data = xstrdup("hi\n");
  r.stdout_len = 3;
  r.stderr_data = xstrdup("");
  r.duration_ms = 41.66;
  r.mode = SM_MODE_PER_RUN;
  snprintf(r.sandbox_id, sizeof r.sandbox_id, "abc");
  r.reused = 1;
  r.files_changed = xcalloc(1, sizeof(char *));
  r.files_changed[0] = xstrdup("out/report.txt");
  r.n_files_changed = 1;
  r.conflicts = xcalloc(1, sizeof(char *));
  r.conflicts[0] = xstrdup("a.txt.sandman-conflict");
  r.n_conflicts = 1;
  json_object *o = sm_run_result_to_json(&r);
  const char *want[] = {"ok", "exit_code", "stdout", "stderr", "stdout_truncated",
                        "stderr_truncated", "timed_out", "oom_killed", "duration_ms", "mode",
                        "sandbox_id", "reused", "files_changed", "conflicts", "refused",
                        "failure_kind", "error"};
  assert_int_equal(json_object_object_length(o), sizeof want / sizeof want[0]);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(o, want[i], &v));
  }
  const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  assert_non_null(strstr(text, "\"duration_ms\":41.7"));
  assert_non_null(strstr(text, "\"failure_kind\":null"));
  assert_non_null(strstr(text, "\"error\":null"));
  assert_non_null(strstr(text, "\"mode\":\"per_run\""));
  assert_non_null(strstr(text, "\"files_changed\":[\"out\\/report.txt\"]") ||
                  strstr(text, "\"files_changed\":[\"out/report.txt\"]"));
  assert_non_null(strstr(text, "\"stdout\":\"hi\\n\""));
  assert_non_null(strstr(text, "\"conflicts\":[\"a.txt.sandman-conflict\"]"));
  json_object_put(o);
  sm_run_result_dispose(&r);
  assert_null(r.stdout_data);
  assert_int_equal(r.n_files_changed, 0);
}

static void test_json_failure_and_bad_utf8(void **state) {
  (void)state;
  sm_run_result r;
  memset(&r, 0, sizeof r);
  r.stdout_data = xmalloc(5);
  memcpy(r.stdout_data, "a\xff\0b", 5);
  r.stdout_len = 4;
  sm_error err = SM_ERROR_INIT;
  sm_error_set(&err, SM_EUNREACHABLE, "engine unreachable at unix:///nowhere");
  sandbox_result_fail(&r, sm_error_failure_kind(err.code), &err);
  json_object *o = sm_run_result_to_json(&r);
  const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  assert_non_null(strstr(text, "\"failure_kind\":\"engine\""));
  assert_non_null(strstr(text, "\"exit_code\":125"));
  assert_non_null(strstr(text, "\"ok\":false"));
  /* Invalid UTF-8 became U+FFFD; the NUL survives as an escape. */
  json_object *so = NULL;
  json_object_object_get_ex(o, "stdout", &so);
  assert_int_equal(json_object_get_string_len(so), 1 + 3 + 1 + 1);
  assert_memory_equal(json_object_get_string(so), "a\xef\xbf\xbd\0b", 6);
  /* The text parses back. */
  json_object *back = json_tokener_parse(text);
  assert_non_null(back);
  json_object_put(back);
  json_object_put(o);
  sm_run_result_dispose(&r);
}

static void test_failure_kinds(void **state) {
  (void)state;
  assert_int_equal(sm_error_failure_kind(SM_EUNREACHABLE), SM_FAIL_ENGINE);
  assert_int_equal(sm_error_failure_kind(SM_EENGINE), SM_FAIL_ENGINE);
  assert_int_equal(sm_error_failure_kind(SM_EPOLICY), SM_FAIL_POLICY);
  assert_int_equal(sm_error_failure_kind(SM_ESANDBOX), SM_FAIL_SANDBOX);
  assert_int_equal(sm_error_failure_kind(SM_EIO), SM_FAIL_SANDBOX);
}

static int forwarded;
static int count_forward(void *ud, int stream, const char *data, size_t len) {
  (void)ud;
  (void)stream;
  (void)data;
  forwarded += (int)len;
  return 0;
}

static void test_capture_caps_and_flags(void **state) {
  (void)state;
  sandbox_capture c;
  forwarded = 0;
  sandbox_capture_init(&c, 10, 4, count_forward, NULL);
  char chunk[7] = "abcdef";
  for (int i = 0; i < 5; i++) assert_int_equal(sandbox_capture_output(&c, 1, chunk, 6), 0);
  assert_int_equal(sandbox_capture_output(&c, 2, "errors!", 7), 0);
  sm_run_result r;
  memset(&r, 0, sizeof r);
  assert_int_equal(sandbox_capture_to_result(&c, &r), 0);
  assert_int_equal(r.stdout_len, 10);
  assert_string_equal(r.stdout_data, "abcdefabcd");
  assert_true(r.stdout_truncated);
  assert_int_equal(r.stderr_len, 4);
  assert_string_equal(r.stderr_data, "erro");
  assert_true(r.stderr_truncated);
  /* Only what was kept is forwarded. */
  assert_int_equal(forwarded, 14);
  sandbox_capture_dispose(&c);
  sm_run_result_dispose(&r);

  sandbox_capture_init(&c, 10, 10, NULL, NULL);
  memset(&r, 0, sizeof r);
  assert_int_equal(sandbox_capture_to_result(&c, &r), 0);
  assert_non_null(r.stdout_data);
  assert_int_equal(r.stdout_len, 0);
  assert_false(r.stdout_truncated);
  sandbox_capture_dispose(&c);
  sm_run_result_dispose(&r);
}

/* Output that fits its cap but finds no memory is lost, not truncated:
 * the result says so (SM_ENOMEM), never "truncated". */
static void test_capture_out_of_memory_is_not_truncation(void **state) {
  (void)state;
  sandbox_capture c;
  sandbox_capture_init(&c, 1024, 1024, NULL, NULL);
  af_fail_at(1); /* the buffer's first growth */
  assert_int_equal(sandbox_capture_output(&c, 1, "abcdef", 6), 0);
  af_fail_at(0);
  sm_run_result r;
  memset(&r, 0, sizeof r);
  assert_int_equal(sandbox_capture_to_result(&c, &r), SM_ENOMEM);
  assert_false(r.stdout_truncated);
  sandbox_capture_dispose(&c);
  sm_run_result_dispose(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_has_exactly_the_contract_fields),
      cmocka_unit_test(test_json_failure_and_bad_utf8),
      cmocka_unit_test(test_failure_kinds),
      cmocka_unit_test(test_capture_caps_and_flags),
      cmocka_unit_test(test_capture_out_of_memory_is_not_truncation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
