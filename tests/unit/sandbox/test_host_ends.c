/* Mode none (src/lib/sandbox/host.c) beyond a plain exit, with no engine at
 * all (the runner points at the fake engine, which must see no request):
 * a tool killed by a signal, a cancel, the resource limits as the tool
 * sees them, the call's own excludes, and the refusals before the tool
 * runs (a workspace that cannot be copied, a scratch folder that cannot be
 * made). No scratch folder is left behind. */
#include <dirent.h>
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

static int setup(void **state) { return fake_world_setup(state, "unit-host-ends"); }

/* Nothing reached the engine and no scratch folder is left. */
static int teardown(void **state) {
  fixture *f = *state;
  char scratch[4200];
  snprintf(scratch, sizeof scratch, "%s/scratch", f->state);
  size_t left = 0;
  DIR *d = opendir(scratch);
  for (struct dirent *de; d && (de = readdir(d)) != NULL;) left += de->d_name[0] != '.';
  if (d) closedir(d);
  size_t requests = fake_engine_count(f->fe, NULL, NULL);
  fake_world_teardown(state);
  if (left || requests) print_error("%zu scratch folders left, %zu engine requests\n", left, requests);
  return left || requests ? -1 : 0;
}

static void host_request(fixture *f, sm_run_request *req, const char *const *argv, size_t argc) {
  fake_world_request(f, req, SM_MODE_NONE, argv, argc);
  req->workspace = NULL;
}

/* A tool killed by a signal exits 128 + the signal, as a shell says it. */
static void killed_by_signal(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo going; kill -TERM $$"};
  sm_run_request req;
  host_request(f, &req, argv, 3);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_int_equal(r.exit_code, 143);
  assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
  assert_string_equal(r.stdout_data, "going\n");
  sm_run_result_dispose(&r);
}

typedef struct canceller {
  volatile int *flag;
} canceller;

static int cancel_on_output(void *ud, int stream, const char *data, size_t len) {
  (void)stream;
  (void)data;
  (void)len;
  *((canceller *)ud)->flag = 1;
  return 0;
}

/* Cancelled once the tool spoke: its process group is killed (what it
 * started in the background too), 137, sandman's verdict. */
static void cancelled(void **state) {
  fixture *f = *state;
  char pidfile[4200];
  snprintf(pidfile, sizeof pidfile, "%s/child.pid", f->ws);
  const char *argv[] = {"sh", "-c", "sleep 60 & echo $! > \"$1\"; echo started; wait", "sh",
                        pidfile};
  sm_run_request req;
  host_request(f, &req, argv, 5);
  volatile int cancel = 0;
  canceller c = {&cancel};
  req.cancel = &cancel;
  req.on_output = cancel_on_output;
  req.on_output_ud = &c;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_true(cancel);
  assert_int_equal(r.exit_code, 137);
  assert_false(r.ok);
  assert_false(r.timed_out);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "cancelled"));
  sm_run_result_dispose(&r);
  /* The background sleep went with its group: gone, or dead and waiting
   * for its reaper (a bounded poll: the kill was sent before sm_run
   * returned, its delivery is the kernel's). */
  char *pid = tf_read(pidfile, NULL);
  assert_non_null(pid);
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%ld/stat", strtol(pid, NULL, 10));
  free(pid);
  int dead = 0;
  for (int i = 0; i < 500 && !dead; i++) {
    char *stat = tf_read(proc, NULL);
    const char *st = stat ? strrchr(stat, ')') : NULL;
    dead = stat == NULL || (st && (st[2] == 'Z' || st[2] == 'X'));
    free(stat);
    if (!dead) usleep(10 * 1000);
  }
  assert_true(dead);
}

/* The limits reach the tool: address space, file size, processes, CPU
 * time (the timeout, rounded up, plus one second). */
