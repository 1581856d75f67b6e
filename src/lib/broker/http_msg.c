/* The route's HTTP/1.1, parsed with hard caps: one request, a head of at
 * most 64 KiB, at most 64 headers, a body only with Content-Length (no
 * chunked encoding: the route's client never needs it). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sandman/hostroute.h>

#include "broker/http_msg.h"
#include "common/buf.h"

static const char *status_text(int s) {
  switch (s) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
  }
  return "Status";
}

static void copy_value(char *dst, const char *v, size_t n) {
  while (n > 0 && (*v == ' ' || *v == '\t')) v++, n--;
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  if (n >= BK_HTTP_VALUE_MAX) n = BK_HTTP_VALUE_MAX - 1;
  memcpy(dst, v, n);
  dst[n] = '\0';
}

/* The request line: METHOD SP TARGET SP HTTP/1.x */
static int request_line(const char *p, size_t n, bk_http_msg *m, const char **why) {
  const char *sp1 = memchr(p, ' ', n);
  if (!sp1 || sp1 == p || (size_t)(sp1 - p) >= sizeof m->method) return *why = "bad request line", 400;
  const char *rest = sp1 + 1;
  const char *sp2 = memchr(rest, ' ', n - (size_t)(rest - p));
  if (!sp2 || sp2 == rest) return *why = "bad request line", 400;
  size_t vlen = n - (size_t)(sp2 + 1 - p);
  if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0) return *why = "not HTTP/1.x", 400;
  memcpy(m->method, p, (size_t)(sp1 - p));
  m->method[sp1 - p] = '\0';
  for (char *c = m->method; *c; c++)
    if (!isupper((unsigned char)*c)) return *why = "bad method", 400;
  size_t tlen = (size_t)(sp2 - rest);
  const char *q = memchr(rest, '?', tlen);
  if (q) tlen = (size_t)(q - rest);
  if (tlen == 0 || tlen >= sizeof m->path || rest[0] != '/') return *why = "bad target", 400;
  memcpy(m->path, rest, tlen);
  m->path[tlen] = '\0';
  for (char *c = m->path; *c; c++)
    if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f) return *why = "bad target", 400;
  return 0;
}

/* Long because it is the one pass over the head: the request line, then
 * each header line with its caps and the few headers the broker reads. */
int broker_http_parse(const char *req, size_t len, bk_http_msg *m, const char **why) {
  memset(m, 0, sizeof *m);
  if (len > SM_ROUTE_REQUEST_MAX) return *why = "request too large", 413;
  size_t lim = len < BK_HTTP_HEAD_MAX ? len : BK_HTTP_HEAD_MAX;
  const char *end = NULL;
  for (size_t i = 0; i + 3 < lim; i++)
    if (memcmp(req + i, "\r\n\r\n", 4) == 0) {
      end = req + i;
      break;
    }
  if (!end) return *why = len >= BK_HTTP_HEAD_MAX ? "head too large" : "incomplete head", len >= BK_HTTP_HEAD_MAX ? 413 : 400;
  const char *eol = memchr(req, '\r', (size_t)(end - req) + 1);
  int rc = request_line(req, (size_t)(eol - req), m, why);
  if (rc) return rc;
  long long clen = -1;
  int headers = 0;
  for (const char *p = eol + 2; p < end; p = eol + 2) {
    eol = memchr(p, '\r', (size_t)(end - p) + 1);
    if (!eol || eol[1] != '\n') return *why = "bad header line", 400;
    if (++headers > BK_HTTP_HEADERS_MAX) return *why = "too many headers", 400;
    const char *colon = memchr(p, ':', (size_t)(eol - p));
    if (!colon || colon == p) return *why = "bad header line", 400;
    for (const char *c = p; c < colon; c++)
      if (!(isalnum((unsigned char)*c) || strchr("!#$%&'*+-.^_`|~", *c))) return *why = "bad header name", 400;
    size_t kn = (size_t)(colon - p), vn = (size_t)(eol - colon - 1);
    const char *v = colon + 1;
    if (memchr(v, '\0', vn)) return *why = "bad header value", 400;
#define IS(name) (kn == sizeof(name) - 1 && strncasecmp(p, name, kn) == 0)
    if (IS("Content-Length")) {
      char num[32];
      copy_value(num, v, vn < sizeof num ? vn : sizeof num - 1);
      char *e = NULL;
      long long x = strtoll(num, &e, 10);
      if (!num[0] || *e || x < 0 || (clen >= 0 && clen != x)) return *why = "bad Content-Length", 400;
      clen = x;
    } else if (IS("Transfer-Encoding")) {
      return *why = "chunked bodies are not accepted (send Content-Length)", 501;
    } else if (IS("Accept")) copy_value(m->accept, v, vn);
    else if (IS("Content-Type")) copy_value(m->content_type, v, vn);
    else if (IS("Mcp-Session-Id")) copy_value(m->session_id, v, vn);
    else if (IS("MCP-Protocol-Version")) copy_value(m->protocol_version, v, vn);
    else if (IS("Origin")) copy_value(m->origin, v, vn);
    else if (IS("Mcp-Method")) copy_value(m->mcp_method, v, vn);
    else if (IS("Mcp-Name")) copy_value(m->mcp_name, v, vn);
#undef IS
  }
  size_t have = len - (size_t)(end + 4 - req);
  if (clen < 0) {
    if (have > 0) return *why = "a body needs Content-Length", 411;
    clen = 0;
  }
  if ((unsigned long long)clen > SM_ROUTE_REQUEST_MAX) return *why = "body too large", 413;
  if ((size_t)clen != have) return *why = "the body does not match Content-Length", 400;
  m->body = end + 4;
  m->body_len = (size_t)clen;
  return 0;
}

int broker_http_raw(int status, const char *content_type, const char *extra_headers,
                    const char *body, size_t body_len, char **resp, size_t *resp_len,
                    sm_error *err) {
  common_buf b;
  common_buf_init(&b, SM_ROUTE_RESPONSE_MAX);
  int rc = common_buf_printf(&b, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\nConnection: close\r\n",
                             status, status_text(status), body_len);
  if (rc == 0 && content_type) rc = common_buf_printf(&b, "Content-Type: %s\r\n", content_type);
  if (rc == 0 && extra_headers) rc = common_buf_append(&b, extra_headers, strlen(extra_headers));
  if (rc == 0) rc = common_buf_append(&b, "\r\n", 2);
  if (rc == 0 && body_len) rc = common_buf_append(&b, body, body_len);
  if (rc) {
    common_buf_dispose(&b);
    return sm_error_set(err, rc, "broker: the answer does not fit (%zu bytes)", body_len);
  }
  *resp = common_buf_steal(&b, resp_len);
  return 0;
}

int broker_http_json(int status, json_object *body, char **resp, size_t *resp_len, sm_error *err) {
  size_t n = 0;
  const char *s = json_object_to_json_string_length(body, JSON_C_TO_STRING_PLAIN, &n);
  if (!s) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  return broker_http_raw(status, "application/json", NULL, s, n, resp, resp_len, err);
}

int broker_http_error(int status, const char *reason, const char *message, const char *rule,
                      char **resp, size_t *resp_len, sm_error *err) {
  json_object *o = json_object_new_object();
  if (!o) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  json_object_object_add(o, "error", json_object_new_string(message ? message : ""));
  json_object_object_add(o, "reason", json_object_new_string(reason ? reason : ""));
  json_object_object_add(o, "rule", rule && rule[0] ? json_object_new_string(rule) : NULL);
  int rc = broker_http_json(status, o, resp, resp_len, err);
  json_object_put(o);
  return rc;
}
