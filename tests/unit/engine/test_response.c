/* Parsing the engine's answers: error bodies, JSON bodies, progress
 * streams, HTTP response heads, URL encoding of filters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "engine/path.h"
#include "engine/response.h"

static sm_error err;

static int from(long status, const char *body) {
  sm_error_clear(&err);
  return engine_error_from_response(status, body, body ? strlen(body) : 0, "POST /x", &err);
}

static void test_error_json(void **s) {
  (void)s;
  assert_int_equal(from(404, "{\"message\":\"No such container: abc\"}\n"), SM_ENOTFOUND);
  assert_string_equal(err.message, "POST /x: engine answered 404: No such container: abc");
  assert_int_equal(err.http_status, 404);
  assert_int_equal(from(409, "{\"message\":\"Conflict. The container name \\\"/n\\\" is already in use\"}"),
                   SM_ECONFLICT);
  assert_non_null(strstr(err.message, "already in use"));
  assert_int_equal(err.http_status, 409);
  assert_int_equal(from(500, "{\"message\":\"driver failed\"}"), SM_EENGINE);
  assert_int_equal(err.http_status, 500);
  assert_non_null(strstr(err.message, "driver failed"));
  assert_int_equal(from(400, "{\"message\":\"bad\\nline\\u0001\"}"), SM_EENGINE);
  assert_non_null(strstr(err.message, "bad line?"));
}

static void test_error_not_json(void **s) {
  (void)s;
  assert_int_equal(from(502, "<html>Bad Gateway</html>"), SM_EENGINE);
  assert_non_null(strstr(err.message, "<html>Bad Gateway</html>"));
  assert_int_equal(from(404, "page not found\n"), SM_ENOTFOUND);
  assert_non_null(strstr(err.message, "page not found"));
  assert_int_equal(from(500, ""), SM_EENGINE);
  assert_non_null(strstr(err.message, "no message"));
  assert_int_equal(from(500, NULL), SM_EENGINE);
  /* JSON without a message, or with a non-string one. */
  assert_int_equal(from(500, "{\"message\":42}"), SM_EENGINE);
  assert_non_null(strstr(err.message, "{\"message\":42}"));
  /* A long body is cut, never overflows the message. */
  char big[5000];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(from(500, big), SM_EENGINE);
  assert_true(strlen(err.message) < SM_ERROR_MESSAGE_MAX);
  /* Binary garbage becomes printable. */
  const char bin[] = {'\x01', '\x02', 'o', 'k', '\x7f', '\0'};
  assert_int_equal(from(500, bin), SM_EENGINE);
  assert_non_null(strstr(err.message, "??ok?"));
}

static void test_json_body(void **s) {
  (void)s;
  json_object *o = NULL;
  const char *good = "  {\"Id\":\"abc\",\"Warnings\":[]}\r\n";
  assert_int_equal(engine_parse_json_body(good, strlen(good), "w", &o, &err), 0);
  assert_non_null(o);
  json_object_put(o);
  assert_int_equal(engine_parse_json_body("", 0, "w", &o, &err), 0);
  assert_null(o);
  assert_int_equal(engine_parse_json_body(" \n", 2, "w", &o, &err), 0);
  assert_null(o);
  const char *bad[] = {"{\"Id\":", "{\"Id\":\"abc\"} trailing", "not json", "{\"a\":1}}",
                       "[1,2", "\"unterminated"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (engine_parse_json_body(bad[i], strlen(bad[i]), "GET /v", &o, &err) != SM_EPROTOCOL)
      fail_msg("accepted '%s'", bad[i]);
    assert_null(o);
    assert_non_null(strstr(err.message, "GET /v"));
  }
  /* Too deep a nesting is refused, not a stack overflow. */
  char deep[400];
  memset(deep, '[', 200);
  memset(deep + 200, ']', 200);
  assert_int_equal(engine_parse_json_body(deep, sizeof deep, "w", &o, &err), SM_EPROTOCOL);
  /* Embedded NUL. */
  assert_int_equal(engine_parse_json_body("{}\0{}", 5, "w", &o, &err), SM_EPROTOCOL);
}

static int seen;
static void on_progress(void *ud, json_object *m) {
  (void)ud;
  assert_true(json_object_is_type(m, json_type_object) || json_object_is_type(m, json_type_array));
  seen++;
}

