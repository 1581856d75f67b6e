/* Parsing what the engine sends back: error bodies, JSON bodies, progress
 * streams and HTTP/1.1 response heads. Pure functions: everything here is
 * unit tested and fuzzed, since it all comes from outside. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/response.h"

/* Copies at most max printable bytes of s (control bytes become '?'). */
static void printable(char *dst, size_t dst_len, const char *s, size_t len) {
  size_t j = 0;
  for (size_t i = 0; i < len && j + 1 < dst_len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    dst[j++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  while (j > 0 && dst[j - 1] == ' ') j--;
  dst[j] = '\0';
}

int engine_parse_json_body(const char *body, size_t len, const char *what,
                           json_object **out, sm_error *err) {
  *out = NULL;
  size_t start = 0;
  while (start < len && isspace((unsigned char)body[start])) start++;
  if (start == len) return 0;
  if (len - start > (size_t)INT32_MAX)
    return sm_error_set(err, SM_ETOOBIG, "%s: the engine's answer is too large", what);
  json_tokener *tok = json_tokener_new_ex(ENGINE_JSON_DEPTH);
  if (tok == NULL) return sm_error_set(err, SM_ENOMEM, "%s: out of memory", what);
  json_object *obj = json_tokener_parse_ex(tok, body + start, (int)(len - start));
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t used = start + json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  if (obj == NULL || jerr != json_tokener_success) {
    if (obj) json_object_put(obj);
    char excerpt[80];
    printable(excerpt, sizeof excerpt, body + start, len - start);
    return sm_error_set(err, SM_EPROTOCOL,
                        "%s: the engine sent malformed JSON (%s): '%s'", what,
                        jerr == json_tokener_continue ? "truncated"
                                                      : json_tokener_error_desc(jerr),
                        excerpt);
  }
  while (used < len && isspace((unsigned char)body[used])) used++;
  if (used != len) {
    json_object_put(obj);
    return sm_error_set(err, SM_EPROTOCOL, "%s: the engine sent trailing data after JSON",
                        what);
  }
  *out = obj;
  return 0;
}

int engine_error_from_response(long status, const char *body, size_t len, const char *what,
                               sm_error *err) {
  int code = status == 404 ? SM_ENOTFOUND : status == 409 ? SM_ECONFLICT : SM_EENGINE;
  char msg[SM_ERROR_MESSAGE_MAX - 128];
  msg[0] = '\0';
  json_object *obj = NULL;
  if (body != NULL && len > 0 && engine_parse_json_body(body, len, what, &obj, NULL) == 0 &&
      obj != NULL) {
    json_object *m = NULL;
    if (json_object_is_type(obj, json_type_object) &&
        json_object_object_get_ex(obj, "message", &m) && json_object_is_type(m, json_type_string))
      printable(msg, sizeof msg, json_object_get_string(m),
                (size_t)json_object_get_string_len(m));
    json_object_put(obj);
  }
  if (msg[0] == '\0' && body != NULL && len > 0) printable(msg, 200, body, len);
  if (msg[0] == '\0') snprintf(msg, sizeof msg, "no message");
  sm_error_set(err, code, "%s: engine answered %ld: %s", what, status, msg);
  if (err) err->http_status = (int)status;
  return code;
}

/* ---- progress streams ---- */

void engine_progress_init(engine_progress *p, sm_progress_fn cb, void *ud) {
  memset(p, 0, sizeof *p);
  common_buf_init(&p->line, ENGINE_MAX_PROGRESS_LINE);
  p->cb = cb;
  p->ud = ud;
}

void engine_progress_dispose(engine_progress *p) { common_buf_dispose(&p->line); }

static void progress_line(engine_progress *p, const char *s, size_t len) {
  while (len > 0 && (s[len - 1] == '\r' || s[len - 1] == ' ')) len--;
  size_t i = 0;
  while (i < len && isspace((unsigned char)s[i])) i++;
  if (i == len || p->code != 0) return;
  json_object *obj = NULL;
  sm_error perr = SM_ERROR_INIT;
  if (engine_parse_json_body(s + i, len - i, "progress", &obj, &perr) != 0) {
    p->code = perr.code;
    snprintf(p->message, sizeof p->message, "%s", perr.message);
    return;
  }
  if (obj == NULL) return;
  if (!p->failed && json_object_is_type(obj, json_type_object)) {
    json_object *e = NULL, *d = NULL, *m = NULL;
    const char *text = NULL;
    size_t tlen = 0;
    if (json_object_object_get_ex(obj, "errorDetail", &d) &&
        json_object_is_type(d, json_type_object) &&
        json_object_object_get_ex(d, "message", &m) && json_object_is_type(m, json_type_string)) {
      text = json_object_get_string(m);
      tlen = (size_t)json_object_get_string_len(m);
    }
    if (text == NULL && json_object_object_get_ex(obj, "error", &e) &&
        json_object_is_type(e, json_type_string)) {
      text = json_object_get_string(e);
      tlen = (size_t)json_object_get_string_len(e);
    }
    if (text != NULL || d != NULL || e != NULL) {
      p->failed = 1;
      if (text != NULL) printable(p->message, sizeof p->message, text, tlen);
      if (p->message[0] == '\0') snprintf(p->message, sizeof p->message, "unknown error");
    }
  }
  if (p->cb) p->cb(p->ud, obj);
  json_object_put(obj);
}

int engine_progress_feed(engine_progress *p, const char *data, size_t len) {
  while (len > 0) {
    const char *nl = memchr(data, '\n', len);
    size_t take = nl ? (size_t)(nl - data) : len;
    if (common_buf_append(&p->line, data, take) != 0) {
      if (p->code == 0) {
        p->code = SM_ETOOBIG;
        snprintf(p->message, sizeof p->message,
                 "a progress message is longer than %zu bytes", p->line.max);
      }
      return SM_ETOOBIG;
    }
    if (nl == NULL) break;
    progress_line(p, p->line.data ? p->line.data : "", p->line.len);
    common_buf_reset(&p->line);
    data += take + 1;
    len -= take + 1;
  }
  return 0;
}

int engine_progress_finish(engine_progress *p, const char *what, sm_error *err) {
  if (p->line.len > 0) {
    progress_line(p, p->line.data, p->line.len);
    common_buf_reset(&p->line);
  }
  if (p->code != 0) return sm_error_set(err, p->code, "%s: %s", what, p->message);
  if (p->failed) return sm_error_set(err, SM_EENGINE, "%s: %s", what, p->message);
  return 0;
}

/* ---- HTTP/1.1 response head ---- */

static const char *find_crlfcrlf(const char *buf, size_t len) {
  for (size_t i = 0; i + 3 < len; i++)
    if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n')
      return buf + i;
  return NULL;
}

static int bad_head(sm_error *err, const char *what) {
  return sm_error_set(err, SM_EPROTOCOL, "not an HTTP/1.x answer head: %s", what);
}

int engine_http_parse_head(const char *buf, size_t len, int *out_status,
                           size_t *out_head_len, long long *out_content_length,
                           int *out_chunked, sm_error *err) {
  /* Reject early what cannot be HTTP, rather than waiting for more. */
  static const char proto[] = "HTTP/1.";
  size_t cmp = len < sizeof proto - 1 ? len : sizeof proto - 1;
  if (memcmp(buf, proto, cmp) != 0) return bad_head(err, "it does not start with HTTP/1.");
  const char *end = find_crlfcrlf(buf, len);
  size_t head_len = end ? (size_t)(end - buf) + 4 : len;
  if (head_len > ENGINE_MAX_HTTP_HEAD || (end == NULL && len >= ENGINE_MAX_HTTP_HEAD))
    return bad_head(err, "its head is longer than the cap");
  if (end == NULL) return 0;

  /* "HTTP/1.x SSS reason\r\n" */
  if (head_len < 14 || (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ')
    return bad_head(err, "a malformed status line");
  int status = 0;
  for (int i = 9; i < 12; i++) {
    if (buf[i] < '0' || buf[i] > '9') return bad_head(err, "a malformed status code");
    status = status * 10 + (buf[i] - '0');
  }
  if ((buf[12] != ' ' && buf[12] != '\r') || status < 100)
    return bad_head(err, "a malformed status code");

  long long clen = -1;
  int chunked = 0;
  const char *line = memchr(buf, '\n', head_len);
  const char *stop = buf + head_len - 2;
  while (line != NULL && line + 1 < stop) {
    line++;
    const char *eol = memchr(line, '\r', (size_t)(stop - line));
    if (eol == NULL) eol = stop;
    size_t llen = (size_t)(eol - line);
    const char *colon = memchr(line, ':', llen);
    if (colon == NULL || colon == line) return bad_head(err, "a header line without a name");
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    while (v < eol && (*v == ' ' || *v == '\t')) v++;
    size_t vlen = (size_t)(eol - v);
    if (nlen == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
      if (vlen == 0 || vlen > 18) return bad_head(err, "a malformed Content-Length");
      clen = 0;
      for (size_t i = 0; i < vlen; i++) {
        if (v[i] < '0' || v[i] > '9') {
          if (v[i] == ' ' || v[i] == '\t') break;
          return bad_head(err, "a malformed Content-Length");
        }
        clen = clen * 10 + (v[i] - '0');
      }
    } else if (nlen == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
      if (vlen >= 7 && strncasecmp(v, "chunked", 7) == 0) chunked = 1;
    }
    line = memchr(eol, '\n', (size_t)(buf + head_len - eol));
  }
  *out_status = status;
  *out_head_len = head_len;
  if (out_content_length) *out_content_length = clen;
  if (out_chunked) *out_chunked = chunked;
  return 1;
}

int engine_expect_json(json_object **answer, json_type type, const char *what, sm_error *err) {
  if (*answer != NULL && json_object_is_type(*answer, type)) return 0;
  json_object_put(*answer);
  *answer = NULL;
  return sm_error_set(err, SM_EPROTOCOL, "%s: the answer is not %s", what,
                      type == json_type_array ? "an array" : "an object");
}

int engine_answer_id(json_object *answer, char out[SM_ENGINE_ID_MAX], const char *what,
                     sm_error *err) {
  json_object *id = NULL;
  if (!json_object_is_type(answer, json_type_object) ||
      !json_object_object_get_ex(answer, "Id", &id) || !json_object_is_type(id, json_type_string) ||
      json_object_get_string_len(id) <= 0 || json_object_get_string_len(id) >= SM_ENGINE_ID_MAX)
    return sm_error_set(err, SM_EPROTOCOL, "%s: the engine's answer has no Id", what);
  if (out) snprintf(out, SM_ENGINE_ID_MAX, "%s", json_object_get_string(id));
  return 0;
}
