/* The host-tool route's transport (issue 16) against the real engine, with
 * a handler written here that echoes who the route says is calling and
 * what arrived (the broker has its own end-to-end tests). One per_run
 * sandbox with `network: none` carries most checks: `sandman-tools list`
 * gets the handler's answer with the call's identity; a call's arguments
 * full of shell metacharacters arrive byte-exact; a process the call left
 * in the background finds "no active call" (the handler sees active=0);
 * the sandbox's user can neither remove nor replace the socket, the link or
 * the relay, nor kill it; the relay refuses an oversized or chunked request
 * and a 33rd connection itself (the handler never sees them); a call
 * without a route starts none. Two calls of different calling tools at once
 * in one sandbox (the other with or without the route): a request gets no
 * identity. A second sandman process is refused the sandbox's route while
 * the first serves it. Then a per_tool call, and the same list
 * through gVisor (runsc). ROUTE_IT_ONLY=<glob> runs a subset: the TLS
 * script (test_tool_route_tls.sh) runs test_tls against the TLS engine. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include <sandman/hostroute.h>
#include <sandman/sandman.h>
#include <sandman/util.h>

#include "sandbox/context.h"
#include "sandbox/lifecycle.h"
#include "sandbox/tool_route.h"
#include "support/itest.h"

static sm_engine *engine;
static sm_runner *runner;

static const char *instance(void) {
  const char *i = getenv("SANDMAN_INSTANCE");
  return i && *i ? i : "it-test_tool_route";
}

/* ---- the test's handler: records every request, echoes ---- */

#define MAX_SEEN 256
typedef struct seen_req {
  int active;
  char who[12][160]; /* the caller's strings, in CALLER order below */
  char *raw;
  size_t len;
} seen_req;

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static seen_req seen[MAX_SEEN];
static int n_seen;

enum { W_CID, W_SANDBOX, W_MODE, W_RUNTIME, W_PROJECT, W_AGENT, W_TOOL, W_USER, W_RUN, W_WORKER,
       W_PRINCIPAL, W_CALL };
static const char *const who_names[12] = {"container_id", "sandbox", "mode",   "runtime",
                                          "project",      "agent",   "tool",   "user",
                                          "run_id",       "worker_id", "principal", "call_id"};

static const char *who_field(const sm_route_caller *w, int i) {
  const char *v[12] = {w->container_id, w->sandbox, w->mode,    w->runtime,
                       w->project,      w->agent,   w->tool,    w->user,
                       w->run_id,       w->worker_id, w->principal, w->call_id};
  return v[i] ? v[i] : "(null)";
}

static int seen_count(void) {
  pthread_mutex_lock(&seen_mu);
  int n = n_seen;
  pthread_mutex_unlock(&seen_mu);
  return n;
}

static char *http_answer(int status, json_object *body, size_t *len) {
  const char *text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
  char *out = NULL;
  int n = asprintf(&out, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                         "Connection: close\r\n\r\n%s",
                   status, strlen(text), text);
  json_object_put(body);
  *len = n > 0 ? (size_t)n : 0;
  return out;
}

static json_object *echo_tool(void) {
  return json_tokener_parse(
      "{\"name\": \"echo\", \"description\": \"Echoes the request's body\", \"inputSchema\": "
      "{\"type\": \"object\", \"properties\": {\"s\": {\"type\": \"string\"}, \"n\": {\"type\": "
      "\"integer\"}, \"flag\": {\"type\": \"boolean\"}}}}");
}

