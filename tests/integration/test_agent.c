/* The in-sandbox agent against the real engine, differentially: every case
 * runs through a runner with agents (from the sandbox's second call) and
 * through one without (engine exec per call), and the two results must be
 * the same: output, exit code, flags. Plus what only the agent path has:
 * its sessions are used, the binary cannot be replaced by the sandbox's
 * user, a tool that kills the agent, a container removed under a parked
 * session, the warm pool's parked session, concurrent calls. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "support/files.h"
#include "support/itest.h"
#include "support/memio.h"

/* Cases list only the fields they need. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static sm_engine *engine;
static sm_runner *with_agent;
static sm_runner *without_agent;

static const char *instance(void) {
  return itest_instance("test_agent");
}

static void cleanup(void) { itest_remove_instance(engine, instance()); }

static void print_log(sm_log_level level, const char *request_id, const char *line, void *ud) {
  fprintf(stderr, "log: %s\n", line);
}

static int setup(void **state) {
  (void)state;
  engine = itest_two_runners(instance(), &with_agent, &without_agent);
  if (getenv("SANDMAN_TEST_DEBUG")) {
    sm_log_set_level(SM_LOG_DEBUG);
    sm_log_set_handler(print_log, NULL);
  }
  cleanup();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sm_runner_free(with_agent);
  sm_runner_free(without_agent);
  if (engine) cleanup();
  sm_engine_free(engine);
  return 0;
}

typedef struct call {
  const char *const *argv; /* the rest is optional: zero when left out */
  size_t argc;
  const char *const *env;
  size_t n_env;
  const char *stdin_data;
  size_t stdin_len;
  double timeout_s;
  int64_t stdout_cap;
} call;

static void run_in(sm_runner *r, const char *run_id, const call *c, sm_run_result *res) {
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = SM_MODE_PER_RUN;
  req.run_id = run_id;
  req.argv = c->argv;
  req.argc = c->argc;
  req.env = c->env;
  req.n_env = c->n_env;
  req.settings.timeout_s = c->timeout_s > 0 ? c->timeout_s : 60;
  if (c->stdout_cap > 0) req.settings.stdout_cap = c->stdout_cap;
  /* Odd sizes: frames must not depend on the reader's chunking. */
  mem_reader f = {c->stdin_data, c->stdin_len, 0, 7777};
  if (c->stdin_data) {
    req.stdin_read = read_mem;
    req.stdin_ud = &f;
  }
  memset(res, 0, sizeof *res);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(r, &req, res, &err), 0);
}

static unsigned long agent_calls(void) {
  sm_agent_stats st;
  sm_runner_agent_stats(with_agent, &st);
  return st.calls;
}

/* Runs c in both runners and checks the results agree; returns the
 * agent's result for more checks (caller disposes). */
static void both(const call *c, sm_run_result *agent_res) {
  sm_run_result plain;
  unsigned long before = agent_calls();
  run_in(with_agent, "diff-a", c, agent_res);
  run_in(without_agent, "diff-b", c, &plain);
  assert_int_equal(agent_calls(), before + 1); /* it really went through the agent */
  assert_string_equal(agent_res->error, plain.error);
  assert_int_equal(agent_res->exit_code, plain.exit_code);
  assert_int_equal(agent_res->ok, plain.ok);
  assert_int_equal(agent_res->timed_out, plain.timed_out);
  assert_int_equal(agent_res->oom_killed, plain.oom_killed);
  assert_int_equal(agent_res->stdout_truncated, plain.stdout_truncated);
  assert_int_equal(agent_res->stdout_len, plain.stdout_len);
  assert_memory_equal(agent_res->stdout_data, plain.stdout_data, plain.stdout_len);
  assert_int_equal(agent_res->stderr_len, plain.stderr_len);
  assert_memory_equal(agent_res->stderr_data, plain.stderr_data, plain.stderr_len);
  sm_run_result_dispose(&plain);
}

