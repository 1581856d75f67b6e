/* The call driver (src/sandbox/call.c, exec.c, acquire.c, workspace/box.c)
 * walked by sm_run against the fake engine (tests/support/fake_engine.h):
 * acquire, copy in, exec, copy out and release, in a per_tool sandbox and
 * in a per_run one (its second call over the in-sandbox agent), with the
 * engine round trips each step costs; a timeout, stdin, a missing image, a
 * refused create, and a keyed sandbox removed behind the runner's back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "support/fake_engine.h"
#include "support/files.h"
#include "support/memio.h"

#define IMAGE "sandman-test/fake:latest"

typedef struct fixture {
  fake_engine *fe;
  sm_runner *runner;
  char state[4096];
  char ws[4096];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (f == NULL || (f->fe = fake_engine_start()) == NULL) return -1;
  fake_engine_add_image(f->fe, IMAGE, "");
  if (tf_temp_dir(f->state, sizeof f->state, "sandman-test-call-state") != 0 ||
      tf_temp_dir(f->ws, sizeof f->ws, "sandman-test-call-ws") != 0)
    return -1;
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  o.engine.host = fake_engine_host(f->fe);
  o.state_dir = f->state;
  o.instance = "unit-call";
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&f->runner, &o, &err) != 0) {
    print_error("runner: %s\n", err.message);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  sm_runner_free(f->runner);
  fake_engine_stop(f->fe);
  tf_rm_rf(f->state);
  tf_rm_rf(f->ws);
  free(f);
  return 0;
}

static void request(fixture *f, sm_run_request *req, sm_mode mode, const char *const *argv,
                    size_t argc) {
  sm_run_request_init(req);
  req->settings.mode = mode;
  snprintf(req->settings.image, sizeof req->settings.image, "%s", IMAGE);
  req->settings.timeout_s = 60;
  req->argv = argv;
  req->argc = argc;
  req->workspace = f->ws;
  req->tool = "shell";
}

/* Runs req; fails the test (with the engine's log) when sm_run refused it. */
static void run(fixture *f, const sm_run_request *req, sm_run_result *out) {
  sm_error err = SM_ERROR_INIT;
  int rc = sm_run(f->runner, req, out, &err);
  if (rc != 0 || out->failure_kind > SM_FAIL_TIMEOUT) {
    char *log = fake_engine_log(f->fe);
    print_error("sm_run: %d %s\nresult: %s (exit %d)\nstdout: %s\nstderr: %s\nengine log:\n%s",
                rc, err.message, out->error, out->exit_code,
                out->stdout_data ? out->stdout_data : "", out->stderr_data ? out->stderr_data : "",
                log);
    free(log);
  }
  assert_int_equal(rc, 0);
}

static char *host_file(fixture *f, const char *name) { return tf_read_at(f->ws, name); }

static void assert_file(fixture *f, const char *name, const char *text) {
  char *got = host_file(f, name);
  assert_non_null(got);
  assert_string_equal(got, text);
  free(got);
}

static int changed(const sm_run_result *r, const char *path) {
  for (size_t i = 0; i < r->n_files_changed; i++)
    if (strcmp(r->files_changed[i], path) == 0) return 1;
  return 0;
}

/* per_tool: a fresh container for the call, the workspace in by the
 * engine's upload, the tool's changes out, the container gone after. */
static void per_tool_walk(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->ws, "in.txt", "from the host\n"), 0);
  assert_int_equal(tf_write_at(f->ws, "gone.txt", "delete me\n"), 0);
  const char *argv[] = {"sh", "-c",
                        "cat in.txt; echo made > out.txt; rm gone.txt; echo to-stderr >&2; "
                        "test \"$HOME\" -ef ."};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_TOOL, argv, 3);
  sm_run_result r;
  run(f, &req, &r);
  assert_true(r.ok);
  assert_int_equal(r.exit_code, 0);
  assert_true(r.started);
  assert_string_equal(r.stdout_data, "from the host\n");
  assert_string_equal(r.stderr_data, "to-stderr\n");
  assert_int_equal(r.mode, SM_MODE_PER_TOOL);
  assert_true(r.sandbox_id[0] != '\0');
  assert_file(f, "out.txt", "made\n");
  assert_null(host_file(f, "gone.txt"));
  assert_true(changed(&r, "out.txt"));
  assert_true(changed(&r, "gone.txt"));
  sm_run_result_dispose(&r);
  /* The round trips of one per_tool call, and nothing left behind. */
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 1);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/*/start"), 1);
  assert_int_equal(fake_engine_count(f->fe, "PUT", "/archive"), 1);
  /* Three execs: the listing that waits for the upload, the tool, the
   * listing after it. */
  assert_int_equal(fake_engine_count(f->fe, "POST", "/exec/"), 3);
  assert_true(fake_engine_count(f->fe, "GET", "/archive") >= 1);
  assert_int_equal(fake_engine_count(f->fe, "DELETE", "/containers/"), 1);
  assert_int_equal(fake_engine_containers(f->fe), 0);
  assert_int_equal(fake_engine_volumes(f->fe), 0);
  /* The tool ran as the sandbox's user, not as the container's root. */
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "cat in.txt", user, sizeof user), 0);
  assert_string_equal(user, "1000:1000");
}

