/* The host-tool route's transport (issues 16, 25) against the real engine,
 * with a handler written here that echoes who the route says is calling
 * and what arrived (the broker has its own end-to-end tests). One per_run
 * sandbox with `network: none` carries most checks: `sandman-tools list`
 * gets the handler's answer with the call's identity and no SANDMAN_
 * variable but the call's marker; a call's arguments full of shell
 * metacharacters arrive byte-exact; a process the call left in the
 * background finds "no active call" (the handler sees active=0); the
 * sandbox's user can neither remove nor replace the socket, the link or the
 * relay, nor kill it; the relay refuses an oversized or chunked request and
 * a 33rd connection itself (the handler never sees them); a call without a
 * route starts none. Who is calling is the call the connecting process
 * descends from: two calls at once in one sandbox each get their own
 * identity (a call without the route none); a loop left behind by a call
 * of a tool without the route gets none while a route call runs (the
 * attack of issue 25: it borrowed that call's identity), nor does one
 * another agent left in its sandbox (never the route call's sandbox). The
 * runner-wide bound on request bytes answers 503 past it. A second sandman
 * process is refused the sandbox's route while the first serves it. Then a
 * per_tool call, and the list and the leftover through gVisor (runsc).
 * ROUTE_IT_ONLY=<glob> runs a subset: the TLS script
 * (test_tool_route_tls.sh) runs test_tls against the TLS engine. */
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
#include <sys/time.h>
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
  return itest_instance("test_tool_route");
}

/* ---- the test's handler: records every request, echoes ---- */

#define MAX_SEEN 256
typedef struct seen_req {
  int active;
  long peer_pid;
  char who[12][160]; /* the caller's strings, in CALLER order below */
  char *raw;
  size_t len;
} seen_req;

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cv = PTHREAD_COND_INITIALIZER;
static seen_req seen[MAX_SEEN];
static int n_seen;
/* Requests whose bytes hold "hold-me" wait in the handler until released. */
static int holding, release_holds;

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
  if (memmem(req, len, "hold-me", 7) != NULL) {
    holding++;
    pthread_cond_broadcast(&seen_cv);
    while (!release_holds) pthread_cond_wait(&seen_cv, &seen_mu);
    holding--;
  }
  if (n_seen < MAX_SEEN) {
    seen_req *s = &seen[n_seen++];
    s->active = who->active;
    s->peer_pid = who->peer_pid;
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
  release_holds = 0;
  pthread_mutex_unlock(&seen_mu);
  return 0;
}

/* The agent of the calls below: "route-agent" may use host tools (its
 * calls without the route share its sandbox, as a broker says for such an
 * agent); "route-reviewer" may not. */
static const char *call_agent = "route-agent";

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
  req.agent = call_agent;
  req.tool = tool;
  req.user = "route-user";
  req.run_id = run_id;
  req.host_route = with_route ? &route : NULL;
  req.agent_has_host_tools = strcmp(call_agent, "route-agent") == 0;
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
       "sandman-tools list --json && env | grep '^SANDMAN_' | cut -d= -f1 >&2 && "
       "command -v sandman-tools >&2",
       NULL, 0, 1, &res);
  check_list_answer(&res, "per_run", "", "route-r1");
  /* The only SANDMAN_ variable is the call's own marker (issue 25). */
  assert_string_equal(res.stderr_data, "SANDMAN_CALL\n" SM_ROUTE_BIN_DIR "/sandman-tools\n");
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

  /* 6. A call without a route starts none (and its PATH has no route). */
  unsigned long started = sandbox_routes_started(sandbox_runner_ctx(runner)->routes);
  call(SM_MODE_PER_RUN, "", "route-r2",
       "case \"$PATH\" in *" SM_ROUTE_BIN_DIR "*) echo route;; *) echo none;; esac", NULL, 0, 0,
       &res);
  assert_string_equal(res.stdout_data, "none\n");
  assert_int_equal(sandbox_routes_started(sandbox_runner_ctx(runner)->routes), started);
  sm_run_result_dispose(&res);
}

/* Two calls at once in one keyed sandbox, of two calling tools of the
 * agent, the other with the route (first) or without it (then, also
 * running before the sandbox's route starts): each process gets the
 * identity of the call it belongs to, a process of a call without the
 * route none. Both list while both run. */