static int handler(void *ud, const sm_route_caller *who, const char *req, size_t len, char **resp,
                   size_t *resp_len, sm_error *err) {
  (void)ud;
  (void)err;
  pthread_mutex_lock(&seen_mu);
  if (n_seen < MAX_SEEN) {
    seen_req *s = &seen[n_seen++];
    s->active = who->active;
    for (int i = 0; i < 12; i++) snprintf(s->who[i], sizeof s->who[i], "%s", who_field(who, i));
    s->raw = malloc(len + 1);
    memcpy(s->raw, req, len);
    s->raw[len] = '\0';
    s->len = len;
  }
  pthread_mutex_unlock(&seen_mu);
  const char *eol = memchr(req, '\r', len);
  char line[512];
  snprintf(line, sizeof line, "%.*s", eol ? (int)(eol - req) : 0, req);
  const char *body = NULL;
  for (size_t i = 0; i + 3 < len && body == NULL; i++)
    if (memcmp(req + i, "\r\n\r\n", 4) == 0) body = req + i + 4;
  if (!who->active) {
    *resp = http_answer(403, json_tokener_parse("{\"error\": \"no active call\", \"reason\": "
                                                "\"no active call\", \"rule\": \"route\"}"),
                        resp_len);
    return 0;
  }
  if (strcmp(line, "GET /v1/tools HTTP/1.1") == 0) {
    json_object *o = json_object_new_object(), *tools = json_object_new_array(),
                *w = json_object_new_object();
    json_object_array_add(tools, echo_tool());
    json_object_object_add(o, "tools", tools);
    for (int i = 0; i < 12; i++)
      json_object_object_add(w, who_names[i], json_object_new_string(who_field(who, i)));
    json_object_object_add(w, "active", json_object_new_boolean(who->active));
    json_object_object_add(o, "who", w);
    json_object_object_add(o, "request_line", json_object_new_string(line));
    *resp = http_answer(200, o, resp_len);
  } else if (strcmp(line, "GET /v1/tools/echo HTTP/1.1") == 0) {
    *resp = http_answer(200, echo_tool(), resp_len);
  } else if (strcmp(line, "POST /v1/tools/echo/call HTTP/1.1") == 0 && body) {
    json_object *o = json_object_new_object(), *content = json_object_new_array(),
                *item = json_object_new_object();
    json_object_object_add(item, "type", json_object_new_string("text"));
    json_object_object_add(item, "text",
                           json_object_new_string_len(body, (int)(req + len - body)));
    json_object_array_add(content, item);
    json_object_object_add(o, "ok", json_object_new_boolean(1));
    json_object_object_add(o, "content", content);
    json_object_object_add(o, "is_error", json_object_new_boolean(0));
    json_object_object_add(o, "call_id", json_object_new_string(who->call_id));
    *resp = http_answer(200, o, resp_len);
  } else {
    *resp = http_answer(404, json_tokener_parse("{\"error\": \"unknown tool\"}"), resp_len);
  }
  return *resp ? 0 : -1;
}

static const sm_host_route route = {handler, NULL};

/* ---- calls ---- */

static int setup(void **state) {
  (void)state;
  /* The runner and the clean-up must agree on the instance. */
  setenv("SANDMAN_INSTANCE", instance(), 0);
  engine = itest_engine();
  /* What a killed earlier run left (its files would fool the checks). */
  itest_remove_instance(engine, instance());
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&runner, &o, &err) != 0) fail_msg("runner: %s", err.message);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sm_runner_free(runner); /* ends the routes: their handler (static) outlives it */
  runner = NULL;
  if (engine) itest_remove_instance(engine, instance());
  sm_engine_free(engine);
  engine = NULL;
  pthread_mutex_lock(&seen_mu);
  for (int i = 0; i < n_seen; i++) free(seen[i].raw);
  n_seen = 0;
  pthread_mutex_unlock(&seen_mu);
  return 0;
}

static void call_as(const char *tool, sm_mode mode, const char *runtime, const char *run_id,
                    const char *script, const char *const *env, size_t n_env, int with_route,
                    sm_run_result *res) {
  const char *argv[] = {"sh", "-c", script};
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = mode;
  snprintf(req.settings.runtime, sizeof req.settings.runtime, "%s", runtime);
  req.settings.timeout_s = 120;
  req.argv = argv;
  req.argc = 3;
  req.env = env;
  req.n_env = n_env;
  req.project = "route-proj";
  req.agent = "route-agent";
  req.tool = tool;
  req.user = "route-user";
  req.run_id = run_id;
  req.host_route = with_route ? &route : NULL;
  memset(res, 0, sizeof *res);
  sm_error err = SM_ERROR_INIT;
  int rc = sm_run(runner, &req, res, &err);
  if (rc != 0 || res->failure_kind == SM_FAIL_SANDBOX || res->failure_kind == SM_FAIL_ENGINE)
    fail_msg("call '%s': rc %d: %s %s", script, rc, err.message, res->error);
}

static void call(sm_mode mode, const char *runtime, const char *run_id, const char *script,
                 const char *const *env, size_t n_env, int with_route, sm_run_result *res) {
  call_as("route-tool", mode, runtime, run_id, script, env, n_env, with_route, res);
}

