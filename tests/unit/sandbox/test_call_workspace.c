/* The workspace's way in and out of a container call
 * (src/lib/sandbox/sandbox_call.c, src/lib/workspace/workspace_box.c)
 * against the fake engine (tests/support/fake_engine.h):
 * what the copy out refuses to bring back (protected paths, links that
 * leave the workspace, a fifo) while it applies the rest; a path both
 * sides changed during the call (a conflict copy beside the host's), in a
 * per_tool sandbox (the engine's execs) and a per_run one over the agent
 * alike; and a copy in of 300 files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "support/fake_engine.h"
#include "support/files.h"

typedef fake_world fixture;

static int setup(void **state) { return fake_world_setup(state, "unit-callws"); }

/* 1 when the result refused path for reason. */
static int refused(const sm_run_result *r, const char *path, const char *reason) {
  for (size_t i = 0; i < r->n_refused; i++)
    if (strcmp(r->refused[i].path, path) == 0 && strcmp(r->refused[i].reason, reason) == 0)
      return 1;
  return 0;
}

static void assert_host_file(fixture *f, const char *name, const char *text) {
  char *got = tf_read_at(f->ws, name);
  if (text == NULL) {
    assert_null(got);
    return;
  }
  assert_non_null(got);
  assert_string_equal(got, text);
  free(got);
}

/* The request of call i: 0 per_tool, 1 per_run (a first call, made here,
 * makes the sandbox: this one goes over the agent). */
static void request(fixture *f, sm_run_request *req, int i, const char *const *argv, size_t argc) {
  static const char *const warm[] = {"true"};
  fake_world_request(f, req, i ? SM_MODE_PER_RUN : SM_MODE_PER_TOOL, i ? warm : argv, i ? 1 : argc);
  req->run_id = "ws";
  if (i) {
    assert_int_equal(fake_world_expect(f, req, ""), 0);
    req->argv = argv;
    req->argc = argc;
  }
}

/* What the copy out must not bring back stays in the sandbox, each said
 * with its reason; the rest of the tool's changes arrive. */
static void refusals(void **state) {
  fixture *f = *state;
  char git[4200];
  snprintf(git, sizeof git, "%s/.git", f->ws);
  assert_int_equal(mkdir(git, 0755), 0);
  assert_int_equal(tf_write_at(git, "config", "[core]\n"), 0);
  const char *argv[] = {"sh", "-c",
                        "echo evil > .git/config; ln -s /etc/passwd abs; "
                        "ln -s ../../outside esc; mkfifo pipe; echo fine > good.txt"};
  for (int i = 0; i < 2; i++) {
    sm_run_request req;
    sm_run_result r;
    request(f, &req, i, argv, 3);
    assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
    assert_true(r.ok);
    assert_true(refused(&r, ".git/config", "protected"));
    assert_true(refused(&r, "abs", "link_absolute"));
    assert_true(refused(&r, "esc", "link_outside"));
    assert_true(refused(&r, "pipe", "fifo"));
    sm_run_result_dispose(&r);
    char *cfg = tf_read_at(git, "config");
    assert_string_equal(cfg, "[core]\n");
    free(cfg);
    assert_host_file(f, "good.txt", "fine\n");
    struct stat st;
    char path[4200];
    for (size_t k = 0; k < 3; k++) {
      static const char *const never[] = {"abs", "esc", "pipe"};
      snprintf(path, sizeof path, "%s/%s", f->ws, never[k]);
      assert_int_equal(lstat(path, &st), -1);
    }
    snprintf(path, sizeof path, "%s/good.txt", f->ws);
    assert_int_equal(unlink(path), 0);
  }
}

typedef struct host_edit {
  fixture *f;
  int done;
} host_edit;

/* Once the tool has written its version, the host writes its own. */
static int edit_on_output(void *ud, int stream, const char *data, size_t len) {
  (void)stream;
  host_edit *h = ud;
  if (h->done || len < 7 || memmem(data, len, "written", 7) == NULL) return 0;
  h->done = 1;
  return tf_write_at(h->f->ws, "shared.txt", "host's\n") == 0 ? 0 : -1;
}

/* Both sides changed a file during the call: the host's stays, the tool's
 * lands beside it as a conflict copy, and the result lists it. */
static void conflict(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo tool\\'s > shared.txt; echo written"};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(tf_write_at(f->ws, "shared.txt", "base\n"), 0);
    sm_run_request req;
    sm_run_result r;
    request(f, &req, i, argv, 3);
    host_edit h = {f, 0};
    req.on_output = edit_on_output;
    req.on_output_ud = &h;
    assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
    assert_true(h.done);
    assert_int_equal(r.n_conflicts, 1);
    assert_string_equal(r.conflicts[0], "shared.txt.sandman-conflict");
    sm_run_result_dispose(&r);
    assert_host_file(f, "shared.txt", "host's\n");
    assert_host_file(f, "shared.txt.sandman-conflict", "tool's\n");
    char path[4200];
    snprintf(path, sizeof path, "%s/shared.txt.sandman-conflict", f->ws);
    assert_int_equal(unlink(path), 0);
  }
}

/* A copy in of 300 files in one upload: every file arrives, and of them
 * only the one the tool changed comes back. */
static void many_files(void **state) {
  fixture *f = *state;
  for (int i = 0; i < 300; i++) {
    char name[32], text[32];
    snprintf(name, sizeof name, "f%03d.txt", i);
    snprintf(text, sizeof text, "%d\n", i);
    assert_int_equal(tf_write_at(f->ws, name, text), 0);
  }
  const char *argv[] = {"sh", "-c", "ls | wc -l; cat f299.txt; echo changed > f150.txt"};
  sm_run_request req;
  request(f, &req, 0, argv, 3);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "300\n299\n");
  assert_int_equal(r.n_files_changed, 1);
  assert_string_equal(r.files_changed[0], "f150.txt");
  sm_run_result_dispose(&r);
  assert_host_file(f, "f150.txt", "changed\n");
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, fake_world_teardown)
  const struct CMUnitTest tests[] = {
      T(refusals),
      T(conflict),
      T(many_files),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
