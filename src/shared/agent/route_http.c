/* The relay's reading of a request head (see route_http.h). */
#include "agent/route_http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *find_blank_line(const char *buf, size_t len) {
  for (size_t i = 0; i + 3 < len; i++)
    if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n')
      return buf + i;
  return NULL;
}

/* "METHOD SP target SP HTTP/1.x", nothing else (no control characters). */
static int request_line_ok(const char *p, size_t n) {
  size_t sp1 = 0, sp2 = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c < 0x21 && c != ' ') return 0;
    if (c == 0x7f) return 0;
    if (c != ' ') continue;
    if (sp1 == 0) sp1 = i;
    else if (sp2 == 0) sp2 = i;
    else return 0;
  }
  if (sp1 == 0 || sp2 <= sp1 + 1) return 0;
  size_t vlen = n - sp2 - 1;
  return vlen == 8 && (memcmp(p + sp2 + 1, "HTTP/1.1", 8) == 0 ||
                       memcmp(p + sp2 + 1, "HTTP/1.0", 8) == 0);
}

static int name_is(const char *name, size_t n, const char *want) {
  return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* Content-Length: digits only, no larger than max; -1 otherwise. */
static long long parse_length(const char *v, size_t n, size_t max) {
  if (n == 0) return -1;
  unsigned long long x = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    x = x * 10 + (unsigned)(v[i] - '0');
    if (x > max) return (long long)max + 1;
  }
  return (long long)x;
}

/* One header line p[0..n): applies it to out; an HTTP status or 0. */
static int header(const char *p, size_t n, size_t total_max, route_head *out, int *have_len) {
  const char *colon = memchr(p, ':', n);
  if (colon == NULL || colon == p) return 400;
  size_t nlen = (size_t)(colon - p);
  for (size_t i = 0; i < nlen; i++)
    if ((unsigned char)p[i] <= ' ' || p[i] == 0x7f) return 400; /* no "Name :" tricks */
  const char *v = colon + 1, *end = p + n;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
  size_t vlen = (size_t)(end - v);
  if (name_is(p, nlen, "transfer-encoding")) return 411;
  if (name_is(p, nlen, "content-length")) {
    long long x = parse_length(v, vlen, total_max);
    if (x < 0) return 400;
    if (*have_len && (size_t)x != out->body_len) return 400;
    *have_len = 1;
    out->body_len = (size_t)x;
  } else if (name_is(p, nlen, "expect")) {
    if (vlen == 12 && strncasecmp(v, "100-continue", 12) == 0) out->expect_continue = 1;
  }
  return 0;
}

int agent_route_http_head(const char *buf, size_t len, size_t total_max, route_head *out) {
  memset(out, 0, sizeof *out);
  size_t scan = len < ROUTE_HEAD_MAX ? len : ROUTE_HEAD_MAX;
  const char *blank = find_blank_line(buf, scan);
  if (blank == NULL) return len >= ROUTE_HEAD_MAX ? 431 : 0;
  size_t head_len = (size_t)(blank - buf) + 4;
  const char *p = buf, *stop = blank + 2; /* each line ends with "\r\n" */
  const char *eol = memchr(p, '\r', (size_t)(stop - p));
  if (eol == NULL || eol[1] != '\n' || !request_line_ok(p, (size_t)(eol - p))) return 400;
  p = eol + 2;
  int have_len = 0;
  while (p < stop) {
    eol = memchr(p, '\r', (size_t)(stop - p));
    if (eol == NULL || eol[1] != '\n') return 400;
    if (memchr(p, '\n', (size_t)(eol - p)) != NULL || memchr(p, '\0', (size_t)(eol - p)) != NULL)
      return 400;
    if (*p == ' ' || *p == '\t') return 400; /* folded lines are obsolete */
    int st = header(p, (size_t)(eol - p), total_max, out, &have_len);
    if (st) return st;
    p = eol + 2;
  }
  out->head_len = head_len;
  if (out->body_len > total_max || head_len > total_max - out->body_len) return 413;
  return 1;
}

static const char *reason(int status) {
  switch (status) {
  case 100: return "Continue";
  case 400: return "Bad Request";
  case 408: return "Request Timeout";
  case 411: return "Length Required";
  case 413: return "Content Too Large";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 502: return "Bad Gateway";
  default: return "Service Unavailable";
  }
}

size_t agent_route_http_error(int status, const char *message, char *out, size_t cap) {
  char body[512];
  int bl = snprintf(body, sizeof body, "{\"error\": \"%s\"}\n", message);
  if (bl < 0 || (size_t)bl >= sizeof body) return 0;
  int n = snprintf(out, cap,
                   "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                   "Connection: close\r\n\r\n%s",
                   status, reason(status), bl, body);
  if (n < 0 || (size_t)n >= cap) return 0;
  return (size_t)n;
}
