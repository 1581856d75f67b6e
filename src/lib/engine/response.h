/* Engine answers, pure (response.c): error bodies, JSON bodies, progress
 * streams and the HTTP/1.1 head of a hijacked exec. */
#ifndef SANDMAN_ENGINE_RESPONSE_H
#define SANDMAN_ENGINE_RESPONSE_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/engine.h>

#include "common/buf.h"

#define ENGINE_MAX_PROGRESS_LINE ((size_t)1 << 20)
/* The response head of a hijacked exec (status line and headers). */
#define ENGINE_MAX_HTTP_HEAD ((size_t)16 << 10)
#define ENGINE_JSON_DEPTH 64

/* Turns a >= 400 answer into an error with the engine's "message" (or a
 * short printable excerpt of a non-JSON body): 404 SM_ENOTFOUND, 409
 * SM_ECONFLICT, others SM_EENGINE; err->http_status is set. what names the
 * call ("POST /containers/create"). Returns the code. */
int engine_error_from_response(long status, const char *body, size_t len, const char *what,
                               sm_error *err);
/* Parses a whole JSON body; empty (or blank) gives *out NULL. SM_EPROTOCOL
 * for malformed JSON. */
int engine_parse_json_body(const char *body, size_t len, const char *what,
                           json_object **out, sm_error *err);

/* Progress streams (build, import): one JSON message per line. */
typedef struct engine_progress {
  common_buf line;
  sm_progress_fn cb;
  void *ud;
  int failed;            /* the stream carried an error message */
  int code;              /* first parse error, or 0 */
  char message[SM_ERROR_MESSAGE_MAX];
} engine_progress;

void engine_progress_init(engine_progress *p, sm_progress_fn cb, void *ud);
void engine_progress_dispose(engine_progress *p);
/* Feeds bytes; returns 0 or a negative code (line over the cap). */
int engine_progress_feed(engine_progress *p, const char *data, size_t len);
/* Flushes the last line and reports the stream's verdict. */
int engine_progress_finish(engine_progress *p, const char *what, sm_error *err);

/* Checks an answer's type: anything else is freed, *answer set to NULL
 * and SM_EPROTOCOL returned ("<what>: the answer is not an object"). */
int engine_expect_json(json_object **answer, json_type type, const char *what, sm_error *err);
/* Copies the answer's "Id" (a create's answer) into out; SM_EPROTOCOL when
 * it has none that fits ("<what>: the engine's answer has no Id"). */
int engine_answer_id(json_object *answer, char out[SM_ENGINE_ID_MAX], const char *what,
                     sm_error *err);

/* HTTP/1.1 response head of the hijacked exec. */
/* Looks for the end of a response head in buf. Returns 1 with *out_status,
 * *out_head_len and *out_content_length (-1 when absent) when complete, 0
 * when more bytes are needed, SM_EPROTOCOL for garbage (err says what). */
int engine_http_parse_head(const char *buf, size_t len, int *out_status,
                           size_t *out_head_len, long long *out_content_length,
                           int *out_chunked, sm_error *err);

#endif
