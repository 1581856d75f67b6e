/* API version negotiation: min(engine, ours), never below 1.41. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "engine/negotiate.h"

static char v[ENGINE_API_MAX_LEN];
static sm_error err;

static int pick(const char *header) {
  sm_error_clear(&err);
  return engine_negotiate_version(header, v, &err);
}

static void test_lower_engine(void **s) {
  (void)s;
  assert_int_equal(pick("1.41"), 0);
  assert_string_equal(v, "1.41");
  assert_int_equal(pick("1.45"), 0);
  assert_string_equal(v, "1.45");
}

static void test_equal_and_higher(void **s) {
  (void)s;
  assert_int_equal(pick(SM_ENGINE_MAX_API), 0);
  assert_string_equal(v, SM_ENGINE_MAX_API);
  assert_int_equal(pick("1.99"), 0);
  assert_string_equal(v, SM_ENGINE_MAX_API);
  assert_int_equal(pick("2.0"), 0);
  assert_string_equal(v, SM_ENGINE_MAX_API);
  /* Numeric, not string, comparison: 1.100 > 1.51, 1.9 < 1.41. */
  assert_int_equal(pick("1.100"), 0);
  assert_string_equal(v, SM_ENGINE_MAX_API);
  /* Header blanks are trimmed. */
  assert_int_equal(pick(" 1.43\r\n"), 0);
  assert_string_equal(v, "1.43");
}

static void test_below_minimum(void **s) {
  (void)s;
  assert_int_equal(pick("1.40"), SM_EUNSUPPORTED);
  assert_non_null(strstr(err.message, "1.40"));
  assert_non_null(strstr(err.message, "1.41"));
  assert_string_equal(v, "");
  assert_int_equal(pick("1.9"), SM_EUNSUPPORTED);
  assert_int_equal(pick("0.99"), SM_EUNSUPPORTED);
}

static void test_garbage(void **s) {
  (void)s;
  const char *bad[] = {"", "1", "1.", ".41", "1.41.0", "v1.41", "1.4a", "abc", "1..41",
                       "-1.41", "1.-41", "99999999.1", "1.41 extra"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (pick(bad[i]) != SM_EPROTOCOL) fail_msg("'%s' accepted", bad[i]);
    assert_string_equal(v, "");
  }
  assert_int_equal(pick(NULL), SM_EPROTOCOL);
  assert_non_null(strstr(err.message, "Api-Version"));
}

static void test_parse_compare(void **s) {
  (void)s;
  int a, b;
  assert_int_equal(engine_api_parse("1.41", &a, &b), 0);
  assert_int_equal(a, 1);
  assert_int_equal(b, 41);
  assert_int_equal(engine_api_parse("1.41 ", &a, &b), -1);
  assert_true(engine_api_compare("1.41", "1.5") > 0);
  assert_true(engine_api_compare("1.41", "1.41") == 0);
  assert_true(engine_api_compare("1.41", "2.0") < 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lower_engine),  cmocka_unit_test(test_equal_and_higher),
      cmocka_unit_test(test_below_minimum), cmocka_unit_test(test_garbage),
      cmocka_unit_test(test_parse_compare),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
