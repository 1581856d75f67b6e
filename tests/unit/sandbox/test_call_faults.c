/* The call driver (src/lib/sandbox/sandbox_call.c, exec.c, acquire.c,
 * src/lib/workspace/workspace_box.c) when the engine fails one of its
 * steps (tests/support/fake_engine.h's canned failures): the copy in, the
 * tool's exec (made, started, read back), the copy out, the kill after a
 * timeout, the removal after the call, a lookup, a create that another
 * sandman won. Each call's result says what failed in the engine's words,
 * and nothing is left running that the call made (but a container whose
 * removal failed, left for a reap). */
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

static int setup(void **state) { return fake_world_setup(state, "unit-faults"); }

/* A call that sm_run takes (returns 0) whose result is sandman's failure,
 * with `words` in its error. */
static void assert_failed(fixture *f, const sm_run_request *req, sm_run_result *r,
                          const char *words) {
  assert_int_equal(fake_world_run(f, req, r, 0), 0);
  if (r->failure_kind != SM_FAIL_SANDBOX && r->failure_kind != SM_FAIL_ENGINE)
    print_error("failure kind %d: %s\n", (int)r->failure_kind, r->error);
  assert_true(r->failure_kind == SM_FAIL_SANDBOX || r->failure_kind == SM_FAIL_ENGINE);
  assert_false(r->ok);
  if (strstr(r->error, words) == NULL) print_error("error: %s\n", r->error);
  assert_non_null(strstr(r->error, words));
}

/* The engine refuses the upload of the workspace: the tool never runs and
 * the per_tool sandbox goes. */
static void copy_in_fails(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->ws, "in.txt", "x\n"), 0);
  const char *argv[] = {"sh", "-c", "echo ran > /workspace/ran.txt"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 3);
  fake_engine_fail(f->fe, "PUT", "/archive", 500, "write /var/lib/docker: no space left", 1);
  sm_run_result r;
  assert_failed(f, &req, &r, "copying the workspace into");
  assert_non_null(strstr(r.error, "no space left"));
  assert_false(r.started);
  sm_run_result_dispose(&r);
  assert_null(tf_read_at(f->ws, "ran.txt"));
  char user[64]; /* the tool's exec was never made */
  assert_int_equal(fake_engine_exec_user(f->fe, "ran.txt", user, sizeof user), -1);
  assert_int_equal(fake_engine_containers(f->fe), 0);
  assert_int_equal(fake_engine_volumes(f->fe), 0);
}

/* The engine will not make, or start, the tool's exec, or read its exit
 * code back: the call fails in the engine's words; the sandbox goes. */
static void tool_exec_fails(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 1);
  req.workspace = NULL;
  sm_run_result r;
  /* POST /containers/{id}/exec */
  fake_engine_fail(f->fe, "POST", "/exec", 500, "exec refused by policy", 1);
  assert_failed(f, &req, &r, "exec refused by policy");
  assert_false(r.started);
  sm_run_result_dispose(&r);
  /* A 409: the container stopped between its start and the exec. */
  fake_engine_fail(f->fe, "POST", "/exec", 409, "container is restarting", 1);
  assert_failed(f, &req, &r, "the sandbox is not running");
  sm_run_result_dispose(&r);
  /* POST /exec/{id}/start: the stream never comes; the sandbox is killed
   * so that nothing of the call runs on. */
  fake_engine_clear_log(f->fe);
  fake_engine_fail(f->fe, "POST", "/exec/", 500, "hijack failed", 1);
  assert_failed(f, &req, &r, "running the tool");
  assert_non_null(strstr(r.error, "hijack failed"));
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/kill"), 1);
  /* GET /exec/{id}/json: the tool ran, its exit code cannot be read. */
  fake_engine_fail(f->fe, "GET", "/exec/", 500, "inspect broke", 1);
  assert_failed(f, &req, &r, "reading the tool's exit code");
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_containers(f->fe), 0);
}

/* The tool ran and changed the workspace, but the copy out fails (the
 * changed file's fetch and then the whole workspace's): the host's files
 * stay as they were and the result says why, with the tool's own
 * outcome. */