typedef struct other_call {
  const char *run_id;
  int with_route;
  sm_run_result res;
} other_call;

static void *second_call(void *arg) {
  other_call *o = arg;
  call_as("route-other", SM_MODE_PER_RUN, "", o->run_id,
          "touch /tmp/route-b-in; while [ ! -e /tmp/route-a-listed ]; do sleep 0.05; done; "
          SM_ROUTE_BIN_DIR "/sandman-tools list --json; echo \"rc=$?\"; touch /tmp/route-b-done",
          NULL, 0, o->with_route, &o->res);
  return NULL;
}

/* The "who" of the handler's answer in text (a sandman-tools list --json). */
static void who_of(const char *text, const char *field, char *out, size_t len) {
  snprintf(out, len, "(none)");
  const char *at = text ? strstr(text, "{\"tools\"") : NULL;
  json_object *doc = at ? json_tokener_parse(at) : NULL, *w = NULL, *v = NULL;
  if (doc && json_object_object_get_ex(doc, "who", &w) && json_object_object_get_ex(w, field, &v))
    snprintf(out, len, "%s", json_object_get_string(v));
  json_object_put(doc);
}

static void two_calls(const char *run_id, int other_has_route, int route_before) {
  sm_run_result res;
  call(SM_MODE_PER_RUN, "", run_id, "true", NULL, 0, route_before, &res);
  sm_run_result_dispose(&res);
  other_call o = {.run_id = run_id, .with_route = other_has_route};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, second_call, &o), 0);
  for (int i = 0; !route_before; i++) {
    /* The other call is in before this one's route starts. */
    call(SM_MODE_PER_RUN, "", run_id, "test -e /tmp/route-b-in", NULL, 0, 0, &res);
    int in = res.exit_code == 0;
    sm_run_result_dispose(&res);
    if (in) break;
    if (i == 600) fail_msg("the other call did not start");
    usleep(50 * 1000);
  }
  call(SM_MODE_PER_RUN, "", run_id,
       "while [ ! -e /tmp/route-b-in ]; do sleep 0.05; done; sandman-tools list --json; "
       "echo \"rc=$?\"; touch /tmp/route-a-listed; "
       "while [ ! -e /tmp/route-b-done ]; do sleep 0.05; done; rm -f /tmp/route-*",
       NULL, 0, 1, &res);
  pthread_join(t, NULL);
  assert_int_equal(o.res.exit_code, 0);
  char tool[64], other_tool[64], call_id[64], other_id[64];
  who_of(res.stdout_data, "tool", tool, sizeof tool);
  who_of(res.stdout_data, "call_id", call_id, sizeof call_id);
  who_of(o.res.stdout_data, "tool", other_tool, sizeof other_tool);
  who_of(o.res.stdout_data, "call_id", other_id, sizeof other_id);
  if (strstr(res.stdout_data, "rc=0") == NULL || strcmp(tool, "route-tool") != 0)
    fail_msg("the route call's own process got '%s': %s / %s", tool, res.stdout_data,
             res.stderr_data);
  if (other_has_route && (strcmp(other_tool, "route-other") != 0 || strcmp(other_id, call_id) == 0))
    fail_msg("the other call's process got '%s' (%s): %s", other_tool, other_id,
             o.res.stdout_data);
  if (!other_has_route && (strstr(o.res.stdout_data, "rc=4") == NULL ||
                           strstr(o.res.stderr_data, "no active call") == NULL))
    fail_msg("a process of the call without the route got an identity: %s / %s",
             o.res.stdout_data, o.res.stderr_data);
  sm_run_result_dispose(&o.res);
  sm_run_result_dispose(&res);
}

static void test_two_calls_at_once(void **state) {
  (void)state;
  two_calls("route-two", 1, 1);
  two_calls("route-two-plain", 0, 1);
  two_calls("route-two-late", 0, 0);
}

/* Requests holding marker (a request line, a body's text), as the handler
 * saw them: how many, and how many of them were handed an identity. */
