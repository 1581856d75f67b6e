/* The 2026-07-28 revision of MCP in the session and the streamable HTTP
 * functions, beside the initialize era: requests carrying their version
 * and capabilities in _meta with no initialize, server/discover, the
 * refusals the revision defines (and the HTTP status each goes with),
 * the HTTP headers checked against the body, no session id; tasks for a
 * long-running tool (the 2026-07-28 extension and 2025-11-25's), polled,
 * cancelled, bounded by the calls in flight, and another owner's task
 * unknown. A stub provider, no engine. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/mcp.h>
#include <sandman/util.h>

#include "mcp/session.h"

static const sm_mcp_tool tools[] = {
    {"echo", NULL, "Answers its text", "{\"type\":\"object\"}", NULL, SM_MCP_READ_ONLY},
    {"slow", NULL, "Runs until released or cancelled", "{\"type\":\"object\"}", NULL,
     SM_MCP_DESTRUCTIVE | SM_MCP_LONG_RUNNING},
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int released;  /* slow calls end with "done" */
static int running;   /* slow calls running now */
static int cancelled; /* slow calls that saw their cancel flag */

static const sm_mcp_tool *list_tools(void *ud, size_t *n) {
  (void)ud;
  *n = 2;
  return tools;
}

static int call(void *ud, void *request, const char *name, json_object *args, volatile int *cancel,
                sm_mcp_result *out, sm_error *err) {
  (void)ud;
  (void)request;
  (void)args;
  (void)err;
  if (strcmp(name, "echo") == 0) return sm_mcp_result_text(out, "echoed", 6);
  pthread_mutex_lock(&mu);
  running++;
  pthread_mutex_unlock(&mu);
  int done = 0;
  while (!done && !*cancel) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&mu);
    done = released;
    pthread_mutex_unlock(&mu);
  }
  pthread_mutex_lock(&mu);
  running--;
  if (!done) cancelled++;
  pthread_mutex_unlock(&mu);
  return done ? sm_mcp_result_text(out, "done", 4) : SM_ECANCELLED;
}

static void set_released(int v) {
  pthread_mutex_lock(&mu);
  released = v;
  pthread_mutex_unlock(&mu);
}

static int count(int *what) {
  pthread_mutex_lock(&mu);
  int n = *what;
  pthread_mutex_unlock(&mu);
  return n;
}

