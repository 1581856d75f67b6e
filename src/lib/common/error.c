/* Error codes, their messages, failure kinds and HTTP statuses, and the context-wrapping
 * helper: the one error policy of the library (docs/architecture.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sandman/error.h>

const char *sm_error_name(int code) {
  switch (code) {
#define SM_X_NAME(name, num, kind, status, msg) \
  case (num):                     \
    return #name;
    SM_ERROR_MAP(SM_X_NAME)
#undef SM_X_NAME
  }
  return "UNKNOWN";
}

const char *sm_error_default_message(int code) {
  switch (code) {
#define SM_X_MSG(name, num, kind, status, msg) \
  case (num):                    \
    return msg;
    SM_ERROR_MAP(SM_X_MSG)
#undef SM_X_MSG
  }
  return "unknown error";
}

sm_failure_kind sm_error_failure_kind(int code) {
  switch (code) {
#define SM_X_KIND(name, num, kind, status, msg) \
  case (num):                           \
    return SM_FAIL_##kind;
    SM_ERROR_MAP(SM_X_KIND)
#undef SM_X_KIND
  }
  return SM_FAIL_SANDBOX;
}

int sm_error_http_status(int code) {
  switch (code) {
#define SM_X_STATUS(name, num, kind, status, msg) \
  case (num):                                     \
    return (status);
    SM_ERROR_MAP(SM_X_STATUS)
#undef SM_X_STATUS
  }
  return 503;
}

const char *sm_failure_kind_name(sm_failure_kind kind) {
  switch (kind) {
    case SM_FAIL_NONE: return NULL;
    case SM_FAIL_TOOL: return "tool";
    case SM_FAIL_TIMEOUT: return "timeout";
    case SM_FAIL_POLICY: return "policy";
    case SM_FAIL_SANDBOX: return "sandbox";
    case SM_FAIL_ENGINE: return "engine";
  }
  return "sandbox";
}

int sm_error_setv(sm_error *err, int code, const char *fmt, va_list ap) {
  if (err == NULL) return code;
  err->code = code;
  err->sys_errno = 0;
  err->http_status = 0;
  if (fmt == NULL || fmt[0] == '\0') {
    snprintf(err->message, sizeof err->message, "%s", sm_error_default_message(code));
  } else {
    vsnprintf(err->message, sizeof err->message, fmt, ap);
  }
  return code;
}

int sm_error_set(sm_error *err, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sm_error_setv(err, code, fmt, ap);
  va_end(ap);
  return code;
}

int sm_error_set_errno(sm_error *err, int code, int sys_errno, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sm_error_setv(err, code, fmt, ap);
  va_end(ap);
  if (err != NULL) {
    err->sys_errno = sys_errno;
    size_t used = strlen(err->message);
    if (sys_errno != 0 && used < sizeof err->message - 1) {
      snprintf(err->message + used, sizeof err->message - used, ": %s", strerror(sys_errno));
    }
  }
  return code;
}

int sm_error_wrap(sm_error *err, const char *fmt, ...) {
  if (err == NULL) return SM_EINVAL;
  char prefix[SM_ERROR_MESSAGE_MAX];
  char joined[SM_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  if (err->message[0] != '\0') {
    snprintf(joined, sizeof joined, "%s: %s", prefix, err->message);
  } else {
    snprintf(joined, sizeof joined, "%s: %s", prefix, sm_error_default_message(err->code));
  }
  memcpy(err->message, joined, sizeof err->message);
  if (err->code == 0) err->code = SM_EIO;
  return err->code;
}

void sm_error_clear(sm_error *err) {
  if (err == NULL) return;
  memset(err, 0, sizeof *err);
}
