/* How a call in a container ends when it does not simply exit
 * (src/lib/sandbox/exec.c), through the engine's exec and over an agent
 * session, against the fake engine (tests/support/fake_engine.h): a cancel
 * while the tool runs and before it starts, the output caps, the sandbox
 * stopping under the call (not out of memory) with or without the
 * runtime's last words, and a call the agent could not start. Every wait
 * is the library's own; the tests trigger each end from the tool's output,
 * never by time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "support/fake_engine.h"
#include "support/files.h"

typedef fake_world fixture;

static int setup(void **state) { return fake_world_setup(state, "unit-stops"); }

/* What an output callback does once the tool has said `when`. */
typedef struct trigger {
  fake_engine *fe;
  const char *when;       /* on this text in the output (NULL: any output) */
  volatile int *cancel;   /* set it, or */
  const char *stop;       /* stop this container (as if it died; not OOM) */
  int fired;
} trigger;

static int on_output(void *ud, int stream, const char *data, size_t len) {
  (void)stream;
  trigger *t = ud;
  if (t->fired) return 0;
  if (t->when && (len < strlen(t->when) || memmem(data, len, t->when, strlen(t->when)) == NULL))
    return 0;
  t->fired = 1;
  if (t->cancel) *t->cancel = 1;
  if (t->stop) fake_engine_stop_container(t->fe, t->stop, 0);
  return 0;
}

/* A per_run sandbox made by a first call; its id into id. The next calls
 * go over an agent session when agent is set (else the engine's execs). */
static void warm(fixture *f, sm_run_request *req, const char *run_id, int agent, char *id,
                 size_t len) {
  static const char *const argv[] = {"true"};
  fake_world_request(f, req, SM_MODE_PER_RUN, argv, 1);
  req->workspace = NULL;
  req->run_id = run_id;
  sm_runner_set_agent(f->runner, agent);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, req, &r, 1), 0);
  assert_true(r.ok);
  snprintf(id, len, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
}

static size_t agent_calls(fixture *f) {
  sm_agent_stats st;
  sm_runner_agent_stats(f->runner, &st);
  return st.calls;
}

/* Cancelled while the tool runs: killed, 137, cancelled (sandman's verdict,
 * not the tool's); in a per_tool sandbox the container is killed, in a
 * per_run one the call's processes, and the sandbox serves the next call. */
static void cancel_running(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo started; exec sleep 30"};
  for (int i = 0; i < 3; i++) {
    /* 0: per_tool; 1: per_run through the engine; 2: over the agent. */
    sm_run_request req;
    char id[SM_ENGINE_ID_MAX] = "";
    if (i) warm(f, &req, i == 1 ? "cancel-engine" : "cancel-agent", i == 2, id, sizeof id);
    else fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 3);
    req.argv = argv;
    req.argc = 3;
    req.workspace = NULL;
    volatile int cancel = 0;
    trigger t = {f->fe, "started", &cancel, NULL, 0};
    req.cancel = &cancel;
    req.on_output = on_output;
    req.on_output_ud = &t;
    size_t before = agent_calls(f);
    sm_run_result r;
    assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
    assert_true(t.fired);
    assert_int_equal(r.exit_code, 137);
    assert_false(r.ok);
    assert_false(r.timed_out);
    assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
    assert_non_null(strstr(r.error, "cancelled"));
    assert_string_equal(r.stdout_data, "started\n");
    sm_run_result_dispose(&r);
    assert_int_equal(agent_calls(f) - before, i == 2 ? 1 : 0);
    if (i == 0) {
      assert_int_equal(fake_engine_count(f->fe, "POST", "/kill"), 1);
      assert_int_equal(fake_engine_containers(f->fe), 0);
      continue;
    }
    char user[64];
    assert_int_equal(fake_engine_exec_user(f->fe, "sandman-kill", user, sizeof user), 0);
    const char *again[] = {"echo", "next"};
    req.argv = again;
    req.argc = 2;
    req.cancel = NULL;
    req.on_output = NULL;
    assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
    assert_true(r.ok);
    assert_string_equal(r.stdout_data, "next\n");
    assert_string_equal(r.sandbox_id, id);
    sm_run_result_dispose(&r);
  }
}

/* Cancelled before the call went over the agent: nothing starts, nothing is
 * killed. */
static void cancel_before(void **state) {
  fixture *f = *state;
  sm_run_request req;
  char id[SM_ENGINE_ID_MAX];
  warm(f, &req, "cancel-before", 1, id, sizeof id);
  const char *argv[] = {"sh", "-c", "echo ran > /workspace/ran.txt"};
  req.argv = argv;
  req.argc = 3;
  volatile int cancel = 1;
  req.cancel = &cancel;
  fake_engine_clear_log(f->fe);
  size_t before = agent_calls(f);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_int_equal(r.exit_code, 137);
  assert_non_null(strstr(r.error, "cancelled"));
  sm_run_result_dispose(&r);
  assert_int_equal(agent_calls(f), before); /* never sent */
  char path[4200];
  assert_int_equal(fake_engine_path(f->fe, id, "/workspace/ran.txt", path, sizeof path), 0);
  assert_null(tf_read(path, NULL));
  char user[64]; /* no killer either */
  assert_int_equal(fake_engine_exec_user(f->fe, "sandman-kill", user, sizeof user), -1);
}

/* The output caps keep the first bytes of each stream and say so, through
 * the engine's exec and over the agent alike. */
