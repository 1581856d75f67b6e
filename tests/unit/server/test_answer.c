/* The error table's HTTP status column and the one conversion of an
 * sm_error into the runner's answer (server/answer.c): every code has a
 * status, the statuses and failure kinds are the ones docs/http-api.md
 * ("Errors") lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "server/answer.h"

static const char *body_str(const server_answer *a, const char *key) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(a->body, key, &v)) return NULL;
  return json_object_get_string(v);
}

static int status_documented(int status) {
  static const int documented[] = {400, 401, 403, 404, 409, 413, 503, 504};
  for (size_t i = 0; i < sizeof documented / sizeof *documented; i++)
    if (documented[i] == status) return 1;
  return 0;
}

static void test_every_code_has_a_status(void **state) {
  (void)state;
  assert_int_equal(sm_error_http_status(0), 200);
  for (int code = -1; code >= SM_ECANCELLED; code--) {
    assert_string_not_equal(sm_error_name(code), "UNKNOWN");
    int status = sm_error_http_status(code);
    if (!status_documented(status)) fail_msg("%s has status %d", sm_error_name(code), status);
  }
  assert_int_equal(sm_error_http_status(-9999), 503);
}

static void test_status_column(void **state) {
  (void)state;
  static const struct {
    int code, status;
  } want[] = {
      {SM_EINVAL, 400},   {SM_EAUTH, 401},        {SM_EPOLICY, 403},      {SM_EUNSAFE, 403},
      {SM_ENOTFOUND, 404}, {SM_ECONFLICT, 409},   {SM_ETOOBIG, 413},      {SM_ETIMEOUT, 504},
      {SM_ENOMEM, 503},   {SM_EUNREACHABLE, 503}, {SM_EENGINE, 503},      {SM_ETLS, 503},
      {SM_EPROTOCOL, 503}, {SM_EBUSY, 503},       {SM_EUNSUPPORTED, 503}, {SM_ECONFIG, 503},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    assert_int_equal(sm_error_http_status(want[i].code), want[i].status);
}

/* The answer of every code: the table's status, a failure_kind of the
 * run object's values ("policy" for a refusal, "engine" for the engine's
 * codes, "timeout" for 504, else "sandbox") and the error's own words. */
static void test_answer_of_every_code(void **state) {
  (void)state;
  for (int code = -1; code >= SM_ECANCELLED; code--) {
    sm_error err = SM_ERROR_INIT;
    sm_error_set(&err, code, "what went wrong %d", code);
    server_answer a = {0, NULL};
    server_answer_from_error(&a, &err);
    assert_int_equal(a.status, sm_error_http_status(code));
    char want_msg[64];
    snprintf(want_msg, sizeof want_msg, "what went wrong %d", code);
    assert_string_equal(body_str(&a, "error"), want_msg);
    const char *kind = body_str(&a, "failure_kind");
    assert_non_null(kind);
    if (a.status < 500) assert_string_equal(kind, "policy");
    else if (a.status == 504) assert_string_equal(kind, "timeout");
    else if (sm_error_failure_kind(code) == SM_FAIL_ENGINE) assert_string_equal(kind, "engine");
    else assert_string_equal(kind, "sandbox");
    json_object_put(a.body);
  }
}

static void test_answer_edges(void **state) {
  (void)state;
  server_answer a = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  sm_error_set(&err, SM_EUNREACHABLE, "%s", ""); /* no words: the code's default */
  err.message[0] = '\0';
  server_answer_from_error(&a, &err);
  assert_int_equal(a.status, 503);
  assert_string_equal(body_str(&a, "failure_kind"), "engine");
  assert_string_equal(body_str(&a, "error"), "engine unreachable");
  json_object_put(a.body);
  /* An error without a code is the runner's own failure, never a 200. */
  sm_error none = SM_ERROR_INIT;
  server_answer_from_error(&a, &none);
  assert_int_equal(a.status, 503);
  assert_string_equal(body_str(&a, "failure_kind"), "sandbox");
  json_object_put(a.body);
  server_answer_error_code(&a, -9999, "odd");
  assert_int_equal(a.status, 503);
  assert_string_equal(body_str(&a, "failure_kind"), "sandbox");
  assert_string_equal(body_str(&a, "error"), "odd");
  json_object_put(a.body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_code_has_a_status),
      cmocka_unit_test(test_status_column),
      cmocka_unit_test(test_answer_of_every_code),
      cmocka_unit_test(test_answer_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
