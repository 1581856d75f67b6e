/* A call on a terminal without an engine: sm_tty's input cap, sizes, the
 * end of input on pipes, and what sm_run refuses before it seeks a
 * sandbox: a terminal with leased credentials or a host-tool route (never
 * in a terminal), outside a keyed mode, with stdin, a workspace or a
 * helper; an `existing` call outside a keyed mode. The runner points at a
 * socket nobody listens on: a request that got past its checks would fail
 * on the engine, not with these codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "common/rmtree.h"
#include "sandbox/tty.h"

static char state_dir[] = "/tmp/sandman-test-tty-XXXXXX";

static sm_runner *new_runner(void) {
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  o.engine.host = "unix:///nonexistent/sandman-test-tty.sock";
  o.engine.connect_timeout_ms = 200;
  o.state_dir = state_dir;
  o.instance = "unit-tty";
  sm_runner *r = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&r, &o, &err) != 0) fail_msg("runner: %s", err.message);
  return r;
}

static void test_input_cap_and_take(void **state) {
  (void)state;
  sm_tty *t = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_tty_new(&t, 24, 80, &err), 0);
  static unsigned char big[SM_TTY_INPUT_MAX];
  memset(big, 'x', sizeof big);
  assert_int_equal(sm_tty_write(t, big, sizeof big, &err), 0);
  /* Full: one more byte is refused, and nothing of it is queued. */
  assert_int_equal(sm_tty_write(t, "y", 1, &err), SM_EBUSY);
  unsigned char buf[100];
  int resized = 0, ended = 0;
  unsigned rows = 0, cols = 0;
  assert_int_equal(sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended), 100);
  assert_false(resized);
  assert_false(ended);
  assert_int_equal(rows, 24);
  assert_int_equal(sm_tty_write(t, "y", 1, &err), 0);
  sm_tty_free(t);
}

/* The driver's direct way out (sandbox_tty_set_direct): what it takes is
 * never queued, what it refuses is, and input queued first keeps its
 * order (the direct way is skipped while anything waits). */
typedef struct direct_log {
  int answer; /* what the fn returns */
  char got[64];
  size_t n;
  int calls;
} direct_log;

static int direct_take(void *ud, const void *data, size_t len) {
  direct_log *d = ud;
  d->calls++;
  if (d->answer < 0) return -1;
  memcpy(d->got + d->n, data, len);
  d->n += len;
  return d->answer;
}

static int woken(sm_tty *t) {
  struct pollfd p = {sandbox_tty_fd(t), POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

static void test_direct(void **state) {
  (void)state;
  sm_tty *t = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_tty_new(&t, 24, 80, &err), 0);
  direct_log d = {0};
  sandbox_tty_set_direct(t, direct_take, &d);
  /* Taken: nothing queued, the driver not woken. */
  assert_int_equal(sm_tty_write(t, "ab", 2, &err), 0);
  assert_int_equal(d.n, 2);
  assert_memory_equal(d.got, "ab", 2);
  assert_false(woken(t));
  unsigned char buf[16];
  int resized = 0, ended = 0;
  unsigned rows = 0, cols = 0;
  assert_int_equal(sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended), 0);
  /* Taken with a rest left for the driver: it is woken. */
  d.answer = 1;
  assert_int_equal(sm_tty_write(t, "c", 1, &err), 0);
  assert_true(woken(t));
  assert_int_equal(sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended), 0);
  /* Refused: queued as before, and what follows queues behind it. */
  d.answer = -1;
  assert_int_equal(sm_tty_write(t, "de", 2, &err), 0);
  d.answer = 0;
  int calls = d.calls;
  assert_int_equal(sm_tty_write(t, "f", 1, &err), 0);
  assert_int_equal(d.calls, calls);
  assert_int_equal(sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended), 3);
  assert_memory_equal(buf, "def", 3);
  /* Cleared: never called again. */
  sandbox_tty_set_direct(t, NULL, NULL);
  calls = d.calls;
  assert_int_equal(sm_tty_write(t, "g", 1, &err), 0);
  assert_int_equal(d.calls, calls);
  assert_int_equal(sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended), 1);
  assert_int_equal(d.n, 3);
  sm_tty_free(t);
}