#define ARGV(...) ((const char *const[]){__VA_ARGS__}), (sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static void test_warm_up_uses_engine_then_agent(void **state) {
  (void)state;
  /* The first call of a runner in a sandbox uses the engine's exec. */
  call c = {ARGV("true")};
  sm_run_result r;
  run_in(with_agent, "diff-a", &c, &r);
  assert_int_equal(r.exit_code, 0);
  sm_run_result_dispose(&r);
  assert_int_equal(agent_calls(), 0);
  run_in(without_agent, "diff-b", &c, &r);
  sm_run_result_dispose(&r);
  run_in(with_agent, "diff-a", &c, &r);
  assert_int_equal(r.exit_code, 0);
  assert_int_equal(r.reused, 1);
  sm_run_result_dispose(&r);
  assert_int_equal(agent_calls(), 1);
  sm_agent_stats st;
  sm_runner_agent_stats(without_agent, &st);
  assert_int_equal(st.calls, 0);
}

static void test_output_streams_and_exit_codes(void **state) {
  (void)state;
  sm_run_result r;
  call c1 = {ARGV("sh", "-c", "echo out; echo err >&2; pwd; id -u; exit 3")};
  both(&c1, &r);
  assert_int_equal(r.exit_code, 3);
  assert_string_equal(r.stdout_data, "out\n/workspace\n1000\n");
  assert_string_equal(r.stderr_data, "err\n");
  sm_run_result_dispose(&r);

  call c2 = {ARGV("nosuchcommand-xyz")};
  both(&c2, &r);
  assert_int_equal(r.exit_code, 127);
  sm_run_result_dispose(&r);

  call c3 = {ARGV("sh", "-c", "kill -TERM $$")};
  both(&c3, &r);
  assert_int_equal(r.exit_code, 143);
  sm_run_result_dispose(&r);

  /* 600 KB of output with a 100 KB cap: truncated the same way. */
  call c4 = {ARGV("sh", "-c", "head -c 600000 /dev/zero | tr '\\0' a; echo e >&2")};
  c4.stdout_cap = 100000;
  both(&c4, &r);
  assert_int_equal(r.stdout_truncated, 1);
  assert_int_equal(r.stdout_len, 100000);
  sm_run_result_dispose(&r);
}

static void test_environment(void **state) {
  (void)state;
  const char *env[] = {"FOO=bar baz", "HOME=/elsewhere"};
  call c = {ARGV("sh", "-c", "echo \"$FOO|$HOME|$PATH|${SANDMAN_CALL:+marked}\"")};
  c.env = env;
  c.n_env = 2;
  sm_run_result r;
  both(&c, &r);
  assert_non_null(strstr(r.stdout_data, "bar baz|/elsewhere|"));
  assert_non_null(strstr(r.stdout_data, "|marked"));
  sm_run_result_dispose(&r);
}

static void test_stdin(void **state) {
  (void)state;
  size_t n = 3 * 1024 * 1024 + 17;
  char *data = malloc(n);
  assert_non_null(data);
  for (size_t i = 0; i < n; i++) data[i] = (char)((i * 131 + i / 4096) & 0xff);
  call c = {ARGV("sh", "-c", "cat > /tmp/in; md5sum < /tmp/in; wc -c < /tmp/in; rm /tmp/in")};
  c.stdin_data = data;
  c.stdin_len = n;
  sm_run_result r;
  both(&c, &r);
  assert_int_equal(r.exit_code, 0);
  assert_non_null(strstr(r.stdout_data, "3145745"));
  sm_run_result_dispose(&r);
  /* A tool that stops reading early: the call ends, the next one is fine. */
  call c2 = {ARGV("head", "-c", "5")};
  c2.stdin_data = data;
  c2.stdin_len = n;
  both(&c2, &r);
  assert_int_equal(r.stdout_len, 5);
  sm_run_result_dispose(&r);
  call c3 = {ARGV("echo", "after")};
  both(&c3, &r);
  assert_string_equal(r.stdout_data, "after\n");
  sm_run_result_dispose(&r);
  free(data);
}

static void test_timeout_kills_the_call(void **state) {
  (void)state;
  call c = {ARGV("sh", "-c", "sleep 300 & sleep 301; echo never")};
  c.timeout_s = 1.5;
  sm_run_result r;
  both(&c, &r);
  assert_int_equal(r.exit_code, 124);
  assert_int_equal(r.timed_out, 1);
  sm_run_result_dispose(&r);
  /* Nothing of it is left, and the session still works. */
  call c2 = {ARGV("sh", "-c", "ps -o args | grep -c '^sleep 30[01]' || true")};
  both(&c2, &r);
  assert_string_equal(r.stdout_data, "0\n");
  sm_run_result_dispose(&r);
}