/* The identity the handler echoed in `sandman-tools list --json`. */
static void check_list_answer(const sm_run_result *res, const char *mode, const char *runtime,
                              const char *run_id) {
  if (res->exit_code != 0)
    fail_msg("sandman-tools list: exit %d: %s %s", res->exit_code, res->stdout_data,
             res->stderr_data);
  json_object *doc = json_tokener_parse(res->stdout_data), *w = NULL, *v = NULL;
  assert_non_null(doc);
  assert_true(json_object_object_get_ex(doc, "who", &w));
  assert_true(json_object_object_get_ex(w, "active", &v) && json_object_get_boolean(v));
  const char *want[][2] = {{"agent", "route-agent"}, {"tool", "route-tool"},
                           {"user", "route-user"},   {"project", "route-proj"},
                           {"principal", "control"}, {"mode", mode},
                           {"runtime", runtime},     {"run_id", run_id},
                           {"container_id", res->sandbox_id}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_true(json_object_object_get_ex(w, want[i][0], &v));
    if (strcmp(json_object_get_string(v), want[i][1]) != 0)
      fail_msg("%s: '%s', want '%s'", want[i][0], json_object_get_string(v), want[i][1]);
  }
  assert_true(json_object_object_get_ex(w, "sandbox", &v));
  assert_true(strncmp(json_object_get_string(v), "sandman-", 8) == 0);
  assert_true(json_object_object_get_ex(w, "call_id", &v));
  assert_int_equal(strlen(json_object_get_string(v)), 32);
  assert_true(json_object_object_get_ex(doc, "request_line", &v));
  assert_string_equal(json_object_get_string(v), "GET /v1/tools HTTP/1.1");
  json_object_put(doc);
}

static void last_call_id(char *out, size_t len) {
  pthread_mutex_lock(&seen_mu);
  snprintf(out, len, "%s", n_seen ? seen[n_seen - 1].who[W_CALL] : "");
  pthread_mutex_unlock(&seen_mu);
}

/* Waits (bounded) until the handler has seen a request with active == 0. */
static int wait_inactive(int from, seen_req *out) {
  double until = sm_monotonic_ms() + 60000;
  while (sm_monotonic_ms() < until) {
    pthread_mutex_lock(&seen_mu);
    for (int i = from; i < n_seen; i++)
      if (!seen[i].active) {
        *out = seen[i];
        pthread_mutex_unlock(&seen_mu);
        return 1;
      }
    pthread_mutex_unlock(&seen_mu);
    usleep(20000);
  }
  return 0;
}

/* Runs argv in container cid through a plain engine exec (not a call of
 * sandman's: the route has no active call meanwhile). */
static void engine_exec(const char *cid, const char *const *cmd) {
  json_object *cfg = itest_exec_config(cmd, 0);
  char id[SM_ENGINE_ID_MAX];
  sm_error err = SM_ERROR_INIT;
  sm_exec_io io = SM_EXEC_IO_INIT;
  if (sm_engine_exec_create(engine, cid, cfg, id, &err) != 0 ||
      sm_engine_exec_start(engine, id, &io, &err) != 0)
    fail_msg("engine exec: %s", err.message);
  json_object_put(cfg);
}

/* A raw request to the relay from the host, through the container's root
 * (/proc/PID/root: runc only); the relay's whole answer into out. */
static int raw_connect(long pid) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "/proc/%ld/root%s", pid, SM_ROUTE_SOCKET);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
    fail_msg("connect %s: %s", a.sun_path, strerror(errno));
  return fd;
}

static void raw_request(long pid, const char *req, char *out, size_t cap) {
  int fd = raw_connect(pid);
  /* The relay may answer and close before it has read everything (its own
   * refusals): a short write is fine, the answer is what counts. */
  ssize_t w = write(fd, req, strlen(req));
  (void)w;
  size_t n = 0;
  ssize_t r;
  while (n + 1 < cap && (r = read(fd, out + n, cap - 1 - n)) > 0) n += (size_t)r;
  out[n] = '\0';
  close(fd);
}

static long container_pid(const char *cid) {
  json_object *insp = NULL, *st = NULL, *pid = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_inspect(engine, cid, &insp, &err) != 0) fail_msg("%s", err.message);
  json_object_object_get_ex(insp, "State", &st);
  json_object_object_get_ex(st, "Pid", &pid);
  long p = (long)json_object_get_int64(pid);
  json_object_put(insp);
  return p;
}

/* The per_run sandbox: identity, metacharacters, a process left behind,
 * the sandbox user against the route, the relay's own refusals, no route
 * for a call without one. */
