/* The HTTP/1.1 answer of a sandbox's server as it streams in (port_http.h).
 * The request the runner sends says "Connection: close" (or asks for a
 * WebSocket's upgrade), so a body without a length ends where the server
 * closes its end. */
#include "server/port_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sandman/util.h>

#define VALUE_MAX 8192
#define CHUNK_LINE_MAX 4096
#define CHUNK_SIZE_MAX ((uint64_t)1 << 60)

long server_port_http_head_end(const char *d, size_t len) {
  size_t n = len < PORT_HTTP_HEAD_MAX ? len : PORT_HTTP_HEAD_MAX;
  for (size_t i = 0; i + 1 < n; i++) {
    if (d[i] == '\n' && d[i + 1] == '\n') return (long)(i + 2);
    if (i + 3 < n && memcmp(d + i, "\r\n\r\n", 4) == 0) return (long)(i + 4);
  }
  return len >= PORT_HTTP_HEAD_MAX ? -1 : 0;
}

/* Calls fn for each header line of the head (after the status line), its
 * name and value trimmed; lines that are no header are skipped. */
static void each_header(const char *head, size_t hlen, port_http_header_fn fn, void *ud) {
  const char *p = memchr(head, '\n', hlen), *end = head + hlen;
  char name[256], value[VALUE_MAX];
  while (p && p + 1 < end) {
    const char *line = p + 1, *eol = memchr(line, '\n', (size_t)(end - line));
    if (eol == NULL) eol = end;
    const char *colon = memchr(line, ':', (size_t)(eol - line));
    size_t nl = colon ? (size_t)(colon - line) : 0;
    if (colon && nl > 0 && nl < sizeof name && line[0] != ' ' && line[0] != '\t') {
      memcpy(name, line, nl);
      name[nl] = '\0';
      const char *s = colon + 1, *e = eol;
      while (s < e && (*s == ' ' || *s == '\t')) s++;
      while (e > s && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) e--;
      if ((size_t)(e - s) < sizeof value && !memchr(s, '\r', (size_t)(e - s)) &&
          !strpbrk(name, " \t\r")) {
        memcpy(value, s, (size_t)(e - s));
        value[e - s] = '\0';
        fn(ud, name, value);
      }
    }
    p = eol < end ? eol : NULL;
  }
}

typedef struct head_walk {
  int chunked, has_length, bad;
  int64_t length;
  char connection[512];
} head_walk;

static void note(void *ud, const char *name, const char *value) {
  head_walk *w = ud;
  if (strcasecmp(name, "Transfer-Encoding") == 0) {
    const char *last = strrchr(value, ',');
    last = last ? last + 1 : value;
    while (*last == ' ') last++;
    w->chunked = strncasecmp(last, "chunked", 7) == 0;
  } else if (strcasecmp(name, "Content-Length") == 0) {
    int64_t n = 0;
    if (sm_parse_int(value, 0, INT64_MAX, &n, NULL) != 0 || (w->has_length && n != w->length))
      w->bad = 1;
    w->has_length = 1;
    w->length = n;
  } else if (strcasecmp(name, "Connection") == 0) {
    size_t used = strlen(w->connection);
    snprintf(w->connection + used, sizeof w->connection - used, "%s%s", used ? "," : "", value);
  }
}

int server_port_http_head_parse(const char *d, size_t hlen, int head_method, port_http_head *out) {
  memset(out, 0, sizeof *out);
  if (hlen < 12 || strncmp(d, "HTTP/1.", 7) != 0 || d[8] != ' ') return -1;
  char code[4] = {d[9], d[10], d[11], '\0'};
  int64_t st = 0;
  if (sm_parse_int(code, 100, 599, &st, NULL) != 0) return -1;
  out->status = (int)st;
  head_walk w;
  memset(&w, 0, sizeof w);
  each_header(d, hlen, note, &w);
  if (w.bad || (w.chunked && w.has_length)) return -1;
  if (head_method || st < 200 || st == 204 || st == 304) out->body = PORT_BODY_NONE;
  else if (w.chunked) out->body = PORT_BODY_CHUNKED;
  else if (w.has_length) out->body = PORT_BODY_LENGTH, out->length = (uint64_t)w.length;
  else out->body = PORT_BODY_CLOSE;
  return 0;
}

