/* The MCP session (JSON-RPC handling over a tool provider), the stdio
 * transport over pipes and the streamable HTTP functions, with a provider
 * of two tools: echo (answers its text) and wait (blocks until
 * cancelled). No engine. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/mcp.h>

static const sm_mcp_tool test_tools[] = {
    {"echo", "Echo", "Answers its text",
     "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}",
     NULL, SM_MCP_READ_ONLY | SM_MCP_IDEMPOTENT},
    {"wait", NULL, "Blocks until cancelled", "{\"type\":\"object\"}", NULL, SM_MCP_DESTRUCTIVE},
};

typedef struct stub {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int waiting;   /* wait calls blocked now */
  int freed;
} stub;

static const sm_mcp_tool *stub_tools(void *ud, size_t *n) {
  (void)ud;
  *n = sizeof test_tools / sizeof test_tools[0];
  return test_tools;
}

static int stub_call(void *ud, void *request, const char *name, json_object *args,
                     volatile int *cancel, sm_mcp_result *out, sm_error *err) {
  (void)request;
  stub *s = ud;
  if (strcmp(name, "echo") == 0) {
    json_object *t = NULL;
    if (!json_object_object_get_ex(args, "text", &t) || !json_object_is_type(t, json_type_string))
      return sm_mcp_result_error(out, "text is required");
    return sm_mcp_result_text(out, json_object_get_string(t), (size_t)json_object_get_string_len(t));
  }
  pthread_mutex_lock(&s->mu);
  s->waiting++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  while (!*cancel) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  pthread_mutex_lock(&s->mu);
  s->waiting--;
  pthread_mutex_unlock(&s->mu);
  return SM_ECANCELLED;
}

static void stub_free(void *ud) {
  stub *s = ud;
  s->freed++;
}

static stub the_stub;

static sm_mcp_session *new_session(void) {
  sm_mcp_provider p = {stub_tools, stub_call, stub_free, &the_stub, NULL};
  sm_mcp_server_info info = {"sandman-test", NULL, "1.2.3", "use the tools", 0};
  sm_mcp_session *s = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_session_new(&s, &info, &p, &err), 0);
  return s;
}

/* Sends text, returns the parsed answer (NULL for none). */
static json_object *send(sm_mcp_session *s, const char *text) {
  char *answer = NULL;
  size_t len = 0;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_session_handle(s, text, strlen(text), NULL, &answer, &len, &err), 0);
  if (answer == NULL) return NULL;
  assert_int_equal(strlen(answer), len);
  json_object *o = json_tokener_parse(answer);
  assert_non_null(o);
  free(answer);
  return o;
}

static int error_code(json_object *a) {
  json_object *e = NULL, *c = NULL;
  if (!json_object_object_get_ex(a, "error", &e) || !json_object_object_get_ex(e, "code", &c)) return 0;
  return json_object_get_int(c);
}

static json_object *result(json_object *a) {
  json_object *r = NULL;
  json_object_object_get_ex(a, "result", &r);
  return r;
}

static const char init_msg[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}";

