/* A call on a terminal (sandman/terminal.h) walked by sm_run against the
 * fake engine (tests/support/fake_engine.h): the agent opens the terminal
 * (or the pipes) in the sandbox, what was typed reaches the program once
 * it has started, its size is the terminal's, the start is told with the
 * sandbox's id, and the session is the terminal's own (closed after). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>
#include <sandman/terminal.h>

#include "support/fake_engine.h"

typedef fake_world fixture;

static int setup(void **state) { return fake_world_setup(state, "unit-calltty"); }

typedef struct started {
  char id[SM_ENGINE_ID_MAX];
  int n;
} started;

static void on_start(void *ud, const char *sandbox_id) {
  started *s = ud;
  snprintf(s->id, sizeof s->id, "%s", sandbox_id ? sandbox_id : "");
  s->n++;
}

/* A per_run sandbox for the terminal's calls; its id into id. */
static void make_sandbox(fixture *f, sm_run_request *req, char *id, size_t len) {
  static const char *const warm[] = {"true"};
  fake_world_request(f, req, SM_MODE_PER_RUN, warm, 1);
  req->workspace = NULL;
  req->run_id = "tty";
  sm_run_result r;
  assert_int_equal(fake_world_run(f, req, &r, 1), 0);
  assert_true(r.ok);
  snprintf(id, len, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
}

/* A terminal of rows x cols whose start is told to st, with typed queued. */
static sm_tty *new_tty(unsigned rows, unsigned cols, started *st, const char *typed) {
  sm_tty *tty = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_tty_new(&tty, rows, cols, &err), 0);
  sm_tty_on_start(tty, on_start, st);
  assert_int_equal(sm_tty_write(tty, typed, strlen(typed), &err), 0);
  return tty;
}

/* Pipes (a terminal of 0 x 0): the input typed ahead reaches the program's
 * stdin, which ends at sm_tty_end_input; its stdout and stderr stay apart. */
static void pipes(void **state) {
  fixture *f = *state;
  sm_run_request req;
  char id[SM_ENGINE_ID_MAX];
  make_sandbox(f, &req, id, sizeof id);
  started st = {"", 0};
  sm_tty *tty = new_tty(0, 0, &st, "typed ahead\n");
  sm_tty_end_input(tty);
  const char *argv[] = {"sh", "-c", "tr a-z A-Z; echo to-err >&2"};
  req.argv = argv;
  req.argc = 3;
  req.tty = tty;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "TYPED AHEAD\n");
  assert_string_equal(r.stderr_data, "to-err\n");
  assert_int_equal(st.n, 1);
  assert_string_equal(st.id, id);
  sm_run_result_dispose(&r);
  sm_tty_free(tty);
}

/* A terminal: the program sees a tty of the given size; input typed ahead
 * reaches it; its exit code is the call's. The terminal's session is its
 * own: the sandbox's next call opens another. */
static void terminal(void **state) {
  fixture *f = *state;
  sm_run_request req;
  char id[SM_ENGINE_ID_MAX];
  make_sandbox(f, &req, id, sizeof id);
  started st = {"", 0};
  sm_tty *tty = new_tty(33, 101, &st, "line\n");
  const char *argv[] = {"sh", "-c",
                        "test -t 0 && echo is-a-tty; stty size; read -r x; echo got-$x; exit 3"};
  req.argv = argv;
  req.argc = 3;
  req.tty = tty;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 0), 0);
  if (r.exit_code != 3) print_error("%s\n%s\n", r.error, r.stdout_data ? r.stdout_data : "");
  assert_int_equal(r.exit_code, 3);
  assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
  assert_non_null(strstr(r.stdout_data, "is-a-tty"));
  assert_non_null(strstr(r.stdout_data, "33 101"));
  assert_non_null(strstr(r.stdout_data, "got-line"));
  assert_int_equal(st.n, 1);
  assert_string_equal(st.id, id);
  sm_run_result_dispose(&r);
  sm_tty_free(tty);
  sm_agent_stats as;
  sm_runner_agent_stats(f->runner, &as);
  unsigned long opened = as.sessions_opened;
  const char *next[] = {"echo", "after"};
  req.argv = next;
  req.argc = 2;
  req.tty = NULL;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_string_equal(r.stdout_data, "after\n");
  sm_run_result_dispose(&r);
  sm_runner_agent_stats(f->runner, &as);
  assert_int_equal(as.sessions_opened, opened + 1);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, fake_world_teardown)
  const struct CMUnitTest tests[] = {
      T(pipes),
      T(terminal),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
