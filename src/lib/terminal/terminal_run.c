/* A running terminal (terminal_run.h): sm_run on a pseudo-terminal, on a
 * thread of its own, its screen fed with its output. */
#include "terminal/terminal_run.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/util.h>

#include "terminal/terminal_screen.h"

#define ANSWERS_MAX 4096 /* the emulator's answers to one piece of output */

struct terminal_run {
  sm_run_request *req;
  terminal_run_hooks hooks;
  sm_tty *tty;
  volatile int cancel;
  pthread_t thread;
  int has_thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  terminal_state state;
  int started, exit_code;
  sm_failure_kind failure;
  char error[512];
  unsigned rows, cols;
  terminal_screen *screen;
  double changed_at; /* monotonic ms: the screen's last change */
  common_buf answers;
};

/* ---- the call's side ---- */

static int on_output(void *ud, int stream, const char *data, size_t len) {
  terminal_run *t = ud;
  (void)stream;
  pthread_mutex_lock(&t->mu);
  common_buf_reset(&t->answers);
  terminal_screen_feed(t->screen, data, len, &t->answers);
  int answered = t->hooks.output && t->hooks.output(t->hooks.ud, data, len, &t->answers);
  if (!answered && t->answers.len > 0) {
    sm_error ignore = SM_ERROR_INIT;
    sm_tty_write(t->tty, t->answers.data, t->answers.len, &ignore);
  }
  t->changed_at = sm_monotonic_ms();
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  return 0;
}