static void test_agent_cannot_be_replaced_by_the_tool(void **state) {
  (void)state;
  call c = {ARGV("sh", "-c",
                 "for f in /.sandman/agent-*; do true > \"$f\" 2>/dev/null && echo WROTE; "
                 "rm -f \"$f\" 2>/dev/null && echo REMOVED; done; "
                 "touch /.sandman/x 2>/dev/null && echo CREATED; ls /.sandman | wc -l")};
  sm_run_result r;
  run_in(with_agent, "diff-a", &c, &r);
  assert_int_equal(r.exit_code, 0);
  assert_null(strstr(r.stdout_data, "WROTE"));
  assert_null(strstr(r.stdout_data, "REMOVED"));
  assert_null(strstr(r.stdout_data, "CREATED"));
  assert_string_equal(r.stdout_data, "1\n");
  sm_run_result_dispose(&r);
}

static void test_tool_killing_the_agent(void **state) {
  (void)state;
  /* kill -9 -1 kills every other process of the sandbox user: the agent
   * serving the call too. Through the agent the call is then lost and
   * reported as 137 (its processes killed); through an engine exec the
   * tool itself (kill never signals its sender) ends as it will, here 0.
   * Either way the next call works. */
  call c = {ARGV("sh", "-c", "kill -9 -1")};
  sm_run_result r;
  unsigned long before = agent_calls();
  run_in(with_agent, "diff-a", &c, &r);
  assert_int_equal(agent_calls(), before + 1);
  assert_int_equal(r.exit_code, 137);
  sm_run_result_dispose(&r);
  run_in(without_agent, "diff-b", &c, &r);
  assert_true(r.exit_code == 0 || r.exit_code == 137);
  sm_run_result_dispose(&r);
  call c2 = {ARGV("echo", "alive")};
  run_in(with_agent, "diff-a", &c2, &r);
  assert_string_equal(r.stdout_data, "alive\n");
  sm_run_result_dispose(&r);
  both(&c2, &r);
  assert_string_equal(r.stdout_data, "alive\n");
  sm_run_result_dispose(&r);
}

static void test_container_removed_under_a_parked_session(void **state) {
  (void)state;
  call c = {ARGV("echo", "one")};
  sm_run_result r;
  run_in(with_agent, "gone", &c, &r);
  sm_run_result_dispose(&r);
  run_in(with_agent, "gone", &c, &r); /* opens and parks a session */
  char id[SM_ENGINE_ID_MAX];
  snprintf(id, sizeof id, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_container_remove(engine, id, 1, 1, &err), 0);
  call c2 = {ARGV("echo", "two")};
  run_in(with_agent, "gone", &c2, &r);
  assert_string_equal(r.error, "");
  assert_string_equal(r.stdout_data, "two\n");
  assert_string_not_equal(r.sandbox_id, id);
  sm_run_result_dispose(&r);
}

/* Workspace sync through the agent (listings, deletes) against the engine
 * path: the same files come back, the same deletions reach the sandbox. */
static void ws_call(sm_runner *r, const char *run_id, const char *dir, const char *script,
                    sm_run_result *res) {
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = SM_MODE_PER_RUN;
  req.run_id = run_id;
  const char *argv[] = {"sh", "-c", script};
  req.argv = argv;
  req.argc = 3;
  req.workspace = dir;
  req.sync = SM_SYNC_INOUT;
  req.settings.timeout_s = 60;
  memset(res, 0, sizeof *res);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(r, &req, res, &err), 0);
  assert_string_equal(res->error, "");
}

static void assert_file(const char *dir, const char *name, const char *text) {
  char *got = tf_read_at(dir, name);
  assert_string_equal(got ? got : "(missing)", text);
  free(got);
}