static void test_lifecycle_and_tools(void **state) {
  (void)state;
  sm_mcp_session *s = new_session();
  /* Before initialize, a request naming no protocol version (neither
   * initialize nor 2026-07-28's _meta): only ping; the rest -32602. */
  json_object *a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"tools/list\"}");
  assert_int_equal(error_code(a), -32602);
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}");
  assert_non_null(result(a));
  json_object_put(a);

  a = send(s, init_msg);
  json_object *r = result(a), *v = NULL;
  assert_true(json_object_object_get_ex(r, "protocolVersion", &v));
  assert_string_equal(json_object_get_string(v), "2025-06-18");
  assert_string_equal(sm_mcp_session_protocol(s), "2025-06-18");
  json_object *si = NULL, *name = NULL, *caps = NULL;
  assert_true(json_object_object_get_ex(r, "serverInfo", &si));
  assert_true(json_object_object_get_ex(si, "name", &name));
  assert_string_equal(json_object_get_string(name), "sandman-test");
  assert_true(json_object_object_get_ex(r, "capabilities", &caps));
  assert_true(json_object_object_get_ex(caps, "tools", NULL));
  json_object_put(a);
  /* A second initialize is refused. */
  a = send(s, init_msg);
  assert_int_equal(error_code(a), -32600);
  json_object_put(a);
  assert_null(send(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));

  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{}}");
  json_object *tools = NULL;
  assert_true(json_object_object_get_ex(result(a), "tools", &tools));
  assert_int_equal(json_object_array_length(tools), 2);
  json_object *t0 = json_object_array_get_idx(tools, 0), *ann = NULL, *ro = NULL, *schema = NULL;
  assert_true(json_object_object_get_ex(t0, "annotations", &ann));
  assert_true(json_object_object_get_ex(ann, "readOnlyHint", &ro));
  assert_true(json_object_get_boolean(ro));
  assert_true(json_object_object_get_ex(t0, "inputSchema", &schema));
  assert_true(json_object_is_type(schema, json_type_object));
  json_object_put(a);
  /* One page: no answer has a nextCursor, so any cursor sent is invalid
   * params (-32602), a null one is none. */
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"tools/list\",\"params\":{\"cursor\":\"x\"}}");
  assert_int_equal(error_code(a), -32602);
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"tools/list\",\"params\":{\"cursor\":7}}");
  assert_int_equal(error_code(a), -32602);
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":23,\"method\":\"tools/list\",\"params\":{\"cursor\":null}}");
  assert_true(json_object_object_get_ex(result(a), "tools", NULL));
  json_object_put(a);

  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
              "\"arguments\":{\"text\":\"h\\u00e9llo\"}}}");
  json_object *content = NULL, *isError = NULL, *id = NULL;
  assert_true(json_object_object_get_ex(result(a), "content", &content));
  json_object *text = NULL;
  assert_true(json_object_object_get_ex(json_object_array_get_idx(content, 0), "text", &text));
  assert_string_equal(json_object_get_string(text), "h\xc3\xa9llo");
  assert_true(json_object_object_get_ex(result(a), "isError", &isError));
  assert_false(json_object_get_boolean(isError));
  assert_true(json_object_object_get_ex(a, "id", &id));
  assert_int_equal(json_object_get_int(id), 3);
  json_object_put(a);
  /* A tool's own failure is a result with isError, not a protocol error. */
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}");
  assert_true(json_object_object_get_ex(result(a), "isError", &isError));
  assert_true(json_object_get_boolean(isError));
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}");
  assert_int_equal(error_code(a), -32602);
  json_object_put(a);
  sm_mcp_session_free(s);
  assert_int_equal(the_stub.freed, 1);
  the_stub.freed = 0;
}

