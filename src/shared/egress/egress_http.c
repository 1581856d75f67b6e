/* The proxy's request head (egress_http.h). Strict on purpose: anything that two
 * HTTP parsers could read two ways (folded lines, bare CR, duplicate Host,
 * Content-Length with Transfer-Encoding) is refused rather than guessed. */
#include <stdio.h>
#include <string.h>

#include "egress/egress_http.h"


static int is_tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 1;
  return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int ieq(const char *a, size_t alen, const char *b) {
  size_t blen = strlen(b);
  if (alen != blen) return 0;
  for (size_t i = 0; i < alen; i++) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
    if (x != y) return 0;
  }
  return 1;
}

/* Finds the end of the head: "\r\n\r\n". Bare LF line ends are refused
 * later, line by line. Returns the head length or 0. */
static size_t head_end(const char *buf, size_t len) {
  for (size_t i = 3; i < len; i++)
    if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') return i + 1;
  return 0;
}

static int authority_has_port(const char *v, size_t n) {
  if (n > 0 && v[0] == '[') {
    const char *close = memchr(v, ']', n);
    return close != NULL && (size_t)(close - v) + 1 < n && close[1] == ':';
  }
  return memchr(v, ':', n) != NULL;
}

static void trim(const char **s, size_t *n) {
  while (*n > 0 && (**s == ' ' || **s == '\t')) {
    (*s)++;
    (*n)--;
  }
  while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

static int parse_target(const char *t, size_t n, eg_request *out, char *why, size_t why_len) {
  char sub[EG_WHY_MAX];
  if (out->is_connect) {
    if (egress_authority_parse(t, n, -1, &out->target, sub, sizeof sub) != 0)
      return egress_fail(why, why_len, "CONNECT target: %s", sub);
    return 0;
  }
  static const char http[] = "http://";
  if (n >= 8 && ieq(t, 8, "https://"))
    return egress_fail(why, why_len,
                       "https:// targets are not proxied: use CONNECT (set HTTPS_PROXY)");
  if (n < sizeof http - 1 || !ieq(t, sizeof http - 1, http))
    return egress_fail(why, why_len,
                       "not a proxy request: the target must be an absolute http:// URL");
  const char *a = t + sizeof http - 1;
  size_t rest = n - (sizeof http - 1), alen = 0;
  while (alen < rest && a[alen] != '/' && a[alen] != '?' && a[alen] != '#') alen++;
  if (alen < rest && a[alen] == '#')
    return egress_fail(why, why_len, "a fragment in the request target");
  if (memchr(a + alen, '#', rest - alen))
    return egress_fail(why, why_len, "a fragment in the request target");
  if (egress_authority_parse(a, alen, 80, &out->target, sub, sizeof sub) != 0)
    return egress_fail(why, why_len, "request target: %s", sub);
  out->path_off = (size_t)(a + alen - t);
  out->path_len = rest - alen;
  return 0;
}

/* At most one Host, agreeing with the target (host and port). */
static int check_host(const char *v, size_t vlen, eg_request *out, char *why, size_t why_len) {
  if (out->has_host) return egress_fail(why, why_len, "more than one Host header");
  out->has_host = 1;
  eg_dest h;
  char sub[EG_WHY_MAX];
  int dport = out->is_connect ? -1 : 80;
  /* A CONNECT's Host may leave the port out; then only the host is compared. */
  if (out->is_connect && !authority_has_port(v, vlen)) dport = out->target.port;
  if (egress_authority_parse(v, vlen, dport, &h, sub, sizeof sub) != 0)
    return egress_fail(why, why_len, "Host header: %s", sub);
  if (strcmp(h.host, out->target.host) != 0 || h.port != out->target.port)
    return egress_fail(why, why_len,
                       "the Host header (%s:%d) disagrees with the request target (%s:%d)", h.host,
                       h.port, out->target.host, out->target.port);
  return 0;
}

/* Headers that frame the request or name where it goes: the proxy reads
 * the body by them and checks Host against the target, so the head it sends
 * upstream must carry them as the client sent them (issue 25, finding 10). */
static int framing_header(const char *name, size_t n) {
  return ieq(name, n, "content-length") || ieq(name, n, "transfer-encoding") || ieq(name, n, "host");
}

/* A Connection header naming a framing header asks the proxy to drop it
 * upstream while it still forwards what it framed: refused. */
static int check_connection(const char *v, size_t vlen, char *why, size_t why_len) {
  while (vlen > 0) {
    const char *comma = memchr(v, ',', vlen);
    size_t tl = comma ? (size_t)(comma - v) : vlen;
    const char *t = v;
    size_t tn = tl;
    trim(&t, &tn);
    if (framing_header(t, tn))
      return egress_fail(why, why_len,
                         "the Connection header names %.*s, which the server must get", (int)tn, t);
    if (comma == NULL) break;
    v = comma + 1;
    vlen -= tl + 1;
  }
  return 0;
}

static int content_length(const char *v, size_t vlen, eg_request *out, char *why, size_t why_len) {
  if (vlen == 0 || vlen > 15) return egress_fail(why, why_len, "bad Content-Length");
  long long cl = 0;
  for (size_t i = 0; i < vlen; i++) {
    if (v[i] < '0' || v[i] > '9') return egress_fail(why, why_len, "bad Content-Length");
    cl = cl * 10 + (v[i] - '0');
  }
  if (out->content_length >= 0 && out->content_length != cl)
    return egress_fail(why, why_len, "two different Content-Length headers");
  out->content_length = cl;
  return 0;
}

/* The header lines of a head whose request line parsed. */
static int parse_headers(const char *p, const char *end, eg_request *out, char *why, size_t why_len) {
  int lines = 0, te = 0;
  for (;;) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    if (e == NULL || e == p || e[-1] != '\r')
      return egress_fail(why, why_len, "bad header line ending");
    size_t hl = (size_t)(e - 1 - p);
    if (hl == 0) break; /* the blank line */
    if (++lines > EG_HEADERS_MAX) {
      egress_fail(why, why_len, "more than %d header lines", EG_HEADERS_MAX);
      return -2;
    }
    if (p[0] == ' ' || p[0] == '\t')
      return egress_fail(why, why_len, "folded header lines are not accepted");
    const char *colon = memchr(p, ':', hl);
    if (colon == NULL || colon == p) return egress_fail(why, why_len, "header line without a name");
    size_t nl = (size_t)(colon - p);
    for (size_t i = 0; i < nl; i++)
      if (!is_tchar((unsigned char)p[i])) return egress_fail(why, why_len, "bad header name");
    const char *v = colon + 1;
    size_t vlen = hl - nl - 1;
    for (size_t i = 0; i < vlen; i++) {
      unsigned char c = (unsigned char)v[i];
      if ((c < 0x20 && c != '\t') || c == 0x7f)
        return egress_fail(why, why_len, "control byte in a header value");
    }
    trim(&v, &vlen);
    int rc = 0;
    if (ieq(p, nl, "host")) rc = check_host(v, vlen, out, why, why_len);
    else if (ieq(p, nl, "content-length")) rc = content_length(v, vlen, out, why, why_len);
    else if (ieq(p, nl, "transfer-encoding")) te = 1;
    else if (ieq(p, nl, "connection")) rc = check_connection(v, vlen, why, why_len);
    if (rc != 0) return rc;
    p = e + 1;
  }
  if (te)
    return egress_fail(why, why_len,
                       "Transfer-Encoding in a request is not accepted (send Content-Length)");
  return 0;
}