static void copy_out_fails(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->ws, "in.txt", "before\n"), 0);
  const char *argv[] = {"sh", "-c", "echo after > in.txt; echo made > new.txt; echo said"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 3);
  /* The changed file's fetch, then the whole workspace's (the fallback). */
  fake_engine_fail(f->fe, "GET", "/archive", 500, "archive stream broke", 2);
  sm_run_result r;
  assert_failed(f, &req, &r, "archive stream broke");
  assert_non_null(strstr(r.error, "nothing of the workspace was changed on the host"));
  assert_non_null(strstr(r.error, "it exited with 0"));
  assert_true(r.started);
  assert_string_equal(r.stdout_data, "said\n");
  sm_run_result_dispose(&r);
  char *in = tf_read_at(f->ws, "in.txt");
  assert_string_equal(in, "before\n");
  free(in);
  assert_null(tf_read_at(f->ws, "new.txt"));
  assert_int_equal(fake_engine_containers(f->fe), 0);
}

/* The engine cannot remove the per_tool sandbox after its call: the call
 * still succeeds, and the container is left for a reap. */
static void removal_fails(void **state) {
  fixture *f = *state;
  const char *argv[] = {"echo", "fine"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 2);
  req.workspace = NULL;
  fake_engine_fail(f->fe, "DELETE", "/containers/", 500, "device or resource busy", 1);
  assert_int_equal(fake_world_expect(f, &req, "fine\n"), 0);
  assert_int_equal(fake_engine_count(f->fe, "DELETE", "/containers/"), 1);
  assert_int_equal(fake_engine_containers(f->fe), 1);
}

/* A per_tool call times out and the engine will not kill its sandbox: the
 * call still reports its timeout, and the sandbox's removal (forced) ends
 * the tool. */
static void kill_fails(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sleep", "30"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 2);
  req.workspace = NULL;
  req.settings.timeout_s = 0.3;
  fake_engine_fail(f->fe, "POST", "/kill", 500, "cannot kill", 1);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_true(r.timed_out);
  assert_int_equal(r.exit_code, 124);
  assert_int_equal(r.failure_kind, SM_FAIL_TIMEOUT);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/kill"), 1);
  assert_int_equal(fake_engine_containers(f->fe), 0);
}

/* The timed-out call's killer in a per_run sandbox fails once (a sandbox
 * at its pids limit refuses it): it is run again, and the tool dies. */
static void killer_retried(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo up; exec sleep 30"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_RUN, argv, 3);
  req.workspace = NULL;
  req.run_id = "killer";
  req.settings.timeout_s = 0.5;
  sm_runner_set_agent(f->runner, 0);
  fake_engine_fail_exec(f->fe, "sandman-kill", "fork: resource temporarily unavailable", 1, 1);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_true(r.timed_out);
  assert_int_equal(r.exit_code, 124);
  assert_string_equal(r.stdout_data, "up\n");
  sm_run_result_dispose(&r);
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "sandman-kill", user, sizeof user), 0);
  /* Started: the tool, then the killer twice (refused, then run). */
  assert_int_equal(fake_engine_count(f->fe, "POST", "/exec/"), 3);
  /* The sandbox serves the next call. */
  const char *again[] = {"echo", "again"};
  req.argv = again;
  req.argc = 2;
  assert_int_equal(fake_world_expect(f, &req, "again\n"), 0);
}

/* The runtime could not start the wrapper and said nothing: the result
 * says the wrapper's exit code. */
static void not_started_silent(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 1);
  req.workspace = NULL;
  fake_engine_fail_exec(f->fe, "sandman-call", "", 126, 1);
  sm_run_result r;
  assert_failed(f, &req, &r, "exited with 126 before the tool started");
  assert_false(r.ok);
  sm_run_result_dispose(&r);
}

/* A keyed sandbox's create answered 409: another sandman made it under the
 * same name meanwhile. The call looks again (finds nothing here: the fake
 * refused without making it) and makes it. */
static void created_elsewhere(void **state) {
  fixture *f = *state;
  const char *argv[] = {"echo", "made"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_RUN, argv, 2);
  req.workspace = NULL;
  req.run_id = "race";
  fake_engine_fail(f->fe, "POST", "/containers/create", 409,
                   "Conflict. The container name is already in use", 1);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "made\n");
  assert_false(r.reused);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 2);
  assert_int_equal(fake_engine_containers(f->fe), 1);
}

/* The keyed sandbox's lookup fails (not a 404): the call is refused rather
 * than making a second sandbox under the name. */
static void lookup_fails(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_RUN, argv, 1);
  req.workspace = NULL;
  req.run_id = "lookup";
  fake_engine_fail(f->fe, "GET", "/containers/", 500, "engine overloaded", 1);
  sm_run_result r;
  assert_failed(f, &req, &r, "looking up sandbox");
  assert_non_null(strstr(r.error, "engine overloaded"));
  assert_false(r.started);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 0);
}

