/* The answer of a sandbox's server as the ports route reads it as it
 * streams (src/lib/server/port_http.c): the head's status and how its body
 * ends, the headers passed on (hop-by-hop ones never), a chunked body
 * undone piece by piece whatever the cuts, a broken answer refused; the
 * request headers the runner owns never passed on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "server/port_http.h"

static int head(const char *s, int head_method, port_http_head *h) {
  long n = server_port_http_head_end(s, strlen(s));
  if (n <= 0) return -1;
  return server_port_http_head_parse(s, (size_t)n, head_method, h);
}

static void head_end(void **state) {
  (void)state;
  assert_int_equal(server_port_http_head_end("HTTP/1.1 200 OK\r\n", 17), 0);
  assert_int_equal(server_port_http_head_end("HTTP/1.1 200 OK\r\n\r\nbody", 23), 19);
  assert_int_equal(server_port_http_head_end("HTTP/1.1 200 OK\n\nbody", 21), 17);
  static char big[PORT_HTTP_HEAD_MAX + 10];
  memset(big, 'a', sizeof big);
  assert_int_equal(server_port_http_head_end(big, sizeof big), -1);
}

static void body_modes(void **state) {
  (void)state;
  port_http_head h;
  assert_int_equal(head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 0, &h), 0);
  assert_int_equal(h.status, 200);
  assert_int_equal(h.body, PORT_BODY_LENGTH);
  assert_int_equal(h.length, 5);
  assert_int_equal(head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 1, &h), 0); /* HEAD's */
  assert_int_equal(h.body, PORT_BODY_NONE);
  assert_int_equal(head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, &h), 0);
  assert_int_equal(h.body, PORT_BODY_CHUNKED);
  assert_int_equal(head("HTTP/1.0 200 OK\r\n\r\n", 0, &h), 0);
  assert_int_equal(h.body, PORT_BODY_CLOSE);
  assert_int_equal(head("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", 0, &h), 0);
  assert_int_equal(h.body, PORT_BODY_NONE);
  assert_int_equal(head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 0, &h), 0);
  assert_int_equal(h.status, 101);
  assert_int_equal(h.body, PORT_BODY_NONE);
}

static void refused(void **state) {
  (void)state;
  port_http_head h;
  assert_int_equal(head("SSH-2.0-OpenSSH\r\n\r\n", 0, &h), -1);
  assert_int_equal(head("HTTP/1.1 099 X\r\n\r\n", 0, &h), -1);
  assert_int_equal(head("HTTP/1.1 2x0 X\r\n\r\n", 0, &h), -1);
  assert_int_equal(head("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, &h), -1);
  assert_int_equal(head("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n", 0, &h), -1);
  /* Both a length and chunked: a request smuggler's answer. */
  assert_int_equal(
      head("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", 0, &h), -1);
}

typedef struct seen {
  char text[1024];
} seen;

static void note(void *ud, const char *name, const char *value) {
  seen *s = ud;
  size_t n = strlen(s->text);
  snprintf(s->text + n, sizeof s->text - n, "%s=%s|", name, value);
}

static void passed_headers(void **state) {
  (void)state;
  const char *a = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: a=1\r\n"
                  "Set-Cookie: b=2\r\nCache-Control: max-age=60\r\nETag: \"x\"\r\n"
                  "Connection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
                  "Transfer-Encoding: chunked\r\nUpgrade: h2c\r\nX-Request-Id: theirs\r\n"
                  "Location: /next\r\n\r\n";
  seen s = {""};
  server_port_http_answer_headers(a, strlen(a), note, &s);
  assert_string_equal(s.text, "Content-Type=text/html|Set-Cookie=a=1|Set-Cookie=b=2|"
                              "Cache-Control=max-age=60|ETag=\"x\"|Location=/next|");
}

typedef struct sink {
  char data[256];
  size_t len;
} sink;

static int put(void *ud, const char *d, size_t n) {
  sink *k = ud;
  if (k->len + n > sizeof k->data) return -1;
  memcpy(k->data + k->len, d, n);
  k->len += n;
  return 0;
}

/* Feeds body in pieces of cut bytes: the decoder's result. */
static int dechunk(const char *body, size_t cut, sink *k, size_t *used_total) {
  port_http_dechunk d;
  memset(&d, 0, sizeof d);
  memset(k, 0, sizeof *k);
  size_t len = strlen(body), at = 0;
  int rc = 0;
  while (at < len && rc == 0) {
    size_t n = len - at < cut ? len - at : cut, used = 0;
    rc = server_port_http_dechunk(&d, body + at, n, &used, put, k);
    at += used;
  }
  *used_total = at;
  return rc;
}

static void chunked(void **state) {
  (void)state;
  const char *b = "5\r\nhello\r\n6;x=y\r\n world\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT";
  for (size_t cut = 1; cut <= strlen(b); cut++) {
    sink k;
    size_t used = 0;
    assert_int_equal(dechunk(b, cut, &k, &used), 1);
    assert_int_equal(k.len, 21);
    assert_memory_equal(k.data, "hello world0123456789", 21);
    assert_int_equal(used, strlen(b) - 4); /* what follows is not the body's */
  }
  sink k;
  size_t used;
  assert_int_equal(dechunk("5\r\nhello\r\n", 3, &k, &used), 0); /* not over yet */
  assert_int_equal(dechunk("zz\r\nab\r\n", 3, &k, &used), -1);   /* not hex */
  assert_int_equal(dechunk("\r\nab\r\n", 3, &k, &used), -1);     /* no size */
  assert_int_equal(dechunk("2\r\nabX\r\n", 3, &k, &used), -1);   /* no CRLF after data */
  assert_int_equal(dechunk("fffffffffffffffffff\r\n", 50, &k, &used), -1); /* past 2^60 */
}

static void owned_headers(void **state) {
  (void)state;
  assert_int_equal(server_port_http_header_passed("Accept", NULL), 1);
  assert_int_equal(server_port_http_header_passed("Cookie", NULL), 1);
  assert_int_equal(server_port_http_header_passed("Sec-WebSocket-Key", "Upgrade"), 1);
  const char *owned[] = {"authorization", "Host", "Connection", "Upgrade", "Content-Length",
                         "Transfer-Encoding", "X-Sandman-Worker-Key", "Proxy-Authorization"};
  for (size_t i = 0; i < sizeof owned / sizeof *owned; i++)
    assert_int_equal(server_port_http_header_passed(owned[i], NULL), 0);
  assert_int_equal(server_port_http_header_passed("A\r\nB", NULL), 0);
  assert_int_equal(server_port_http_header_passed("X-Mine", "keep-alive, X-Mine"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(head_end),     cmocka_unit_test(body_modes),
      cmocka_unit_test(refused),      cmocka_unit_test(passed_headers),
      cmocka_unit_test(chunked),      cmocka_unit_test(owned_headers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
