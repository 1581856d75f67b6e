/* sandman: errors.
 *
 * Functions that can fail return int: 0 on success, a negative SM_E* code on
 * failure, and fill the caller's sm_error (never thread-local state: the HTTP
 * service is multi-threaded). Codes never change number. */
#ifndef SANDMAN_ERROR_H
#define SANDMAN_ERROR_H

#include <sandman/export.h>

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, number, message). Append only; never renumber. */
#define SM_ERROR_MAP(X)                                                    \
  X(OK, 0, "success")                                                      \
  X(INVAL, -1, "invalid argument")                                         \
  X(NOMEM, -2, "out of memory")                                            \
  X(IO, -3, "input/output error")                                          \
  X(UNREACHABLE, -4, "engine unreachable")                                 \
  X(ENGINE, -5, "engine error")                                            \
  X(NOTFOUND, -6, "not found")                                             \
  X(CONFLICT, -7, "conflict")                                              \
  X(TIMEOUT, -8, "timed out")                                              \
  X(TOOBIG, -9, "too large")                                               \
  X(PROTOCOL, -10, "protocol error")                                       \
  X(POLICY, -11, "refused by policy")                                      \
  X(CONFIG, -12, "configuration error")                                    \
  X(SANDBOX, -13, "sandbox error")                                         \
  X(UNSAFE, -14, "unsafe input refused")                                   \
  X(UNSUPPORTED, -15, "unsupported")                                       \
  X(BUSY, -16, "busy")                                                     \
  X(AUTH, -17, "not authorized")                                           \
  X(TLS, -18, "TLS error")                                                 \
  X(CANCELLED, -19, "cancelled")

typedef enum {
#define SM_X_ENUM(name, num, msg) SM_E##name = (num),
  SM_ERROR_MAP(SM_X_ENUM)
#undef SM_X_ENUM
} sm_error_code;

#define SM_ERROR_MESSAGE_MAX 1024

/* Filled by a failing call. http_status is the engine's (or 0); sys_errno
 * the errno that caused it (or 0). message is complete, human readable and
 * already carries the context added by sm_error_wrap. */
typedef struct sm_error {
  int code;
  int sys_errno;
  int http_status;
  char message[SM_ERROR_MESSAGE_MAX];
} sm_error;

#define SM_ERROR_INIT {0, 0, 0, {0}}

/* Short stable name ("ENGINE") and default message of a code. */
SM_API const char *sm_error_name(int code);
SM_API const char *sm_error_default_message(int code);

/* Sets err (if non-NULL) and returns code, so callers can write
 * `return sm_error_set(err, SM_EINVAL, "bad size '%s'", s);`. */
SM_API int sm_error_set(sm_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
SM_API int sm_error_setv(sm_error *err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Like sm_error_set, also records errno. */
SM_API int sm_error_set_errno(sm_error *err, int code, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prepends context: "creating sandbox for run r1: <previous message>".
 * Keeps the code; returns it. */
SM_API int sm_error_wrap(sm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
SM_API void sm_error_clear(sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