static void count_marked(int from, const char *marker, int *n, int *with_identity) {
  *n = *with_identity = 0;
  pthread_mutex_lock(&seen_mu);
  for (int i = from; i < n_seen; i++) {
    if (strstr(seen[i].raw, marker) == NULL) continue;
    (*n)++;
    if (seen[i].active) (*with_identity)++;
  }
  pthread_mutex_unlock(&seen_mu);
}

/* The loop a call leaves behind: waits for /tmp/route-go, then lists the
 * host tools three times (the full path: its PATH has no route), then says
 * so. Only the loop lists (its requests are the GET /v1/tools ones). */
#define LEFTOVER_LOOP                                                                            \
  "( while [ ! -e /tmp/route-go ]; do sleep 0.05; done; for i in 1 2 3; do " SM_ROUTE_BIN_DIR \
  "/sandman-tools list >>/tmp/route-loop.out 2>&1; echo \"rc=$?\" >>/tmp/route-loop.out; done; " \
  "touch /tmp/route-loop-done ) </dev/null >/dev/null 2>&1 &"
#define LOOP_REQUEST "GET /v1/tools HTTP/1.1"

/* Issue 25, finding 2: a loop left behind by a call of the agent's tool
 * without host tools (one that from_tools excludes) asks the route while
 * the agent's route call runs, in one per_run sandbox. It used to get that
 * call's identity; it gets none, and the route call's own request still
 * gets its own. Under runtime (runc, or gVisor's runsc). */
static void leftover_of_a_tool_without_route(const char *runtime, const char *run_id) {
  sm_run_result res;
  int before = seen_count();
  call_as("route-excluded", SM_MODE_PER_RUN, runtime, run_id, LEFTOVER_LOOP, NULL, 0, 0, &res);
  assert_int_equal(res.exit_code, 0);
  char box[SM_ENGINE_ID_MAX];
  snprintf(box, sizeof box, "%s", res.sandbox_id);
  sm_run_result_dispose(&res);
  call(SM_MODE_PER_RUN, runtime, run_id,
       "touch /tmp/route-go; while [ ! -e /tmp/route-loop-done ]; do sleep 0.05; done; "
       "cat /tmp/route-loop.out >&2; sandman-tools call echo s=mine-own",
       NULL, 0, 1, &res);
  assert_string_equal(res.sandbox_id, box); /* one sandbox: the agent's */
  int n = 0, lent = 0, mine = 0, mine_lent = 0;
  count_marked(before, LOOP_REQUEST, &n, &lent);
  count_marked(before, "mine-own", &mine, &mine_lent);
  if (n != 3 || lent != 0)
    fail_msg("%s: the leftover's %d requests: %d were handed the route call's identity: %s",
             runtime[0] ? runtime : "runc", n, lent, res.stderr_data);
  assert_non_null(strstr(res.stderr_data, "no active call"));
  assert_null(strstr(res.stderr_data, "rc=0"));
  if (mine != 1 || mine_lent != 1)
    fail_msg("the route call's own request: %d seen, %d with its identity: %s / %s", mine,
             mine_lent, res.stdout_data, res.stderr_data);
  sm_run_result_dispose(&res);
}

static void test_leftover_of_excluded_tool(void **state) {
  (void)state;
  leftover_of_a_tool_without_route("", "route-left");
}

/* Containers of this instance labelled with run run_id (at most max). */
static size_t run_boxes(const char *run_id, char ids[][SM_ENGINE_ID_MAX], size_t max) {
  char l1[200], l2[200];
  snprintf(l1, sizeof l1, "io.sandman.instance=%s", instance());
  snprintf(l2, sizeof l2, "io.sandman.run=%s", run_id);
  const char *labels[] = {l1, l2};
  json_object *list = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_list(engine, 0, labels, 2, &list, &err) != 0) fail_msg("%s", err.message);
  size_t n = 0;
  for (size_t i = 0; i < json_object_array_length(list) && n < max; i++) {
    json_object *id = NULL;
    json_object_object_get_ex(json_object_array_get_idx(list, i), "Id", &id);
    snprintf(ids[n++], SM_ENGINE_ID_MAX, "%s", json_object_get_string(id));
  }
  json_object_put(list);
  return n;
}