/* A per_tool sandbox's fresh name taken (409): refused, nothing left. */
static void name_taken(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 1);
  req.workspace = NULL;
  fake_engine_fail(f->fe, "POST", "/containers/create", 409, "name in use", 1);
  sm_run_result r;
  assert_failed(f, &req, &r, "is taken");
  assert_false(r.started);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_containers(f->fe), 0);
}

/* No engine answers where the runner looks: the call fails as the engine's
 * failure, before anything is made. */
static void engine_unreachable(void **state) {
  fixture *f = *state;
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  char host[4300];
  snprintf(host, sizeof host, "unix://%s/no-engine.sock", f->state);
  o.engine.host = host;
  o.state_dir = f->state;
  o.instance = "unit-faults";
  sm_runner *runner = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_new(&runner, &o, &err), 0);
  sm_runner *mine = f->runner;
  f->runner = runner;
  const char *argv[] = {"true"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_TOOL, argv, 1);
  req.workspace = NULL;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  f->runner = mine;
  sm_runner_free(runner);
  assert_int_equal(r.failure_kind, SM_FAIL_ENGINE);
  assert_false(r.started);
  assert_true(r.error[0] != '\0');
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, NULL, NULL), 0);
}

/* A per_run call without its run id has no sandbox to name: refused (sm_run
 * says so too), nothing asked of the engine but its version. */
static void no_run_id(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_RUN, argv, 1);
  req.workspace = NULL;
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  assert_int_not_equal(sm_run(f->runner, &req, &r, &err), 0);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "per_run needs a run id"));
  assert_false(r.started);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", NULL), 0);
}

/* A helper call (sandman's own in-sandbox program) whose install the
 * runtime refuses: the call fails saying so, and nothing ran; the next
 * installs it and runs it as the sandbox's user. */
static void helper_not_installed(void **state) {
  fixture *f = *state;
  const char *warm[] = {"true"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_RUN, warm, 1);
  req.workspace = NULL;
  req.run_id = "helper";
  sm_runner_set_agent(f->runner, 0);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  sm_run_result_dispose(&r);
  fake_engine_fail_exec(f->fe, "/.sandman/agent-", "read-only file system", 126, 1);
  const char *argv[] = {"wsdigest", "/workspace", "100"};
  req.argv = argv;
  req.argc = 3;
  req.helper = 1;
  assert_failed(f, &req, &r, "installing sandman's helper in the sandbox");
  assert_false(r.started);
  sm_run_result_dispose(&r);
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "wsdigest", user, sizeof user), -1);
  /* Installed on the next call, it runs as the sandbox's user. */
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_true(r.ok);
  assert_true(r.stdout_len > 0);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_exec_user(f->fe, "wsdigest", user, sizeof user), 0);
  assert_string_equal(user, "1000:1000");
}

/* A keyed sandbox's tool ran, then its exec is gone when its exit code is
 * read (a 404, as when the container went meanwhile): the call fails and
 * says so; it is never run a second time, as a call is whose sandbox was
 * found gone before its tool started. */
static void gone_after_start_not_rerun(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo ran >> /workspace/runs.txt"};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_RUN, argv, 3);
  req.run_id = "gone-after-start";
  req.workspace = NULL; /* the tool's exec alone, through the engine */
  sm_runner_set_agent(f->runner, 0);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0); /* the sandbox made, cached */
  assert_true(r.ok);
  sm_run_result_dispose(&r);
  fake_engine_fail(f->fe, "GET", "/exec/", 404, "no such exec instance", 1);
  assert_failed(f, &req, &r, "reading the tool's exit code");
  sm_run_result_dispose(&r);
  const char *count[] = {"sh", "-c", "wc -l < /workspace/runs.txt"};
  fake_world_request(f, &req, SM_MODE_PER_RUN, count, 3);
  req.run_id = "gone-after-start";
  req.workspace = NULL;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_string_equal(r.stdout_data, "2\n"); /* once in each of the two calls */
  sm_run_result_dispose(&r);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, fake_world_teardown)
  const struct CMUnitTest tests[] = {
      T(copy_in_fails),      T(tool_exec_fails),   T(copy_out_fails),
      T(removal_fails),      T(kill_fails),        T(killer_retried),
      T(not_started_silent), T(created_elsewhere), T(lookup_fails),
      T(name_taken),         T(engine_unreachable), T(no_run_id),
      T(helper_not_installed), T(gone_after_start_not_rerun),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