static void workspace_rounds(sm_runner *r, const char *run_id, char *out_listing,
                             size_t out_len) {
  char dir[] = "/tmp/sandman-agent-ws-XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_int_equal(tf_write_at(dir, "keep.txt", "keep\n"), 0);
  assert_int_equal(tf_write_at(dir, "gone.txt", "gone\n"), 0);
  sm_run_result res;
  ws_call(r, run_id, dir, "cat keep.txt", &res);
  assert_string_equal(res.stdout_data, "keep\n");
  sm_run_result_dispose(&res);
  /* The tool changes the workspace: the changes come back. */
  ws_call(r, run_id, dir, "echo new > new.txt; echo more >> keep.txt; mkdir -p d/e; echo x > d/e/f",
          &res);
  assert_true(res.n_files_changed >= 3); /* the three files (and new folders) */
  size_t changed = res.n_files_changed;
  sm_run_result_dispose(&res);
  assert_file(dir, "keep.txt", "keep\nmore\n");
  assert_file(dir, "new.txt", "new\n");
  assert_file(dir, "d/e/f", "x\n");
  /* The host deletes and edits: the sandbox sees both. */
  char path[512];
  snprintf(path, sizeof path, "%s/gone.txt", dir);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(tf_write_at(dir, "new.txt", "edited on the host\n"), 0);
  ws_call(r, run_id, dir, "ls -R | sort | tr '\\n' ' '; cat new.txt", &res);
  snprintf(out_listing, out_len, "%zu changed; %s", changed, res.stdout_data);
  sm_run_result_dispose(&res);
  assert_int_equal(tf_rm_rf(dir), 0);
}

static void test_workspace_sync_through_the_agent(void **state) {
  (void)state;
  char with[1024], without[1024];
  unsigned long before = agent_calls();
  workspace_rounds(with_agent, "ws-a", with, sizeof with);
  assert_int_equal(agent_calls(), before + 2); /* its second and third calls */
  workspace_rounds(without_agent, "ws-b", without, sizeof without);
  assert_string_equal(with, without);
  assert_null(strstr(with, "gone.txt"));
  assert_non_null(strstr(with, "edited on the host"));
}

/* A long-running process (background work on) opens a keyed sandbox's
 * session after its first call: the second call finds it parked. */
static void test_background_session_for_the_second_call(void **state) {
  (void)state;
  sm_runner *r = NULL;
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_new(&r, &o, &err), 0);
  sm_runner_set_agent(r, 1);
  sm_runner_set_background_removal(r, 1);
  call c = {ARGV("echo", "first")};
  sm_run_result res;
  run_in(r, "bg", &c, &res);
  assert_string_equal(res.stdout_data, "first\n");
  sm_run_result_dispose(&res);
  assert_int_equal(sm_runner_settle(r, 60, &err), 0);
  sm_agent_stats st;
  sm_runner_agent_stats(r, &st);
  assert_int_equal(st.sessions_opened, 1);
  assert_int_equal(st.calls, 0);
  call c2 = {ARGV("echo", "second")};
  run_in(r, "bg", &c2, &res);
  assert_string_equal(res.stdout_data, "second\n");
  sm_run_result_dispose(&res);
  sm_runner_agent_stats(r, &st);
  assert_int_equal(st.sessions_opened, 1); /* the parked one */
  assert_int_equal(st.calls, 1);
  sm_runner_free(r);
}

/* Under gVisor the agent is installed and runs the same way (its calls
 * cost more there: every process start does). */
static void test_gvisor(void **state) {
  (void)state;
  /* The second engine of test_engine_tls.sh has no gVisor registered. */
  if (getenv("SANDMAN_AGENT_TEST_NO_GVISOR")) skip();
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = SM_MODE_PER_RUN;
  req.run_id = "gvisor";
  snprintf(req.settings.runtime, sizeof req.settings.runtime, "runsc");
  const char *argv[] = {"sh", "-c", "echo $(id -u) $(cat /proc/version | cut -c1-5); exit 7"};
  req.argv = argv;
  req.argc = 3;
  req.settings.timeout_s = 60;
  unsigned long before = agent_calls();
  for (int i = 0; i < 3; i++) {
    sm_run_result r;
    memset(&r, 0, sizeof r);
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(sm_run(with_agent, &req, &r, &err), 0);
    assert_string_equal(r.error, "");
    assert_int_equal(r.exit_code, 7);
    assert_string_equal(r.stdout_data, "1000 Linux\n");
    sm_run_result_dispose(&r);
  }
  /* The first through the engine, the next two through the agent. */
  assert_int_equal(agent_calls(), before + 2);
}

