/* One HTTP/1.1 request as the route hands it over (untrusted bytes), and
 * the responses the broker answers with. */
#ifndef SANDMAN_BROKER_HTTP_MSG_H
#define SANDMAN_BROKER_HTTP_MSG_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>

#define BK_HTTP_HEAD_MAX (64u * 1024)
#define BK_HTTP_HEADERS_MAX 64
#define BK_HTTP_VALUE_MAX 256

typedef struct bk_http_msg {
  char method[16];
  char path[1024];  /* without the query */
  char accept[BK_HTTP_VALUE_MAX], content_type[BK_HTTP_VALUE_MAX];
  char session_id[BK_HTTP_VALUE_MAX], protocol_version[BK_HTTP_VALUE_MAX];
  char origin[BK_HTTP_VALUE_MAX];
  char mcp_method[BK_HTTP_VALUE_MAX], mcp_name[BK_HTTP_VALUE_MAX]; /* MCP 2026-07-28 */
  const char *body; /* into the request; NUL-free not guaranteed */
  size_t body_len;
} bk_http_msg;

/* Parses req[0..len): 0, or the HTTP status to refuse it with (400 bad
 * syntax, 411 no length for a body, 413 too large, 501 chunked) and why. */
int broker_http_parse(const char *req, size_t len, bk_http_msg *m, const char **why);

/* A complete response with a JSON body (borrowed) into *resp. */
int broker_http_json(int status, json_object *body, char **resp, size_t *resp_len, sm_error *err);
/* {"error": message, "reason": reason, "rule": rule or null}. */
int broker_http_error(int status, const char *reason, const char *message, const char *rule,
                      char **resp, size_t *resp_len, sm_error *err);
/* A complete response with any body (content_type NULL: none) and extra
 * header lines (each ending in \r\n; may be NULL). */
int broker_http_raw(int status, const char *content_type, const char *extra_headers,
                    const char *body, size_t body_len, char **resp, size_t *resp_len,
                    sm_error *err);

#endif