static void test_malformed_messages(void **state) {
  (void)state;
  sm_mcp_session *s = new_session();
  json_object_put(send(s, init_msg));
  static const struct {
    const char *msg;
    int code;
  } cases[] = {
      {"{", -32700},
      {"not json", -32700},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing", -32700},
      {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600},
      {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", -32600},
      {"{\"id\":1,\"method\":\"ping\"}", -32600},
      {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", -32600},
      {"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", -32600},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", -32600},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}", -32602},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
       "\"arguments\":[1]}}", -32602},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}", -32601},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}", -32601},
      {"\"str\"", -32600},
      /* a repeated key (issue 25): json-c would keep the last one */
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"method\":\"tools/list\"}", -32700},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
       "\"arguments\":{\"a\":\"x\",\"\\u0061\":\"y\"}}}", -32700},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_object *a = send(s, cases[i].msg);
    if (a == NULL) fail_msg("no answer to %s", cases[i].msg);
    if (error_code(a) != cases[i].code)
      fail_msg("%s: code %d, wanted %d", cases[i].msg, error_code(a), cases[i].code);
    json_object_put(a);
  }
  /* Notifications and responses are never answered. */
  assert_null(send(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}"));
  assert_null(send(s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}"));
  /* Deep nesting is refused, not a crash. */
  char deep[4096];
  size_t o = 0;
  for (int i = 0; i < 1000; i++) deep[o++] = '[';
  deep[o] = '\0';
  json_object *a = send(s, deep);
  assert_int_equal(error_code(a), -32700);
  json_object_put(a);
  /* An unknown protocol version gets ours. */
  sm_mcp_session *s2 = new_session();
  a = send(s2, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
               "{\"protocolVersion\":\"1999-01-01\"}}");
  json_object *v = NULL;
  assert_true(json_object_object_get_ex(result(a), "protocolVersion", &v));
  assert_string_equal(json_object_get_string(v), SM_MCP_PROTOCOL_LATEST);
  json_object_put(a);
  sm_mcp_session_free(s2);
  sm_mcp_session_free(s);
  the_stub.freed = 0;
}

typedef struct bg {
  sm_mcp_session *s;
  const char *msg;
  json_object *answer;
  volatile int *cancel;
} bg;

static void *bg_send(void *p) {
  bg *b = p;
  char *answer = NULL;
  size_t len = 0;
  sm_error err = SM_ERROR_INIT;
  sm_mcp_session_handle(b->s, b->msg, strlen(b->msg), b->cancel, &answer, &len, &err);
  b->answer = answer ? json_tokener_parse(answer) : NULL;
  free(answer);
  return NULL;
}

static void wait_for_waiters(int n) {
  pthread_mutex_lock(&the_stub.mu);
  while (the_stub.waiting < n) pthread_cond_wait(&the_stub.cv, &the_stub.mu);
  pthread_mutex_unlock(&the_stub.mu);
}

static void test_cancellation(void **state) {
  (void)state;
  sm_mcp_session *s = new_session();
  json_object_put(send(s, init_msg));
  bg b = {s, "{\"jsonrpc\":\"2.0\",\"id\":\"w1\",\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}", NULL, NULL};
  pthread_t t;
  pthread_create(&t, NULL, bg_send, &b);
  wait_for_waiters(1);
  /* Other requests are answered while the call waits. */
  json_object *a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
  assert_non_null(result(a));
  json_object_put(a);
  assert_null(send(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
                      "{\"requestId\":\"w1\",\"reason\":\"user\"}}"));
  pthread_join(t, NULL);
  assert_int_equal(error_code(b.answer), -32800);
  json_object_put(b.answer);
  /* The transport's flag cancels too. */
  volatile int flag = 0;
  bg b2 = {s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}", NULL, &flag};
  pthread_create(&t, NULL, bg_send, &b2);
  wait_for_waiters(1);
  flag = 1;
  pthread_join(t, NULL);
  assert_int_equal(error_code(b2.answer), -32800);
  json_object_put(b2.answer);
  /* cancel_all: in flight and later. */
  bg b3 = {s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}", NULL, NULL};
  pthread_create(&t, NULL, bg_send, &b3);
  wait_for_waiters(1);
  sm_mcp_session_cancel_all(s);
  pthread_join(t, NULL);
  assert_int_equal(error_code(b3.answer), -32800);
  json_object_put(b3.answer);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}");
  assert_int_equal(error_code(a), -32800);
  json_object_put(a);
  sm_mcp_session_free(s);
  the_stub.freed = 0;
}

static void test_too_many_calls(void **state) {
  (void)state;
  sm_mcp_session *s = new_session();
  json_object_put(send(s, init_msg));
  bg b[SM_MCP_MAX_CALLS_IN_FLIGHT];
  pthread_t t[SM_MCP_MAX_CALLS_IN_FLIGHT];
  char msgs[SM_MCP_MAX_CALLS_IN_FLIGHT][128];
  for (int i = 0; i < SM_MCP_MAX_CALLS_IN_FLIGHT; i++) {
    snprintf(msgs[i], sizeof msgs[i],
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}", i);
    b[i] = (bg){s, msgs[i], NULL, NULL};
    pthread_create(&t[i], NULL, bg_send, &b[i]);
  }
  wait_for_waiters(SM_MCP_MAX_CALLS_IN_FLIGHT);
  json_object *a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}");
  assert_int_equal(error_code(a), -32000);
  json_object_put(a);
  sm_mcp_session_cancel_all(s);
  for (int i = 0; i < SM_MCP_MAX_CALLS_IN_FLIGHT; i++) {
    pthread_join(t[i], NULL);
    json_object_put(b[i].answer);
  }
  sm_mcp_session_free(s);
  the_stub.freed = 0;
}

