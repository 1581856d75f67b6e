/* Mode none end to end (src/lib/sandbox/host.c): sm_run with no engine at all
 * (the runner points at the fake engine, which must see no request): the
 * workspace copied into a scratch folder and its changes back, protected
 * paths refused, the scrubbed environment, stdin, exit codes, the output
 * caps, a limit, the timeout, the sync modes, and the scratch folder gone
 * after every call. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "support/fake_engine.h"
#include "support/files.h"
#include "support/memio.h"
#include "support/xalloc.h"

typedef fake_world fixture;

static int setup(void **state) {
  fixture *f = xcalloc(1, sizeof *f);
  *state = f;
  return f && fake_world_open(f, "unit-host") == 0 ? 0 : -1;
}

/* Every call left its scratch folder behind it empty, and not one request
 * reached the engine. */
static int teardown(void **state) {
  fixture *f = *state;
  char scratch[4200];
  snprintf(scratch, sizeof scratch, "%s/scratch", f->state);
  DIR *d = opendir(scratch);
  size_t left = 0;
  for (struct dirent *de; d && (de = readdir(d)) != NULL;) left += de->d_name[0] != '.';
  if (d) closedir(d);
  size_t requests = fake_engine_count(f->fe, NULL, NULL);
  fake_world_close(f);
  free(f);
  if (left || requests)
    print_error("%zu scratch folders left, %zu engine requests\n", left, requests);
  return left || requests ? -1 : 0;
}

static void request(fixture *f, sm_run_request *req, const char *const *argv, size_t argc) {
  sm_run_request_init(req);
  req->settings.mode = SM_MODE_NONE;
  req->settings.timeout_s = 60;
  req->argv = argv;
  req->argc = argc;
  req->workspace = f->ws;
}

static void run(fixture *f, const sm_run_request *req, sm_run_result *out) {
  sm_error err = SM_ERROR_INIT;
  int rc = sm_run(f->runner, req, out, &err);
  if (rc != 0 || out->failure_kind > SM_FAIL_TIMEOUT)
    print_error("sm_run: %d %s; result: %s\n", rc, err.message, out->error);
  assert_int_equal(rc, 0);
}

static void workspace_round_trip(void **state) {
  fixture *f = *state;
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/.git", f->ws);
  assert_int_equal(mkdir(dir, 0755), 0);
  assert_int_equal(tf_write_at(f->ws, "in.txt", "in\n"), 0);
  assert_int_equal(tf_write_at(f->ws, "gone.txt", "x\n"), 0);
  const char *argv[] = {"sh", "-c",
                        "cat in.txt; echo out > out.txt; rm gone.txt; mkdir -p sub && "
                        "echo deep > sub/deep.txt; echo evil > .git/config; "
                        "test \"$HOME\" -ef . && test -d \"$TMPDIR\""};
  sm_run_request req;
  request(f, &req, argv, 3);
  sm_run_result r;
  run(f, &req, &r);
  assert_true(r.ok);
  assert_int_equal(r.mode, SM_MODE_NONE);
  assert_string_equal(r.sandbox_id, "");
  assert_string_equal(r.stdout_data, "in\n");
  char *got = tf_read_at(f->ws, "out.txt");
  assert_string_equal(got, "out\n");
  free(got);
  got = tf_read_at(f->ws, "sub/deep.txt");
  assert_string_equal(got, "deep\n");
  free(got);
  assert_null(tf_read_at(f->ws, "gone.txt"));
  /* A protected path never reaches the host; the result says so. */
  assert_null(tf_read_at(f->ws, ".git/config"));
  assert_int_equal(r.n_refused, 1);
  assert_string_equal(r.refused[0].path, ".git/config");
  assert_string_equal(r.refused[0].reason, "protected");
  assert_true(r.n_files_changed >= 3);
  sm_run_result_dispose(&r);
}

