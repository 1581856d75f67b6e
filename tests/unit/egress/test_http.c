/* The proxy's request head: what is accepted, what is refused and why, and
 * the head sent upstream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "egress/egress_http.h"

static void test_requests(void **state) {
  (void)state;
  static const struct {
    const char *head;
    int rc; /* egress_request_parse's verdict */
    const char *host;
    int port, is_connect;
    const char *why_has;
  } cases[] = {
      {"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", 1, "allowed.test", 443, 1, NULL},
      {"CONNECT allowed.test:443 HTTP/1.0\r\n\r\n", 1, "allowed.test", 443, 1, NULL},
      {"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 1, "allowed.test", 443, 1, NULL},
      {"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n", 1, "2001:db8::1", 443, 1, NULL},
      {"GET http://allowed.test/x?y=1 HTTP/1.1\r\nHost: allowed.test\r\nUser-Agent: t\r\n\r\n", 1,
       "allowed.test", 80, 0, NULL},
      {"GET http://ALLOWED.test:8080/ HTTP/1.1\r\nHost: allowed.TEST:8080\r\n\r\n", 1, "allowed.test", 8080, 0,
       NULL},
      {"POST http://allowed.test/p HTTP/1.1\r\nHost: allowed.test:80\r\nContent-Length: 5\r\n\r\n", 1,
       "allowed.test", 80, 0, NULL},
      {"GET http://allowed.test/ HTTP/1.0\r\n\r\n", 1, "allowed.test", 80, 0, NULL},
      /* incomplete */
      {"CONNECT allowed.test:443 HTTP/1.1\r\nHost: a", 0, NULL, 0, 0, NULL},
      /* refused */
      {"CONNECT allowed.test HTTP/1.1\r\n\r\n", -1, NULL, 0, 0, "port is required"},
      {"CONNECT allowed.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n", -1, NULL, 0, 0, "disagrees"},
      {"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:8443\r\n\r\n", -1, NULL, 0, 0, "disagrees"},
      {"GET http://allowed.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", -1, NULL, 0, 0, "disagrees"},
      {"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: denied.test\r\n\r\n", -1, NULL, 0, 0,
       "more than one Host"},
      {"GET http://allowed.test/ HTTP/1.1\r\n\r\n", -1, NULL, 0, 0, "without a Host"},
      {"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "not a proxy request"},
      {"GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "use CONNECT"},
      {"GET http://user:pw@allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "user info"},
      {"GET http://allowed.test/#f HTTP/1.1\r\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "fragment"},
      {"GET http://allowed.test/ HTTP/2.0\r\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "HTTP/1.0 and HTTP/1.1"},
      {"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n folded\r\n\r\n", -1, NULL, 0, 0, "folded"},
      {"GET http://allowed.test/ HTTP/1.1\r\nHost : allowed.test\r\n\r\n", -1, NULL, 0, 0, "bad header name"},
      {"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX: a\rb\r\n\r\n", -1, NULL, 0, 0,
       "control byte"},
      {"GET http://allowed.test/ HTTP/1.1\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "line ending"},
      {"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n", -1, NULL,
       0, 0, "Transfer-Encoding"},
      {"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
       -1, NULL, 0, 0, "two different Content-Length"},
      {"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: -1\r\n\r\n", -1, NULL, 0, 0,
       "bad Content-Length"},
      {"GET  http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "bad request line"},
      {"G(T http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "bad method"},
      {"CONNECT 127.0.0.1:22 HTTP/1.1\r\nContent-Length: 3\r\n\r\n", -1, NULL, 0, 0, "CONNECT with a body"},
      {"CONNECT 0x7f.1:443 HTTP/1.1\r\n\r\n", -1, NULL, 0, 0, "short-form address"},
      {"GET http://allowed.test/\x01 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", -1, NULL, 0, 0, "control"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    eg_request r;
    char why[EG_WHY_MAX] = "";
    int rc = egress_request_parse(cases[i].head, strlen(cases[i].head), &r, why, sizeof why);
    if (rc != cases[i].rc) fail_msg("case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc, why);
    if (rc == 1) {
      assert_string_equal(r.target.host, cases[i].host);
      assert_int_equal(r.target.port, cases[i].port);
      assert_int_equal(r.is_connect, cases[i].is_connect);
      assert_int_equal(r.head_len, strlen(cases[i].head));
    }
    if (cases[i].why_has && strstr(why, cases[i].why_has) == NULL)
      fail_msg("case %zu: why '%s' lacks '%s'", i, why, cases[i].why_has);
  }
}

static void test_caps(void **state) {
  (void)state;
  static char big[EG_HEAD_MAX + 100];
  memset(big, 'a', sizeof big);
  memcpy(big, "GET http://a.test/ HTTP/1.1\r\nX: ", 32);
  eg_request r;
  char why[EG_WHY_MAX];
  assert_int_equal(egress_request_parse(big, sizeof big, &r, why, sizeof why), -2);
  /* Too many header lines. */
  static char many[EG_HEAD_MAX];
  size_t n = (size_t)snprintf(many, sizeof many, "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n");
  for (int i = 0; i < EG_HEADERS_MAX + 5 && n + 10 < sizeof many; i++) n += (size_t)snprintf(many + n, sizeof many - n, "X%d: y\r\n", i);
  n += (size_t)snprintf(many + n, sizeof many - n, "\r\n");
  assert_int_equal(egress_request_parse(many, n, &r, why, sizeof why), -2);
  /* NUL before the head is complete: refused at once. */
  assert_int_equal(egress_request_parse("GET \0x", 6, &r, why, sizeof why), -1);
}

static void test_upstream_head(void **state) {
  (void)state;
  const char *head =
      "GET http://allowed.test:8080/a/b?c=d HTTP/1.1\r\n"
      "Host: allowed.test:8080\r\n"
      "Proxy-Connection: keep-alive\r\n"
      "Proxy-Authorization: Basic c2VjcmV0\r\n"
      "Connection: keep-alive, X-Drop\r\n"
      "X-Drop: 1\r\n"
      "Accept: */*\r\n"
      "\r\n";
  eg_request r;
  char why[EG_WHY_MAX], out[4096];
  assert_int_equal(egress_request_parse(head, strlen(head), &r, why, sizeof why), 1);
  long n = egress_request_upstream_head(head, &r, out, sizeof out);
  assert_true(n > 0);
  out[n] = '\0';
  assert_string_equal(out,
                      "GET /a/b?c=d HTTP/1.1\r\n"
                      "Host: allowed.test:8080\r\n"
                      "Accept: */*\r\n"
                      "Connection: close\r\n\r\n");
  /* HTTP/1.0 without Host: one is added from the target; "http://h?q" -> "/?q". */
  const char *h10 = "GET http://allowed.test?q HTTP/1.0\r\n\r\n";
  assert_int_equal(egress_request_parse(h10, strlen(h10), &r, why, sizeof why), 1);
  n = egress_request_upstream_head(h10, &r, out, sizeof out);
  assert_true(n > 0);
  out[n] = '\0';
  assert_string_equal(out, "GET /?q HTTP/1.1\r\nHost: allowed.test:80\r\nConnection: close\r\n\r\n");
  assert_int_equal(egress_request_upstream_head(head, &r, out, 10), -1);
}

/* Issue 25, finding 10: a Connection header that names a framing header
 * (Content-Length, Transfer-Encoding) or Host would have the proxy drop it
 * from the head it sends upstream while still forwarding the body it
 * framed: the server would read that body as a second request. Such a
 * request is refused; and the head sent upstream never loses those headers,
 * whatever Connection says. */
static void test_connection_names_framing(void **state) {
  (void)state;
  static const char *const refused[] = {
      "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\n"
      "Connection: Content-Length\r\n\r\n",
      "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\n"
      "Connection: keep-alive , content-length\r\n\r\n",
      "GET http://allowed.test/ HTTP/1.1\r\nConnection: close, HOST\r\nHost: allowed.test\r\n\r\n",
      "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n"
      "Connection: Transfer-Encoding\r\n\r\n",
      "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\nConnection: host\r\n\r\n",
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    eg_request r;
    char why[EG_WHY_MAX] = "";
    int rc = egress_request_parse(refused[i], strlen(refused[i]), &r, why, sizeof why);
    if (rc != -1) fail_msg("case %zu: rc %d, want -1 (refused)", i, rc);
    if (strstr(why, "Connection header names") == NULL) fail_msg("case %zu: why '%s'", i, why);
  }
  /* Names that only look alike are hop-by-hop as before. */
  const char *ok = "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 2\r\n"
                   "Connection: Content-Length-X, X-Host\r\nContent-Length-X: 1\r\nX-Host: h\r\n\r\n";
  eg_request r;
  char why[EG_WHY_MAX], out[4096];
  assert_int_equal(egress_request_parse(ok, strlen(ok), &r, why, sizeof why), 1);
  long n = egress_request_upstream_head(ok, &r, out, sizeof out);
  assert_true(n > 0);
  out[n] = '\0';
  assert_string_equal(out, "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 2\r\nConnection: close\r\n\r\n");
  /* Built by hand past the parser: the framing headers stay all the same. */
  const char *raw = "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 2\r\n"
                    "Connection: content-length, host, transfer-encoding\r\n\r\n";
  memset(&r, 0, sizeof r);
  r.head_len = strlen(raw);
  r.has_host = 1;
  snprintf(r.method, sizeof r.method, "POST");
  r.path_off = (size_t)(strstr(raw, "/ HTTP") - raw);
  r.path_len = 1;
  n = egress_request_upstream_head(raw, &r, out, sizeof out);
  assert_true(n > 0);
  out[n] = '\0';
  assert_string_equal(out, "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 2\r\nConnection: close\r\n\r\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_requests),
      cmocka_unit_test(test_caps),
      cmocka_unit_test(test_upstream_head),
      cmocka_unit_test(test_connection_names_framing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