static const sm_mcp_tool bad_name[] = {{"has space", NULL, "", "{}", NULL, 0}};
static const sm_mcp_tool bad_schema[] = {{"ok", NULL, "", "[1]", NULL, 0}};
static const sm_mcp_tool *bad_name_tools(void *ud, size_t *n) {
  (void)ud;
  *n = 1;
  return bad_name;
}
static const sm_mcp_tool *bad_schema_tools(void *ud, size_t *n) {
  (void)ud;
  *n = 1;
  return bad_schema;
}

static void test_bad_tools_refused(void **state) {
  (void)state;
  sm_mcp_server_info info = {"x", NULL, "1", NULL, 0};
  sm_mcp_session *s = NULL;
  sm_error err = SM_ERROR_INIT;
  sm_mcp_provider p1 = {bad_name_tools, stub_call, stub_free, &the_stub, NULL};
  sm_mcp_provider p2 = {bad_schema_tools, stub_call, stub_free, &the_stub, NULL};
  sm_mcp_provider none = {NULL, stub_call, NULL, NULL, NULL};
  assert_int_equal(sm_mcp_session_new(&s, &info, &p1, &err), SM_EINVAL);
  assert_int_equal(sm_mcp_session_new(&s, &info, &p2, &err), SM_EINVAL);
  assert_int_equal(sm_mcp_session_new(&s, &info, &none, &err), SM_EINVAL);
  assert_null(s);
  assert_int_equal(the_stub.freed, 0); /* a failed new leaves the provider to its caller */
}

/* ---- stdio ---- */

static void test_stdio(void **state) {
  (void)state;
  sm_mcp_session *s = new_session();
  int in[2], out[2];
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(out), 0);
  char big[8192];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  char script[16384];
  snprintf(script, sizeof script,
           "%s\n"
           "\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r\n"
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"%s\"}}}\n"
           "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}\n"
           "garbage\n"
           "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}",
           init_msg, big);
  assert_int_equal(write(in[1], script, strlen(script)), (ssize_t)strlen(script));
  close(in[1]); /* the end: the waiting call is cancelled */
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_serve_stdio(s, in[0], out[1], NULL, &err), 0);
  close(out[1]);
  close(in[0]);
  FILE *f = fdopen(out[0], "r");
  char *line = NULL;
  size_t cap = 0;
  int seen[5] = {0}, parse_errors = 0;
  while (getline(&line, &cap, f) > 0) {
    json_object *a = json_tokener_parse(line);
    assert_non_null(a);
    json_object *id = NULL;
    if (json_object_object_get_ex(a, "id", &id) && id != NULL) {
      int i = json_object_get_int(id);
      assert_true(i >= 1 && i <= 4);
      seen[i]++;
      if (i == 2) {
        json_object *content = NULL, *text = NULL;
        assert_true(json_object_object_get_ex(result(a), "content", &content));
        assert_true(json_object_object_get_ex(json_object_array_get_idx(content, 0), "text", &text));
        assert_int_equal(json_object_get_string_len(text), sizeof big - 1);
      }
      if (i == 3) assert_int_equal(error_code(a), -32800);
    } else {
      assert_int_equal(error_code(a), -32700);
      parse_errors++;
    }
    json_object_put(a);
  }
  free(line);
  fclose(f);
  assert_int_equal(seen[1], 1);
  assert_int_equal(seen[2], 1);
  assert_int_equal(seen[3], 1);
  assert_int_equal(seen[4], 1); /* the last line had no newline */
  assert_int_equal(parse_errors, 1);
  sm_mcp_session_free(s);
  the_stub.freed = 0;
}

