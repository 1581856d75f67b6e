/* `sandman-agent watch` (src/agent/agent_watch.c) run here on a temporary
 * folder, its output parsed by the host's parser (files/watch_wire.c):
 * the events of files created, appended, renamed and deleted, of a folder
 * made later and what it holds; a link to a folder outside is never
 * followed, whether there before the watch or made during it; a link on
 * the path is refused (ELOOP), ".." too (EXDEV); the watched folder
 * removed ends the watch; a path too long to tell is an overflow; closing
 * its output ends the process. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "files/watch_wire.h"

#include "support/xalloc.h"

#ifndef SANDMAN_AGENT_PATH
#error "SANDMAN_AGENT_PATH must name the built sandman-agent"
#endif

#define WAIT_MS 10000

typedef struct watcher {
  char root[64];
  char outside[64];
  pid_t pid;
  int out; /* the agent's stdout */
  watch_wire wire;
  char log[1 << 18]; /* paths of up to 4 KiB each */
  size_t n;
  int ready;
} watcher;

static int on_ready(void *ud) {
  ((watcher *)ud)->ready = 1;
  return 0;
}

static int on_event(void *ud, const sm_watch_event *ev) {
  watcher *w = ud;
  if (w->n < sizeof w->log)
    w->n += (size_t)snprintf(w->log + w->n, sizeof w->log - w->n, "%c%d:%s>%s;", (char)ev->kind,
                             ev->is_dir, ev->path, ev->to ? ev->to : "-");
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void start(watcher *w, const char *path, const char *flags) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  w->pid = fork();
  assert_true(w->pid >= 0);
  if (w->pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    execl(SANDMAN_AGENT_PATH, SANDMAN_AGENT_PATH, "watch", w->root, path, flags, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  w->out = p[0];
  files_watch_wire_init(&w->wire, on_ready, on_event, w);
}

/* Reads the agent's output until `want` is in the log (or the watch's
 * ready/end/err state when want is NULL), at most WAIT_MS. */
static int read_until(watcher *w, const char *want, int *flag) {
  double deadline = now_ms() + WAIT_MS;
  for (;;) {
    if (want && strstr(w->log, want)) return 1;
    if (flag && *flag) return 1;
    int left = (int)(deadline - now_ms());
    if (left <= 0) return 0;
    struct pollfd pf = {w->out, POLLIN, 0};
    if (poll(&pf, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = read(w->out, buf, sizeof buf);
    if (n <= 0) return 0;
    sm_error err = SM_ERROR_INIT;
    if (files_watch_wire_feed(&w->wire, buf, (size_t)n, &err) != 0) fail_msg("%s", err.message);
  }
}

static void stop(watcher *w) {
  close(w->out);
  int st = 0;
  /* Its output closed: it ends by itself (bounded by the test's run). */
  assert_int_equal(waitpid(w->pid, &st, 0), w->pid);
}

static void put(const char *root, const char *rel, const char *mode, const char *text) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, mode);
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void path_of(char *out, size_t len, const char *root, const char *rel) {
  snprintf(out, len, "%s/%s", root, rel);
}

static int setup(void **state) {
  watcher *w = xcalloc(1, sizeof *w);
  snprintf(w->root, sizeof w->root, "/tmp/sm-watch-XXXXXX");
  snprintf(w->outside, sizeof w->outside, "/tmp/sm-watch-out-XXXXXX");
  if (mkdtemp(w->root) == NULL || mkdtemp(w->outside) == NULL) return -1;
  *state = w;
  return 0;
}

static int teardown(void **state) {
  watcher *w = *state;
  /* Both folders are this test's own: removed with everything in them. */
  pid_t pid = fork();
  if (pid == 0) {
    execlp("rm", "rm", "-rf", w->root, w->outside, (char *)NULL);
    _exit(127);
  }
  waitpid(pid, NULL, 0);
  free(w);
  return 0;
}

static void events_of_a_file_and_a_new_folder(void **state) {
  watcher *w = *state;
  char p[256], q[256];
  path_of(p, sizeof p, w->root, "pre");
  assert_int_equal(mkdir(p, 0755), 0);
  path_of(p, sizeof p, w->root, "pre/out");
  assert_int_equal(symlink(w->outside, p), 0);
  start(w, ".", "r");
  assert_true(read_until(w, NULL, &w->ready));
  put(w->root, "a.txt", "w", "one\n");
  assert_true(read_until(w, "c0:a.txt>-;", NULL));
  put(w->root, "a.txt", "a", "two\n");
  assert_true(read_until(w, "m0:a.txt>-;", NULL));
  path_of(p, sizeof p, w->root, "a.txt");
  path_of(q, sizeof q, w->root, "b.txt");
  assert_int_equal(rename(p, q), 0);
  assert_true(read_until(w, "v0:a.txt>b.txt;", NULL));
  assert_int_equal(unlink(q), 0);
  assert_true(read_until(w, "d0:b.txt>-;", NULL));
  path_of(p, sizeof p, w->root, "sub");
  assert_int_equal(mkdir(p, 0755), 0);
  put(w->root, "sub/x", "w", "x");
  assert_true(read_until(w, "c0:sub/x>-;", NULL));
  /* A link planted during the watch, and the one there before it. */
  path_of(p, sizeof p, w->root, "sub/out");
  assert_int_equal(symlink(w->outside, p), 0);
  put(w->outside, "secret", "w", "s");
  put(w->root, "mark", "w", "m");
  assert_true(read_until(w, "c0:mark>-;", NULL));
  assert_non_null(strstr(w->log, "c0:sub/out>-;"));
  assert_null(strstr(w->log, "secret"));
  stop(w);
}

static void refusals(void **state) {
  watcher *w = *state;
  char p[256];
  path_of(p, sizeof p, w->root, "lnk");
  assert_int_equal(symlink(w->outside, p), 0);
  start(w, "lnk", "-");
  assert_true(read_until(w, NULL, &w->wire.failed));
  assert_string_equal(w->wire.errname, "ELOOP");
  stop(w);
  memset(&w->wire, 0, sizeof w->wire);
  start(w, "../etc", "-");
  assert_true(read_until(w, NULL, &w->wire.failed));
  assert_string_equal(w->wire.errname, "EXDEV");
  stop(w);
}

static void the_folder_removed_ends_it(void **state) {
  watcher *w = *state;
  char p[256];
  path_of(p, sizeof p, w->root, "gone");
  assert_int_equal(mkdir(p, 0755), 0);
  start(w, "gone", "-");
  assert_true(read_until(w, NULL, &w->ready));
  assert_int_equal(rmdir(p), 0);
  assert_true(read_until(w, NULL, &w->wire.ended));
  stop(w);
}

/* A file whose path would pass 4096 bytes: not told, but an overflow says
 * something was lost. */
static void a_path_too_long_is_an_overflow(void **state) {
  watcher *w = *state;
  start(w, ".", "r");
  assert_true(read_until(w, NULL, &w->ready));
  char name[251];
  memset(name, 'd', 250);
  name[250] = '\0';
  int fd = open(w->root, O_RDONLY | O_DIRECTORY);
  assert_true(fd >= 0);
  for (int level = 0; level < 16; level++) { /* 16 * 251 bytes of folders */
    assert_int_equal(mkdirat(fd, name, 0755), 0);
    int next = openat(fd, name, O_RDONLY | O_DIRECTORY);
    close(fd);
    assert_true(next >= 0);
    fd = next;
  }
  memset(name, 'f', 200);
  name[200] = '\0';
  int f = openat(fd, name, O_WRONLY | O_CREAT, 0644);
  assert_true(f >= 0);
  close(f);
  close(fd);
  assert_true(read_until(w, "o0:>-;", NULL));
  stop(w);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(events_of_a_file_and_a_new_folder, setup, teardown),
      cmocka_unit_test_setup_teardown(refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(the_folder_removed_ends_it, setup, teardown),
      cmocka_unit_test_setup_teardown(a_path_too_long_is_an_overflow, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