static void environment(void **state) {
  fixture *f = *state;
  setenv("SANDMAN_TEST_HOST_SECRET", "leaked", 1);
  setenv("PASS_ME", "passed", 1);
  const char *argv[] = {"sh", "-c",
                        "echo \"${SANDMAN_TEST_HOST_SECRET:-unset} ${PASS_ME:-unset} $EXTRA\""};
  const char *env[] = {"EXTRA=given"};
  sm_run_request req;
  request(f, &req, argv, 3);
  req.workspace = NULL;
  req.env = env;
  req.n_env = 1;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_string_list_add(&req.settings.env_passthrough, "PASS_*", &err), 0);
  sm_run_result r;
  run(f, &req, &r);
  assert_string_equal(r.stdout_data, "unset passed given\n");
  sm_run_result_dispose(&r);
  unsetenv("SANDMAN_TEST_HOST_SECRET");
  unsetenv("PASS_ME");
}

static void stdin_and_codes(void **state) {
  fixture *f = *state;
  const char *upper[] = {"sh", "-c", "tr a-z A-Z; exit 5"};
  sm_run_request req;
  request(f, &req, upper, 3);
  req.workspace = NULL;
  mem_reader in = {"words\n", 6, 0, 2};
  req.stdin_read = read_mem;
  req.stdin_ud = &in;
  sm_run_result r;
  run(f, &req, &r);
  assert_int_equal(r.exit_code, 5);
  assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
  assert_string_equal(r.stdout_data, "WORDS\n");
  sm_run_result_dispose(&r);
  const char *missing[] = {"no-such-command-anywhere"};
  request(f, &req, missing, 1);
  req.workspace = NULL;
  run(f, &req, &r);
  assert_int_equal(r.exit_code, 127);
  sm_run_result_dispose(&r);
  const char *limit[] = {"sh", "-c", "ulimit -n"};
  request(f, &req, limit, 3);
  req.workspace = NULL;
  req.settings.nofile = 64;
  run(f, &req, &r);
  assert_string_equal(r.stdout_data, "64\n");
  sm_run_result_dispose(&r);
}

static void caps_and_timeout(void **state) {
  fixture *f = *state;
  const char *loud[] = {"sh", "-c",
                        "i=0; while [ $i -lt 100 ]; do printf 0123456789; "
                        "i=$((i+1)); done"};
  sm_run_request req;
  request(f, &req, loud, 3);
  req.workspace = NULL;
  req.settings.stdout_cap = 10;
  sm_run_result r;
  run(f, &req, &r);
  assert_true(r.ok);
  assert_true(r.stdout_truncated);
  assert_int_equal(r.stdout_len, 10);
  sm_run_result_dispose(&r);
  const char *slow[] = {"sleep", "30"};
  request(f, &req, slow, 2);
  req.workspace = NULL;
  req.settings.timeout_s = 0.3;
  run(f, &req, &r);
  assert_true(r.timed_out);
  assert_int_equal(r.exit_code, 124);
  assert_int_equal(r.failure_kind, SM_FAIL_TIMEOUT);
  sm_run_result_dispose(&r);
}

static void sync_modes(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->ws, "in.txt", "in\n"), 0);
  const char *argv[] = {"sh", "-c", "cat in.txt 2>/dev/null || echo none; echo x > new.txt"};
  sm_run_request req;
  request(f, &req, argv, 3);
  req.sync = SM_SYNC_IN;
  sm_run_result r;
  run(f, &req, &r);
  assert_string_equal(r.stdout_data, "in\n");
  assert_null(tf_read_at(f->ws, "new.txt")); /* in only: nothing comes back */
  sm_run_result_dispose(&r);
  req.sync = SM_SYNC_NONE;
  run(f, &req, &r);
  assert_string_equal(r.stdout_data, "none\n"); /* nothing went in */
  assert_null(tf_read_at(f->ws, "new.txt"));
  sm_run_result_dispose(&r);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(workspace_round_trip), T(environment), T(stdin_and_codes),
      T(caps_and_timeout),     T(sync_modes),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