static void test_per_run(void **state) {
  (void)state;
  sm_run_result res;
  /* 1. list: the handler's answer, with this call's identity. */
  call(SM_MODE_PER_RUN, "", "route-r1",
       "sandman-tools list --json && echo \"$SANDMAN_TOOLS_SOCKET\" >&2 && "
       "command -v sandman-tools >&2",
       NULL, 0, 1, &res);
  check_list_answer(&res, "per_run", "", "route-r1");
  assert_non_null(strstr(res.stderr_data, SM_ROUTE_SOCKET "\n" SM_ROUTE_BIN_DIR "/sandman-tools"));
  char cid[SM_ENGINE_ID_MAX], first_call[80], second_call[80];
  snprintf(cid, sizeof cid, "%s", res.sandbox_id);
  last_call_id(first_call, sizeof first_call);
  sm_run_result_dispose(&res);

  /* 2. shell metacharacters, spaces, quotes, newlines: byte-exact. */
  static const char nasty[] = "a b;$(id) `uname` \"q\" 'y' | & > < * ? \\ ~ #\n\ttab \xc3\xa9 %00";
  char env_s[256];
  snprintf(env_s, sizeof env_s, "ROUTE_S=%s", nasty);
  const char *env[] = {env_s};
  int before = seen_count();
  call(SM_MODE_PER_RUN, "", "route-r1",
       "sandman-tools call echo \"s=$ROUTE_S\" n=42 flag=true", env, 1, 1, &res);
  assert_int_equal(res.exit_code, 0);
  json_object *s = json_object_new_string(nasty);
  char want[512];
  snprintf(want, sizeof want, "{\"arguments\": {\"s\": %s, \"n\": 42, \"flag\": true}}",
           json_object_to_json_string_ext(s, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(s);
  /* The tool's text is the body the handler got, printed by sandman-tools. */
  char want_out[520];
  snprintf(want_out, sizeof want_out, "%s\n", want);
  char got[512] = "(no call arrived)";
  pthread_mutex_lock(&seen_mu);
  for (int i = before; i < n_seen; i++) {
    const char *body = strstr(seen[i].raw, "\r\n\r\n");
    if (strncmp(seen[i].raw, "POST /v1/tools/echo/call ", 25) == 0 && body)
      snprintf(got, sizeof got, "%s", body + 4);
  }
  pthread_mutex_unlock(&seen_mu);
  assert_string_equal(got, want);
  assert_string_equal(res.stdout_data, want_out);
  last_call_id(second_call, sizeof second_call);
  assert_string_not_equal(first_call, second_call);
  sm_run_result_dispose(&res);

  /* 3. A process left behind tries the route after its call ended. */
  call(SM_MODE_PER_RUN, "", "route-r1",
       "( while [ ! -e /tmp/route-go ]; do sleep 0.05; done; sandman-tools list "
       ">/tmp/route-bg.out 2>&1; echo $? >/tmp/route-bg.rc ) </dev/null >/dev/null 2>&1 &",
       NULL, 0, 1, &res);
  assert_int_equal(res.exit_code, 0);
  sm_run_result_dispose(&res);
  before = seen_count();
  const char *go[] = {"touch", "/tmp/route-go", NULL};
  engine_exec(cid, go);
  seen_req inactive;
  if (!wait_inactive(before, &inactive)) {
    call(SM_MODE_PER_RUN, "", "route-r1", "ps -o pid,user,args; ls -la /tmp; cat /tmp/route-bg.*",
         NULL, 0, 0, &res);
    print_message("in the sandbox now:\n%s\n%s\n", res.stdout_data, res.stderr_data);
    fail_msg("the process left behind never reached the handler");
  }
  assert_int_equal(inactive.active, 0);
  assert_string_equal(inactive.who[W_CID], cid);
  assert_string_equal(inactive.who[W_AGENT], "");
  assert_string_equal(inactive.who[W_CALL], "");
  call(SM_MODE_PER_RUN, "", "route-r1",
       "while [ ! -s /tmp/route-bg.rc ]; do sleep 0.05; done; cat /tmp/route-bg.rc "
       "/tmp/route-bg.out",
       NULL, 0, 1, &res);
  assert_true(strncmp(res.stdout_data, "4\n", 2) == 0);
  assert_non_null(strstr(res.stdout_data, "no active call"));
  sm_run_result_dispose(&res);

  /* 4. The sandbox's user against the socket, the link, the binary and
   * the relay: everything fails and the route still answers. */
  call(SM_MODE_PER_RUN, "", "route-r1",
       "rm -f " SM_ROUTE_SOCKET " 2>/dev/null && echo RM-DONE; "
       "mv " SM_ROUTE_SOCKET " /tmp/s 2>/dev/null && echo MV-DONE; "
       "ln -sf /bin/true " SM_ROUTE_BIN_DIR "/sandman-tools 2>/dev/null && echo LN-DONE; "
       "cp /bin/busybox " SM_ROUTE_BIN_DIR "/x 2>/dev/null && echo CP-DONE; "
       "for a in /.sandman/agent-*; do printf x >\"$a\" 2>/dev/null && echo TRUNC-DONE; done; "
       "for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' <$p/cmdline 2>/dev/null)\" in "
       "*' route ') echo RELAY-FOUND; kill -9 ${p#/proc/} 2>/dev/null && echo KILL-DONE;; esac; done; "
       "sandman-tools list >/dev/null && echo STILL-ANSWERS",
       NULL, 0, 1, &res);
  if (strstr(res.stdout_data, "DONE") != NULL || strstr(res.stdout_data, "RELAY-FOUND") == NULL ||
      strstr(res.stdout_data, "STILL-ANSWERS") == NULL)
    fail_msg("the sandbox's user reached the route: %s / %s", res.stdout_data, res.stderr_data);
  sm_run_result_dispose(&res);

  /* 5. The relay's own refusals (from the host, through the container's
   * root): the handler sees none of them. */
  long pid = container_pid(cid);
  before = seen_count();
  char answer[4096];
  /* A client that sends half a head and goes silent holds a slot until the
   * relay drops it (408, after 10 s: read last, while the rest runs). */
  int slow = raw_connect(pid);
  assert_int_equal(write(slow, "GET /v1/tools HTTP/1.1\r\n", 24), 24);
  raw_request(pid, "POST /v1/tools/echo/call HTTP/1.1\r\nContent-Length: 5000000\r\n\r\n", answer,
              sizeof answer);
  assert_true(strncmp(answer, "HTTP/1.1 413 ", 13) == 0);
  raw_request(pid, "POST /v1/tools/echo/call HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", answer,
              sizeof answer);
  assert_true(strncmp(answer, "HTTP/1.1 411 ", 13) == 0);
  int held[31]; /* with the slow one: 32, the relay's bound */
  for (int i = 0; i < 31; i++) held[i] = raw_connect(pid);
  raw_request(pid, "GET /v1/tools HTTP/1.1\r\n\r\n", answer, sizeof answer);
  assert_true(strncmp(answer, "HTTP/1.1 503 ", 13) == 0);
  for (int i = 0; i < 31; i++) close(held[i]);
  size_t have = 0;
  ssize_t r;
  while (have + 1 < sizeof answer && (r = read(slow, answer + have, sizeof answer - 1 - have)) > 0)
    have += (size_t)r;
  answer[have] = '\0';
  close(slow);
  assert_true(strncmp(answer, "HTTP/1.1 408 ", 13) == 0);
  assert_int_equal(seen_count(), before);

  /* 6. A call without a route starts none (and gets no socket variable). */
  unsigned long started = sandbox_routes_started(sm_runner_ctx(runner)->routes);
  call(SM_MODE_PER_RUN, "", "route-r2", "echo \"[$SANDMAN_TOOLS_SOCKET]\"", NULL, 0, 0, &res);
  assert_string_equal(res.stdout_data, "[]\n");
  assert_int_equal(sandbox_routes_started(sm_runner_ctx(runner)->routes), started);
  sm_run_result_dispose(&res);
}

/* Two calls at once in one keyed sandbox, of two calling tools, the other
 * with the route too (first) or without it (then): a request could come
 * from either, so the handler gets no identity. */
typedef struct other_call {
  const char *run_id;
  int with_route;
  sm_run_result res;
} other_call;

static void *second_call(void *arg) {
  other_call *o = arg;
  call_as("route-other", SM_MODE_PER_RUN, "", o->run_id,
          "touch /tmp/route-second-in; while [ ! -e /tmp/route-first-done ]; do sleep 0.05; done",
          NULL, 0, o->with_route, &o->res);
  return NULL;
}

/* route_before: the sandbox's route is up before the two race to it; else
 * the other call (without the route) is running before the route starts. */
static void two_calls(const char *run_id, int other_has_route, int route_before) {
  sm_run_result res;
  call(SM_MODE_PER_RUN, "", run_id, "true", NULL, 0, route_before, &res);
  sm_run_result_dispose(&res);
  other_call o = {.run_id = run_id, .with_route = other_has_route};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, second_call, &o), 0);
  for (int i = 0; !route_before; i++) {
    /* The other call is in before this one's route starts. */
    call(SM_MODE_PER_RUN, "", run_id, "test -e /tmp/route-second-in", NULL, 0, 0, &res);
    int in = res.exit_code == 0;
    sm_run_result_dispose(&res);
    if (in) break;
    if (i == 600) fail_msg("the other call did not start");
    usleep(50 * 1000);
  }
  call(SM_MODE_PER_RUN, "", run_id,
       "while [ ! -e /tmp/route-second-in ]; do sleep 0.05; done; sandman-tools list; "
       "echo \"rc=$?\"; touch /tmp/route-first-done",
       NULL, 0, 1, &res);
  pthread_join(t, NULL);
  assert_int_equal(o.res.exit_code, 0);
  sm_run_result_dispose(&o.res);
  if (strstr(res.stdout_data, "rc=4") == NULL || strstr(res.stderr_data, "no active call") == NULL)
    fail_msg("two callers at once (the other %s the route) got an identity: %s / %s",
             other_has_route ? "with" : "without", res.stdout_data, res.stderr_data);
  sm_run_result_dispose(&res);
}

