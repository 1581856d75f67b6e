/* A rollback (src/lib/sandbox/fork.c) whose new container cannot be made
 * (the engine fails its create, its start or the upload of its /workspace:
 * tests/support/fake_engine.h's canned failures) keeps the sandbox as it
 * was: the same container under its name, answering, its files the same,
 * nothing of the attempt left. A rollback that goes well replaces the
 * container and its /workspace with the snapshot's, and leaves one
 * container and one volume. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "support/fake_engine.h"

typedef fake_world fixture;

static int setup(void **state) { return fake_world_setup(state, "unit-rollback"); }

/* Runs sh -c script in run r1's sandbox (no workspace copied in or out);
 * its stdout into out (len), its container id into id (may be NULL). */
static void in_sandbox(fixture *f, const char *script, char *out, size_t len, char *id) {
  const char *argv[] = {"sh", "-c", script};
  sm_run_request req;
  fake_world_request(f, &req, SM_MODE_PER_RUN, argv, 3);
  req.workspace = NULL;
  req.run_id = "r1";
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  if (!r.ok) print_error("call failed: %s\n", r.error);
  assert_true(r.ok);
  snprintf(out, len, "%s", r.stdout_data ? r.stdout_data : "");
  if (id) snprintf(id, SM_ENGINE_ID_MAX, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
}

/* A sandbox with a.txt "one", its snapshot s1, then a.txt "two" and b.txt:
 * its name into name. */
static void sandbox_and_snapshot(fixture *f, char *name, size_t len) {
  char out[256], id[SM_ENGINE_ID_MAX];
  in_sandbox(f, "echo one > /workspace/a.txt && echo made", out, sizeof out, id);
  assert_string_equal(out, "made\n");
  assert_int_equal(fake_engine_name_of(f->fe, id, name, len), 0);
  sm_snapshot_options o = SM_SNAPSHOT_OPTIONS_INIT;
  o.name = "s1";
  sm_snapshot snap;
  sm_error err = SM_ERROR_INIT;
  if (sm_sandbox_snapshot(f->runner, name, &o, &snap, &err) != 0) print_error("snapshot: %s\n", err.message);
  assert_int_equal(err.code, 0);
  in_sandbox(f, "echo two > /workspace/a.txt && echo new > /workspace/b.txt && echo ok", out,
             sizeof out, NULL);
  assert_string_equal(out, "ok\n");
}

/* The engine fails one step of making the new container: the rollback
 * fails, says the sandbox is kept, and the sandbox is the same one with
 * its files of after the snapshot. */
static void failed_step_keeps_sandbox(fixture *f, const char *method, const char *part) {
  char name[300], out[256], before[SM_ENGINE_ID_MAX], after[SM_ENGINE_ID_MAX];
  sandbox_and_snapshot(f, name, sizeof name);
  in_sandbox(f, "true", out, sizeof out, before);
  fake_engine_fail(f->fe, method, part, 500, "the engine failed on purpose", 1);
  sm_rest_report rep;
  sm_error err = SM_ERROR_INIT;
  assert_int_not_equal(sm_sandbox_rollback(f->runner, name, "s1", NULL, &rep, &err), 0);
  if (strstr(err.message, "kept as it was") == NULL) print_error("error: %s\n", err.message);
  assert_non_null(strstr(err.message, "kept as it was"));
  assert_non_null(strstr(err.message, "failed on purpose"));
  /* Nothing of the attempt is left: the sandbox's container and volume. */
  assert_int_equal(fake_engine_containers(f->fe), 1);
  assert_int_equal(fake_engine_volumes(f->fe), 1);
  in_sandbox(f, "cat /workspace/a.txt /workspace/b.txt", out, sizeof out, after);
  assert_string_equal(out, "two\nnew\n");
  assert_string_equal(before, after);
}

static void create_fails(void **state) {
  failed_step_keeps_sandbox(*state, "POST", "/containers/create");
}

static void start_fails(void **state) {
  failed_step_keeps_sandbox(*state, "POST", "/start");
}

static void workspace_upload_fails(void **state) {
  failed_step_keeps_sandbox(*state, "PUT", "/archive");
}

/* Then, with the engine well, the rollback goes through: a new container
 * with the snapshot's files, and one container and one volume left. */
static void rollback_after_failure(void **state) {
  fixture *f = *state;
  failed_step_keeps_sandbox(f, "POST", "/start");
  char name[300], out[256], before[SM_ENGINE_ID_MAX], after[SM_ENGINE_ID_MAX];
  in_sandbox(f, "true", out, sizeof out, before);
  assert_int_equal(fake_engine_name_of(f->fe, before, name, sizeof name), 0);
  sm_rest_report rep;
  sm_error err = SM_ERROR_INIT;
  if (sm_sandbox_rollback(f->runner, name, "s1", NULL, &rep, &err) != 0) print_error("rollback: %s\n", err.message);
  assert_int_equal(err.code, 0);
  assert_string_equal(rep.name, name);
  in_sandbox(f, "cat /workspace/a.txt; test -e /workspace/b.txt || echo no-b", out, sizeof out, after);
  assert_string_equal(out, "one\nno-b\n");
  assert_string_not_equal(before, after);
  assert_int_equal(fake_engine_containers(f->fe), 1);
  assert_int_equal(fake_engine_volumes(f->fe), 1);
  /* And a second rollback (from a volume named by the first) as well. */
  in_sandbox(f, "echo three > /workspace/a.txt", out, sizeof out, NULL);
  assert_int_equal(sm_sandbox_rollback(f->runner, name, "s1", NULL, &rep, &err), 0);
  in_sandbox(f, "cat /workspace/a.txt", out, sizeof out, NULL);
  assert_string_equal(out, "one\n");
  assert_int_equal(fake_engine_containers(f->fe), 1);
  assert_int_equal(fake_engine_volumes(f->fe), 1);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, fake_world_teardown)
  const struct CMUnitTest tests[] = {
      T(create_fails),
      T(start_fails),
      T(workspace_upload_fails),
      T(rollback_after_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
