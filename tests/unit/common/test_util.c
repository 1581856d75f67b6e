/* Parsers and the capped buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "common/buf.h"

static void test_sizes(void **state) {
  (void)state;
  static const struct {
    const char *in;
    int64_t want;
  } ok[] = {{"0", 0},         {"512", 512},       {"64k", 65536},         {"64K", 65536},
            {"10m", 10485760}, {"2g", 2147483648}, {"1t", 1099511627776}, {"10mb", 10485760},
            {"10MiB", 10485760}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    int64_t v = -1;
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(sm_parse_size(ok[i].in, &v, &err), 0);
    assert_int_equal(v, ok[i].want);
  }
  static const char *bad[] = {"", "-1", "k", "10x", "1.5m", "99999999999999999999", "8388608t", " 1", "1 m"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v = 0;
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(sm_parse_size(bad[i], &v, &err), SM_EINVAL);
    assert_int_equal(err.code, SM_EINVAL);
    assert_true(strlen(err.message) > 0);
  }
}

static void test_durations(void **state) {
  (void)state;
  static const struct {
    const char *in;
    double want;
  } ok[] = {{"0s", 0}, {"90s", 90}, {"10m", 600}, {"2h", 7200}, {"7d", 604800}, {"1.5s", 1.5}, {"30", 30}, {"250ms", 0.25}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    double v = -1;
    assert_int_equal(sm_parse_duration(ok[i].in, &v, NULL), 0);
    assert_true(v > ok[i].want - 1e-9 && v < ok[i].want + 1e-9);
  }
  static const char *bad[] = {"", "s", "-5s", "10y", "1h30m", "abc", "nan"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    double v = 0;
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(sm_parse_duration(bad[i], &v, &err), SM_EINVAL);
    assert_non_null(strstr(err.message, "duration"));
  }
}

static void test_ints(void **state) {
  (void)state;
  int64_t v = 0;
  assert_int_equal(sm_parse_int("64", 1, 100, &v, NULL), 0);
  assert_int_equal(v, 64);
  assert_int_equal(sm_parse_int("0", 1, 100, &v, NULL), SM_EINVAL);
  assert_int_equal(sm_parse_int("12a", 0, 100, &v, NULL), SM_EINVAL);
  assert_int_equal(sm_parse_int("99999999999999999999", 0, INT64_MAX, &v, NULL), SM_EINVAL);
  double d = 0;
  assert_int_equal(sm_parse_double("1.5", 0, 64, &d, NULL), 0);
  assert_true(d == 1.5);
  assert_int_equal(sm_parse_double("inf", 0, 64, &d, NULL), SM_EINVAL);
  assert_int_equal(sm_parse_double("-1", 0, 64, &d, NULL), SM_EINVAL);
}

static void test_time_round_trip(void **state) {
  (void)state;
  char buf[32];
  sm_format_time(1795312415.0, buf, sizeof buf);
  assert_string_equal(buf, "2026-11-22T01:53:35Z");
  assert_true(sm_parse_time(buf) == 1795312415.0);
  double t = sm_parse_time("2026-11-22T01:53:35.5+01:00");
  assert_true(t == 1795312415.5 - 3600);
  assert_true(sm_parse_time("yesterday") < 0);
  assert_true(sm_parse_time("2026-11-22T01:53:35") < 0); /* no zone */
  char size[32];
  sm_format_size(67108864, size, sizeof size);
  assert_string_equal(size, "64m");
  sm_format_size(1000, size, sizeof size);
  assert_string_equal(size, "1000");
}

static void test_buf_cap(void **state) {
  (void)state;
  common_buf b;
  common_buf_init(&b, 10);
  assert_int_equal(common_buf_append(&b, "12345", 5), 0);
  assert_int_equal(common_buf_append(&b, "123456", 6), SM_ETOOBIG);
  assert_int_equal(b.len, 5); /* unchanged by the refused append */
  assert_string_equal(b.data, "12345");
  assert_int_equal(common_buf_append_capped(&b, "abcdefgh", 8), 3);
  assert_int_equal(b.len, 10);
  assert_string_equal(b.data, "12345abcde");
  assert_int_equal(common_buf_printf(&b, "%d", 1), SM_ETOOBIG);
  size_t len = 0;
  char *s = common_buf_steal(&b, &len);
  assert_int_equal(len, 10);
  assert_null(b.data);
  free(s);
  common_buf_init(&b, 1 << 20);
  for (int i = 0; i < 1000; i++) assert_int_equal(common_buf_printf(&b, "line %d\n", i), 0);
  assert_non_null(strstr(b.data, "line 999\n"));
  common_buf_dispose(&b);
}

static void test_errors(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_error_set(&err, SM_ENOTFOUND, "no such container: %s", "abc"), SM_ENOTFOUND);
  assert_int_equal(sm_error_wrap(&err, "running tool in run %s", "r1"), SM_ENOTFOUND);
  assert_string_equal(err.message, "running tool in run r1: no such container: abc");
  assert_string_equal(sm_error_name(SM_ETIMEOUT), "TIMEOUT");
  assert_string_equal(sm_error_name(-9999), "UNKNOWN");
  assert_int_equal(sm_error_set(NULL, SM_EIO, "x"), SM_EIO);
  sm_error_set_errno(&err, SM_EIO, 2, "opening %s", "/x");
  assert_non_null(strstr(err.message, "opening /x: No such file"));
  assert_true(sm_glob_match("web_*", "web_fetch"));
  assert_false(sm_glob_match("web_*", "shell"));
}

/* sm_random_hex: 2n lowercase hex digits from the kernel, never the same
 * twice in practice, and no more than 64 bytes at once. */
static void test_random_hex(void **s) {
  (void)s;
  char a[129], b[129];
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_random_hex(a, 64, &err), 0);
  assert_int_equal(strlen(a), 128);
  assert_int_equal(strspn(a, "0123456789abcdef"), 128);
  assert_int_equal(sm_random_hex(b, 64, &err), 0);
  assert_string_not_equal(a, b);
  assert_int_equal(sm_random_hex(a, 0, &err), 0);
  assert_string_equal(a, "");
  assert_int_equal(sm_random_hex(a, 65, &err), SM_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes),   cmocka_unit_test(test_durations),
      cmocka_unit_test(test_ints),    cmocka_unit_test(test_time_round_trip),
      cmocka_unit_test(test_buf_cap), cmocka_unit_test(test_errors),
      cmocka_unit_test(test_random_hex),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