static void test_two_calls_at_once(void **state) {
  (void)state;
  two_calls("route-two", 1, 1);
  two_calls("route-two-plain", 0, 1);
  two_calls("route-two-late", 0, 0);
}

/* Another sandman process (here: another runner) with host tools for the
 * same sandbox is refused while this one serves its route, and served once
 * this one has gone. */
static void test_second_process(void **state) {
  (void)state;
  sm_run_result res;
  call(SM_MODE_PER_RUN, "", "route-shared", "sandman-tools list >/dev/null", NULL, 0, 1, &res);
  assert_int_equal(res.exit_code, 0);
  sm_run_result_dispose(&res);
  sm_runner *first = runner, *second = NULL;
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&second, &o, &err) != 0) fail_msg("runner: %s", err.message);
  runner = second;
  const char *argv[] = {"sandman-tools", "list"};
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = SM_MODE_PER_RUN;
  req.project = "route-proj";
  req.run_id = "route-shared";
  req.argv = argv;
  req.argc = 2;
  req.host_route = &route;
  memset(&res, 0, sizeof res);
  sm_run(second, &req, &res, &err);
  int refused = res.failure_kind == SM_FAIL_SANDBOX && strstr(res.error, "another sandman process");
  char text[sizeof res.error];
  snprintf(text, sizeof text, "%s", res.error);
  sm_run_result_dispose(&res);
  sm_runner_free(first); /* its relay goes */
  if (!refused) fail_msg("a second process got the route: '%s'", text);
  call(SM_MODE_PER_RUN, "", "route-shared", "sandman-tools list --json", NULL, 0, 1, &res);
  check_list_answer(&res, "per_run", "", "route-shared");
  sm_run_result_dispose(&res);
}