/* In container cid, by an engine exec: `touch path` (op "touch") or
 * `test -e path` (op "test"); the exit code. */
static int exec_test(const char *cid, const char *op, const char *path) {
  int touch = strcmp(op, "touch") == 0;
  const char *cmd[] = {touch ? "touch" : "test", touch ? path : "-e", touch ? NULL : path, NULL};
  json_object *cfg = itest_exec_config(cmd, 0);
  char id[SM_ENGINE_ID_MAX];
  sm_error err = SM_ERROR_INIT;
  sm_exec_io io = SM_EXEC_IO_INIT;
  int code = -1, running = 0;
  if (sm_engine_exec_create(engine, cid, cfg, id, &err) == 0 &&
      sm_engine_exec_start(engine, id, &io, &err) == 0)
    sm_engine_exec_inspect(engine, id, &running, &code, NULL, &err);
  json_object_put(cfg);
  return code;
}

typedef struct bg_call {
  const char *run_id;
  sm_run_result res;
} bg_call;

static void *coder_call(void *arg) {
  bg_call *b = arg;
  call(SM_MODE_PER_RUN, "", b->run_id,
       "touch /tmp/route-coder-in; i=0; while [ ! -e /tmp/route-release ] && [ $i -lt 1200 ]; "
       "do sleep 0.05; i=$((i+1)); done; sandman-tools call echo s=coder-own",
       NULL, 0, 1, &b->res);
  return NULL;
}

/* Issue 25, finding 2: another agent (no host tools) of the same run
 * leaves a loop behind, which asks the route while the host-tool agent's
 * call runs. It used to share that call's sandbox and borrow its identity;
 * now the agent with host tools has a sandbox of its own and the loop
 * reaches no route at all. */
static void test_leftover_of_another_agent(void **state) {
  (void)state;
  sm_run_result res;
  int before = seen_count();
  call_agent = "route-reviewer";
  call_as("route-tool", SM_MODE_PER_RUN, "", "route-rev", LEFTOVER_LOOP, NULL, 0, 0, &res);
  call_agent = "route-agent";
  assert_int_equal(res.exit_code, 0);
  char reviewer_box[SM_ENGINE_ID_MAX];
  snprintf(reviewer_box, sizeof reviewer_box, "%s", res.sandbox_id);
  sm_run_result_dispose(&res);
  bg_call b = {.run_id = "route-rev"};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, coder_call, &b), 0);
  /* The route call is in (wherever it runs): the loop may go. */
  char ids[4][SM_ENGINE_ID_MAX];
  int in = 0;
  for (int i = 0; i < 1200 && !in; i++) {
    size_t n = run_boxes("route-rev", ids, 4);
    for (size_t k = 0; k < n && !in; k++) in = exec_test(ids[k], "test", "/tmp/route-coder-in") == 0;
    if (!in) usleep(50 * 1000);
  }
  if (!in) fail_msg("the route call did not start");
  exec_test(reviewer_box, "touch", "/tmp/route-go");
  int done = 0;
  for (int i = 0; i < 1200 && !done; i++) {
    done = exec_test(reviewer_box, "test", "/tmp/route-loop-done") == 0;
    if (!done) usleep(50 * 1000);
  }
  size_t n = run_boxes("route-rev", ids, 4);
  for (size_t k = 0; k < n; k++) exec_test(ids[k], "touch", "/tmp/route-release");
  pthread_join(t, NULL);
  assert_true(done);
  assert_int_equal(b.res.exit_code, 0);
  if (strcmp(b.res.sandbox_id, reviewer_box) == 0)
    fail_msg("the agent with host tools shares its sandbox with another agent");
  int seen_n = 0, lent = 0, mine = 0, mine_lent = 0;
  count_marked(before, LOOP_REQUEST, &seen_n, &lent);
  count_marked(before, "coder-own", &mine, &mine_lent);
  if (lent != 0) fail_msg("the other agent's leftover was handed an identity %d times", lent);
  assert_int_equal(mine_lent, 1);
  sm_run_result_dispose(&b.res);
}

