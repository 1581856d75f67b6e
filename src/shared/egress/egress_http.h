/* The proxy's HTTP request head: parsing with hard caps, the checks that
 * make a request safe to decide on, and the head sent upstream. libc only
 * (built into the library for tests and fuzzing, and into the proxy). */
#ifndef SANDMAN_EGRESS_HTTP_H
#define SANDMAN_EGRESS_HTTP_H

#include <stddef.h>

#include "egress/egress_policy.h"

#define EG_HEAD_MAX (16 * 1024)
#define EG_HEADERS_MAX 100

typedef struct eg_request {
  int is_connect;
  char method[16];
  eg_dest target;          /* CONNECT host:port, or the absolute-form URL's authority */
  int http_minor;          /* HTTP/1.0 or 1.1 */
  size_t head_len;         /* bytes up to and including the blank line */
  size_t path_off, path_len; /* absolute form: the origin-form part ("/x?y") in the buffer */
  long long content_length; /* -1: none */
  int has_host;
  int target_ok; /* target parsed, also when the head is refused later (for the audit) */
} eg_request;

/* Parses the request head at the start of buf. Returns 1 when complete
 * (*out filled), 0 when more bytes are needed, -1 for a request refused
 * as malformed or unsafe (why says which: 400), -2 when the head is over
 * EG_HEAD_MAX or has more than EG_HEADERS_MAX lines (431). Checks: one
 * request line `METHOD SP TARGET SP HTTP/1.x`; CONNECT takes host:port;
 * other methods the absolute form http://host[:port]/path (no https://,
 * no user info, no fragment); header names are tokens, no folded lines, no
 * control bytes; at most one Host, which must agree with the target (host
 * and port); a body only by Content-Length (Transfer-Encoding is refused,
 * as are two different Content-Length values). */
int egress_request_parse(const char *buf, size_t len, eg_request *out, char *why, size_t why_len);

/* Writes the head to send upstream for a plain-HTTP request: the request
 * line in origin form, the client's headers minus hop-by-hop ones
 * (Connection and what it names, Proxy-*, Keep-Alive, TE, Trailer,
 * Upgrade), a Host header if the client sent none, and Connection: close.
 * Returns the length written, or -1 if it does not fit in cap. */
long egress_request_upstream_head(const char *buf, const eg_request *req, char *out, size_t cap);

#endif