static void test_per_tool(void **state) {
  (void)state;
  sm_run_result res;
  call(SM_MODE_PER_TOOL, "", NULL, "sandman-tools list --json", NULL, 0, 1, &res);
  check_list_answer(&res, "per_tool", "", "");
  sm_run_result_dispose(&res);
}

static void test_gvisor(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  if (sm_sandbox_runtime_present(engine, "runsc", NULL, &err) != 0) {
    if (itest_in_ci()) fail_msg("runsc: %s", err.message);
    skip();
  }
  sm_run_result res;
  call(SM_MODE_PER_RUN, "runsc", "route-gvisor", "sandman-tools list --json", NULL, 0, 1, &res);
  check_list_answer(&res, "per_run", "runsc", "route-gvisor");
  sm_run_result_dispose(&res);
}

/* Through the engine of DOCKER_HOST (the TLS script's). */
static void test_tls(void **state) {
  (void)state;
  sm_run_result res;
  call(SM_MODE_PER_RUN, "", "route-tls", "sandman-tools list --json", NULL, 0, 1, &res);
  check_list_answer(&res, "per_run", "", "route-tls");
  sm_run_result_dispose(&res);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* see raw_request */
  const char *only = getenv("ROUTE_IT_ONLY");
  if (only && only[0]) cmocka_set_test_filter(only);
  else cmocka_set_skip_filter("test_tls");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_per_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_two_calls_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_second_process, setup, teardown),
      cmocka_unit_test_setup_teardown(test_per_tool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gvisor, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