/* Issue 25, finding 7: the requests the routes hold at once are bounded in
 * bytes, runner-wide: with 8 MiB, two 3 MiB requests held by the handler
 * leave no room for a third, which is answered 503 at once (before, it was
 * taken and held too); once they are answered, the room is back. From the
 * host through the container's root (runc): no identity, so the handler
 * answers "no active call", which is all this needs. */
static void send_body(int fd, size_t len) {
  char head[256];
  int hl = snprintf(head, sizeof head,
                    "POST /v1/tools/echo/call HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", len);
  assert_int_equal(write(fd, head, (size_t)hl), hl);
  char *body = malloc(len);
  memset(body, 'x', len);
  memcpy(body, "{\"arguments\": {\"s\": \"hold-me", 28);
  memcpy(body + len - 3, "\"}}", 3);
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(fd, body + off, len - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  free(body);
}

static void read_all(int fd, char *out, size_t cap) {
  struct timeval tv = {60, 0}; /* a bound, not a timing: a hang fails the check below */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < cap && (r = read(fd, out + n, cap - 1 - n)) > 0) n += (size_t)r;
  out[n] = '\0';
}

static void test_memory_bound(void **state) {
  (void)state;
  sm_run_result res;
  call(SM_MODE_PER_RUN, "", "route-mem", "sandman-tools list >/dev/null", NULL, 0, 1, &res);
  assert_int_equal(res.exit_code, 0);
  long pid = container_pid(res.sandbox_id);
  sm_run_result_dispose(&res);
  sm_runner_set_route_memory(runner, (size_t)8 << 20);
  int held[2];
  for (int i = 0; i < 2; i++) {
    held[i] = raw_connect(pid);
    send_body(held[i], (size_t)3 << 20);
  }
  pthread_mutex_lock(&seen_mu);
  double until = sm_monotonic_ms() + 60000;
  while (holding < 2 && sm_monotonic_ms() < until) {
    pthread_mutex_unlock(&seen_mu);
    usleep(20000);
    pthread_mutex_lock(&seen_mu);
  }
  int holding_now = holding;
  pthread_mutex_unlock(&seen_mu);
  assert_int_equal(holding_now, 2);
  char answer[4096];
  int third = raw_connect(pid);
  send_body(third, (size_t)3 << 20);
  read_all(third, answer, sizeof answer);
  close(third);
  pthread_mutex_lock(&seen_mu);
  release_holds = 1;
  pthread_cond_broadcast(&seen_cv);
  pthread_mutex_unlock(&seen_mu);
  if (strncmp(answer, "HTTP/1.1 503 ", 13) != 0 || strstr(answer, "host-tool-memory") == NULL)
    fail_msg("a third 3 MiB request past the 8 MiB bound: '%.200s'", answer);
  /* The handler answered the two it held (from the host: no identity, so
   * its "no active call"). */
  for (int i = 0; i < 2; i++) {
    read_all(held[i], answer, sizeof answer);
    close(held[i]);
    if (strstr(answer, "no active call") == NULL) fail_msg("a held request: '%.200s'", answer);
  }
  /* The room is back. */
  int again = raw_connect(pid);
  send_body(again, (size_t)3 << 20);
  read_all(again, answer, sizeof answer);
  close(again);
  if (strstr(answer, "no active call") == NULL) fail_msg("after the others: '%.200s'", answer);
  sm_runner_set_route_memory(runner, 0);
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
  req.agent = call_agent; /* the same sandbox: the agent's own */
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
  if (sandbox_runtime_present(engine, "runsc", NULL, &err) != 0) {
    if (itest_in_ci()) fail_msg("runsc: %s", err.message);
    skip();
  }
  sm_run_result res;
  call(SM_MODE_PER_RUN, "runsc", "route-gvisor", "sandman-tools list --json", NULL, 0, 1, &res);
  check_list_answer(&res, "per_run", "runsc", "route-gvisor");
  sm_run_result_dispose(&res);
  /* The kernel's word (SO_PEERCRED, /proc) holds under gVisor too. */
  leftover_of_a_tool_without_route("runsc", "route-gvisor");
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
      cmocka_unit_test_setup_teardown(test_leftover_of_excluded_tool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_leftover_of_another_agent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_second_process, setup, teardown),
      cmocka_unit_test_setup_teardown(test_per_tool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gvisor, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
