/* The one error policy: failure kinds from the code table, errno text added
 * once, cleanup attributes and the type-checked steal_pointer. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "common/cleanup.h"

#include "support/xalloc.h"

static void test_failure_kinds(void **state) {
  (void)state;
  assert_int_equal(sm_error_failure_kind(0), SM_FAIL_NONE);
  assert_int_equal(sm_error_failure_kind(SM_EPOLICY), SM_FAIL_POLICY);
  assert_int_equal(sm_error_failure_kind(SM_EAUTH), SM_FAIL_POLICY);
  assert_int_equal(sm_error_failure_kind(SM_EUNREACHABLE), SM_FAIL_ENGINE);
  assert_int_equal(sm_error_failure_kind(SM_EENGINE), SM_FAIL_ENGINE);
  assert_int_equal(sm_error_failure_kind(SM_EPROTOCOL), SM_FAIL_ENGINE);
  assert_int_equal(sm_error_failure_kind(SM_ETLS), SM_FAIL_ENGINE);
  assert_int_equal(sm_error_failure_kind(SM_ESANDBOX), SM_FAIL_SANDBOX);
  assert_int_equal(sm_error_failure_kind(SM_EINVAL), SM_FAIL_SANDBOX);
  assert_int_equal(sm_error_failure_kind(-9999), SM_FAIL_SANDBOX);
  /* Every code of the table has a kind with a name; only success has none. */
  for (int code = 0; code >= SM_ECANCELLED; code--) {
    sm_failure_kind k = sm_error_failure_kind(code);
    if (code == 0) assert_null(sm_failure_kind_name(k));
    else assert_non_null(sm_failure_kind_name(k));
  }
}

static void test_errno_text_once(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_error_set_errno(&err, SM_EIO, ENOENT, "opening %s", "/x"), SM_EIO);
  assert_int_equal(err.sys_errno, ENOENT);
  const char *text = strerror(ENOENT);
  const char *first = strstr(err.message, text);
  assert_non_null(first);
  assert_null(strstr(first + strlen(text), text));
  assert_int_equal(strncmp(err.message, "opening /x: ", 12), 0);
}

static int freed;
static void count_free(char **p) {
  if (*p) freed++;
  free(*p);
}

static char *make_owned(void) {
  __attribute__((cleanup(count_free))) char *s = xstrdup("owned");
  return steal_pointer(&s); /* not freed here: stolen */
}

static void test_steal_and_cleanup(void **state) {
  (void)state;
  freed = 0;
  char *s = make_owned();
  assert_int_equal(freed, 0);
  assert_string_equal(s, "owned");
  free(s);
  {
    cleanup_strv common_strv v = {0};
    assert_int_equal(common_strv_add(&v, "a"), 0);
    assert_int_equal(common_strv_addf(&v, "%s=%d", "b", 2), 0);
    assert_int_equal(v.n, 2);
    assert_string_equal(v.v[1], "b=2");
    assert_null(v.v[2]);
    char **taken = steal_pointer(&v.v);
    assert_null(v.v);
    common_strings_free(taken, 2);
  }
  {
    cleanup_buf common_buf b;
    common_buf_init(&b, 16);
    assert_int_equal(common_buf_append(&b, "0123456789", 10), 0);
    assert_int_equal(common_buf_append(&b, "0123456789", 10), SM_ETOOBIG);
    assert_int_equal(b.len, 10);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failure_kinds),
      cmocka_unit_test(test_errno_text_once),
      cmocka_unit_test(test_steal_and_cleanup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