static void on_start(void *ud, const char *sandbox_id) {
  terminal_run *t = ud;
  int refuse = t->hooks.started && t->hooks.started(t->hooks.ud, sandbox_id);
  pthread_mutex_lock(&t->mu);
  if (refuse) t->cancel = 1;
  if (!t->cancel) {
    t->state = TERMINAL_RUNNING;
    t->started = 1;
  }
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void *run_main(void *arg) {
  terminal_run *t = arg;
  sm_run_result res;
  memset(&res, 0, sizeof res);
  if (t->hooks.run) {
    t->hooks.run(t->hooks.ud, t->req, &res);
  } else {
    res.failure_kind = SM_FAIL_SANDBOX;
    snprintf(res.error, sizeof res.error, "nothing runs the terminal's call");
  }
  pthread_mutex_lock(&t->mu);
  t->state = TERMINAL_EXITED;
  t->exit_code = res.exit_code;
  t->failure = res.failure_kind;
  if (res.failure_kind != SM_FAIL_NONE && res.failure_kind != SM_FAIL_TOOL)
    snprintf(t->error, sizeof t->error, "%s", res.error);
  if (t->hooks.ended) t->hooks.ended(t->hooks.ud, &res);
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  sm_run_result_dispose(&res);
  return NULL;
}

/* ---- its life ---- */

terminal_run *terminal_run_start(sm_run_request *req, unsigned rows, unsigned cols,
                                 size_t scrollback, const terminal_run_hooks *hooks,
                                 sm_error *err) {
  terminal_run *t = calloc(1, sizeof *t);
  if (t == NULL) {
    sm_error_set(err, SM_ENOMEM, NULL);
    return NULL;
  }
  t->req = req;
  t->hooks = *hooks;
  t->rows = rows;
  t->cols = cols;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  common_buf_init(&t->answers, ANSWERS_MAX);
  t->changed_at = sm_monotonic_ms();
  t->screen = terminal_screen_new(rows, cols, scrollback);
  if (t->screen == NULL || sm_tty_new(&t->tty, rows, cols, err) != 0) {
    if (t->screen == NULL) sm_error_set(err, SM_ENOMEM, NULL);
    terminal_run_free(t);
    return NULL;
  }
  /* A terminal is a call on its tty with nothing that reaches beyond its
   * sandbox: no host-tool route, no time limit but its life. */
  req->tty = t->tty;
  req->host_route = NULL;
  req->settings.timeout_s = 0;
  req->on_output = on_output;
  req->on_output_ud = t;
  req->stdout_forward_only = 1;
  req->cancel = &t->cancel;
  sm_tty_on_start(t->tty, on_start, t);
  if (pthread_create(&t->thread, NULL, run_main, t) != 0) {
    sm_error_set(err, SM_ENOMEM, "cannot start the terminal's thread");
    terminal_run_free(t);
    return NULL;
  }
  t->has_thread = 1;
  return t;
}

void terminal_run_cancel(terminal_run *t) {
  pthread_mutex_lock(&t->mu);
  t->cancel = 1;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

void terminal_run_free(terminal_run *t) {
  if (t == NULL) return;
  if (t->has_thread) {
    terminal_run_cancel(t);
    pthread_join(t->thread, NULL);
  }
  terminal_screen_free(t->screen);
  sm_tty_free(t->tty);
  common_buf_dispose(&t->answers);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}

/* Under t->mu: waits until when (monotonic ms) at most. */
static void wait_until(terminal_run *t, double when) {
  double left = when - sm_monotonic_ms();
  if (left <= 0) return;
  struct timespec w;
  clock_gettime(CLOCK_REALTIME, &w);
  long long ns = w.tv_nsec + (long long)(left * 1e6);
  w.tv_sec += ns / 1000000000;
  w.tv_nsec = ns % 1000000000;
  pthread_cond_timedwait(&t->cv, &t->mu, &w);
}

int terminal_run_wait_started(terminal_run *t, double wait_ms) {
  double until = sm_monotonic_ms() + wait_ms;
  pthread_mutex_lock(&t->mu);
  while (!t->started && t->state != TERMINAL_EXITED && sm_monotonic_ms() < until)
    wait_until(t, until);
  int started = t->started;
  pthread_mutex_unlock(&t->mu);
  return started;
}

int terminal_run_wait_ended(terminal_run *t, double wait_ms) {
  double until = sm_monotonic_ms() + wait_ms;
  pthread_mutex_lock(&t->mu);
  while (t->state != TERMINAL_EXITED && sm_monotonic_ms() < until) wait_until(t, until);
  int ended = t->state == TERMINAL_EXITED;
  pthread_mutex_unlock(&t->mu);
  return ended;
}

void terminal_run_settle(terminal_run *t, int quiet_ms, int wait_ms, int need_change) {
  double start = sm_monotonic_ms(), until = start + wait_ms;
  pthread_mutex_lock(&t->mu);
  for (;;) {
    double now = sm_monotonic_ms();
    if (now >= until || t->state == TERMINAL_EXITED) break;
    if (need_change && t->changed_at <= start) {
      wait_until(t, until);
      continue;
    }
    double quiet_until = (t->changed_at > start ? t->changed_at : start) + quiet_ms;
    if (now >= quiet_until) break;
    wait_until(t, quiet_until < until ? quiet_until : until);
  }
  pthread_mutex_unlock(&t->mu);
}

/* ---- reading and using it ---- */

terminal_state terminal_run_state_locked(terminal_run *t, int *exit_code) {
  if (exit_code) *exit_code = t->exit_code;
  return t->state;
}

terminal_state terminal_run_state(terminal_run *t, int *exit_code, sm_failure_kind *failure,
                                  char *error, size_t error_len) {
  pthread_mutex_lock(&t->mu);
  terminal_state s = terminal_run_state_locked(t, exit_code);
  if (failure) *failure = t->failure;
  if (error && error_len) snprintf(error, error_len, "%s", t->error);
  pthread_mutex_unlock(&t->mu);
  return s;
}

void terminal_run_size(terminal_run *t, unsigned *rows, unsigned *cols) {
  pthread_mutex_lock(&t->mu);
  *rows = t->rows;
  *cols = t->cols;
  pthread_mutex_unlock(&t->mu);
}

int terminal_run_input(terminal_run *t, const void *data, size_t len, sm_error *err) {
  pthread_mutex_lock(&t->mu);
  int ended = t->state == TERMINAL_EXITED;
  pthread_mutex_unlock(&t->mu);
  if (ended) return sm_error_set(err, SM_ECONFLICT, "the terminal's program has ended");
  return sm_tty_write(t->tty, data, len, err);
}

int terminal_run_resize(terminal_run *t, unsigned rows, unsigned cols, sm_error *err) {
  int rc = sm_tty_resize(t->tty, rows, cols, err);
  if (rc) return rc;
  pthread_mutex_lock(&t->mu);
  t->rows = rows;
  t->cols = cols;
  terminal_screen_resize(t->screen, rows, cols);
  pthread_mutex_unlock(&t->mu);
  return 0;
}

json_object *terminal_run_screen_json(terminal_run *t, size_t scrollback) {
  pthread_mutex_lock(&t->mu);
  json_object *o = terminal_screen_json(t->screen, scrollback);
  pthread_mutex_unlock(&t->mu);
  return o;
}

int terminal_run_screen_text(terminal_run *t, common_buf *out) {
  pthread_mutex_lock(&t->mu);
  int rc = terminal_screen_text(t->screen, out);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void terminal_run_lock(terminal_run *t) { pthread_mutex_lock(&t->mu); }
void terminal_run_unlock(terminal_run *t) { pthread_mutex_unlock(&t->mu); }

int terminal_run_redraw_locked(terminal_run *t, common_buf *out) {
  return terminal_screen_redraw(t->screen, out);
}