/* A bounded poll: until cond() holds, at most 10 s. */
static void wait_until(int (*cond)(void)) {
  double start = sm_monotonic_ms();
  while (!cond()) {
    assert_true(sm_monotonic_ms() - start < 10000);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

static int none_running(void) { return count(&running) == 0; }

static sm_mcp_session *new_session(void) {
  sm_mcp_provider p = {list_tools, call, NULL, NULL, NULL};
  sm_mcp_server_info info = {"stub", "Stub server", "9.9", "be nice", 0};
  sm_mcp_session *s = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_session_new(&s, &info, &p, &err), 0);
  return s;
}

#define CAPS_NONE "{}"
#define CAPS_TASKS "{\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}"

/* A 2026-07-28 request: params extra (may be "") and the _meta. */
static char *req(char *buf, size_t n, int id, const char *method, const char *extra, const char *caps) {
  snprintf(buf, n,
           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":{%s%s\"_meta\":{"
           "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
           "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"t\",\"version\":\"1\"},"
           "\"io.modelcontextprotocol/clientCapabilities\":%s}}}",
           id, method, extra, extra[0] ? "," : "", caps);
  return buf;
}

static json_object *send_status(sm_mcp_session *s, const char *text, int *status) {
  char *answer = NULL;
  size_t len = 0;
  sm_error err = SM_ERROR_INIT;
  int st = -1;
  assert_int_equal(mcp_session_answer(s, NULL, text, strlen(text), NULL, &answer, &len, &st, &err), 0);
  if (status) *status = st;
  if (answer == NULL) return NULL;
  json_object *o = json_tokener_parse(answer);
  assert_non_null(o);
  free(answer);
  return o;
}

static json_object *send(sm_mcp_session *s, const char *text) { return send_status(s, text, NULL); }

static int code_of(json_object *a) {
  json_object *e = NULL, *c = NULL;
  if (!json_object_object_get_ex(a, "error", &e) || !json_object_object_get_ex(e, "code", &c)) return 0;
  return json_object_get_int(c);
}

static json_object *res(json_object *a) {
  json_object *r = NULL;
  json_object_object_get_ex(a, "result", &r);
  return r;
}

static const char *plain(json_object *o) {
  return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

static const char *str(json_object *o, const char *k) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static void test_requests(void **state) {
  (void)state;
  sm_mcp_session *s = new_session();
  char b[2048];
  int st = 0;
  /* A tool call with no initialize: its _meta is enough. */
  json_object *a = send_status(s, req(b, sizeof b, 1, "tools/call", "\"name\":\"echo\"", CAPS_NONE), &st);
  assert_int_equal(st, 0);
  assert_string_equal(str(res(a), "resultType"), "complete");
  assert_non_null(strstr(plain(res(a)), "echoed"));
  json_object *meta = NULL, *si = NULL;
  assert_true(json_object_object_get_ex(res(a), "_meta", &meta));
  assert_true(json_object_object_get_ex(meta, "io.modelcontextprotocol/serverInfo", &si));
  assert_string_equal(str(si, "name"), "stub");
  assert_string_equal(str(si, "version"), "9.9");
  json_object_put(a);
  assert_null(sm_mcp_session_protocol(s)); /* nothing was negotiated */

  /* server/discover: versions, capabilities (the tasks extension: a tool
   * is long-running), caching hints. */
  a = send(s, req(b, sizeof b, 2, "server/discover", "", CAPS_NONE));
  json_object *r = res(a), *v = NULL, *caps = NULL, *ext = NULL;
  assert_true(json_object_object_get_ex(r, "supportedVersions", &v));
  assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "2026-07-28");
  assert_true(json_object_object_get_ex(r, "capabilities", &caps));
  assert_true(json_object_object_get_ex(caps, "tools", NULL));
  assert_true(json_object_object_get_ex(caps, "extensions", &ext));
  assert_true(json_object_object_get_ex(ext, "io.modelcontextprotocol/tasks", NULL));
  assert_string_equal(str(r, "instructions"), "be nice");
  assert_string_equal(str(r, "cacheScope"), "private");
  assert_non_null(str(r, "ttlMs"));
  assert_string_equal(str(r, "resultType"), "complete");
  json_object_put(a);

  /* tools/list: caching hints, no 2025-11-25 execution field. */
  a = send(s, req(b, sizeof b, 3, "tools/list", "", CAPS_TASKS));
  r = res(a);
  assert_non_null(str(r, "ttlMs"));
  assert_string_equal(str(r, "cacheScope"), "private");
  assert_true(json_object_object_get_ex(r, "tools", &v));
  assert_int_equal(json_object_array_length(v), 2);
  assert_null(strstr(plain(v), "taskSupport"));
  json_object_put(a);
  a = send_status(s, req(b, sizeof b, 31, "tools/list", "\"cursor\":\"x\"", CAPS_NONE), &st);
  assert_int_equal(code_of(a), -32602); /* one page: no cursor is ours */
  assert_int_equal(st, 0);
  json_object_put(a);

  /* Refusals, each with its code and HTTP status. */
  static const struct {
    const char *msg;
    int code, status;
  } bad[] = {
      /* no protocol version, no initialize */
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", -32602, 400},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{}}", -32602, 400},
      /* a version but no capabilities */
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
       "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}", -32602, 400},
      /* an unknown version */
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
       "\"io.modelcontextprotocol/protocolVersion\":\"2099-01-01\","
       "\"io.modelcontextprotocol/clientCapabilities\":{}}}}", -32022, 400},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    a = send_status(s, bad[i].msg, &st);
    if (code_of(a) != bad[i].code || st != bad[i].status)
      fail_msg("%s: %d (%d), wanted %d (%d)", bad[i].msg, code_of(a), st, bad[i].code, bad[i].status);
    json_object_put(a);
  }
  a = send(s, bad[3].msg);
  json_object *e = NULL, *data = NULL;
  assert_true(json_object_object_get_ex(a, "error", &e));
  assert_true(json_object_object_get_ex(e, "data", &data));
  assert_string_equal(str(data, "requested"), "2099-01-01");
  assert_true(json_object_object_get_ex(data, "supported", &v));
  assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "2026-07-28");
  json_object_put(a);
  /* Methods this revision removed, and unknown ones: -32601, 404. */
  const char *gone[] = {"ping", "logging/setLevel", "resources/list", "subscriptions/listen"};
  for (size_t i = 0; i < 4; i++) {
    a = send_status(s, req(b, sizeof b, 9, gone[i], "", CAPS_NONE), &st);
    assert_int_equal(code_of(a), -32601);
    assert_int_equal(st, 404);
    json_object_put(a);
  }
  a = send_status(s, req(b, sizeof b, 10, "tools/call", "\"name\":\"nope\"", CAPS_NONE), &st);
  assert_int_equal(code_of(a), -32602);
  assert_int_equal(st, 0); /* in-band */
  json_object_put(a);

  /* Both eras on one session: an initialize, then requests of either. */
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
              "\"2025-06-18\",\"capabilities\":{}}}");
  assert_string_equal(str(res(a), "protocolVersion"), "2025-06-18");
  assert_null(str(res(a), "resultType")); /* the initialize era's shapes */
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"tools/list\"}");
  assert_null(str(res(a), "resultType"));
  assert_true(json_object_object_get_ex(res(a), "tools", NULL));
  json_object_put(a);
  a = send(s, req(b, sizeof b, 22, "tools/list", "", CAPS_NONE));
  assert_string_equal(str(res(a), "resultType"), "complete");
  json_object_put(a);
  sm_mcp_session_free(s);
}