int egress_request_parse(const char *buf, size_t len, eg_request *out, char *why, size_t why_len) {
  memset(out, 0, sizeof *out);
  out->content_length = -1;
  size_t scan = len > EG_HEAD_MAX ? EG_HEAD_MAX : len;
  size_t end = head_end(buf, scan);
  if (end == 0) {
    if (len >= EG_HEAD_MAX) {
      egress_fail(why, why_len, "request head over %d bytes", EG_HEAD_MAX);
      return -2;
    }
    /* Refuse garbage early instead of waiting for 16 KiB of it. */
    for (size_t i = 0; i < scan; i++)
      if (buf[i] == '\0') return egress_fail(why, why_len, "NUL byte in the request head");
    return 0;
  }
  out->head_len = end;

  /* Request line. */
  const char *line = buf, *eol = memchr(buf, '\r', end);
  if (eol == NULL || eol[1] != '\n') return egress_fail(why, why_len, "bad request line ending");
  size_t ll = (size_t)(eol - line);
  if (memchr(line, '\n', ll)) return egress_fail(why, why_len, "bad request line ending (bare LF)");
  const char *sp1 = memchr(line, ' ', ll);
  if (sp1 == NULL) return egress_fail(why, why_len, "bad request line");
  const char *sp2 = memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - line));
  if (sp2 == NULL || memchr(sp2 + 1, ' ', ll - (size_t)(sp2 + 1 - line)))
    return egress_fail(why, why_len, "bad request line (METHOD TARGET HTTP/1.x)");
  size_t ml = (size_t)(sp1 - line);
  if (ml == 0 || ml >= sizeof out->method) return egress_fail(why, why_len, "bad method");
  for (size_t i = 0; i < ml; i++)
    if (!is_tchar((unsigned char)line[i])) return egress_fail(why, why_len, "bad method");
  memcpy(out->method, line, ml);
  out->method[ml] = '\0';
  out->is_connect = strcmp(out->method, "CONNECT") == 0;
  const char *ver = sp2 + 1;
  size_t vl = (size_t)(eol - ver);
  if (vl != 8 || memcmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1'))
    return egress_fail(why, why_len, "only HTTP/1.0 and HTTP/1.1 are proxied");
  out->http_minor = ver[7] - '0';
  const char *target = sp1 + 1;
  size_t tl = (size_t)(sp2 - target);
  for (size_t i = 0; i < tl; i++)
    if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] >= 0x7f)
      return egress_fail(why, why_len, "control or non-ASCII byte in the request target");
  if (parse_target(target, tl, out, why, why_len) != 0) return -1;
  out->target_ok = 1;
  if (!out->is_connect) out->path_off += (size_t)(target - buf);

  int hrc = parse_headers(eol + 2, buf + end, out, why, why_len);
  if (hrc != 0) return hrc;
  if (!out->is_connect && !out->has_host && out->http_minor == 1)
    return egress_fail(why, why_len, "an HTTP/1.1 request without a Host header");
  if (out->is_connect && out->content_length > 0)
    return egress_fail(why, why_len, "a CONNECT with a body");
  return 1;
}