/* ---- streamable HTTP ---- */

static int factory_calls;
static int factory(void *ud, const char *owner, sm_mcp_session **out, sm_error *err) {
  (void)ud;
  (void)err;
  factory_calls++;
  assert_non_null(owner);
  *out = new_session();
  return 0;
}

static sm_mcp_http_answer post(sm_mcp_http *h, const char *owner, const char *sid, const char *body,
                               const char *accept) {
  sm_mcp_http_request r = {"POST", accept, "application/json", sid, NULL, NULL, body, strlen(body), owner, NULL, NULL, NULL, NULL};
  sm_mcp_http_answer a;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  return a;
}

static void test_http(void **state) {
  (void)state;
  const char *origins[] = {"http://allowed.example"};
  sm_mcp_http_options o = {factory, NULL, 2, 3600, 0, origins, 1, 0};
  sm_mcp_http *h = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_http_new(&h, &o, &err), 0);

  /* Without a session id, only initialize. */
  sm_mcp_http_answer a = post(h, "control", NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
  assert_int_equal(a.status, 400);
  sm_mcp_http_answer_dispose(&a);
  a = post(h, "control", NULL, init_msg, "application/json, text/event-stream");
  assert_int_equal(a.status, 200);
  assert_string_equal(a.content_type, "application/json");
  assert_int_equal(strlen(a.session_id), 64);
  char sid[65];
  snprintf(sid, sizeof sid, "%s", a.session_id);
  sm_mcp_http_answer_dispose(&a);
  assert_int_equal(sm_mcp_http_count(h), 1);

  /* A notification: 202; a request: 200; SSE when only that is accepted. */
  a = post(h, "control", sid, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL);
  assert_int_equal(a.status, 202);
  assert_null(a.body);
  sm_mcp_http_answer_dispose(&a);
  a = post(h, "control", sid, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}", "text/event-stream");
  assert_int_equal(a.status, 200);
  assert_string_equal(a.content_type, "text/event-stream");
  assert_true(strncmp(a.body, "event: message\ndata: {", 22) == 0);
  assert_int_equal(a.body[a.body_len - 1], '\n');
  sm_mcp_http_answer_dispose(&a);
  /* Another owner does not see the session. */
  a = post(h, "worker:k2", sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}", NULL);
  assert_int_equal(a.status, 404);
  sm_mcp_http_answer_dispose(&a);
  a = post(h, "control", "nope", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}", NULL);
  assert_int_equal(a.status, 404);
  sm_mcp_http_answer_dispose(&a);

  /* Headers: content type, accept, protocol version, origin; methods. */
  sm_mcp_http_request r = {"POST", NULL, "text/plain", sid, NULL, NULL, "{}", 2, "control", NULL, NULL, NULL, NULL};
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 415);
  sm_mcp_http_answer_dispose(&a);
  r.content_type = "application/json; charset=utf-8";
  r.accept = "text/html";
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 406);
  sm_mcp_http_answer_dispose(&a);
  r.accept = NULL;
  r.protocol_version = "2099-01-01";
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 400);
  sm_mcp_http_answer_dispose(&a);
  r.protocol_version = "2025-06-18";
  r.origin = "http://evil.example";
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 403);
  sm_mcp_http_answer_dispose(&a);
  r.origin = "http://allowed.example";
  r.body = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}";
  r.body_len = strlen(r.body);
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 200);
  sm_mcp_http_answer_dispose(&a);
  r.method = "GET";
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 405);
  assert_string_equal(a.allow, "POST, DELETE");
  sm_mcp_http_answer_dispose(&a);

  /* The session cap. */
  a = post(h, "control", NULL, init_msg, NULL);
  assert_int_equal(a.status, 200);
  sm_mcp_http_answer_dispose(&a);
  a = post(h, "control", NULL, init_msg, NULL);
  assert_int_equal(a.status, 503);
  sm_mcp_http_answer_dispose(&a);

  /* DELETE ends the session (by its owner only). */
  r = (sm_mcp_http_request){"DELETE", NULL, NULL, sid, NULL, NULL, NULL, 0, "worker:k2", NULL, NULL, NULL, NULL};
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 404);
  sm_mcp_http_answer_dispose(&a);
  r.owner = "control";
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 204);
  sm_mcp_http_answer_dispose(&a);
  assert_int_equal(sm_mcp_http_count(h), 1);
  a = post(h, "control", sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}", NULL);
  assert_int_equal(a.status, 404);
  sm_mcp_http_answer_dispose(&a);
  /* A failed initialize keeps no session. */
  int before = factory_calls;
  a = post(h, "control", NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}", NULL);
  assert_int_equal(a.status, 400);
  assert_int_equal(factory_calls, before + 1);
  assert_int_equal(sm_mcp_http_count(h), 1);
  sm_mcp_http_answer_dispose(&a);
  sm_mcp_http_free(h);
  assert_int_equal(the_stub.freed, 3);
  the_stub.freed = 0;
}