static void test_progress(void **s) {
  (void)s;
  engine_progress p;
  seen = 0;
  engine_progress_init(&p, on_progress, NULL);
  const char *ok = "{\"stream\":\"Step 1/2\"}\r\n{\"stream\":\"Step 2/2\"}\n\n{\"aux\":{\"ID\":\"sha256:1\"}}";
  /* Fed in odd pieces. */
  for (size_t i = 0; i < strlen(ok); i += 7) {
    size_t n = strlen(ok) - i < 7 ? strlen(ok) - i : 7;
    assert_int_equal(engine_progress_feed(&p, ok + i, n), 0);
  }
  assert_int_equal(engine_progress_finish(&p, "image build", &err), 0);
  assert_int_equal(seen, 3);
  engine_progress_dispose(&p);

  engine_progress_init(&p, NULL, NULL);
  const char *bad = "{\"stream\":\"Step 1/2\"}\n"
                    "{\"errorDetail\":{\"code\":1,\"message\":\"RUN failed: exit 7\"},"
                    "\"error\":\"RUN failed: exit 7\"}\n";
  assert_int_equal(engine_progress_feed(&p, bad, strlen(bad)), 0);
  assert_int_equal(engine_progress_finish(&p, "image build", &err), SM_EENGINE);
  assert_string_equal(err.message, "image build: RUN failed: exit 7");
  engine_progress_dispose(&p);

  engine_progress_init(&p, NULL, NULL);
  const char *only_error = "{\"error\":\"no space left\"}";
  assert_int_equal(engine_progress_feed(&p, only_error, strlen(only_error)), 0);
  assert_int_equal(engine_progress_finish(&p, "image import", &err), SM_EENGINE);
  assert_non_null(strstr(err.message, "no space left"));
  engine_progress_dispose(&p);

  engine_progress_init(&p, NULL, NULL);
  assert_int_equal(engine_progress_feed(&p, "{\"stream\":\n", 11), 0);
  assert_int_equal(engine_progress_finish(&p, "image build", &err), SM_EPROTOCOL);
  engine_progress_dispose(&p);

  /* A line longer than the cap. */
  engine_progress_init(&p, NULL, NULL);
  static char chunk[65536];
  memset(chunk, 'a', sizeof chunk);
  int rc = 0;
  for (int i = 0; i < 20 && rc == 0; i++) rc = engine_progress_feed(&p, chunk, sizeof chunk);
  assert_int_equal(rc, SM_ETOOBIG);
  assert_int_equal(engine_progress_finish(&p, "image build", &err), SM_ETOOBIG);
  engine_progress_dispose(&p);
}

static void test_http_head(void **s) {
  (void)s;
  int st = 0, ch = 0;
  size_t hl = 0;
  long long cl = 0;
  const char *up = "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
                   "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n\x01\x00";
  assert_int_equal(engine_http_parse_head(up, strlen(up) + 1, &st, &hl, &cl, &ch, NULL), 1);
  assert_int_equal(st, 101);
  assert_int_equal(hl, strlen(up) - 1);
  assert_int_equal(cl, -1);
  const char *nf = "HTTP/1.1 404 Not Found\r\ncontent-length: 42\r\n\r\n";
  assert_int_equal(engine_http_parse_head(nf, strlen(nf), &st, &hl, &cl, &ch, NULL), 1);
  assert_int_equal(st, 404);
  assert_int_equal(cl, 42);
  const char *chunked = "HTTP/1.1 500 x\r\nTransfer-Encoding: chunked\r\n\r\n";
  assert_int_equal(engine_http_parse_head(chunked, strlen(chunked), &st, &hl, &cl, &ch, NULL), 1);
  assert_int_equal(ch, 1);
  /* Incomplete: more bytes needed, at every cut. */
  for (size_t i = 0; i < strlen(nf); i++)
    assert_int_equal(engine_http_parse_head(nf, i, &st, &hl, &cl, &ch, NULL), 0);
  const char *bad[] = {"SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n",
                       "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
                       "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
                       "HTTP/2 200\r\n\r\n", "HTTP/1.1 099 x\r\n\r\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (engine_http_parse_head(bad[i], strlen(bad[i]), &st, &hl, &cl, &ch, NULL) != SM_EPROTOCOL)
      fail_msg("accepted '%s'", bad[i]);
  /* A head that never ends is refused at the cap instead of awaited. */
  static char endless[ENGINE_MAX_HTTP_HEAD + 10];
  memset(endless, 'a', sizeof endless);
  memcpy(endless, "HTTP/1.1 200 OK\r\nX: ", 20);
  assert_int_equal(engine_http_parse_head(endless, sizeof endless, &st, &hl, &cl, &ch, NULL),
                   SM_EPROTOCOL);
}

static void test_url_and_filters(void **s) {
  (void)s;
  common_buf b;
  common_buf_init(&b, 4096);
  assert_int_equal(engine_url_escape(&b, "a b/c:d?e&f=g", NULL), 0);
  assert_string_equal(b.data, "a%20b%2Fc%3Ad%3Fe%26f%3Dg");
  common_buf_reset(&b);
  assert_int_equal(engine_url_escape(&b, "sandman/minimal:latest", "/:@"), 0);
  assert_string_equal(b.data, "sandman/minimal:latest");
  common_buf_reset(&b);
  const char *labels[] = {"io.sandman.managed=true", "io.sandman.instance=a b"};
  assert_int_equal(engine_label_filters(&b, labels, 2, NULL), 0);
  assert_string_equal(b.data,
                      "filters=%7B%22label%22%3A%5B%22io.sandman.managed%3Dtrue%22%2C%22io."
                      "sandman.instance%3Da%20b%22%5D%7D");
  common_buf_dispose(&b);
  assert_int_equal(engine_check_ref("", "container id", &err), SM_EINVAL);
  assert_int_equal(engine_check_ref(NULL, "container id", &err), SM_EINVAL);
  assert_int_equal(engine_check_ref("a\nb", "container id", &err), SM_EINVAL);
  assert_int_equal(engine_check_ref("abc", "container id", &err), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_json),  cmocka_unit_test(test_error_not_json),
      cmocka_unit_test(test_json_body),   cmocka_unit_test(test_progress),
      cmocka_unit_test(test_http_head),   cmocka_unit_test(test_url_and_filters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
