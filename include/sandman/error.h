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

/* X(name, number, failure kind, HTTP status, message). Append only; never
 * renumber. The failure kind column is the one place that says what a call
 * that failed with this code reports as its failure_kind (see
 * sm_error_failure_kind); the HTTP status column the one place that says
 * what the runner answers a request that failed with it
 * (sm_error_http_status; src/lib/server/answer.c builds the answer). */
#define SM_ERROR_MAP(X)                                       \
  X(OK, 0, NONE, 200, "success")                        \
  X(INVAL, -1, SANDBOX, 400, "invalid argument")        \
  X(NOMEM, -2, SANDBOX, 503, "out of memory")           \
  X(IO, -3, SANDBOX, 503, "input/output error")         \
  X(UNREACHABLE, -4, ENGINE, 503, "engine unreachable") \
  X(ENGINE, -5, ENGINE, 503, "engine error")            \
  X(NOTFOUND, -6, SANDBOX, 404, "not found")            \
  X(CONFLICT, -7, SANDBOX, 409, "conflict")             \
  X(TIMEOUT, -8, SANDBOX, 504, "timed out")             \
  X(TOOBIG, -9, SANDBOX, 413, "too large")              \
  X(PROTOCOL, -10, ENGINE, 503, "protocol error")       \
  X(POLICY, -11, POLICY, 403, "refused by policy")      \
  X(CONFIG, -12, SANDBOX, 503, "configuration error")   \
  X(SANDBOX, -13, SANDBOX, 503, "sandbox error")        \
  X(UNSAFE, -14, SANDBOX, 403, "unsafe input refused")  \
  X(UNSUPPORTED, -15, SANDBOX, 503, "unsupported")      \
  X(BUSY, -16, SANDBOX, 503, "busy")                    \
  X(AUTH, -17, POLICY, 401, "not authorized")           \
  X(TLS, -18, ENGINE, 503, "TLS error")                 \
  X(CANCELLED, -19, SANDBOX, 503, "cancelled")

typedef enum {
#define SM_X_ENUM(name, num, kind, status, msg) SM_E##name = (num),
  SM_ERROR_MAP(SM_X_ENUM)
#undef SM_X_ENUM
} sm_error_code;

/* What a failed tool call reports as failure_kind (the contract's JSON
 * field): SM_FAIL_TOOL and SM_FAIL_TIMEOUT come from the tool's own outcome;
 * the others from the error code that stopped the call
 * (sm_error_failure_kind). */
typedef enum {
  SM_FAIL_NONE = 0, /* JSON null */
  SM_FAIL_TOOL,
  SM_FAIL_TIMEOUT,
  SM_FAIL_POLICY,
  SM_FAIL_SANDBOX,
  SM_FAIL_ENGINE,
} sm_failure_kind;

/* "tool", "timeout", "policy", "sandbox", "engine"; NULL for SM_FAIL_NONE. */
SM_API const char *sm_failure_kind_name(sm_failure_kind kind);
/* The failure kind of a call stopped by error code `code` (the table's
 * column): SM_FAIL_NONE for 0, SM_FAIL_SANDBOX for a code not in the table. */
SM_API sm_failure_kind sm_error_failure_kind(int code);
/* The HTTP status the runner answers a request stopped by error code
 * `code` (the table's column): 400, 401, 403, 404, 409, 413, 504 or 503;
 * 200 for 0, 503 for a code not in the table. */
SM_API int sm_error_http_status(int code);

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
/* Like sm_error_set, also records errno and appends ": " and its text
 * (strerror): the one place that adds it, so the format must not. */
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
