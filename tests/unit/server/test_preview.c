/* The preview tokens' table (src/lib/server/preview.c): tokens are long and
 * random, found only whole, gone once expired or revoked, and capped per
 * sandbox and in all. The clock is the caller's, so expiry is tested
 * without waiting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "server/preview.h"

#define A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void found_whole_only(void **state) {
  (void)state;
  server_previews *t = server_previews_new(16, 4);
  assert_non_null(t);
  server_preview p, q;
  assert_int_equal(server_previews_add(t, A, "k1", 8000, 60, 1000.0, &p), 0);
  assert_int_equal(strlen(p.token), SERVER_PREVIEW_TOKEN_LEN);
  assert_int_equal(strspn(p.token, "0123456789abcdef"), SERVER_PREVIEW_TOKEN_LEN);
  assert_int_equal(server_previews_find(t, p.token, 1001.0, &q), 0);
  assert_string_equal(q.container_id, A);
  assert_string_equal(q.worker_key, "k1");
  assert_int_equal(q.port, 8000);
  char cut[SERVER_PREVIEW_TOKEN_LEN + 2];
  snprintf(cut, sizeof cut, "%.*s", SERVER_PREVIEW_TOKEN_LEN - 1, p.token);
  assert_int_equal(server_previews_find(t, cut, 1001.0, &q), -1);
  snprintf(cut, sizeof cut, "%sx", p.token);
  assert_int_equal(server_previews_find(t, cut, 1001.0, &q), -1);
  assert_int_equal(server_previews_find(t, "", 1001.0, &q), -1);
  server_preview p2;
  assert_int_equal(server_previews_add(t, A, "k1", 8000, 60, 1000.0, &p2), 0);
  assert_string_not_equal(p.token, p2.token);
  server_previews_free(t);
}

static void expires(void **state) {
  (void)state;
  server_previews *t = server_previews_new(16, 4);
  assert_non_null(t);
  server_preview p, q;
  assert_int_equal(server_previews_add(t, A, "", 80, 10, 5000.0, &p), 0);
  assert_int_equal(server_previews_find(t, p.token, 14999.0, &q), 0);
  assert_int_equal(server_previews_find(t, p.token, 15000.0, &q), -1);
  assert_int_equal(server_previews_count(t), 0);
  server_previews_free(t);
}

static void revoked_per_sandbox(void **state) {
  (void)state;
  server_previews *t = server_previews_new(16, 4);
  assert_non_null(t);
  server_preview a1, a2, b1, q;
  assert_int_equal(server_previews_add(t, A, "k1", 80, 60, 0.0, &a1), 0);
  assert_int_equal(server_previews_add(t, A, "k1", 81, 60, 0.0, &a2), 0);
  assert_int_equal(server_previews_add(t, B, "k2", 80, 60, 0.0, &b1), 0);
  assert_int_equal(server_previews_revoke(t, ""), 0);
  assert_int_equal(server_previews_revoke(t, A), 2);
  assert_int_equal(server_previews_find(t, a1.token, 1.0, &q), -1);
  assert_int_equal(server_previews_find(t, a2.token, 1.0, &q), -1);
  assert_int_equal(server_previews_find(t, b1.token, 1.0, &q), 0);
  assert_string_equal(q.container_id, B);
  server_previews_free(t);
}

static void capped(void **state) {
  (void)state;
  server_previews *t = server_previews_new(5, 3);
  assert_non_null(t);
  server_preview p;
  for (int i = 0; i < 3; i++) assert_int_equal(server_previews_add(t, A, "", 80, 60, 0.0, &p), 0);
  assert_int_equal(server_previews_add(t, A, "", 80, 60, 0.0, &p), -1); /* per sandbox */
  assert_int_equal(server_previews_add(t, B, "", 80, 60, 0.0, &p), 0);
  assert_int_equal(server_previews_add(t, B, "", 80, 60, 0.0, &p), 0);
  assert_int_equal(server_previews_add(t, "c", "", 80, 60, 0.0, &p), -1); /* in all */
  /* Expired ones make room. */
  assert_int_equal(server_previews_add(t, "c", "", 80, 60, 60000.0, &p), 0);
  assert_int_equal(server_previews_count(t), 1);
  server_previews_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(found_whole_only),
      cmocka_unit_test(expires),
      cmocka_unit_test(revoked_per_sandbox),
      cmocka_unit_test(capped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
