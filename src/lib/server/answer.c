/* The runner's answers (answer.h): error bodies, and the one conversion
 * of a library error into an answer (the error table's status column). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/answer.h"

void server_answer_error(server_answer *a, int status, const char *kind, const char *fmt, ...) {
  char msg[SM_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  a->status = status;
  a->body = json_object_new_object();
  json_object_object_add(a->body, "error", json_object_new_string(msg));
  json_object_object_add(a->body, "failure_kind", json_object_new_string(kind));
}

const char *server_answer_kind_of_status(int status, int code) {
  if (status < 500) return "policy";
  if (status == 504) return "timeout";
  const char *kind = sm_failure_kind_name(sm_error_failure_kind(code));
  return kind && strcmp(kind, "policy") != 0 ? kind : "sandbox";
}

void server_answer_error_code(server_answer *a, int code, const char *message) {
  int status = sm_error_http_status(code);
  if (status < 400) status = 503; /* an error without a code: the runner's own */
  server_answer_error(a, status, server_answer_kind_of_status(status, code), "%s",
                      message && message[0] ? message : sm_error_default_message(code));
}

void server_answer_from_error(server_answer *a, const sm_error *err) {
  server_answer_error_code(a, err->code, err->message);
}

int server_answer_status_of(const sm_run_result *res) {
  if (res->failure_kind == SM_FAIL_POLICY) return 403;
  if (res->failure_kind == SM_FAIL_ENGINE) return 503;
  if (res->failure_kind == SM_FAIL_SANDBOX && !res->started) return 503;
  return 200;
}