typedef struct worker_arg {
  int n;
  int good;
} worker_arg;

static void *worker(void *p) {
  worker_arg *w = p;
  char script[64];
  snprintf(script, sizeof script, "echo w%d; sleep 0.2", w->n);
  const char *argv[] = {"sh", "-c", script};
  char want[16];
  snprintf(want, sizeof want, "w%d\n", w->n);
  for (int i = 0; i < 5; i++) {
    sm_run_request req;
    sm_run_request_init(&req);
    req.settings.mode = SM_MODE_PER_RUN;
    req.run_id = "diff-a";
    req.argv = argv;
    req.argc = 3;
    req.settings.timeout_s = 60;
    sm_run_result r;
    memset(&r, 0, sizeof r);
    sm_error err = SM_ERROR_INIT;
    if (sm_run(with_agent, &req, &r, &err) == 0 && r.exit_code == 0 && r.stdout_data &&
        strcmp(r.stdout_data, want) == 0)
      w->good++;
    sm_run_result_dispose(&r);
  }
  return NULL;
}

static void test_concurrent_calls_in_one_sandbox(void **state) {
  (void)state;
  unsigned long before = agent_calls();
  pthread_t t[4];
  worker_arg w[4];
  for (int i = 0; i < 4; i++) {
    w[i].n = i;
    w[i].good = 0;
    assert_int_equal(pthread_create(&t[i], NULL, worker, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 4; i++) assert_int_equal(w[i].good, 5);
  assert_int_equal(agent_calls(), before + 20);
}

static void test_pool_container_has_a_session(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_pool_size(with_agent), 0);
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = SM_MODE_PER_TOOL;
  /* Over the pool's session, so its agent is in /.sandman: a per_tool
   * sandbox's is a root-owned tmpfs (a keyed one's a volume:
   * test_agent_cannot_be_replaced_by_the_tool) the tool cannot write. */
  const char *argv[] = {"sh", "-c",
                        "echo pooled; id -u; for f in /.sandman/agent-*; do true > \"$f\" 2>/dev/null "
                        "&& echo WROTE; rm -f \"$f\" 2>/dev/null && echo REMOVED; done; "
                        "touch /.sandman/x 2>/dev/null && echo CREATED; ls /.sandman | wc -l; "
                        "grep -c ' /.sandman tmpfs ' /proc/mounts"};
  req.argv = argv;
  req.argc = 3;
  req.settings.timeout_s = 60;
  assert_int_equal(sm_runner_pool_set_size(with_agent, 1, &err), 0);
  assert_int_equal(sm_runner_pool_prepare(with_agent, &req, &err), 0);
  assert_int_equal(sm_runner_settle(with_agent, 60, &err), 0);
  unsigned long before = agent_calls();
  sm_run_result r;
  memset(&r, 0, sizeof r);
  assert_int_equal(sm_run(with_agent, &req, &r, &err), 0);
  assert_string_equal(r.error, "");
  assert_string_equal(r.stdout_data, "pooled\n1000\n1\n1\n");
  assert_int_equal(agent_calls(), before + 1);
  sm_run_result_dispose(&r);
  assert_int_equal(sm_runner_pool_set_size(with_agent, 0, &err), 0);
  assert_int_equal(sm_runner_settle(with_agent, 60, &err), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_warm_up_uses_engine_then_agent),
      cmocka_unit_test(test_output_streams_and_exit_codes),
      cmocka_unit_test(test_environment),
      cmocka_unit_test(test_stdin),
      cmocka_unit_test(test_timeout_kills_the_call),
      cmocka_unit_test(test_agent_cannot_be_replaced_by_the_tool),
      cmocka_unit_test(test_tool_killing_the_agent),
      cmocka_unit_test(test_container_removed_under_a_parked_session),
      cmocka_unit_test(test_concurrent_calls_in_one_sandbox),
      cmocka_unit_test(test_pool_container_has_a_session),
      cmocka_unit_test(test_workspace_sync_through_the_agent),
      cmocka_unit_test(test_background_session_for_the_second_call),
      cmocka_unit_test(test_gvisor),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
