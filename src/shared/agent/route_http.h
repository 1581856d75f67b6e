/* The little the host-tool route's relay must know of an HTTP/1.1 request:
 * where its head ends and how long its body is, so that it can forward the
 * whole request, untouched, as one frame (the host parses it again, as
 * untrusted input). Everything else is the host's business. libc only: it
 * is built into sandman-agent and, for its unit tests, the library. */
#ifndef SANDMAN_AGENT_ROUTE_HTTP_H
#define SANDMAN_AGENT_ROUTE_HTTP_H

#include <stddef.h>

/* The most a request head may take (request line and headers). */
#define ROUTE_HEAD_MAX (64u << 10)

typedef struct route_head {
  size_t head_len;   /* through the blank line */
  size_t body_len;   /* Content-Length, 0 without one */
  int expect_continue; /* "Expect: 100-continue": the client waits for a 100 */
} route_head;

/* Reads the head in buf[0..len) (what has arrived so far). Returns 0 when
 * more is needed, 1 when the head is complete (out filled), or the HTTP
 * status the relay answers itself: 400 (malformed request line or
 * Content-Length), 411 (Transfer-Encoding: bodies must come with a
 * Content-Length), 413 (head and body over total_max), 431 (head over
 * ROUTE_HEAD_MAX). */
int agent_route_http_head(const char *buf, size_t len, size_t total_max, route_head *out);

/* A complete response with status and a JSON body {"error": message}
 * (message: plain ASCII, no quotes) into out; its length, or 0 if it does
 * not fit. */
size_t agent_route_http_error(int status, const char *message, char *out, size_t cap);

#endif
