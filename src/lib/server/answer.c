/* The runner's answers (answer.h): error bodies and status mapping. */
#include <stdarg.h>
#include <stdio.h>

#include "server/answer.h"

void sm_answer_error(sm_answer *a, int status, const char *kind, const char *fmt, ...) {
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

void sm_answer_error_code(sm_answer *a, int code, const char *message) {
  int status = 503;
  const char *kind = "sandbox";
  switch (code) {
    case SM_ENOTFOUND: status = 404, kind = "policy"; break;
    case SM_ECONFLICT: status = 409, kind = "policy"; break;
    case SM_EUNSAFE:
    case SM_EPOLICY: status = 403, kind = "policy"; break;
    case SM_EAUTH: status = 401, kind = "policy"; break;
    case SM_EINVAL: status = 400, kind = "policy"; break;
    case SM_ETOOBIG: status = 413, kind = "policy"; break;
    case SM_ETIMEOUT: status = 504, kind = "timeout"; break;
    case SM_EUNREACHABLE:
    case SM_EENGINE:
    case SM_ETLS:
    case SM_EPROTOCOL: kind = "engine"; break;
    default: break;
  }
  sm_answer_error(a, status, kind, "%s",
                  message && message[0] ? message : sm_error_default_message(code));
}

int sm_answer_status_of(const sm_run_result *res) {
  if (res->failure_kind == SM_FAIL_POLICY) return 403;
  if (res->failure_kind == SM_FAIL_ENGINE) return 503;
  if (res->failure_kind == SM_FAIL_SANDBOX && !res->started) return 503;
  return 200;
}