static int one_running(void) { return count(&running) == 1; }

/* A task's status until it leaves "working" (bounded). */
static json_object *poll_task(sm_mcp_session *s, const char *id) {
  char b[2048], extra[128];
  snprintf(extra, sizeof extra, "\"taskId\":\"%s\"", id);
  double start = sm_monotonic_ms();
  for (;;) {
    json_object *a = send(s, req(b, sizeof b, 50, "tasks/get", extra, CAPS_TASKS));
    const char *status = str(res(a), "status");
    assert_non_null(status);
    if (strcmp(status, "working") != 0) return a;
    json_object_put(a);
    assert_true(sm_monotonic_ms() - start < 10000);
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
}

static void test_tasks(void **state) {
  (void)state;
  sm_mcp_session *s = new_session();
  char b[2048], extra[128], id[64];
  int st = 0;
  set_released(0);
  /* A client with the extension gets a task for the long-running tool. */
  json_object *a = send(s, req(b, sizeof b, 1, "tools/call", "\"name\":\"slow\"", CAPS_TASKS));
  json_object *r = res(a);
  assert_string_equal(str(r, "resultType"), "task");
  assert_string_equal(str(r, "status"), "working");
  assert_non_null(str(r, "ttlMs"));
  assert_non_null(str(r, "pollIntervalMs"));
  snprintf(id, sizeof id, "%s", str(r, "taskId"));
  assert_int_equal(strlen(id), 32);
  json_object_put(a);
  assert_true(mcp_session_busy(s));
  wait_until(one_running);
  snprintf(extra, sizeof extra, "\"taskId\":\"%s\"", id);
  a = send(s, req(b, sizeof b, 2, "tasks/get", extra, CAPS_TASKS));
  assert_string_equal(str(res(a), "status"), "working");
  assert_string_equal(str(res(a), "resultType"), "complete");
  json_object_put(a);
  /* tasks/update: acknowledged (sandman never asks for input). */
  char upd[256];
  snprintf(upd, sizeof upd, "%s,\"inputResponses\":{}", extra);
  a = send(s, req(b, sizeof b, 3, "tasks/update", upd, CAPS_TASKS));
  assert_string_equal(str(res(a), "resultType"), "complete");
  json_object_put(a);
  a = send(s, req(b, sizeof b, 4, "tasks/update", extra, CAPS_TASKS));
  assert_int_equal(code_of(a), -32602);
  json_object_put(a);
  /* Without the extension declared on the request: -32021, 400. */
  a = send_status(s, req(b, sizeof b, 5, "tasks/get", extra, CAPS_NONE), &st);
  assert_int_equal(code_of(a), -32021);
  assert_int_equal(st, 400);
  assert_non_null(strstr(plain(a), "requiredCapabilities"));
  json_object_put(a);
  /* The work ends: completed, the tool's result inline. */
  set_released(1);
  a = poll_task(s, id);
  assert_string_equal(str(res(a), "status"), "completed");
  json_object *inner = NULL;
  assert_true(json_object_object_get_ex(res(a), "result", &inner));
  assert_non_null(strstr(plain(inner), "done"));
  json_object_put(a);
  /* Unknown ids: -32602; cancelling a finished task is acknowledged. */
  a = send(s, req(b, sizeof b, 6, "tasks/get", "\"taskId\":\"0123456789abcdef0123456789abcdef\"", CAPS_TASKS));
  assert_int_equal(code_of(a), -32602);
  json_object_put(a);
  a = send(s, req(b, sizeof b, 7, "tasks/cancel", extra, CAPS_TASKS));
  assert_string_equal(str(res(a), "resultType"), "complete");
  json_object_put(a);

  /* Without the extension, the same tool runs in its request. */
  a = send(s, req(b, sizeof b, 8, "tools/call", "\"name\":\"slow\"", CAPS_NONE));
  assert_string_equal(str(res(a), "resultType"), "complete");
  assert_non_null(strstr(plain(res(a)), "done"));
  json_object_put(a);
  /* A tool not flagged long-running is never a task. */
  a = send(s, req(b, sizeof b, 9, "tools/call", "\"name\":\"echo\"", CAPS_TASKS));
  assert_string_equal(str(res(a), "resultType"), "complete");
  json_object_put(a);

  /* tasks/cancel stops a running task: cancelled, the tool saw it. */
  set_released(0);
  int before = count(&cancelled);
  a = send(s, req(b, sizeof b, 10, "tools/call", "\"name\":\"slow\"", CAPS_TASKS));
  snprintf(extra, sizeof extra, "\"taskId\":\"%s\"", str(res(a), "taskId"));
  snprintf(id, sizeof id, "%s", str(res(a), "taskId"));
  json_object_put(a);
  wait_until(one_running);
  a = send(s, req(b, sizeof b, 11, "tasks/cancel", extra, CAPS_TASKS));
  assert_string_equal(str(res(a), "resultType"), "complete");
  json_object_put(a);
  a = poll_task(s, id);
  assert_string_equal(str(res(a), "status"), "cancelled");
  assert_false(json_object_object_get_ex(res(a), "result", NULL));
  json_object_put(a);
  wait_until(none_running);
  assert_int_equal(count(&cancelled), before + 1);

  /* The calls in flight bound the tasks too: 16 run, the 17th is refused
   * (the revision's own busy code); ending the session cancels them all. */
  for (int i = 0; i < SM_MCP_MAX_CALLS_IN_FLIGHT; i++) {
    a = send(s, req(b, sizeof b, 100 + i, "tools/call", "\"name\":\"slow\"", CAPS_TASKS));
    assert_string_equal(str(res(a), "resultType"), "task");
    json_object_put(a);
  }
  a = send(s, req(b, sizeof b, 200, "tools/call", "\"name\":\"slow\"", CAPS_TASKS));
  assert_int_equal(code_of(a), -31000);
  json_object_put(a);
  before = count(&cancelled);
  sm_mcp_session_free(s); /* waits for the tasks' work to end */
  assert_int_equal(count(&running), 0);
  assert_int_equal(count(&cancelled), before + SM_MCP_MAX_CALLS_IN_FLIGHT);
}

/* 2025-11-25's tasks, after initialize: the capability, execution.taskSupport,
 * params.task, tasks/get, tasks/result, tasks/list, tasks/cancel. */
static void test_legacy_tasks(void **state) {
  (void)state;
  sm_mcp_session *s = new_session();
  json_object *a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                           "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}");
  assert_non_null(strstr(plain(res(a)), "\"tasks\""));
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
  const char *text = plain(res(a));
  assert_non_null(strstr(text, "\"taskSupport\":\"optional\""));
  json_object_put(a);
  set_released(0);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\","
              "\"task\":{\"ttl\":60000}}}");
  json_object *task = NULL;
  assert_true(json_object_object_get_ex(res(a), "task", &task));
  assert_string_equal(str(task, "status"), "working");
  assert_string_equal(str(task, "ttl"), "60000");
  char id[64], m[512];
  snprintf(id, sizeof id, "%s", str(task, "taskId"));
  json_object_put(a);
  snprintf(m, sizeof m, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"%s\"}}", id);
  a = send(s, m);
  assert_string_equal(str(res(a), "status"), "working");
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tasks/list\"}");
  json_object *list = NULL;
  assert_true(json_object_object_get_ex(res(a), "tasks", &list));
  assert_int_equal(json_object_array_length(list), 1);
  json_object_put(a);
  /* tasks/result waits for the end and answers what the call would have. */
  set_released(1);
  snprintf(m, sizeof m, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tasks/result\",\"params\":{\"taskId\":\"%s\"}}", id);
  a = send(s, m);
  assert_non_null(strstr(plain(res(a)), "done"));
  assert_non_null(strstr(plain(res(a)), "io.modelcontextprotocol/related-task"));
  json_object_put(a);
  /* A finished task cannot be cancelled (-32602); a tool that is not
   * long-running cannot be a task (-32601). */
  snprintf(m, sizeof m, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/cancel\",\"params\":{\"taskId\":\"%s\"}}", id);
  a = send(s, m);
  assert_int_equal(code_of(a), -32602);
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"task\":{}}}");
  assert_int_equal(code_of(a), -32601);
  json_object_put(a);
  /* The 2026-07-28 methods do not see 2025-11-25's tasks. */
  char b[2048], extra[128];
  snprintf(extra, sizeof extra, "\"taskId\":\"%s\"", id);
  a = send(s, req(b, sizeof b, 9, "tasks/get", extra, CAPS_TASKS));
  assert_int_equal(code_of(a), -32602);
  json_object_put(a);
  sm_mcp_session_free(s);

  /* An older version offers no tasks and ignores params.task. */
  s = new_session();
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
              "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}");
  assert_null(strstr(plain(res(a)), "\"tasks\""));
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"task\":{}}}");
  assert_non_null(strstr(plain(res(a)), "done"));
  json_object_put(a);
  a = send(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/list\"}");
  assert_int_equal(code_of(a), -32601);
  json_object_put(a);
  sm_mcp_session_free(s);
}