static void limits(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "ulimit -v; ulimit -f; ulimit -p; ulimit -t"};
  sm_run_request req;
  host_request(f, &req, argv, 3);
  req.settings.memory = 256 * 1024 * 1024;
  req.settings.disk = 1024 * 1024;
  req.settings.pids = 321;
  req.settings.timeout_s = 9.5;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_true(r.ok);
  /* dash: kbytes, 512-byte blocks, processes, seconds. */
  assert_string_equal(r.stdout_data, "262144\n2048\n321\n11\n");
  sm_run_result_dispose(&r);
}

/* The call's own excludes keep files out of the scratch copy; the tool's
 * changes still come back. */
static void call_excludes(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->ws, "keep.txt", "k\n"), 0);
  assert_int_equal(tf_write_at(f->ws, "skip.log", "s\n"), 0);
  const char *argv[] = {"sh", "-c", "ls; echo new > made.txt"};
  sm_run_request req;
  host_request(f, &req, argv, 3);
  req.workspace = f->ws;
  sm_string_list extra;
  memset(&extra, 0, sizeof extra);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_string_list_add(&extra, "*.log", &err), 0);
  req.extra_excludes = &extra;
  assert_int_equal(fake_world_expect(f, &req, "keep.txt\n"), 0);
  char *made = tf_read_at(f->ws, "made.txt");
  assert_string_equal(made, "new\n");
  free(made);
  char *skip = tf_read_at(f->ws, "skip.log");
  assert_string_equal(skip, "s\n"); /* excluded: untouched on the host */
  free(skip);
}

/* A workspace that cannot be copied in: the tool never runs. */
static void workspace_refused(void **state) {
  fixture *f = *state;
  char missing[4200];
  snprintf(missing, sizeof missing, "%s/no-such-folder", f->ws);
  char marker[4200];
  snprintf(marker, sizeof marker, "%s/ran", f->ws);
  const char *argv[] = {"sh", "-c", "touch \"$1\"", "sh", marker};
  sm_run_request req;
  host_request(f, &req, argv, 5);
  req.workspace = missing;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_false(r.started);
  assert_false(r.ok);
  assert_true(r.failure_kind > SM_FAIL_TIMEOUT);
  assert_non_null(strstr(r.error, "copying the workspace into"));
  sm_run_result_dispose(&r);
  assert_null(tf_read(marker, NULL));
}

/* The state folder's scratch cannot be made (a file stands in its way):
 * refused before anything runs. */
static void scratch_refused(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->state, "scratch", "not a folder\n"), 0);
  char marker[4200];
  snprintf(marker, sizeof marker, "%s/ran", f->ws);
  const char *argv[] = {"sh", "-c", "touch \"$1\"", "sh", marker};
  sm_run_request req;
  host_request(f, &req, argv, 5);
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_false(r.started);
  assert_true(r.failure_kind > SM_FAIL_TIMEOUT);
  assert_non_null(strstr(r.error, "creating"));
  sm_run_result_dispose(&r);
  assert_null(tf_read(marker, NULL));
  char path[4200];
  snprintf(path, sizeof path, "%s/scratch", f->state);
  assert_int_equal(unlink(path), 0);
}

/* A limit the kernel refuses (open files past fs.nr_open): the tool never
 * runs, and the result says which limit. */
static void limit_refused(void **state) {
  fixture *f = *state;
  char marker[4200];
  snprintf(marker, sizeof marker, "%s/ran", f->ws);
  const char *argv[] = {"sh", "-c", "touch \"$1\"", "sh", marker};
  sm_run_request req;
  host_request(f, &req, argv, 5);
  req.settings.nofile = (int64_t)1 << 40;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  assert_false(r.started);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "setting the open files limit"));
  sm_run_result_dispose(&r);
  assert_null(tf_read(marker, NULL));
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(killed_by_signal),  T(cancelled),       T(limits),
      T(call_excludes),     T(workspace_refused), T(scratch_refused),
      T(limit_refused),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
