/* A timed-out or cancelled call leaves no process of its own behind (issue
 * 13, item 7), written as the attack: the tool detaches every way a shell
 * can (a new session with a cleared environment, a double fork, a child
 * that kills its own parent, nohup with its stdio closed) and then runs
 * past its timeout, or is cancelled. Through the engine's exec and through
 * the in-sandbox agent, in per_run and per_worker sandboxes (per_tool
 * containers are killed whole). A process an earlier call left running in
 * the same sandbox is not the call's and survives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "support/itest.h"

ITEST_TWO_RUNNERS_GROUP("test_call_kill")

/* Every way out of the call's process group and environment marker, then
 * "started" once they all run, then a wait the timeout (or cancel) ends. */
static const char detach_script[] =
    "setsid env -i sleep 1001 >/dev/null 2>&1 &\n"
    "(sleep 1002 >/dev/null 2>&1 &)\n"
    "sh -c 'sh -c \"kill \\$PPID; exec sleep 1003\" >/dev/null 2>&1 & wait' &\n"
    "sleep 1004 </dev/null >/dev/null 2>&1 &\n"
    "setsid sh -c '(env -i sleep 1005 >/dev/null 2>&1 &)' &\n"
    "i=0; while [ $(ps -o args | grep -c '^sleep 100[1-5]$') -lt 5 ] && [ $i -lt 200 ]; do\n"
    "  sleep 0.05; i=$((i + 1)); done\n"
    "echo started\n"
    "sleep 300\n";

typedef struct cancel_on {
  volatile int flag;
} cancel_on;

/* Cancels the call once the tool has said "started": no timing involved. */
static int cancel_when_started(void *ud, int stream, const char *data, size_t len) {
  cancel_on *c = ud;
  if (stream == 1 && memmem(data, len, "started", 7)) c->flag = 1;
  return 0;
}

static void call(sm_runner *r, sm_mode mode, const char *key, const char *script, double timeout,
                 cancel_on *cancel, sm_run_result *res) {
  const char *argv[] = {"sh", "-c", script};
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = mode;
  req.run_id = key;
  req.worker_id = key;
  req.argv = argv;
  req.argc = 3;
  req.settings.timeout_s = timeout;
  if (cancel) {
    req.cancel = &cancel->flag;
    req.on_output = cancel_when_started;
    req.on_output_ud = cancel;
  }
  memset(res, 0, sizeof *res);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(r, &req, res, &err), 0);
}

/* The sleeps of the sandbox ("sleep 900" is the earlier call's, "sleep
 * 3600" the sandbox's own; none of 1001-1005 may be left). */
static void left_behind(sm_runner *r, sm_mode mode, const char *key, char *out, size_t len) {
  sm_run_result res;
  call(r, mode, key, "ps -o args | grep '^sleep [0-9]*$' | sort | tr '\\n' ' '", 60, NULL, &res);
  assert_int_equal(res.exit_code, 0);
  snprintf(out, len, "%s", res.stdout_data ? res.stdout_data : "");
  sm_run_result_dispose(&res);
}

static void one_case(sm_runner *r, sm_mode mode, const char *key, int by_cancel) {
  sm_run_result res;
  /* An earlier call's background process: a server a run keeps, say. It
   * also makes the next call the sandbox's second (the agent's path). */
  call(r, mode, key, "sleep 900 >/dev/null 2>&1 &", 60, NULL, &res);
  assert_int_equal(res.exit_code, 0);
  sm_run_result_dispose(&res);
  sm_agent_stats before, after;
  sm_runner_agent_stats(r, &before);
  cancel_on c = {0};
  call(r, mode, key, detach_script, by_cancel ? 120 : 3, by_cancel ? &c : NULL, &res);
  sm_runner_agent_stats(r, &after);
  /* It went the way this case means to test. */
  assert_int_equal(after.calls - before.calls, r == with_agent ? 1 : 0);
  assert_non_null(strstr(res.stdout_data, "started"));
  if (by_cancel) {
    assert_int_equal(res.exit_code, 137);
  } else {
    assert_int_equal(res.timed_out, 1);
    assert_int_equal(res.exit_code, 124);
  }
  sm_run_result_dispose(&res);
  char left[512];
  left_behind(r, mode, key, left, sizeof left);
  if (strcmp(left, "sleep 3600 sleep 900 ") != 0)
    fail_msg("%s %s %s: left behind [%s]", r == with_agent ? "agent" : "engine exec",
             sm_mode_name(mode), by_cancel ? "cancel" : "timeout", left);
}

static void test_timeout_engine_exec(void **state) {
  (void)state;
  one_case(without_agent, SM_MODE_PER_RUN, "t-engine-run", 0);
  one_case(without_agent, SM_MODE_PER_WORKER, "t-engine-worker", 0);
}

static void test_timeout_agent(void **state) {
  (void)state;
  one_case(with_agent, SM_MODE_PER_RUN, "t-agent-run", 0);
  one_case(with_agent, SM_MODE_PER_WORKER, "t-agent-worker", 0);
}

static void test_cancel_engine_exec(void **state) {
  (void)state;
  one_case(without_agent, SM_MODE_PER_RUN, "c-engine-run", 1);
}

static void test_cancel_agent(void **state) {
  (void)state;
  one_case(with_agent, SM_MODE_PER_WORKER, "c-agent-worker", 1);
}

/* A per_tool container is killed whole at its timeout, and removed. */
static void test_timeout_per_tool(void **state) {
  (void)state;
  sm_run_result res;
  call(without_agent, SM_MODE_PER_TOOL, NULL, detach_script, 3, NULL, &res);
  assert_int_equal(res.exit_code, 124);
  char id[SM_ENGINE_ID_MAX];
  snprintf(id, sizeof id, "%s", res.sandbox_id);
  sm_run_result_dispose(&res);
  json_object *insp = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_container_inspect(engine, id, &insp, &err), SM_ENOTFOUND);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timeout_engine_exec), cmocka_unit_test(test_timeout_agent),
      cmocka_unit_test(test_cancel_engine_exec),  cmocka_unit_test(test_cancel_agent),
      cmocka_unit_test(test_timeout_per_tool),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