/* ---- HTTP ---- */

static int factory(void *ud, const char *owner, sm_mcp_session **out, sm_error *err) {
  (void)ud;
  (void)owner;
  (void)err;
  *out = new_session();
  return 0;
}

typedef struct hreq {
  const char *owner, *version, *method, *name, *sid;
} hreq;

static sm_mcp_http_answer http(sm_mcp_http *h, hreq q, const char *body) {
  sm_mcp_http_request r = {.method = "POST",
                           .accept = "application/json, text/event-stream",
                           .content_type = "application/json",
                           .session_id = q.sid,
                           .protocol_version = q.version,
                           .body = body,
                           .body_len = strlen(body),
                           .owner = q.owner,
                           .mcp_method = q.method,
                           .mcp_name = q.name};
  sm_mcp_http_answer a;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_http_handle(h, &r, &a, &err), 0);
  return a;
}

static json_object *body_of(sm_mcp_http_answer *a) {
  json_object *o = a->body ? json_tokener_parse(a->body) : NULL;
  sm_mcp_http_answer_dispose(a);
  return o;
}

static void test_http_stateless(void **state) {
  (void)state;
  sm_mcp_http_options o = {.factory = factory, .max_sessions = 8, .max_sessions_per_owner = 2};
  sm_mcp_http *h = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_http_new(&h, &o, &err), 0);
  char b[2048];
  hreq ctl = {"control", "2026-07-28", "tools/call", "echo", NULL};
  /* No session: 200, no Mcp-Session-Id; the owner's context is made. */
  sm_mcp_http_answer a = http(h, ctl, req(b, sizeof b, 1, "tools/call", "\"name\":\"echo\"", CAPS_NONE));
  assert_int_equal(a.status, 200);
  assert_string_equal(a.session_id, "");
  json_object *o2 = body_of(&a);
  assert_string_equal(str(res(o2), "resultType"), "complete");
  json_object_put(o2);
  assert_int_equal(sm_mcp_http_count(h), 1);
  a = http(h, ctl, req(b, sizeof b, 2, "tools/call", "\"name\":\"echo\"", CAPS_NONE));
  sm_mcp_http_answer_dispose(&a);
  assert_int_equal(sm_mcp_http_count(h), 1); /* the same context */

  /* The headers must say what the body says: 400, -32020, with the id. */
  hreq bad[] = {{"control", NULL, "tools/call", "echo", NULL},
                {"control", "2026-07-28", NULL, "echo", NULL},
                {"control", "2026-07-28", "tools/list", "echo", NULL},
                {"control", "2026-07-28", "tools/call", NULL, NULL},
                {"control", "2026-07-28", "tools/call", "execute", NULL},
                {"control", "2026-07-28", "tools/call", "=?base64?bm9wZQ==?=", NULL}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    a = http(h, bad[i], req(b, sizeof b, 3, "tools/call", "\"name\":\"echo\"", CAPS_NONE));
    assert_int_equal(a.status, 400);
    json_object *e = body_of(&a), *id = NULL;
    assert_int_equal(code_of(e), -32020);
    assert_true(json_object_object_get_ex(e, "id", &id));
    assert_int_equal(json_object_get_int(id), 3);
    json_object_put(e);
  }
  hreq b64 = {"control", "2026-07-28", "tools/call", "=?base64?ZWNobw==?=", NULL};
  a = http(h, b64, req(b, sizeof b, 4, "tools/call", "\"name\":\"echo\"", CAPS_NONE));
  assert_int_equal(a.status, 200);
  sm_mcp_http_answer_dispose(&a);
  /* The revision's refusals with their statuses. */
  hreq list = {"control", "2026-07-28", "tools/list", NULL, NULL};
  hreq nf = {"control", "2026-07-28", "resources/list", NULL, NULL};
  a = http(h, nf, req(b, sizeof b, 5, "resources/list", "", CAPS_NONE));
  assert_int_equal(a.status, 404);
  json_object *e = body_of(&a);
  assert_int_equal(code_of(e), -32601);
  json_object_put(e);
  a = http(h, list, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                    "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}");
  assert_int_equal(a.status, 400);
  e = body_of(&a);
  assert_int_equal(code_of(e), -32602);
  json_object_put(e);
  hreq future = {"control", "2099-01-01", "tools/list", NULL, NULL};
  a = http(h, future, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                      "\"io.modelcontextprotocol/protocolVersion\":\"2099-01-01\","
                      "\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
  assert_int_equal(a.status, 400);
  e = body_of(&a);
  assert_int_equal(code_of(e), -32022);
  json_object_put(e);
  /* A stateless revision named only by the header: still that era. */
  a = http(h, list, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}");
  assert_int_equal(a.status, 400);
  e = body_of(&a);
  assert_int_equal(code_of(e), -32602);
  json_object_put(e);
  a = http(h, list, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}");
  assert_int_equal(a.status, 202);
  sm_mcp_http_answer_dispose(&a);
  a = http(h, list, "{not json");
  assert_int_equal(a.status, 400);
  e = body_of(&a);
  assert_int_equal(code_of(e), -32700);
  json_object_put(e);

  /* An initialize always opens a session of its era, whatever the header. */
  a = http(h, list, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}");
  assert_int_equal(a.status, 200);
  assert_int_equal(strlen(a.session_id), 64);
  snprintf(b, sizeof b, "%s", a.session_id);
  sm_mcp_http_answer_dispose(&a);
  sm_mcp_http_request del = {.method = "DELETE", .session_id = b, .owner = "control"};
  assert_int_equal(sm_mcp_http_handle(h, &del, &a, &err), 0);
  assert_int_equal(a.status, 204);
  sm_mcp_http_answer_dispose(&a);
  /* A legacy session beside it; its id on a 2026-07-28 request is ignored. */
  hreq old = {"control", NULL, NULL, NULL, NULL};
  a = http(h, old, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                   "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}");
  assert_int_equal(a.status, 200);
  char sid[65];
  snprintf(sid, sizeof sid, "%s", a.session_id);
  sm_mcp_http_answer_dispose(&a);
  assert_int_equal(sm_mcp_http_count(h), 2);
  hreq with_sid = {"control", "2026-07-28", "tools/call", "echo", sid};
  a = http(h, with_sid, req(b, sizeof b, 9, "tools/call", "\"name\":\"echo\"", CAPS_NONE));
  assert_int_equal(a.status, 200);
  assert_string_equal(a.session_id, "");
  sm_mcp_http_answer_dispose(&a);
  /* The owner's share (2) is full: a third owner context is not made, but
   * the owner's existing one still serves. */
  hreq w = {"worker:w1", NULL, NULL, NULL, NULL};
  for (int i = 0; i < 2; i++) {
    a = http(h, w, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                   "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}");
    assert_int_equal(a.status, 200);
    sm_mcp_http_answer_dispose(&a);
  }
  hreq wl = {"worker:w1", "2026-07-28", "tools/list", NULL, NULL};
  a = http(h, wl, req(b, sizeof b, 10, "tools/list", "", CAPS_NONE));
  assert_int_equal(a.status, 503);
  sm_mcp_http_answer_dispose(&a);
  sm_mcp_http_free(h);
}