/* per_run: the first call makes the sandbox and copies in through sandman's
 * unpacker; the second finds it in the runner's cache, runs over an agent
 * session and sees what the first left in the sandbox. */
static void per_run_walk(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->ws, "in.txt", "one\n"), 0);
  const char *first[] = {"sh", "-c", "cat in.txt; echo kept > /tmp/state; echo 1 > out.txt"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_RUN, first, 3);
  req.run_id = "walk";
  sm_run_result r;
  run(f, &req, &r);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "one\n");
  assert_false(r.reused);
  assert_file(f, "out.txt", "1\n");
  char id[SM_ENGINE_ID_MAX];
  snprintf(id, sizeof id, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 1);
  assert_int_equal(fake_engine_count(f->fe, "PUT", "/archive"), 0); /* the unpacker did it */
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "untar", user, sizeof user), 0);
  assert_string_equal(user, "1000:1000");

  assert_int_equal(tf_write_at(f->ws, "in.txt", "two\n"), 0);
  const char *second[] = {"sh", "-c", "cat in.txt /tmp/state; echo 2 > out.txt"};
  req.argv = second;
  fake_engine_clear_log(f->fe);
  run(f, &req, &r);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "two\nkept\n");
  assert_true(r.reused);
  assert_string_equal(r.sandbox_id, id);
  assert_file(f, "out.txt", "2\n");
  sm_run_result_dispose(&r);
  sm_agent_stats st;
  sm_runner_agent_stats(f->runner, &st);
  assert_int_equal(st.sessions_opened, 1);
  assert_true(st.calls >= 1);
  /* Found in the cache (no inspect); one exec, the agent's session, and
   * over it the call and the workspace's listing and upload. */
  assert_int_equal(fake_engine_count(f->fe, "GET", "/containers/*/json"), 0);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/*/exec"), 1);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 0);
  assert_int_equal(fake_engine_containers(f->fe), 1); /* kept for the run's next call */
}

/* A keyed sandbox removed behind the runner's back: the next call finds
 * its cached entry stale, looks again and makes it anew. */
static void per_run_gone(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo hi"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_RUN, argv, 3);
  req.run_id = "gone";
  req.workspace = NULL;
  sm_runner_set_agent(f->runner, 0);
  sm_run_result r;
  run(f, &req, &r);
  assert_true(r.ok);
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_engine(f->runner, &e, &err), 0);
  assert_int_equal(sm_engine_container_remove(e, r.sandbox_id, 1, 1, &err), 0);
  sm_run_result_dispose(&r);
  run(f, &req, &r);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "hi\n");
  assert_false(r.reused);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 2);
}

/* The call outlives its timeout: killed, 124. */
static void timeout(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sleep", "30"};
  for (int keyed = 0; keyed < 2; keyed++) {
    sm_run_request req;
    request(f, &req, keyed ? SM_MODE_PER_RUN : SM_MODE_PER_TOOL, argv, 2);
    req.run_id = "timeout";
    req.workspace = NULL;
    req.settings.timeout_s = 0.3;
    sm_run_result r;
    run(f, &req, &r);
    assert_true(r.timed_out);
    assert_int_equal(r.exit_code, 124);
    assert_false(r.ok);
    sm_run_result_dispose(&r);
  }
  /* per_tool: the container was killed; per_run: the call's processes, by
   * sandman's kill script in the sandbox. */
  assert_int_equal(fake_engine_count(f->fe, "POST", "/kill"), 1);
}

static void with_stdin(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "tr a-z A-Z; exit 7"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_TOOL, argv, 3);
  req.workspace = NULL;
  mem_reader in = {"quiet words\n", 12, 0, 4};
  req.stdin_read = read_mem;
  req.stdin_ud = &in;
  sm_run_result r;
  run(f, &req, &r);
  assert_int_equal(r.exit_code, 7);
  assert_false(r.ok);
  assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
  assert_string_equal(r.stdout_data, "QUIET WORDS\n");
  sm_run_result_dispose(&r);
}

/* Nothing is made when the image is missing or the engine refuses the
 * container; the result says why. */
static void refusals(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_TOOL, argv, 1);
  req.workspace = NULL;
  snprintf(req.settings.image, sizeof req.settings.image, "no/such:image");
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(f->runner, &req, &r, &err), 0);
  assert_false(r.started);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "not present"));
  sm_run_result_dispose(&r);
  snprintf(req.settings.image, sizeof req.settings.image, "%s", IMAGE);
  fake_engine_fail(f->fe, "POST", "/containers/create", 500, "no space left on device", 1);
  assert_int_equal(sm_run(f->runner, &req, &r, &err), 0);
  assert_false(r.started);
  assert_non_null(strstr(r.error, "no space left on device"));
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/exec"), 0);
  assert_int_equal(fake_engine_containers(f->fe), 0);
  assert_int_equal(fake_engine_volumes(f->fe), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(per_tool_walk, setup, teardown),
      cmocka_unit_test_setup_teardown(per_run_walk, setup, teardown),
      cmocka_unit_test_setup_teardown(per_run_gone, setup, teardown),
      cmocka_unit_test_setup_teardown(timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(with_stdin, setup, teardown),
      cmocka_unit_test_setup_teardown(refusals, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
