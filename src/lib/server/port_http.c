/* The HTTP/1.1 answer of a sandbox's server, parsed once it is whole
 * (port_http.h). The request the runner sends says "Connection: close",
 * so the answer ends where the server closes its end; its body is either
 * Content-Length bytes, chunked (undone here), or all that follows. */
#include "server/port_http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sandman/util.h>

#define HEAD_MAX (64 * 1024)

/* The end of the head ("\r\n\r\n" or "\n\n"): the body's offset, or 0. */
static size_t head_end(const char *d, size_t len) {
  size_t n = len < HEAD_MAX ? len : HEAD_MAX;
  for (size_t i = 0; i + 1 < n; i++) {
    if (d[i] == '\n' && d[i + 1] == '\n') return i + 2;
    if (i + 3 < len && memcmp(d + i, "\r\n\r\n", 4) == 0) return i + 4;
  }
  return 0;
}

/* The value of header name in the head's lines, trimmed, into v. 1 if found. */
static int header(const char *head, size_t hlen, const char *name, char *v, size_t vsz) {
  size_t nl = strlen(name);
  const char *p = memchr(head, '\n', hlen), *end = head + hlen;
  while (p && p + 1 < end) {
    const char *line = p + 1, *eol = memchr(line, '\n', (size_t)(end - line));
    if (eol == NULL) eol = end;
    if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
      const char *s = line + nl + 1, *e = eol;
      while (s < e && (*s == ' ' || *s == '\t')) s++;
      while (e > s && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) e--;
      size_t n = (size_t)(e - s) < vsz - 1 ? (size_t)(e - s) : vsz - 1;
      memcpy(v, s, n);
      v[n] = '\0';
      return 1;
    }
    p = eol < end ? eol : NULL;
  }
  return 0;
}

/* Undoes the chunked coding of d[0..len) into out. 0, or -1 when broken. */
static int unchunk(const char *d, size_t len, port_http_answer *out) {
  char *b = malloc(len + 1);
  if (b == NULL) return -1;
  size_t i = 0, n = 0;
  for (;;) {
    const char *eol = memchr(d + i, '\n', len - i);
    if (eol == NULL) break;
    char *stop = NULL;
    unsigned long long sz = strtoull(d + i, &stop, 16);
    if (stop == d + i) break;
    i = (size_t)(eol - d) + 1;
    if (sz == 0) {
      out->body = b;
      out->body_len = n;
      b[n] = '\0';
      return 0;
    }
    if (sz > len - i) break;
    memcpy(b + n, d + i, (size_t)sz);
    n += (size_t)sz;
    i += (size_t)sz;
    if (i < len && d[i] == '\r') i++;
    if (i < len && d[i] == '\n') i++;
  }
  free(b);
  return -1;
}

int server_port_http_parse(const char *data, size_t len, int head, port_http_answer *out) {
  memset(out, 0, sizeof *out);
  size_t body = head_end(data, len);
  if (body == 0 || len < 12 || strncmp(data, "HTTP/1.", 7) != 0 || data[8] != ' ') return -1;
  char code[4] = {data[9], data[10], data[11], '\0'};
  int64_t st = 0;
  if (sm_parse_int(code, 100, 599, &st, NULL) != 0) return -1;
  out->status = (int)st;
  header(data, body, "Content-Type", out->content_type, sizeof out->content_type);
  header(data, body, "Location", out->location, sizeof out->location);
  if (head || st < 200 || st == 204 || st == 304) { /* no body */
    out->body = calloc(1, 1);
    return out->body ? 0 : -1;
  }
  char v[64];
  if (header(data, body, "Transfer-Encoding", v, sizeof v) && strcasecmp(v, "chunked") == 0)
    return unchunk(data + body, len - body, out);
  size_t n = len - body;
  if (header(data, body, "Content-Length", v, sizeof v)) {
    int64_t cl = 0;
    if (sm_parse_int(v, 0, (int64_t)n, &cl, NULL) != 0) return -1;
    n = (size_t)cl;
  }
  if ((out->body = malloc(n + 1)) == NULL) return -1;
  memcpy(out->body, data + body, n);
  out->body[n] = '\0';
  out->body_len = n;
  return 0;
}

void server_port_http_answer_dispose(port_http_answer *a) {
  free(a->body);
  a->body = NULL;
}

int server_port_http_header_passed(const char *name) {
  static const char *const owned[] = {"Authorization", "Host", "Connection", "Keep-Alive",
                                      "Proxy-Authorization", "Proxy-Connection", "TE",
                                      "Trailer", "Transfer-Encoding", "Upgrade",
                                      "Content-Length", "Expect", "X-Sandman-Worker-Key"};
  for (size_t i = 0; i < sizeof owned / sizeof *owned; i++)
    if (strcasecmp(name, owned[i]) == 0) return 0;
  return name[0] != '\0' && strpbrk(name, "\r\n:") == NULL;
}