/* Hop-by-hop: for this connection only, never forwarded (framing headers
 * never are, whatever Connection names). */
static int hop_by_hop(const char *name, size_t n, const char *connection, size_t clen) {
  if (framing_header(name, n)) return 0;
  static const char *const fixed[] = {"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                                      "proxy-authenticate", "te", "trailer", "upgrade", NULL};
  for (const char *const *f = fixed; *f; f++)
    if (ieq(name, n, *f)) return 1;
  /* Headers the client's Connection header names. */
  const char *c = connection;
  while (c && clen > 0) {
    const char *comma = memchr(c, ',', clen);
    size_t tl = comma ? (size_t)(comma - c) : clen;
    const char *t = c;
    size_t tn = tl;
    trim(&t, &tn);
    if (tn == n && tn > 0) {
      char tmp[64];
      if (tn < sizeof tmp) {
        memcpy(tmp, t, tn);
        tmp[tn] = '\0';
        if (ieq(name, n, tmp)) return 1;
      }
    }
    if (!comma) break;
    clen -= tl + 1;
    c = comma + 1;
  }
  return 0;
}

static int put(char *out, size_t cap, size_t *used, const char *s, size_t n) {
  if (*used + n > cap) return -1;
  memcpy(out + *used, s, n);
  *used += n;
  return 0;
}

long egress_request_upstream_head(const char *buf, const eg_request *req, char *out, size_t cap) {
  size_t used = 0;
  const char *path = req->path_len ? buf + req->path_off : "/";
  size_t plen = req->path_len ? req->path_len : 1;
  if (path[0] == '?') { /* http://host?x -> /?x */
    if (put(out, cap, &used, req->method, strlen(req->method)) || put(out, cap, &used, " /", 2)) return -1;
  } else if (put(out, cap, &used, req->method, strlen(req->method)) || put(out, cap, &used, " ", 1)) {
    return -1;
  }
  if (put(out, cap, &used, path, plen) || put(out, cap, &used, " HTTP/1.1\r\n", 11)) return -1;
  /* The Connection header's value, for the headers it names. */
  const char *conn = NULL;
  size_t conn_len = 0;
  const char *p = memchr(buf, '\n', req->head_len) + 1;
  const char *end = buf + req->head_len;
  while (p < end) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    size_t hl = (size_t)(e - 1 - p);
    if (hl == 0) break;
    const char *colon = memchr(p, ':', hl);
    if (ieq(p, (size_t)(colon - p), "connection")) {
      conn = colon + 1;
      conn_len = hl - (size_t)(colon + 1 - p);
    }
    p = e + 1;
  }
  p = memchr(buf, '\n', req->head_len) + 1;
  while (p < end) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    size_t hl = (size_t)(e - 1 - p);
    if (hl == 0) break;
    const char *colon = memchr(p, ':', hl);
    if (!hop_by_hop(p, (size_t)(colon - p), conn, conn_len) &&
        (put(out, cap, &used, p, hl) || put(out, cap, &used, "\r\n", 2)))
      return -1;
    p = e + 1;
  }
  if (!req->has_host) {
    char host[EG_HOST_MAX + 32];
    int n;
    if (req->target.is_addr && req->target.addr.family == 6)
      n = snprintf(host, sizeof host, "Host: [%s]:%d\r\n", req->target.host, req->target.port);
    else
      n = snprintf(host, sizeof host, "Host: %s:%d\r\n", req->target.host, req->target.port);
    if (n < 0 || put(out, cap, &used, host, (size_t)n)) return -1;
  }
  if (put(out, cap, &used, "Connection: close\r\n\r\n", 21)) return -1;
  return (long)used;
}
