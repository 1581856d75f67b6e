/* A call's pseudo-terminal, as the threads around it see it
 * (sandman/terminal.h): typed input queued under a cap, the latest size,
 * and an eventfd that wakes the call's thread (tty.h). */
#include "sandbox/tty.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct sm_tty {
  pthread_mutex_t mu;
  int wake;
  unsigned rows, cols;
  int resized;       /* the size changed since the driver took it */
  int ended;         /* no more input (sm_tty_end_input) */
  unsigned char *in; /* typed, not yet taken */
  size_t in_len, in_cap;
  sm_tty_start_fn on_start;
  void *on_start_ud;
  sandbox_tty_direct_fn direct; /* the driver's way straight out */
  void *direct_ud;
};

static int dims_ok(unsigned rows, unsigned cols) {
  return rows >= 1 && cols >= 1 && rows <= SM_TTY_DIM_MAX && cols <= SM_TTY_DIM_MAX;
}

int sm_tty_new(sm_tty **out, unsigned rows, unsigned cols, sm_error *err) {
  *out = NULL;
  if (!dims_ok(rows, cols) && !(rows == 0 && cols == 0))
    return sm_error_set(err, SM_EINVAL, "a terminal has 1 to %d rows and columns", SM_TTY_DIM_MAX);
  sm_tty *t = calloc(1, sizeof *t);
  if (t == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  t->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (t->wake < 0) {
    free(t);
    return sm_error_set_errno(err, SM_EIO, errno, "eventfd");
  }
  pthread_mutex_init(&t->mu, NULL);
  t->rows = rows;
  t->cols = cols;
  *out = t;
  return 0;
}

void sm_tty_free(sm_tty *t) {
  if (t == NULL) return;
  close(t->wake);
  pthread_mutex_destroy(&t->mu);
  free(t->in);
  free(t);
}

static void poke(sm_tty *t) {
  uint64_t one = 1;
  (void)!write(t->wake, &one, sizeof one);
}

int sm_tty_write(sm_tty *t, const void *data, size_t len, sm_error *err) {
  if (len == 0) return 0;
  pthread_mutex_lock(&t->mu);
  int rc = 0, direct = -1;
  if (t->direct && t->in_len == 0) direct = t->direct(t->direct_ud, data, len);
  if (direct >= 0) {
    pthread_mutex_unlock(&t->mu);
    if (direct) poke(t);
    return 0;
  }
  if (len > SM_TTY_INPUT_MAX - t->in_len) {
    rc = sm_error_set(err, SM_EBUSY, "the terminal's input is backed up (%zu bytes wait)",
                      t->in_len);
  } else if (t->in_len + len > t->in_cap) {
    size_t cap = t->in_cap ? t->in_cap : 4096;
    while (cap < t->in_len + len) cap *= 2;
    unsigned char *b = realloc(t->in, cap);
    if (b == NULL) rc = sm_error_set(err, SM_ENOMEM, NULL);
    else t->in = b, t->in_cap = cap;
  }
  if (rc == 0) {
    memcpy(t->in + t->in_len, data, len);
    t->in_len += len;
  }
  pthread_mutex_unlock(&t->mu);
  if (rc == 0) poke(t);
  return rc;
}

int sm_tty_resize(sm_tty *t, unsigned rows, unsigned cols, sm_error *err) {
  if (!dims_ok(rows, cols))
    return sm_error_set(err, SM_EINVAL, "a terminal has 1 to %d rows and columns", SM_TTY_DIM_MAX);
  pthread_mutex_lock(&t->mu);
  if (t->rows) {
    t->rows = rows;
    t->cols = cols;
    t->resized = 1;
  }
  pthread_mutex_unlock(&t->mu);
  poke(t);
  return 0;
}

void sm_tty_end_input(sm_tty *t) {
  pthread_mutex_lock(&t->mu);
  t->ended = 1;
  pthread_mutex_unlock(&t->mu);
  poke(t);
}

void sm_tty_size(sm_tty *t, unsigned *rows, unsigned *cols) {
  pthread_mutex_lock(&t->mu);
  *rows = t->rows;
  *cols = t->cols;
  pthread_mutex_unlock(&t->mu);
}

void sm_tty_on_start(sm_tty *t, sm_tty_start_fn fn, void *ud) {
  pthread_mutex_lock(&t->mu);
  t->on_start = fn;
  t->on_start_ud = ud;
  pthread_mutex_unlock(&t->mu);
}

int sandbox_tty_fd(sm_tty *t) { return t->wake; }

void sandbox_tty_set_direct(sm_tty *t, sandbox_tty_direct_fn fn, void *ud) {
  pthread_mutex_lock(&t->mu);
  t->direct = fn;
  t->direct_ud = ud;
  pthread_mutex_unlock(&t->mu);
}

size_t sandbox_tty_take(sm_tty *t, unsigned char *buf, size_t cap, int *resized, unsigned *rows,
                        unsigned *cols, int *ended) {
  uint64_t v;
  (void)!read(t->wake, &v, sizeof v);
  pthread_mutex_lock(&t->mu);
  *resized = t->resized;
  *rows = t->rows;
  *cols = t->cols;
  t->resized = 0;
  size_t n = t->in_len < cap ? t->in_len : cap;
  if (n) {
    memcpy(buf, t->in, n);
    memmove(t->in, t->in + n, t->in_len - n);
    t->in_len -= n;
  }
  int more = t->in_len > 0 && cap > 0;
  *ended = t->ended && t->in_len == 0;
  pthread_mutex_unlock(&t->mu);
  /* What did not fit wakes the driver again. */
  if (more) poke(t);
  return n;
}

void sandbox_tty_started(sm_tty *t, const char *sandbox_id) {
  pthread_mutex_lock(&t->mu);
  sm_tty_start_fn fn = t->on_start;
  void *ud = t->on_start_ud;
  pthread_mutex_unlock(&t->mu);
  if (fn) fn(ud, sandbox_id);
}
