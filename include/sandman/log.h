/* sandman: logging hook. The library never prints: it hands each line to a
 * handler the application installs (the CLI prints text or JSON to stderr).
 * With no handler installed, log lines are dropped.
 *
 * A line is a record: level, time, the thread's request id, an event name
 * ("call.end") and fields (tool, mode, exit_code, ...) besides the message,
 * so that a machine reads the fields instead of parsing the message.
 * sm_log_format_text and sm_log_format_json render a record as one line;
 * both escape every value with sm_log_escape, so that nothing from outside
 * (a file name, a tool name) can end a line or fake another one. */
#ifndef SANDMAN_LOG_H
#define SANDMAN_LOG_H

#include <stddef.h>
#include <stdint.h>

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

typedef enum {
  SM_LOG_FIELD_STR = 0,
  SM_LOG_FIELD_INT,
  SM_LOG_FIELD_NUM,
  SM_LOG_FIELD_BOOL,
} sm_log_field_type;

/* One field of a record. A NULL string field is left out of the line. */
typedef struct sm_log_field {
  const char *key; /* a name of the code's own: "exit_code" */
  sm_log_field_type type;
  const char *s;
  int64_t i; /* SM_LOG_FIELD_INT and _BOOL */
  double d;  /* SM_LOG_FIELD_NUM */
} sm_log_field;

#define SM_LOG_STR(k, v) ((sm_log_field){.key = (k), .type = SM_LOG_FIELD_STR, .s = (v)})
#define SM_LOG_INT(k, v) ((sm_log_field){.key = (k), .type = SM_LOG_FIELD_INT, .i = (int64_t)(v)})
#define SM_LOG_NUM(k, v) ((sm_log_field){.key = (k), .type = SM_LOG_FIELD_NUM, .d = (double)(v)})
#define SM_LOG_BOOL(k, v) ((sm_log_field){.key = (k), .type = SM_LOG_FIELD_BOOL, .i = !!(v)})
/* The fields argument pair of sm_log_event: SM_LOG_FIELDS(SM_LOG_STR(...), ...). */
#define SM_LOG_FIELDS(...)                        \
  (const sm_log_field[]){__VA_ARGS__},            \
      sizeof((const sm_log_field[]){__VA_ARGS__}) / sizeof(sm_log_field)

typedef struct sm_log_record {
  sm_log_level level;
  double time;             /* seconds since the epoch */
  const char *request_id;  /* the calling thread's (NULL if none) */
  const char *event;       /* "call.end", or NULL for a plain line */
  const char *message;     /* formatted; never NULL */
  const sm_log_field *fields;
  size_t n_fields;
} sm_log_record;

/* request_id is the id set on the calling thread (NULL if none). Called from
 * any thread; must be thread-safe. Messages never hold secrets: callers of
 * sm_log must not pass credential values. The message of an event carries
 * its fields as text (key=value, escaped). */
typedef void (*sm_log_handler)(sm_log_level level, const char *request_id,
                               const char *message, void *userdata);
/* The record handler gets every field; it replaces a plain handler. */
typedef void (*sm_log_record_handler)(const sm_log_record *record, void *userdata);

SM_API void sm_log_set_handler(sm_log_handler handler, void *userdata);
SM_API void sm_log_set_record_handler(sm_log_record_handler handler, void *userdata);
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
/* A structured line: event names what happened ("sandbox.create"),
 * fields its values (borrowed for the call), fmt a message for people. */
SM_API void sm_log_event(sm_log_level level, const char *event, const sm_log_field *fields,
                  size_t n_fields, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The one escaping of log values, for text and JSON alike: the result
 * holds no control character, and with SM_LOG_ESCAPE_QUOTES it is the body
 * of a JSON string (backslash and '"' get a backslash; text lines use it for
 * quoted values, not for the message). \n, \r, \t are written so; other C0 and C1 controls,
 * DEL, U+2028/U+2029 and the bidirectional controls become \uXXXX; a byte
 * that is not UTF-8 becomes \ufffd. Writes at most len-1 bytes and a NUL
 * into out, never cutting an escape or a character; returns the bytes
 * written. */
#define SM_LOG_ESCAPE_QUOTES 1u
SM_API size_t sm_log_escape(char *out, size_t len, const char *in, size_t in_len, unsigned flags);

/* One line, without the newline, NUL-terminated in out; a line longer than
 * len ends with "..." (text) or is cut at a field and still parses (JSON).
 * Returns its length.
 *   text: 2025-01-02T03:04:05.678Z INFO [req] message event=call.end tool=make exit_code=0
 *   json: {"time":"...","level":"info","request_id":"req","event":"call.end",
 *          "msg":"message","tool":"make","exit_code":0} */
SM_API size_t sm_log_format_text(const sm_log_record *record, char *out, size_t len);
SM_API size_t sm_log_format_json(const sm_log_record *record, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif
