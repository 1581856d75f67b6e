/* The host-tool route's pieces without an engine: the relay's reading of a
 * request head (where it ends, the body's length, what it refuses itself),
 * its own answers, the route's frame types and caps, and sandman-tools'
 * JSON reader and writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/hostroute.h>

#include "agent/frame.h"
#include "agent/json_mini.h"
#include "agent/route_http.h"

#include "support/xalloc.h"

#define MAX (4u << 20)

static int head(const char *text, route_head *h) {
  return agent_route_http_head(text, strlen(text), MAX, h);
}

static void test_complete_heads(void **state) {
  (void)state;
  route_head h;
  const char *get = "GET /v1/tools HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(head(get, &h), 1);
  assert_int_equal(h.head_len, strlen(get));
  assert_int_equal(h.body_len, 0);
  assert_int_equal(h.expect_continue, 0);

  const char *post = "POST /v1/tools/a%20b/call HTTP/1.0\r\ncontent-LENGTH:  17 \r\n"
                     "Expect: 100-Continue\r\n\r\n{\"arguments\": {}}";
  assert_int_equal(head(post, &h), 1);
  assert_int_equal(h.head_len, strlen(post) - 17);
  assert_int_equal(h.body_len, 17);
  assert_int_equal(h.expect_continue, 1);
  /* The same length twice is fine; bytes past the head do not matter. */
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabcdef", &h),
                   1);
  assert_int_equal(h.body_len, 3);
}

static void test_incomplete_heads_wait(void **state) {
  (void)state;
  route_head h;
  const char *full = "GET /v1/tools HTTP/1.1\r\nHost: x\r\n\r\n";
  for (size_t n = 0; n < strlen(full); n++)
    assert_int_equal(agent_route_http_head(full, n, MAX, &h), 0);
}

static void test_refusals(void **state) {
  (void)state;
  route_head h;
  /* Chunked (any Transfer-Encoding): the relay wants a Content-Length. */
  assert_int_equal(head("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &h), 411);
  assert_int_equal(head("POST / HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n\r\n", &h), 411);
  /* Over the cap: the body alone, or head and body together. */
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length: 4194305\r\n\r\n", &h), 413);
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", &h),
                   413);
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length: 4194304\r\n\r\n", &h), 413);
  /* Malformed lengths and lines. */
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &h), 400);
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", &h), 400);
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", &h), 400);
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", &h),
                   400);
  assert_int_equal(head("POST / HTTP/1.1\r\nContent-Length : 3\r\n\r\n", &h), 400);
  assert_int_equal(head("POST / HTTP/1.1\r\n folded\r\n\r\n", &h), 400);
  assert_int_equal(head("POST / HTTP/1.1\r\nno colon\r\n\r\n", &h), 400);
  assert_int_equal(head("POST / HTTP/1.1\r\nA: b\nc\r\n\r\n", &h), 400);
  assert_int_equal(head("GET /\r\n\r\n", &h), 400);
  assert_int_equal(head("GET / HTTP/2.0\r\n\r\n", &h), 400);
  assert_int_equal(head("GET  / HTTP/1.1\r\n\r\n", &h), 400);
  assert_int_equal(head("GET / x HTTP/1.1\r\n\r\n", &h), 400);
  assert_int_equal(head("\r\n\r\n", &h), 400);
  /* A head without its end within 64 KiB. */
  size_t n = ROUTE_HEAD_MAX + 10;
  char *big = xmalloc(n);
  memset(big, 'a', n);
  memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
  assert_int_equal(agent_route_http_head(big, ROUTE_HEAD_MAX - 1, MAX, &h), 0);
  assert_int_equal(agent_route_http_head(big, ROUTE_HEAD_MAX, MAX, &h), 431);
  assert_int_equal(agent_route_http_head(big, n, MAX, &h), 431);
  free(big);
}

static void test_local_answers(void **state) {
  (void)state;
  char out[512];
  size_t n = agent_route_http_error(413, "too large", out, sizeof out);
  assert_true(n > 0);
  assert_int_equal(strlen(out), n);
  assert_true(strncmp(out, "HTTP/1.1 413 Content Too Large\r\n", 32) == 0);
  const char *body = strstr(out, "\r\n\r\n") + 4;
  assert_string_equal(body, "{\"error\": \"too large\"}\n");
  assert_non_null(strstr(out, "Content-Length: 23\r\n"));
  assert_int_equal(agent_route_http_error(503, "busy", out, 40), 0); /* does not fit */
}

static int got_type, got_calls;
static uint32_t got_id, got_len;

static int on_frame(void *ud, int type, uint32_t id, const unsigned char *p, uint32_t len) {
  (void)ud;
  (void)p;
  got_type = type;
  got_id = id;
  got_len = len;
  got_calls++;
  return 0;
}

static void test_route_frames(void **state) {
  (void)state;
  assert_int_equal(SM_FRAME_ROUTE_REQUEST_MAX, SM_ROUTE_REQUEST_MAX + SM_FRAME_ROUTE_PEER_MAX);
  assert_int_equal(SM_FRAME_ROUTE_RESPONSE_MAX, SM_ROUTE_RESPONSE_MAX);
  assert_int_equal(agent_frame_type_max(SM_FRAME_ROUTE_REQUEST), SM_FRAME_ROUTE_REQUEST_MAX);
  assert_int_equal(agent_frame_type_max(SM_FRAME_ROUTE_RESPONSE), SM_ROUTE_RESPONSE_MAX);
  /* A request frame of connection 7, fed a byte at a time. */
  unsigned char buf[SM_FRAME_HEADER + 5];
  agent_frame_header(buf, SM_FRAME_ROUTE_REQUEST, 7, 5);
  memcpy(buf + SM_FRAME_HEADER, "GET /", 5);
  agent_frame_reader r;
  agent_frame_reader_init(&r, SM_ROUTE_REQUEST_MAX, on_frame, NULL);
  got_calls = 0;
  for (size_t i = 0; i < sizeof buf; i++)
    assert_int_equal(agent_frame_reader_feed(&r, buf + i, 1), 0);
  assert_int_equal(got_calls, 1);
  assert_int_equal(got_type, SM_FRAME_ROUTE_REQUEST);
  assert_int_equal(got_id, 7);
  assert_int_equal(got_len, 5);
  /* Over the request cap: refused by its header alone. */
  agent_frame_header(buf, SM_FRAME_ROUTE_REQUEST, 7, SM_FRAME_ROUTE_REQUEST_MAX + 1);
  agent_frame_reader_dispose(&r);
  agent_frame_reader_init(&r, SM_ROUTE_RESPONSE_MAX, on_frame, NULL);
  assert_int_equal(agent_frame_reader_feed(&r, buf, SM_FRAME_HEADER), -1);
  agent_frame_reader_dispose(&r);
  /* An agent session's reader (caps at SM_FRAME_DATA_MAX) refuses a large one. */
  agent_frame_reader_init(&r, SM_FRAME_DATA_MAX, on_frame, NULL);
  agent_frame_header(buf, SM_FRAME_ROUTE_RESPONSE, 1, SM_FRAME_DATA_MAX + 1);
  assert_int_equal(agent_frame_reader_feed(&r, buf, SM_FRAME_HEADER), -1);
  agent_frame_reader_dispose(&r);
}

static void test_json_reader(void **state) {
  (void)state;
  const char *text = " {\"tools\": [{\"name\": \"a\\u00e9\\ud83d\\ude00\\n\", \"n\": -1.5e3, "
                     "\"ok\": true, \"x\": null, \"o\": {\"k\": [1, 2]}}]} ";
  jm_node *doc = agent_json_parse(text, strlen(text));
  assert_non_null(doc);
  const jm_node *tools = agent_json_get(doc, "tools");
  assert_non_null(tools);
  assert_int_equal(tools->type, JM_ARR);
  const jm_node *t = tools->child;
  assert_string_equal(agent_json_get_str(t, "name"), "a\xc3\xa9\xf0\x9f\x98\x80\n");
  assert_int_equal(agent_json_get(t, "n")->type, JM_NUM);
  assert_int_equal(agent_json_get(t, "n")->raw_len, 6);
  assert_int_equal(agent_json_get(t, "ok")->boolean, 1);
  assert_int_equal(agent_json_get(t, "x")->type, JM_NULL);
  const jm_node *o = agent_json_get(t, "o");
  assert_memory_equal(o->raw, "{\"k\": [1, 2]}", o->raw_len);
  assert_null(agent_json_get_str(t, "missing"));
  agent_json_free(doc);

  const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "tru", "\"\\x\"", "\"a",
                       "\"\\ud800\"", "\"\x01\"", "{} x", "[1] [2]", "-", "1e"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    jm_node *n = agent_json_parse(bad[i], strlen(bad[i]));
    if (n) fail_msg("'%s' parsed", bad[i]);
  }
  /* Nesting is bounded. */
  char deep[2 * (JM_MAX_DEPTH + 2) + 1];
  size_t d = JM_MAX_DEPTH + 2;
  memset(deep, '[', d);
  memset(deep + d, ']', d);
  assert_null(agent_json_parse(deep, 2 * d));
  assert_non_null(doc = agent_json_parse(deep + 2, 2 * (d - 2)));
  agent_json_free(doc);
}

static void test_json_writer(void **state) {
  (void)state;
  jm_buf b = {.max = 64};
  agent_json_buf_json_string(&b, "a\"b\\c\n\t\x01\x7f \xc3\xa9", 12);
  assert_false(b.failed);
  assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f \xc3\xa9\"");
  /* What it writes reads back as what went in. */
  jm_node *n = agent_json_parse(b.data, b.len);
  assert_non_null(n);
  assert_memory_equal(n->str, "a\"b\\c\n\t\x01\x7f \xc3\xa9", 12);
  agent_json_free(n);
  /* Past its cap a buffer fails and keeps what it had. */
  size_t had = b.len;
  agent_json_buf_str(&b, "0123456789012345678901234567890123456789");
  assert_true(b.failed);
  assert_int_equal(b.len, had);
  free(b.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_complete_heads),  cmocka_unit_test(test_incomplete_heads_wait),
      cmocka_unit_test(test_refusals),        cmocka_unit_test(test_local_answers),
      cmocka_unit_test(test_route_frames),    cmocka_unit_test(test_json_reader),
      cmocka_unit_test(test_json_writer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