static void test_http_idle_expiry(void **state) {
  (void)state;
  sm_mcp_http_options o = {factory, NULL, 4, 0.001, 0, NULL, 0, 0};
  sm_mcp_http *h = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_http_new(&h, &o, &err), 0);
  sm_mcp_http_answer a = post(h, "control", NULL, init_msg, NULL);
  assert_int_equal(a.status, 200);
  sm_mcp_http_answer_dispose(&a);
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
  sm_mcp_http_expire(h);
  assert_int_equal(sm_mcp_http_count(h), 0);
  assert_int_equal(the_stub.freed, 1);
  /* Any Origin is refused when none is allowed. */
  sm_mcp_http_request r = {"POST", NULL, "application/json", NULL, NULL, "http://localhost", init_msg, strlen(init_msg), "control", NULL, NULL, NULL, NULL};
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 403);
  sm_mcp_http_answer_dispose(&a);
  sm_mcp_http_free(h);
  the_stub.freed = 0;
}

/* A provider whose tools depend on who asks: the request's context (here
 * the caller's name) reaches list and call through the HTTP layer. */
static int who_list(void *ud, void *request, json_object **tools, sm_error *err) {
  (void)ud;
  const char *who = request;
  if (who == NULL) return sm_error_set(err, SM_EPOLICY, "no caller");
  json_object *arr = json_object_new_array(), *t = json_object_new_object();
  char name[64];
  snprintf(name, sizeof name, "tool_of_%s", who);
  json_object_object_add(t, "name", json_object_new_string(name));
  json_object_object_add(t, "inputSchema", json_tokener_parse("{\"type\":\"object\"}"));
  json_object_array_add(arr, t);
  *tools = arr;
  return 0;
}

static int who_call(void *ud, void *request, const char *name, json_object *args,
                    volatile int *cancel, sm_mcp_result *out, sm_error *err) {
  (void)ud;
  (void)args;
  (void)cancel;
  char want[64];
  snprintf(want, sizeof want, "tool_of_%s", request ? (const char *)request : "");
  if (request == NULL || strcmp(name, want) != 0) return SM_ENOTFOUND;
  return sm_mcp_result_text(out, request, strlen(request));
}

static int who_factory(void *ud, const char *owner, sm_mcp_session **out, sm_error *err) {
  (void)ud;
  (void)owner;
  sm_mcp_provider p = {NULL, who_call, NULL, NULL, who_list};
  sm_mcp_server_info info = {"sandman-test", NULL, "1", NULL, 0};
  return sm_mcp_session_new(out, &info, &p, err);
}

