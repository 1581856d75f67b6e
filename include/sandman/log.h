/* sandman: logging hook. The library never prints: it hands each line to a
 * handler the application installs (the CLI prints text or JSON to stderr).
 * With no handler installed, log lines are dropped. */
#ifndef SANDMAN_LOG_H
#define SANDMAN_LOG_H

#include <sandman/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SM_LOG_DEBUG = 0,
  SM_LOG_INFO = 1,
  SM_LOG_WARN = 2,
  SM_LOG_ERROR = 3,
} sm_log_level;

/* request_id is the id set on the calling thread (NULL if none). Called from
 * any thread; must be thread-safe. Messages never hold secrets: callers of
 * sm_log must not pass credential values. */
typedef void (*sm_log_handler)(sm_log_level level, const char *request_id,
                               const char *message, void *userdata);

SM_API void sm_log_set_handler(sm_log_handler handler, void *userdata);
SM_API void sm_log_set_level(sm_log_level min_level);
SM_API sm_log_level sm_log_get_level(void);
/* Parses "debug", "info", "warn", "error". Returns 0 or SM_EINVAL. */
SM_API int sm_log_level_parse(const char *s, sm_log_level *out);
SM_API const char *sm_log_level_name(sm_log_level level);

/* Per-thread request id (copied, at most 63 bytes); NULL clears it. */
SM_API void sm_log_set_request_id(const char *id);
SM_API const char *sm_log_request_id(void);

SM_API void sm_log(sm_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
