/* Per-worker token derivation against vectors computed independently:
 *   printf 'sandman-worker-token-v1\0worker-a' |
 *     openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf %s "$KEY" | xxd -p)
 * and python3's hmac module (same value), with
 * KEY=control-token-0123456789abcdef. Also loading the control token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/server.h>

#define KEY "control-token-0123456789abcdef"

static void derive_known_vectors(void **state) {
  (void)state;
  char out[65];
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_token_derive(KEY, "worker-a", out, &err), 0);
  assert_string_equal(out, "2c316a55f7155ae64a2a2836d611166d69779a0b58e7510a0c510c5c3d705ace");
  assert_int_equal(sm_token_derive(KEY, "w/2@x", out, &err), 0);
  assert_string_equal(out, "7cb18ca737e7eb4f472a89ee66aa511ae9873e5ed960708a4ec98f47297edc6f");
}

static void derive_differs_per_key_and_token(void **state) {
  (void)state;
  char a[65], b[65], c[65];
  assert_int_equal(sm_token_derive(KEY, "worker-a", a, NULL), 0);
  assert_int_equal(sm_token_derive(KEY, "worker-b", b, NULL), 0);
  assert_int_equal(sm_token_derive(KEY "x", "worker-a", c, NULL), 0);
  assert_string_not_equal(a, b);
  assert_string_not_equal(a, c);
  assert_int_equal(strlen(a), 64);
}

static void derive_rejects_empty(void **state) {
  (void)state;
  char out[65];
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_token_derive(KEY, "", out, &err), SM_EINVAL);
  assert_int_equal(sm_token_derive("", "k", out, &err), SM_EINVAL);
  char longkey[300];
  memset(longkey, 'k', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = '\0';
  assert_int_equal(sm_token_derive(KEY, longkey, out, &err), SM_EINVAL);
}

static void equal_is_exact(void **state) {
  (void)state;
  assert_true(sm_token_equal("abcdefgh", "abcdefgh"));
  assert_false(sm_token_equal("abcdefgh", "abcdefgH"));
  assert_false(sm_token_equal("abcdefgh", "abcdefg"));
  assert_false(sm_token_equal("abcdefgh", NULL));
}

static char *write_tmp(const char *content, size_t len) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/sm-token-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, content, len), (ssize_t)len);
  close(fd);
  return path;
}

static void load_from_file_strips_newlines(void **state) {
  (void)state;
  char tok[SM_TOKEN_MAX_LEN + 2];
  sm_error err = SM_ERROR_INIT;
  char *p = write_tmp(KEY "\r\n\n", strlen(KEY) + 3);
  assert_int_equal(sm_token_load(p, tok, sizeof tok, &err), 0);
  assert_string_equal(tok, KEY);
  unlink(p);
}

static void load_refuses_weak_tokens(void **state) {
  (void)state;
  char tok[SM_TOKEN_MAX_LEN + 2];
  sm_error err = SM_ERROR_INIT;
  char *p = write_tmp("short\n", 6);
  assert_int_equal(sm_token_load(p, tok, sizeof tok, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "at least"));
  unlink(p);
  p = write_tmp("has a space in it here", 22);
  assert_int_equal(sm_token_load(p, tok, sizeof tok, &err), SM_EINVAL);
  unlink(p);
  assert_int_equal(sm_token_load("/nonexistent/token", tok, sizeof tok, &err), SM_EIO);
}

static void load_from_environment(void **state) {
  (void)state;
  char tok[SM_TOKEN_MAX_LEN + 2];
  sm_error err = SM_ERROR_INIT;
  unsetenv(SM_TOKEN_ENV);
  assert_int_equal(sm_token_load(NULL, tok, sizeof tok, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "--token-file"));
  setenv(SM_TOKEN_ENV, KEY, 1);
  assert_int_equal(sm_token_load(NULL, tok, sizeof tok, &err), 0);
  assert_string_equal(tok, KEY);
  unsetenv(SM_TOKEN_ENV);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(derive_known_vectors),
      cmocka_unit_test(derive_differs_per_key_and_token),
      cmocka_unit_test(derive_rejects_empty),
      cmocka_unit_test(equal_is_exact),
      cmocka_unit_test(load_from_file_strips_newlines),
      cmocka_unit_test(load_refuses_weak_tokens),
      cmocka_unit_test(load_from_environment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