/* A task belongs to its owner's context: another owner's request for its
 * id is answered as for an id never made. Idle expiry spares a context
 * whose task runs. */
static void test_http_task_owner(void **state) {
  (void)state;
  sm_mcp_http_options o = {.factory = factory, .idle_timeout_s = 0.05};
  sm_mcp_http *h = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_http_new(&h, &o, &err), 0);
  char b[2048], extra[128], id[64];
  set_released(0);
  hreq call_slow = {"worker:a", "2026-07-28", "tools/call", "slow", NULL};
  sm_mcp_http_answer a = http(h, call_slow, req(b, sizeof b, 1, "tools/call", "\"name\":\"slow\"", CAPS_TASKS));
  assert_int_equal(a.status, 200);
  json_object *r = body_of(&a);
  assert_string_equal(str(res(r), "resultType"), "task");
  snprintf(id, sizeof id, "%s", str(res(r), "taskId"));
  json_object_put(r);
  snprintf(extra, sizeof extra, "\"taskId\":\"%s\"", id);
  hreq get_a = {"worker:a", "2026-07-28", "tasks/get", id, NULL};
  hreq get_b = {"worker:b", "2026-07-28", "tasks/get", id, NULL};
  hreq cancel_b = {"worker:b", "2026-07-28", "tasks/cancel", id, NULL};
  a = http(h, get_b, req(b, sizeof b, 2, "tasks/get", extra, CAPS_TASKS));
  assert_int_equal(a.status, 200);
  r = body_of(&a);
  assert_int_equal(code_of(r), -32602);
  assert_non_null(strstr(plain(r), "Task not found"));
  json_object_put(r);
  a = http(h, cancel_b, req(b, sizeof b, 3, "tasks/cancel", extra, CAPS_TASKS));
  r = body_of(&a);
  assert_int_equal(code_of(r), -32602);
  json_object_put(r);
  a = http(h, get_a, req(b, sizeof b, 4, "tasks/get", extra, CAPS_TASKS));
  r = body_of(&a);
  assert_string_equal(str(res(r), "status"), "working"); /* b's cancel did nothing */
  json_object_put(r);
  /* Idle past the timeout, but busy: kept. */
  double start = sm_monotonic_ms();
  while (sm_monotonic_ms() - start < 120) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  sm_mcp_http_expire(h);
  assert_int_equal(sm_mcp_http_count(h), 1); /* b's context went, a's stays */
  a = http(h, get_a, req(b, sizeof b, 5, "tasks/get", extra, CAPS_TASKS));
  r = body_of(&a);
  assert_string_equal(str(res(r), "taskId"), id);
  json_object_put(r);
  set_released(1);
  sm_mcp_http_free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_requests),     cmocka_unit_test(test_tasks),
      cmocka_unit_test(test_legacy_tasks), cmocka_unit_test(test_http_stateless),
      cmocka_unit_test(test_http_task_owner),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