static void test_sizes(void **state) {
  (void)state;
  sm_tty *t = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_tty_new(&t, 0, 80, &err), SM_EINVAL);
  assert_int_equal(sm_tty_new(&t, 24, SM_TTY_DIM_MAX + 1, &err), SM_EINVAL);
  assert_int_equal(sm_tty_new(&t, 24, 80, &err), 0);
  assert_int_equal(sm_tty_resize(t, 0, 10, &err), SM_EINVAL);
  assert_int_equal(sm_tty_resize(t, 30, 100, &err), 0);
  assert_int_equal(sm_tty_resize(t, 40, 120, &err), 0);
  unsigned char buf[8];
  int resized = 0, ended = 0;
  unsigned rows = 0, cols = 0;
  sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended);
  /* Two sizes on their way: the last wins. */
  assert_true(resized);
  assert_int_equal(rows, 40);
  assert_int_equal(cols, 120);
  sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended);
  assert_false(resized);
  sm_tty_free(t);
}

/* Pipes (size 0): the end of input is told once all was taken. */
static void test_pipes_end_of_input(void **state) {
  (void)state;
  sm_tty *t = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_tty_new(&t, 0, 0, &err), 0);
  assert_int_equal(sm_tty_write(t, "abcdef", 6, &err), 0);
  sm_tty_end_input(t);
  unsigned char buf[4];
  int resized = 0, ended = 0;
  unsigned rows = 1, cols = 1;
  assert_int_equal(sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended), 4);
  assert_false(ended); /* two bytes still wait */
  assert_int_equal(rows, 0);
  assert_int_equal(sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended), 2);
  assert_true(ended);
  assert_int_equal(sm_tty_resize(t, 30, 100, &err), 0); /* no terminal: ignored */
  sandbox_tty_take(t, buf, sizeof buf, &resized, &rows, &cols, &ended);
  assert_false(resized);
  sm_tty_free(t);
}

static ssize_t no_input(void *ud, char *buf, size_t len) {
  (void)ud;
  (void)buf;
  (void)len;
  return 0;
}

/* What sm_run refuses before it seeks a sandbox. */
static void test_run_refuses(void **state) {
  (void)state;
  sm_runner *r = new_runner();
  sm_tty *t = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_tty_new(&t, 24, 80, &err), 0);
  const char *argv[] = {"sh"};
  const char *secret[] = {"TOKEN=value-of-a-lease"};
  sm_host_route route;
  memset(&route, 0, sizeof route);
  struct {
    const char *what;
    int rc;
  } cases[] = {{"leased credentials", SM_EPOLICY},
               {"host-tool route", SM_EPOLICY},
               {"per_tool", SM_EINVAL},
               {"stdin", SM_EINVAL},
               {"workspace", SM_EINVAL},
               {"helper", SM_EINVAL},
               {"relative cwd", SM_EINVAL},
               {"existing per_tool", SM_EINVAL}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sm_run_request req;
    sm_run_request_init(&req);
    req.settings.mode = SM_MODE_PER_RUN;
    req.run_id = "r1";
    req.argv = argv;
    req.argc = 1;
    req.tty = t;
    switch (i) {
    case 0:
      req.secret_env = secret, req.n_secret_env = 1;
      break;
    case 1:
      req.host_route = &route;
      break;
    case 2:
      req.settings.mode = SM_MODE_PER_TOOL;
      break;
    case 3:
      req.stdin_read = no_input;
      break;
    case 4:
      req.workspace = "/tmp";
      break;
    case 5:
      req.helper = 1;
      break;
    case 6:
      req.cwd = "workspace";
      break;
    case 7:
      req.tty = NULL, req.existing = 1, req.settings.mode = SM_MODE_PER_TOOL;
      break;
    }
    sm_run_result res;
    sm_error e = SM_ERROR_INIT;
    int rc = sm_run(r, &req, &res, &e);
    if (rc != cases[i].rc) fail_msg("%s: %d (%s)", cases[i].what, rc, e.message);
    assert_false(res.started);
    sm_run_result_dispose(&res);
  }
  sm_tty_free(t);
  sm_runner_free(r);
}

static int setup(void **state) {
  (void)state;
  return mkdtemp(state_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return common_rmtree_at(AT_FDCWD, state_dir) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_input_cap_and_take),
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_direct),
      cmocka_unit_test(test_pipes_end_of_input),
      cmocka_unit_test(test_run_refuses),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