static json_object *post_as(sm_mcp_http *h, const char *sid, const char *body, char *who,
                            char *sid_out) {
  sm_mcp_http_request r = {"POST", NULL, "application/json", sid, NULL, NULL,
                           body,   strlen(body), "box-1",  NULL, who, NULL, NULL};
  sm_mcp_http_answer a;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  assert_int_equal(a.status, 200);
  if (sid_out) memcpy(sid_out, a.session_id, sizeof a.session_id);
  json_object *o = json_tokener_parse(a.body);
  sm_mcp_http_answer_dispose(&a);
  return o;
}

static void test_request_context(void **state) {
  (void)state;
  sm_mcp_http_options o = {who_factory, NULL, 4, 3600, 0, NULL, 0, 2};
  sm_mcp_http *h = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_http_new(&h, &o, &err), 0);
  char sid[65];
  char alice[] = "alice", bob[] = "bob";
  json_object_put(post_as(h, NULL, init_msg, alice, sid));
  const char *list = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}";
  /* One session, two callers: each sees its own tools. */
  json_object *a = post_as(h, sid, list, alice, NULL), *tools = NULL, *n = NULL;
  assert_true(json_object_object_get_ex(result(a), "tools", &tools));
  assert_true(json_object_object_get_ex(json_object_array_get_idx(tools, 0), "name", &n));
  assert_string_equal(json_object_get_string(n), "tool_of_alice");
  json_object_put(a);
  a = post_as(h, sid, list, bob, NULL);
  assert_true(json_object_object_get_ex(result(a), "tools", &tools));
  assert_true(json_object_object_get_ex(json_object_array_get_idx(tools, 0), "name", &n));
  assert_string_equal(json_object_get_string(n), "tool_of_bob");
  json_object_put(a);
  /* The call sees the caller of its request; another's tool is unknown. */
  const char *call = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"tool_of_bob\"}}";
  a = post_as(h, sid, call, bob, NULL);
  json_object *content = NULL, *t = NULL;
  assert_true(json_object_object_get_ex(result(a), "content", &content));
  assert_true(json_object_object_get_ex(json_object_array_get_idx(content, 0), "text", &t));
  assert_string_equal(json_object_get_string(t), "bob");
  json_object_put(a);
  a = post_as(h, sid, call, alice, NULL);
  assert_int_equal(error_code(a), -32602);
  json_object_put(a);
  /* A list refused by the provider is a JSON-RPC error with its message. */
  a = post_as(h, sid, list, NULL, NULL);
  assert_int_equal(error_code(a), -32600);
  json_object *e = NULL, *m = NULL;
  assert_true(json_object_object_get_ex(a, "error", &e) && json_object_object_get_ex(e, "message", &m));
  assert_string_equal(json_object_get_string(m), "no caller");
  json_object_put(a);
  /* At most two sessions per owner (this table's cap); another owner still gets one. */
  json_object_put(post_as(h, NULL, init_msg, alice, NULL));
  sm_mcp_http_request r = {.method = "POST", .content_type = "application/json", .body = init_msg,
                           .body_len = strlen(init_msg), .owner = "box-1", .context = alice};
  sm_mcp_http_answer ans;
  assert_int_equal(sm_mcp_http_handle(h, &r, &ans, &err), 0);
  assert_int_equal(ans.status, 503);
  sm_mcp_http_answer_dispose(&ans);
  r.owner = "box-2";
  assert_int_equal(sm_mcp_http_handle(h, &r, &ans, &err), 0);
  assert_int_equal(ans.status, 200);
  sm_mcp_http_answer_dispose(&ans);
  assert_int_equal(sm_mcp_http_count(h), 3);
  sm_mcp_http_free(h);
}

int main(void) {
  pthread_mutex_init(&the_stub.mu, NULL);
  pthread_cond_init(&the_stub.cv, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lifecycle_and_tools), cmocka_unit_test(test_malformed_messages),
      cmocka_unit_test(test_cancellation),        cmocka_unit_test(test_too_many_calls),
      cmocka_unit_test(test_bad_tools_refused),   cmocka_unit_test(test_stdio),
      cmocka_unit_test(test_http),                cmocka_unit_test(test_http_idle_expiry),
      cmocka_unit_test(test_request_context),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