/* 1 when name is one of the comma-separated tokens of list. */
static int listed(const char *list, const char *name) {
  size_t nl = strlen(name);
  for (const char *p = list; p && *p;) {
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    size_t n = strcspn(p, ", \t");
    if (n == nl && strncasecmp(p, name, n) == 0) return 1;
    p += n;
  }
  return 0;
}

static int hop_by_hop(const char *name) {
  static const char *const hop[] = {"Connection", "Keep-Alive", "Proxy-Connection",
                                    "Proxy-Authenticate", "Proxy-Authorization", "TE",
                                    "Trailer", "Transfer-Encoding", "Upgrade",
                                    "Content-Length"};
  for (size_t i = 0; i < sizeof hop / sizeof *hop; i++)
    if (strcasecmp(name, hop[i]) == 0) return 1;
  return 0;
}

typedef struct pass_walk {
  head_walk w;
  port_http_header_fn fn;
  void *ud;
} pass_walk;

static void pass(void *ud, const char *name, const char *value) {
  pass_walk *p = ud;
  if (hop_by_hop(name) || listed(p->w.connection, name) || strcasecmp(name, "X-Request-Id") == 0)
    return;
  p->fn(p->ud, name, value);
}

void server_port_http_answer_headers(const char *d, size_t hlen, port_http_header_fn fn, void *ud) {
  pass_walk p;
  memset(&p, 0, sizeof p);
  each_header(d, hlen, note, &p.w);
  p.fn = fn;
  p.ud = ud;
  each_header(d, hlen, pass, &p);
}

int server_port_http_header_passed(const char *name, const char *connection) {
  if (hop_by_hop(name) || strcasecmp(name, "Authorization") == 0 ||
      strcasecmp(name, "Host") == 0 || strcasecmp(name, "Expect") == 0 ||
      strcasecmp(name, "X-Sandman-Worker-Key") == 0 || (connection && listed(connection, name)))
    return 0;
  return name[0] != '\0' && strpbrk(name, "\r\n:") == NULL;
}

/* ---- chunked bodies ---- */

enum { CH_SIZE = 0, CH_EXT, CH_DATA, CH_DATA_END, CH_TRAILER, CH_DONE };

/* One byte of a size line or a trailer line. 0 to go on, -1 broken. */
static int chunk_line_byte(port_http_dechunk *d, char ch) {
  if (++d->line > CHUNK_LINE_MAX) return -1;
  if (ch == '\n') {
    if (d->state == CH_TRAILER) {
      if (d->line <= 2) d->state = CH_DONE; /* an empty line ("\n" or "\r\n") */
      d->line = 0;
      return 0;
    }
    if (!d->digits) return -1;
    d->state = d->left ? CH_DATA : CH_TRAILER;
    d->line = 0;
    d->digits = 0;
    return 0;
  }
  if (d->state != CH_SIZE) return 0; /* an extension or a trailer: skipped */
  int v = ch >= '0' && ch <= '9' ? ch - '0'
          : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
          : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                   : -1;
  if (v < 0) {
    if (ch != ';' && ch != ' ' && ch != '\t' && ch != '\r') return -1;
    d->state = CH_EXT;
    return 0;
  }
  d->left = d->left * 16 + (uint64_t)v;
  d->digits = 1;
  return d->left > CHUNK_SIZE_MAX ? -1 : 0;
}

int server_port_http_dechunk(port_http_dechunk *d, const char *data, size_t len, size_t *used,
                             port_http_emit_fn emit, void *ud) {
  size_t i = 0;
  while (i < len && d->state != CH_DONE) {
    if (d->state == CH_DATA) {
      size_t n = len - i < d->left ? len - i : (size_t)d->left;
      if (emit(ud, data + i, n) != 0) return -1;
      i += n;
      d->left -= n;
      if (d->left == 0) d->state = CH_DATA_END;
    } else if (d->state == CH_DATA_END) {
      char ch = data[i++];
      if (ch == '\n') d->state = CH_SIZE;
      else if (ch != '\r') return -1;
    } else if (chunk_line_byte(d, data[i++]) != 0) {
      return -1;
    }
  }
  *used = i;
  return d->state == CH_DONE ? 1 : 0;
}