static void output_caps(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c",
                        "i=0; while [ $i -lt 200 ]; do printf 0123456789; printf abcdefghij >&2; "
                        "i=$((i+1)); done"};
  for (int i = 0; i < 2; i++) {
    sm_run_request req;
    char id[SM_ENGINE_ID_MAX];
    if (i) warm(f, &req, "caps", 1, id, sizeof id);
    else fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 3);
    req.argv = argv;
    req.argc = 3;
    req.workspace = NULL;
    req.settings.stdout_cap = 25;
    req.settings.stderr_cap = 12;
    sm_run_result r;
    assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
    assert_true(r.ok);
    assert_true(r.stdout_truncated);
    assert_true(r.stderr_truncated);
    assert_int_equal(r.stdout_len, 25);
    assert_int_equal(r.stderr_len, 12);
    assert_memory_equal(r.stdout_data, "0123456789012345678901234", 25);
    assert_memory_equal(r.stderr_data, "abcdefghijab", 12);
    sm_run_result_dispose(&r);
  }
  assert_int_equal(agent_calls(f), 1);
}

/* The sandbox stops under the call, not out of memory: sandman's failure,
 * not the tool's; the next call replaces the sandbox ("it was not
 * running"). Through the engine's exec and over the agent. */
static void stopped_under_call(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo begun; exec sleep 30"};
  for (int agent = 0; agent < 2; agent++) {
    sm_run_request req;
    char id[SM_ENGINE_ID_MAX];
    warm(f, &req, agent ? "stop-agent" : "stop-engine", agent, id, sizeof id);
    req.argv = argv;
    req.argc = 3;
    trigger t = {f->fe, "begun", NULL, id, 0};
    req.on_output = on_output;
    req.on_output_ud = &t;
    sm_run_result r;
    assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
    assert_true(t.fired);
    assert_false(r.ok);
    assert_false(r.oom_killed);
    if (agent) {
      assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
      assert_non_null(strstr(r.error, "the sandbox stopped during the call"));
    } else {
      /* The engine's exec ends with the kill's 137; the sandbox's state
       * (not running, no OOM) says the tool did not run out of memory. */
      assert_int_equal(r.exit_code, 137);
      assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
    }
    sm_run_result_dispose(&r);
    const char *again[] = {"echo", "fresh"};
    req.argv = again;
    req.argc = 2;
    req.on_output = NULL;
    assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
    assert_true(r.ok);
    assert_string_equal(r.replaced_previous, id);
    assert_string_equal(r.replaced_because, "it was not running");
    sm_run_result_dispose(&r);
  }
}

/* The sandbox dies and the runtime's last words end the tool's stderr
 * (gVisor: "waiting on pid N: ..."): sandman's failure, in those words,
 * which are taken out of the tool's stderr. */
static void runtime_last_words(void **state) {
  fixture *f = *state;
  sm_run_request req;
  char id[SM_ENGINE_ID_MAX];
  warm(f, &req, "words", 0, id, sizeof id);
  const char *argv[] = {"sh", "-c",
                        "echo own words >&2; echo 'waiting on pid 7: sentry killed' >&2; "
                        "exec sleep 30"};
  req.argv = argv;
  req.argc = 3;
  trigger t = {f->fe, "waiting on pid", NULL, id, 0};
  req.on_output = on_output;
  req.on_output_ud = &t;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_true(t.fired);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "the sandbox stopped during the call: waiting on pid 7"));
  assert_string_equal(r.stderr_data, "own words\n");
  sm_run_result_dispose(&r);
}

/* The agent could not start the call (its working folder is missing): the
 * result says so; the session serves the next call. */
static void agent_cannot_start(void **state) {
  fixture *f = *state;
  sm_run_request req;
  char id[SM_ENGINE_ID_MAX];
  warm(f, &req, "nostart", 1, id, sizeof id);
  const char *argv[] = {"echo", "never"};
  req.argv = argv;
  req.argc = 2;
  req.cwd = "/workspace/no/such/folder";
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "the call could not start in the sandbox"));
  assert_null(r.stdout_data && *r.stdout_data ? r.stdout_data : NULL);
  sm_run_result_dispose(&r);
  req.cwd = NULL;
  assert_int_equal(fake_world_expect(f, &req, "never\n"), 0);
}

/* The agent cannot be put in the sandbox nor started there (the runtime
 * refuses both execs): the call runs through the engine's exec instead,
 * and says it fell back. */
static void agent_unusable(void **state) {
  fixture *f = *state;
  sm_run_request req;
  char id[SM_ENGINE_ID_MAX];
  warm(f, &req, "no-agent", 0, id, sizeof id); /* no session prepared ahead */
  sm_runner_set_agent(f->runner, 1);
  fake_engine_fail_exec(f->fe, "/.sandman/agent-", "exec format error", 126, 2);
  const char *argv[] = {"echo", "by-engine"};
  req.argv = argv;
  req.argc = 2;
  assert_int_equal(fake_world_expect(f, &req, "by-engine\n"), 0);
  sm_agent_stats st;
  sm_runner_agent_stats(f->runner, &st);
  assert_int_equal(st.sessions_opened, 0);
  assert_int_equal(st.calls, 0);
  assert_int_equal(st.fallbacks, 1);
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "by-engine", user, sizeof user), 0);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, fake_world_teardown)
  const struct CMUnitTest tests[] = {
      T(cancel_running),     T(cancel_before),      T(output_caps),
      T(stopped_under_call), T(runtime_last_words), T(agent_cannot_start),
      T(agent_unusable),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
