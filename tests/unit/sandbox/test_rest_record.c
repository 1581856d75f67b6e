/* The record of a sandbox at rest, as a change cut short leaves it
 * (docs/state.md, Safety; the engine's side is test_state_crash.sh): a
 * first change's record, which once had no state, is read; a resume cut
 * short before it ran is listed at rest (not the engine's "exited", which
 * a reap removes); the half-written tar of a save cut short is swept, and
 * nothing else; the containers a hibernation cut short between its two
 * renames leaves are known for what they are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/keep.h>

#include "common/rmtree.h"
#include "sandbox/rest_record.h"

#define NAME "sandman-t-per_run-0123"

typedef struct fixture {
  char dir[64];
} fixture;

static int setup(void **state) {
  static fixture f;
  snprintf(f.dir, sizeof f.dir, "/tmp/sandman-test-rest-XXXXXX");
  if (mkdtemp(f.dir) == NULL) return -1;
  *state = &f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  common_rmtree_at(AT_FDCWD, f->dir);
  return 0;
}

static void put_file(const char *dir, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/rest/%s", dir, name);
  mkdir(dir, 0700);
  char sub[256];
  snprintf(sub, sizeof sub, "%s/rest", dir);
  mkdir(sub, 0700);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

static int exists(const char *dir, const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/rest/%s", dir, name);
  return access(path, F_OK) == 0;
}

/* Written before the fix: pending, no state. Read as its prior state, and
 * a pending record written now carries one. */
static void test_first_change_record(void **state) {
  fixture *f = *state;
  put_file(f->dir, NAME ".json",
           "{\"pending\":\"hibernated\",\"prior\":\"running\",\"id\":\"abc\",\"ws_saved\":1}");
  sandbox_rest_record r;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sandbox_rest_read(f->dir, NAME, &r, &err), 0);
  assert_string_equal(r.state, "running");
  assert_string_equal(r.pending, "hibernated");

  sandbox_rest_record w;
  memset(&w, 0, sizeof w);
  snprintf(w.pending, sizeof w.pending, "stopped");
  snprintf(w.prior, sizeof w.prior, "frozen");
  assert_int_equal(sandbox_rest_write(f->dir, NAME, &w, &err), 0);
  assert_int_equal(sandbox_rest_read(f->dir, NAME, &r, &err), 0);
  assert_string_equal(r.state, "frozen");
}

/* A resume cut short before the engine started it: still at rest. */
static void test_resume_cut_short_listed_at_rest(void **state) {
  fixture *f = *state;
  char out[SM_REST_STATE_MAX];
  double since = 0;
  put_file(f->dir, NAME ".json",
           "{\"state\":\"stopped\",\"pending\":\"running\",\"prior\":\"stopped\",\"since\":5,"
           "\"ws_saved\":1}");
  sm_sandbox_rest_state(f->dir, NAME, "exited", out, &since);
  assert_string_equal(out, "stopped");
  assert_true(since == 5);
  sm_sandbox_rest_state(f->dir, NAME, "running", out, &since);
  assert_string_equal(out, "running");
  put_file(f->dir, NAME ".json",
           "{\"state\":\"hibernated\",\"pending\":\"running\",\"prior\":\"hibernated\"}");
  sm_sandbox_rest_state(f->dir, NAME, "created", out, NULL);
  assert_string_equal(out, "hibernated");
  /* No record: the engine's word. */
  sm_sandbox_rest_state(f->dir, "sandman-t-none", "exited", out, NULL);
  assert_string_equal(out, "exited");
}

static void test_sweep(void **state) {
  fixture *f = *state;
  put_file(f->dir, NAME ".ws.tar", "whole");
  put_file(f->dir, NAME ".ws.tar.tmp-Ab12Cd", "half");
  put_file(f->dir, NAME "9.ws.tar.tmp-Ab12Cd", "another sandbox's");
  sandbox_rest_sweep(f->dir, NAME);
  assert_false(exists(f->dir, NAME ".ws.tar.tmp-Ab12Cd"));
  assert_true(exists(f->dir, NAME ".ws.tar"));
  assert_true(exists(f->dir, NAME "9.ws.tar.tmp-Ab12Cd"));
}

static void test_sides(void **state) {
  fixture *f = *state;
  char base[SM_NAME_MAX];
  put_file(f->dir, NAME ".json",
           "{\"state\":\"running\",\"pending\":\"hibernated\",\"prior\":\"running\",\"id\":\"old1\","
           "\"next_id\":\"new2\",\"ws_saved\":1}");
  assert_int_equal(sm_keep_rest_side(f->dir, NAME "-hib", "old1", base, sizeof base), 1);
  assert_string_equal(base, NAME);
  assert_int_equal(sm_keep_rest_side(f->dir, NAME "-next", "new2", base, sizeof base), 2);
  /* Not the containers the record names, or no such record. */
  assert_int_equal(sm_keep_rest_side(f->dir, NAME "-hib", "other", base, sizeof base), 0);
  assert_int_equal(sm_keep_rest_side(f->dir, NAME "-next", "old1", base, sizeof base), 0);
  assert_int_equal(sm_keep_rest_side(f->dir, NAME, "old1", base, sizeof base), 0);
  assert_int_equal(sm_keep_rest_side(f->dir, "sandman-t-none-hib", "old1", base, sizeof base), 0);
  /* Once the change is done, a container named so is its own. */
  put_file(f->dir, NAME ".json", "{\"state\":\"hibernated\",\"id\":\"new2\"}");
  assert_int_equal(sm_keep_rest_side(f->dir, NAME "-hib", "old1", base, sizeof base), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_first_change_record, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resume_cut_short_listed_at_rest, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sides, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
