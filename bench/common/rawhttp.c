/* See rawhttp.h. Blocking sockets, one thread per connection. */
#define _GNU_SOURCE /* strcasestr */
#include "rawhttp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

double rh_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static int unix_connect(const char *path) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(sa.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int rh_open(rh_conn *c, const char *path) {
  memset(c, 0, sizeof *c);
  snprintf(c->path, sizeof c->path, "%s", path);
  c->fd = unix_connect(path);
  if (c->fd >= 0) c->connects++;
  return c->fd < 0 ? -1 : 0;
}

void rh_close(rh_conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Makes at least one more byte available in c->buf. 0, or -1 at EOF/error. */
static int fill(rh_conn *c) {
  if (c->off > 0 && c->off == c->len) c->off = c->len = 0;
  if (c->len == sizeof c->buf) {
    memmove(c->buf, c->buf + c->off, c->len - c->off);
    c->len -= c->off;
    c->off = 0;
    if (c->len == sizeof c->buf) return -1;
  }
  for (;;) {
    ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    c->len += (size_t)r;
    return 0;
  }
}

/* One line ending in CRLF, without it, into line. */
static int read_line(rh_conn *c, char *line, size_t cap) {
  for (;;) {
    char *s = c->buf + c->off;
    char *nl = memchr(s, '\n', c->len - c->off);
    if (nl) {
      size_t n = (size_t)(nl - s);
      if (n > 0 && s[n - 1] == '\r') n--;
      if (n >= cap) n = cap - 1;
      memcpy(line, s, n);
      line[n] = '\0';
      c->off += (size_t)(nl - s) + 1;
      return 0;
    }
    if (fill(c) != 0) return -1;
  }
}

static int read_exact(rh_conn *c, char *dst, size_t n) {
  while (n > 0) {
    if (c->off == c->len && fill(c) != 0) return -1;
    size_t k = c->len - c->off;
    if (k > n) k = n;
    if (dst) memcpy(dst, c->buf + c->off, k);
    if (dst) dst += k;
    c->off += k;
    n -= k;
  }
  return 0;
}

static int read_answer(rh_conn *c, rh_answer *a, int head_only_body) {
  char line[8192];
  memset(a, 0, sizeof *a);
  if (read_line(c, line, sizeof line) != 0) return -1;
  if (strncmp(line, "HTTP/1.", 7) != 0 || strlen(line) < 12) return -1;
  a->status = (int)strtol(line + 9, NULL, 10);
  long long clen = -1;
  int chunked = 0;
  for (;;) {
    if (read_line(c, line, sizeof line) != 0) return -1;
    if (line[0] == '\0') break;
    if (strncasecmp(line, "Content-Length:", 15) == 0) clen = strtoll(line + 15, NULL, 10);
    else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 && strstr(line, "chunked"))
      chunked = 1;
    else if (strncasecmp(line, "Connection:", 11) == 0 && strcasestr(line, "close"))
      a->close = 1;
  }
  if (head_only_body) return 0;
  size_t cap = 4096, used = 0;
  a->body = malloc(cap);
  if (a->body == NULL) return -1;
  if (a->status == 204 || a->status == 304 || (a->status >= 100 && a->status < 200)) clen = 0;
  if (chunked) {
    for (;;) {
      if (read_line(c, line, sizeof line) != 0) return -1;
      size_t n = (size_t)strtoul(line, NULL, 16);
      if (n == 0) {
        do {
          if (read_line(c, line, sizeof line) != 0) return -1;
        } while (line[0] != '\0');
        break;
      }
      if (used + n + 1 > RH_BODY_MAX) return -1;
      if (used + n + 1 > cap) {
        while (used + n + 1 > cap) cap *= 2;
        char *nb = realloc(a->body, cap);
        if (nb == NULL) return -1;
        a->body = nb;
      }
      if (read_exact(c, a->body + used, n) != 0) return -1;
      used += n;
      if (read_line(c, line, sizeof line) != 0) return -1;
    }
  } else if (clen >= 0) {
    if ((size_t)clen + 1 > RH_BODY_MAX) return -1;
    if ((size_t)clen + 1 > cap) {
      cap = (size_t)clen + 1;
      char *nb = realloc(a->body, cap);
      if (nb == NULL) return -1;
      a->body = nb;
    }
    if (read_exact(c, a->body, (size_t)clen) != 0) return -1;
    used = (size_t)clen;
  } else {
    /* No length: the body runs to EOF. */
    for (;;) {
      if (c->off == c->len && fill(c) != 0) break;
      size_t k = c->len - c->off;
      if (used + k + 1 > RH_BODY_MAX) return -1;
      if (used + k + 1 > cap) {
        while (used + k + 1 > cap) cap *= 2;
        char *nb = realloc(a->body, cap);
        if (nb == NULL) return -1;
        a->body = nb;
      }
      memcpy(a->body + used, c->buf + c->off, k);
      used += k;
      c->off += k;
    }
    a->close = 1;
  }
  a->body[used] = '\0';
  a->len = used;
  return 0;
}

int rh_request(rh_conn *c, const char *method, const char *path, const char *extra_headers,
               const char *body, size_t body_len, rh_answer *out) {
  char head[4096];
  int n = snprintf(head, sizeof head,
                   "%s %s HTTP/1.1\r\nHost: localhost\r\n%s%s%sContent-Length: %zu\r\n\r\n",
                   method, path, extra_headers ? extra_headers : "",
                   body ? "Content-Type: application/json" : "", body ? "\r\n" : "",
                   body ? body_len : (size_t)0);
  if (n < 0 || (size_t)n >= sizeof head) return -1;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (c->fd < 0) {
      c->fd = unix_connect(c->path);
      if (c->fd < 0) return -1;
      c->connects++;
      c->off = c->len = 0;
    }
    c->requests++;
    if (write_all(c->fd, head, (size_t)n) == 0 &&
        (body == NULL || write_all(c->fd, body, body_len) == 0) && read_answer(c, out, 0) == 0) {
      if (out->close) rh_close(c);
      return 0;
    }
    /* A kept-alive connection the server closed meanwhile: once more. */
    rh_answer_dispose(out);
    rh_close(c);
  }
  return -1;
}

