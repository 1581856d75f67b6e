/* The answer of a sandbox's server as the ports route reads it
 * (src/lib/server/port_http.c): status, the headers passed on, the body by
 * Content-Length, chunked or to the end; a broken answer refused; the
 * request headers the runner owns never passed on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "server/port_http.h"

static int parse(const char *s, port_http_answer *a) {
  return server_port_http_parse(s, strlen(s), 0, a);
}

static void no_body(void **state) {
  (void)state;
  port_http_answer a;
  const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
  assert_int_equal(server_port_http_parse(h, strlen(h), 1, &a), 0); /* a HEAD's */
  assert_int_equal(a.body_len, 0);
  server_port_http_answer_dispose(&a);
  h = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  assert_int_equal(server_port_http_parse(h, strlen(h), 1, &a), 0);
  assert_int_equal(a.body_len, 0);
  server_port_http_answer_dispose(&a);
  assert_int_equal(parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", &a), 0);
  assert_int_equal(a.body_len, 0);
  server_port_http_answer_dispose(&a);
}

static void by_length(void **state) {
  (void)state;
  port_http_answer a;
  assert_int_equal(parse("HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n"
                         "\r\nhello and more",
                         &a),
                   0);
  assert_int_equal(a.status, 200);
  assert_string_equal(a.content_type, "text/html");
  assert_int_equal(a.body_len, 5);
  assert_memory_equal(a.body, "hello", 5);
  server_port_http_answer_dispose(&a);
  assert_int_equal(parse("HTTP/1.1 302 Found\nLocation: /next\n\nrest", &a), 0);
  assert_int_equal(a.status, 302);
  assert_string_equal(a.location, "/next");
  assert_string_equal(a.body, "rest");
  server_port_http_answer_dispose(&a);
}

static void chunked(void **state) {
  (void)state;
  port_http_answer a;
  assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n",
                         &a),
                   0);
  assert_string_equal(a.body, "hello world");
  assert_int_equal(a.body_len, 11);
  server_port_http_answer_dispose(&a);
  /* Cut before its last chunk, or a chunk longer than what came. */
  assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", &a),
                   -1);
  assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nab\r\n", &a),
                   -1);
}

static void refused(void **state) {
  (void)state;
  port_http_answer a;
  assert_int_equal(parse("", &a), -1);
  assert_int_equal(parse("SSH-2.0-OpenSSH\r\n\r\n", &a), -1);
  assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", &a), -1);      /* no end */
  assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", &a), -1); /* short */
  assert_int_equal(parse("HTTP/1.1 099 X\r\n\r\n", &a), -1);
  assert_int_equal(parse("HTTP/1.1 2x0 X\r\n\r\n", &a), -1);
}

static void owned_headers(void **state) {
  (void)state;
  assert_int_equal(server_port_http_header_passed("Accept"), 1);
  assert_int_equal(server_port_http_header_passed("Cookie"), 1);
  const char *owned[] = {"authorization", "Host", "Connection", "Upgrade", "Content-Length",
                         "Transfer-Encoding", "X-Sandman-Worker-Key", "Proxy-Authorization"};
  for (size_t i = 0; i < sizeof owned / sizeof *owned; i++)
    assert_int_equal(server_port_http_header_passed(owned[i]), 0);
  assert_int_equal(server_port_http_header_passed("A\r\nB"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(by_length),
      cmocka_unit_test(chunked),
      cmocka_unit_test(no_body),
      cmocka_unit_test(refused),
      cmocka_unit_test(owned_headers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