int rh_hijack(const char *sock_path, const char *path, const char *body, char *out, size_t cap,
              size_t *out_bytes) {
  static __thread rh_conn hc; /* large: not on the stack */
  *out_bytes = 0;
  if (rh_open(&hc, sock_path) != 0) return -1;
  char head[2048];
  size_t blen = body ? strlen(body) : 0;
  int n = snprintf(head, sizeof head,
                   "POST %s HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n"
                   "Upgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                   path, blen);
  rh_answer a;
  int status = -1;
  if (n > 0 && (size_t)n < sizeof head && write_all(hc.fd, head, (size_t)n) == 0 &&
      (blen == 0 || write_all(hc.fd, body, blen) == 0) && read_answer(&hc, &a, 1) == 0) {
    status = a.status;
    size_t kept = 0;
    for (;;) {
      if (hc.off == hc.len && fill(&hc) != 0) break;
      size_t k = hc.len - hc.off;
      if (out && kept < cap) {
        size_t m = k < cap - kept ? k : cap - kept;
        memcpy(out + kept, hc.buf + hc.off, m);
        kept += m;
      }
      *out_bytes += k;
      hc.off += k;
    }
  }
  rh_close(&hc);
  return status;
}

void rh_answer_dispose(rh_answer *a) {
  free(a->body);
  a->body = NULL;
  a->len = 0;
}

static const char *find_key(const char *json, const char *key) {
  char pat[128];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *p = json ? strstr(json, pat) : NULL;
  if (p == NULL) return NULL;
  p += strlen(pat);
  while (*p == ' ' || *p == ':') p++;
  return p;
}

int rh_json_string(const char *json, const char *key, char *out, size_t len) {
  const char *p = find_key(json, key);
  if (p == NULL || *p != '"') return -1;
  p++;
  size_t i = 0;
  while (*p && *p != '"' && i + 1 < len) out[i++] = *p++;
  out[i] = '\0';
  return 0;
}

int rh_json_int(const char *json, const char *key, long long *out) {
  const char *p = find_key(json, key);
  if (p == NULL || (*p != '-' && (*p < '0' || *p > '9'))) return -1;
  *out = strtoll(p, NULL, 10);
  return 0;
}
