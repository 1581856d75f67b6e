/* sandman-agent run directly on this machine over pipes, spoken to through
 * frame.c as the host side does: calls, output, stdin, failures to start,
 * the environment, background processes, stale frames, protocol errors and
 * the end of the session. No timing assertions: only hang guards. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "agent/frame.h"
#include "common/unconst.h"
#include "support/proc.h"
#include "support/xalloc.h"

#ifndef SANDMAN_AGENT_PATH
#error "SANDMAN_AGENT_PATH must name the built sandman-agent"
#endif

/* Hang guard; the sleeps below last far longer, so "gone" means killed. */
#define HANG_GUARD_MS 60000

typedef struct frame {
  struct frame *next;
  int type;
  uint32_t id, len;
  unsigned char *data;
} frame;

typedef struct agent {
  pid_t pid;
  int to, from; /* its stdin (our write end), its stdout (our read end) */
  agent_frame_reader r;
  frame *head, *tail;
  int eof;
} agent;

/* A growable byte buffer for outgoing streams and collected output. */
typedef struct bytes {
  unsigned char *p;
  size_t len, cap;
} bytes;

typedef struct result {
  bytes out, err;
  int exited, code;
  int failed, fail_errno;
  char fail_msg[4096];
} result;

static void bytes_add(bytes *b, const void *data, size_t len) {
  if (b->len + len > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + len) cap *= 2;
    b->p = xrealloc(b->p, cap);
    assert_non_null(b->p);
    b->cap = cap;
  }
  if (len) memcpy(b->p + b->len, data, len);
  b->len += len;
}

static void add_frame(bytes *b, int type, uint32_t id, const void *data, size_t len) {
  unsigned char h[SM_FRAME_HEADER];
  agent_frame_header(h, type, id, (uint32_t)len);
  bytes_add(b, h, sizeof h);
  bytes_add(b, data, len);
}

/* A call frame: cwd, argc, argv, then the NULL-terminated env list. */
static void add_call(bytes *b, uint32_t id, const char *cwd, const char *const *argv,
                     const char *const *env) {
  bytes p = {0};
  char num[16];
  size_t argc = 0;
  while (argv[argc]) argc++;
  snprintf(num, sizeof num, "%zu", argc);
  bytes_add(&p, cwd, strlen(cwd) + 1);
  bytes_add(&p, num, strlen(num) + 1);
  for (size_t i = 0; i < argc; i++) bytes_add(&p, argv[i], strlen(argv[i]) + 1);
  for (size_t i = 0; env && env[i]; i++) bytes_add(&p, env[i], strlen(env[i]) + 1);
  add_frame(b, SM_FRAME_CALL, id, p.p, p.len);
  free(p.p);
}

/* Stdin in frames of at most SM_FRAME_DATA_MAX, then the EOF frame. */
static void add_stdin(bytes *b, uint32_t id, const unsigned char *data, size_t len) {
  for (size_t off = 0; off < len; off += SM_FRAME_DATA_MAX) {
    size_t n = len - off < SM_FRAME_DATA_MAX ? len - off : SM_FRAME_DATA_MAX;
    add_frame(b, SM_FRAME_STDIN, id, data + off, n);
  }
  add_frame(b, SM_FRAME_EOF, id, NULL, 0);
}

static int queue_frame(void *ud, int type, uint32_t id, const unsigned char *payload,
                       uint32_t len) {
  agent *a = ud;
  frame *f = xcalloc(1, sizeof *f);
  assert_non_null(f);
  f->type = type;
  f->id = id;
  f->len = len;
  f->data = xmalloc(len + 1);
  assert_non_null(f->data);
  memcpy(f->data, payload, len);
  f->data[len] = 0;
  if (a->tail) a->tail->next = f;
  else a->head = f;
  a->tail = f;
  return 0;
}

static void frame_free(frame *f) {
  if (f) free(f->data);
  free(f);
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads whatever the agent has sent into the frame queue. */
static void pull(agent *a) {
  unsigned char buf[65536];
  ssize_t n = read(a->from, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  assert_true(n >= 0);
  if (n == 0) {
    a->eof = 1;
    return;
  }
  assert_int_equal(agent_frame_reader_feed(&a->r, buf, (size_t)n), 0);
}

/* The next frame, or NULL at EOF. */
static frame *next_frame(agent *a) {
  long long end = now_ms() + HANG_GUARD_MS;
  while (a->head == NULL && !a->eof) {
    struct pollfd pf = {.fd = a->from, .events = POLLIN};
    int left = (int)(end - now_ms());
    assert_true(left > 0); /* hang guard */
    if (poll(&pf, 1, left) > 0) pull(a);
  }
  frame *f = a->head;
  if (f) {
    a->head = f->next;
    if (a->head == NULL) a->tail = NULL;
  }
  return f;
}

/* RLIMIT_NOFILE for the next agent started, 0 to leave it. */
static rlim_t nofile_limit;

static void agent_start(agent *a, const char *const *extra_env) {
  int in[2], out[2];
  memset(a, 0, sizeof *a);
  assert_int_equal(pipe2(in, O_CLOEXEC), 0);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  a->pid = fork();
  assert_true(a->pid >= 0);
  if (a->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    /* A descriptor the agent did not open itself: calls must not get it. */
    int stray = open("/dev/null", O_RDONLY);
    if (stray >= 0 && stray != 9) dup2(stray, 9), close(stray);
    for (size_t i = 0; extra_env && extra_env[i]; i++) putenv(SM_UNCONST(extra_env[i]));
    signal(SIGHUP, SIG_IGN); /* calls must not inherit this (nor our SIGPIPE) */
    struct rlimit rl = {nofile_limit, nofile_limit};
    if (nofile_limit && setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(126);
    execl(SANDMAN_AGENT_PATH, "sandman-agent", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  a->to = in[1];
  a->from = out[0];
  fcntl(a->to, F_SETFL, O_NONBLOCK);
  agent_frame_reader_init(&a->r, SM_FRAME_CALL_MAX, queue_frame, a);
  frame *f = next_frame(a);
  assert_non_null(f);
  assert_int_equal(f->type, SM_FRAME_HELLO);
  assert_int_equal(f->id, 0);
  assert_string_equal((char *)f->data, SM_AGENT_HELLO);
  frame_free(f);
}

/* The agent's exit status, waiting at most the hang guard. */
static int agent_wait(agent *a) {
  long long end = now_ms() + HANG_GUARD_MS;
  int st;
  pid_t p;
  while ((p = waitpid(a->pid, &st, WNOHANG)) == 0) {
    assert_true(now_ms() < end);
    usleep(10000);
  }
  assert_int_equal(p, a->pid);
  a->pid = 0;
  return st;
}

static void agent_stop(agent *a) {
  if (a->pid > 0) {
    kill(a->pid, SIGKILL);
    waitpid(a->pid, NULL, 0);
  }
  if (a->to >= 0) close(a->to);
  close(a->from);
  while (a->head) {
    frame *f = a->head;
    a->head = f->next;
    frame_free(f);
  }
  agent_frame_reader_dispose(&a->r);
}

/* Writes the stream while reading the agent's frames (neither side may
 * block the other), until call `id` ends with EXIT or FAIL. */
static void exchange(agent *a, const bytes *send, uint32_t id, result *res) {
  size_t off = 0;
  long long end = now_ms() + HANG_GUARD_MS;
  memset(res, 0, sizeof *res);
  for (;;) {
    frame *f;
    while ((f = a->head) != NULL) {
      a->head = f->next;
      if (a->head == NULL) a->tail = NULL;
      assert_int_equal(f->id, id);
      int type = f->type;
      if (type == SM_FRAME_STDOUT) bytes_add(&res->out, f->data, f->len);
      if (type == SM_FRAME_STDERR) bytes_add(&res->err, f->data, f->len);
      if (type == SM_FRAME_EXIT) {
        assert_int_equal(f->len, 4);
        res->exited = 1;
        res->code = (int)((uint32_t)f->data[0] << 24 | (uint32_t)f->data[1] << 16 |
                          (uint32_t)f->data[2] << 8 | f->data[3]);
      }
      if (type == SM_FRAME_FAIL) {
        assert_true(f->len >= 4);
        res->failed = 1;
        res->fail_errno = (int)((uint32_t)f->data[0] << 24 | (uint32_t)f->data[1] << 16 |
                                (uint32_t)f->data[2] << 8 | f->data[3]);
        snprintf(res->fail_msg, sizeof res->fail_msg, "%s", (char *)f->data + 4);
      }
      frame_free(f);
      if (type == SM_FRAME_EXIT || type == SM_FRAME_FAIL) {
        /* Frames sent after the end belong to nothing: write the rest. */
        return;
      }
    }
    assert_false(a->eof);
    struct pollfd pf[2] = {{.fd = a->from, .events = POLLIN}, {.fd = a->to, .events = POLLOUT}};
    int left = (int)(end - now_ms());
    assert_true(left > 0); /* hang guard */
    if (poll(pf, off < send->len ? 2 : 1, left) <= 0) continue;
    if (pf[0].revents) pull(a);
    if (off < send->len && pf[1].revents) {
      ssize_t n = write(a->to, send->p + off, send->len - off);
      if (n < 0) assert_true(errno == EAGAIN || errno == EINTR);
      else off += (size_t)n;
    }
  }
}

static void result_dispose(result *r) {
  free(r->out.p);
  free(r->err.p);
}

/* One call with the given stdin (may be empty); waits for its end. */
static void run(agent *a, uint32_t id, const char *cwd, const char *const *argv,
                const char *const *env, const unsigned char *in, size_t in_len, result *res) {
  bytes b = {0};
  add_call(&b, id, cwd, argv, env);
  add_stdin(&b, id, in, in_len);
  exchange(a, &b, id, res);
  free(b.p);
}

/* Blocking write of a whole stream (small ones, when no reply is read). */
static void send_all(agent *a, const bytes *b) {
  size_t off = 0;
  while (off < b->len) {
    struct pollfd pf = {.fd = a->to, .events = POLLOUT};
    assert_true(poll(&pf, 1, HANG_GUARD_MS) == 1);
    ssize_t n = write(a->to, b->p + off, b->len - off);
    if (n < 0) assert_true(errno == EAGAIN || errno == EINTR);
    else off += (size_t)n;
  }
}

static int output_is(const result *r, const char *out, const char *err) {
  return r->out.len == strlen(out) && memcmp(r->out.p ? (char *)r->out.p : "", out, r->out.len) == 0 &&
         r->err.len == strlen(err) && memcmp(r->err.p ? (char *)r->err.p : "", err, r->err.len) == 0;
}

/* Dead or a zombie (when no one reaps orphans here). */
static int process_gone(pid_t pid) {
  char state = 0;
  return tp_stat(pid, &state, NULL) != 0 || state == 'Z' || state == 'X';
}

static int wait_gone(pid_t pid) {
  long long end = now_ms() + HANG_GUARD_MS;
  while (!process_gone(pid)) {
    if (now_ms() > end) return 0;
    usleep(10000);
  }
  return 1;
}

static int count_fds(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  assert_non_null(d);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static long rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

static pid_t pid_from(const result *r) {
  char num[32] = {0};
  assert_true(r->out.len > 0 && r->out.len < sizeof num);
  memcpy(num, r->out.p, r->out.len);
  long v = strtol(num, NULL, 10);
  assert_true(v > 1);
  return (pid_t)v;
}

static int setup(void **state) {
  static agent a;
  static const char *const env[] = {"SANDMAN_T_OLD=inherited", "SANDMAN_T_KEEP=kept", NULL};
  agent_start(&a, env);
  *state = &a;
  return 0;
}

/* Fds 0-3 (3: the agent's signalfd) and 9 taken, 10 allowed: the third
 * of a call's four pipes cannot be made. */
static int setup_few_fds(void **state) {
  nofile_limit = 10;
  setup(state);
  nofile_limit = 0;
  return 0;
}

static int teardown(void **state) {
  agent_stop(*state);
  return 0;
}

static void test_output_and_exit_code(void **state) {
  agent *a = *state;
  const char *const argv[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
  result r;
  run(a, 1, "/", argv, NULL, NULL, 0, &r);
  assert_true(r.exited);
  assert_int_equal(r.code, 3);
  assert_true(output_is(&r, "out\n", "err\n"));
  result_dispose(&r);
}

static void test_five_megabytes_through_cat(void **state) {
  agent *a = *state;
  size_t len = 5u << 20;
  unsigned char *in = xmalloc(len);
  assert_non_null(in);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < len; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    in[i] = (unsigned char)x;
  }
  const char *const argv[] = {"/bin/cat", NULL};
  result r;
  run(a, 2, "/", argv, NULL, in, len, &r);
  assert_true(r.exited);
  assert_int_equal(r.code, 0);
  assert_int_equal(r.out.len, len);
  assert_memory_equal(r.out.p, in, len);
  assert_int_equal(r.err.len, 0);
  free(in);
  result_dispose(&r);
}

static void test_exec_and_chdir_failures(void **state) {
  agent *a = *state;
  const char *const nosuch[] = {"/no/such", NULL};
  result r;
  run(a, 3, "/", nosuch, NULL, NULL, 0, &r);
  assert_true(r.failed);
  assert_int_equal(r.fail_errno, ENOENT);
  assert_non_null(strstr(r.fail_msg, "exec /no/such"));
  result_dispose(&r);

  const char *const sh[] = {"/bin/sh", "-c", "echo never", NULL};
  run(a, 4, "/no/such/dir", sh, NULL, NULL, 0, &r);
  assert_true(r.failed);
  assert_int_equal(r.fail_errno, ENOENT);
  assert_non_null(strstr(r.fail_msg, "chdir /no/such/dir"));
  assert_int_equal(r.out.len, 0);
  result_dispose(&r);

  /* No PATH search: a bare name is not found. */
  const char *const bare[] = {"sh", "-c", "true", NULL};
  run(a, 5, "/", bare, NULL, NULL, 0, &r);
  assert_true(r.failed);
  assert_int_equal(r.fail_errno, ENOENT);
  result_dispose(&r);

  /* The session goes on; the cwd is used. */
  const char *const pwd[] = {"/bin/sh", "-c", "pwd", NULL};
  run(a, 6, "/tmp", pwd, NULL, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  assert_true(output_is(&r, "/tmp\n", ""));
  result_dispose(&r);
}

static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A call with its not-after time (SM_FRAME_NOT_AFTER) ahead of it. */
static void run_not_after(agent *a, uint32_t na_id, uint64_t ms, uint32_t id,
                          const char *const *argv, result *r) {
  bytes b = {0};
  unsigned char t[8];
  agent_frame_put_u64(t, ms);
  add_frame(&b, SM_FRAME_NOT_AFTER, na_id, t, sizeof t);
  add_call(&b, id, "/", argv, NULL);
  add_stdin(&b, id, NULL, 0);
  exchange(a, &b, id, r);
  free(b.p);
}

/* A call read after its not-after time (a frozen sandbox thawed too late,
 * or by someone else after the host gave up: docs/state.md) never starts;
 * one read in time runs; the time binds its own call id only, once. */
static void test_not_after(void **state) {
  agent *a = *state;
  char mark[64], script[128];
  snprintf(mark, sizeof mark, "/tmp/sm-not-after-%ld", (long)getpid());
  snprintf(script, sizeof script, "echo ran; : > %s", mark);
  unlink(mark);
  const char *const argv[] = {"/bin/sh", "-c", script, NULL};
  result r;
  run_not_after(a, 7, wall_ms() - 1, 7, argv, &r);
  assert_true(r.failed);
  assert_int_equal(r.fail_errno, ETIME);
  assert_int_equal(strncmp(r.fail_msg, SM_AGENT_LATE, strlen(SM_AGENT_LATE)), 0);
  assert_int_equal(r.out.len, 0);
  assert_int_equal(access(mark, F_OK), -1); /* it never ran */
  result_dispose(&r);

  run_not_after(a, 8, wall_ms() + 60000, 8, argv, &r);
  assert_true(r.exited && r.code == 0);
  assert_true(output_is(&r, "ran\n", ""));
  assert_int_equal(access(mark, F_OK), 0);
  result_dispose(&r);
  unlink(mark);

  /* Another id's time, long past, binds nothing; nor does it stay for later. */
  run_not_after(a, 99, wall_ms() - 1000, 9, argv, &r);
  assert_true(r.exited && r.code == 0);
  result_dispose(&r);
  run(a, 99, "/", argv, NULL, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  result_dispose(&r);
  unlink(mark);
}

static void test_not_after_bad_length_exits_2(void **state) {
  agent *a = *state;
  bytes b = {0};
  add_frame(&b, SM_FRAME_NOT_AFTER, 1, "1234", 4);
  send_all(a, &b);
  free(b.p);
  int st = agent_wait(a);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
}

static void test_environment(void **state) {
  agent *a = *state;
  const char *const argv[] = {
      "/bin/sh", "-c", "echo \"$SANDMAN_T_OLD $SANDMAN_T_NEW ${SANDMAN_T_KEEP-unset}\"", NULL};
  const char *const env[] = {"SANDMAN_T_OLD=over", "SANDMAN_T_NEW=added", NULL};
  result r;
  run(a, 7, "/", argv, env, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  assert_true(output_is(&r, "over added kept\n", ""));
  result_dispose(&r);
  /* Nothing sticks to the next call; a bare name removes a variable. */
  const char *const unset[] = {"SANDMAN_T_KEEP", NULL};
  run(a, 8, "/", argv, unset, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  assert_true(output_is(&r, "inherited  unset\n", ""));
  result_dispose(&r);
}

/* Default signal dispositions and an empty mask (the agent ignores SIGPIPE
 * and blocks SIGCHLD; this test process ignores SIGPIPE too), its own
 * process group, and only fds 0-2. */
static void test_child_starts_clean(void **state) {
  agent *a = *state;
  const char *const sig[] = {"/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status", NULL};
  result r;
  run(a, 20, "/", sig, NULL, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  assert_true(output_is(&r, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n", ""));
  result_dispose(&r);
  const char *const grp[] = {"/bin/sh", "-c", "echo $$; cut -d' ' -f5 /proc/$$/stat", NULL};
  run(a, 21, "/", grp, NULL, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  bytes_add(&r.out, "", 1);
  char *rest;
  long pid = strtol((char *)r.out.p, &rest, 10), pgid = strtol(rest, NULL, 10);
  assert_true(pid > 1);
  assert_int_equal(pgid, pid);
  result_dispose(&r);
  const char *const fds[] = {"/bin/sh", "-c", "ls /proc/$$/fd", NULL};
  run(a, 22, "/", fds, NULL, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  assert_true(output_is(&r, "0\n1\n2\n", ""));
  result_dispose(&r);
}

static void test_killed_by_signal(void **state) {
  agent *a = *state;
  const char *const argv[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
  result r;
  run(a, 9, "/", argv, NULL, NULL, 0, &r);
  assert_true(r.exited);
  assert_int_equal(r.code, 128 + SIGKILL);
  result_dispose(&r);
}

static void test_background_processes(void **state) {
  agent *a = *state;
  /* Holding stdout: the call ends after the grace period all the same. */
  const char *const held[] = {"/bin/sh", "-c", "sleep 600 & echo $!", NULL};
  result r;
  run(a, 10, "/", held, NULL, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  pid_t sleeper = pid_from(&r);
  assert_false(process_gone(sleeper)); /* it outlives the call */
  kill(sleeper, SIGKILL);
  assert_true(wait_gone(sleeper));
  result_dispose(&r);
  /* Output redirected: nothing holds the pipes. */
  const char *const quiet[] = {"/bin/sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!", NULL};
  run(a, 11, "/", quiet, NULL, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  sleeper = pid_from(&r);
  kill(sleeper, SIGKILL);
  assert_true(wait_gone(sleeper));
  result_dispose(&r);
}

static void test_stale_stdin_ignored(void **state) {
  agent *a = *state;
  bytes b = {0};
  add_frame(&b, SM_FRAME_STDIN, 99, "idle", 4); /* while idle */
  add_frame(&b, SM_FRAME_EOF, 99, NULL, 0);
  const char *const argv[] = {"/bin/cat", NULL};
  add_call(&b, 12, "/", argv, NULL);
  add_frame(&b, SM_FRAME_STDIN, 11, "stale", 5);
  add_frame(&b, SM_FRAME_STDIN, 12, "fresh", 5);
  add_frame(&b, SM_FRAME_EOF, 11, NULL, 0); /* must not end cat's stdin */
  add_frame(&b, SM_FRAME_STDIN, 12, "more", 4);
  add_frame(&b, SM_FRAME_EOF, 12, NULL, 0);
  result r;
  exchange(a, &b, 12, &r);
  assert_true(r.exited && r.code == 0);
  assert_true(output_is(&r, "freshmore", ""));
  result_dispose(&r);
  free(b.p);
}

static void test_many_calls_leak_nothing(void **state) {
  agent *a = *state;
  const char *const argv[] = {"/bin/true", NULL};
  result r;
  run(a, 1, "/", argv, NULL, NULL, 0, &r);
  assert_true(r.exited && r.code == 0);
  result_dispose(&r);
  int fds = count_fds(a->pid);
  long rss = rss_kib(a->pid);
  for (uint32_t id = 2; id <= 1001; id++) {
    run(a, id, "/", argv, NULL, NULL, 0, &r);
    assert_true(r.exited && r.code == 0);
    result_dispose(&r);
  }
  assert_int_equal(count_fds(a->pid), fds);
#ifdef SANDMAN_PROGRAMS_SANITIZED
  /* The sanitizers' allocator keeps freed memory a while: its resident size
   * says nothing. LeakSanitizer says it instead, as the agent exits (its
   * exit code is then not 0). */
  (void)rss;
#else
  /* A leak of even a small buffer per call would show over 1000 calls. */
  assert_true(rss_kib(a->pid) <= rss + 256);
#endif
  close(a->to);
  a->to = -1;
  int st = agent_wait(a);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_out_of_fds_fails_the_call(void **state) {
  agent *a = *state;
  int fds = count_fds(a->pid);
  const char *const argv[] = {"/bin/true", NULL};
  for (uint32_t id = 1; id <= 3; id++) {
    result r;
    run(a, id, "/", argv, NULL, NULL, 0, &r);
    assert_true(r.failed);
    assert_int_equal(r.fail_errno, EMFILE);
    assert_non_null(strstr(r.fail_msg, "pipe /bin/true"));
    result_dispose(&r);
  }
  assert_int_equal(count_fds(a->pid), fds); /* the pipes made were closed */
}

static void test_protocol_error_exits_2(void **state) {
  agent *a = *state;
  bytes b = {0};
  add_frame(&b, SM_FRAME_EXIT, 1, "\0\0\0\0", 4); /* type 'X' goes agent -> host */
  send_all(a, &b);
  int st = agent_wait(a);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
  free(b.p);
}

static void test_unknown_type_exits_2(void **state) {
  agent *a = *state;
  bytes b = {0};
  add_frame(&b, 'Z', 1, NULL, 0);
  send_all(a, &b);
  int st = agent_wait(a);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  free(b.p);
}

static void test_call_during_call_exits_2(void **state) {
  agent *a = *state;
  bytes b = {0};
  const char *const argv[] = {"/bin/sh", "-c", "echo $$; exec sleep 600", NULL};
  add_call(&b, 1, "/", argv, NULL);
  add_frame(&b, SM_FRAME_EOF, 1, NULL, 0);
  send_all(a, &b);
  frame *f = next_frame(a);
  assert_non_null(f);
  assert_int_equal(f->type, SM_FRAME_STDOUT);
  pid_t sleeper = (pid_t)strtol((char *)f->data, NULL, 10);
  frame_free(f);
  b.len = 0;
  add_call(&b, 2, "/", argv, NULL);
  send_all(a, &b);
  int st = agent_wait(a);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  assert_true(wait_gone(sleeper)); /* nothing outlives a broken session */
  free(b.p);
}

static void test_close_while_idle_exits_0(void **state) {
  agent *a = *state;
  close(a->to);
  a->to = -1;
  int st = agent_wait(a);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_close_during_call_kills_group(void **state) {
  agent *a = *state;
  bytes b = {0};
  const char *const argv[] = {"/bin/sh", "-c", "sleep 600 & echo $!; wait", NULL};
  add_call(&b, 1, "/", argv, NULL);
  add_frame(&b, SM_FRAME_EOF, 1, NULL, 0);
  send_all(a, &b);
  frame *f = next_frame(a);
  assert_non_null(f);
  assert_int_equal(f->type, SM_FRAME_STDOUT);
  pid_t sleeper = (pid_t)strtol((char *)f->data, NULL, 10);
  assert_true(sleeper > 1);
  frame_free(f);
  close(a->to);
  a->to = -1;
  int st = agent_wait(a);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_true(wait_gone(sleeper)); /* the grandchild too: the whole group */
  free(b.p);
}

/* ---- calls on a terminal (SM_FRAME_TTY, SM_FRAME_RESIZE) ---- */

/* A call frame on a terminal of rows x cols. */
static void add_tty_call(bytes *b, uint32_t id, unsigned rows, unsigned cols,
                         const char *const *argv) {
  bytes c = {0};
  add_call(&c, id, "/", argv, NULL);
  unsigned char size[4];
  agent_frame_size_put(size, rows, cols);
  bytes p = {0};
  bytes_add(&p, size, 4);
  bytes_add(&p, c.p + SM_FRAME_HEADER, c.len - SM_FRAME_HEADER);
  add_frame(b, SM_FRAME_TTY, id, p.p, p.len);
  free(c.p);
  free(p.p);
}

static int has_text(const bytes *b, const char *text) {
  size_t n = strlen(text);
  for (size_t i = 0; b->p && i + n <= b->len; i++)
    if (memcmp(b->p + i, text, n) == 0) return 1;
  return 0;
}

/* Reads the call's frames into res until its output holds text (1) or the
 * call ends (0). */
static int read_until(agent *a, uint32_t id, result *res, const char *text) {
  for (;;) {
    if (text && has_text(&res->out, text)) return 1;
    if (res->exited || res->failed) return 0;
    frame *f = next_frame(a);
    assert_non_null(f);
    assert_int_equal(f->id, id);
    if (f->type == SM_FRAME_STDOUT) bytes_add(&res->out, f->data, f->len);
    if (f->type == SM_FRAME_STDERR) bytes_add(&res->err, f->data, f->len);
    if (f->type == SM_FRAME_EXIT) {
      res->exited = 1;
      res->code = f->data[3];
    }
    if (f->type == SM_FRAME_FAIL) res->failed = 1;
    frame_free(f);
  }
}

static void test_tty_size_resize_and_input(void **state) {
  agent *a = *state;
  const char *const argv[] = {"/bin/sh", "-c",
                              "tty; stty size; echo ready; read x; stty size; echo got-$x; "
                              "echo to-stderr >&2",
                              NULL};
  bytes b = {0};
  add_tty_call(&b, 1, 30, 100, argv);
  send_all(a, &b);
  result r;
  memset(&r, 0, sizeof r);
  assert_true(read_until(a, 1, &r, "ready"));
  assert_true(has_text(&r.out, "/dev/pts/"));
  assert_true(has_text(&r.out, "30 100"));
  b.len = 0;
  unsigned char size[4];
  agent_frame_size_put(size, 40, 120);
  add_frame(&b, SM_FRAME_RESIZE, 1, size, 4);
  add_frame(&b, SM_FRAME_STDIN, 1, "hi\r", 3);
  add_frame(&b, SM_FRAME_EOF, 1, NULL, 0); /* no end of input on a terminal */
  send_all(a, &b);
  read_until(a, 1, &r, NULL);
  assert_true(r.exited);
  assert_int_equal(r.code, 0);
  assert_true(has_text(&r.out, "40 120"));
  assert_true(has_text(&r.out, "got-hi"));
  /* One stream: stderr comes through the terminal too. */
  assert_true(has_text(&r.out, "to-stderr"));
  assert_int_equal(r.err.len, 0);
  result_dispose(&r);
  free(b.p);
}

/* ^C typed reaches the foreground program: the terminal is its
 * controlling terminal. */
static void test_tty_ctrl_c_interrupts(void **state) {
  agent *a = *state;
  const char *const argv[] = {"/bin/sh", "-c", "echo ready; exec sleep 600", NULL};
  bytes b = {0};
  add_tty_call(&b, 1, 24, 80, argv);
  send_all(a, &b);
  result r;
  memset(&r, 0, sizeof r);
  assert_true(read_until(a, 1, &r, "ready"));
  b.len = 0;
  add_frame(&b, SM_FRAME_STDIN, 1, "\003", 1);
  send_all(a, &b);
  read_until(a, 1, &r, NULL);
  assert_true(r.exited);
  assert_int_equal(r.code, 128 + SIGINT);
  result_dispose(&r);
  free(b.p);
}

/* A size for a call without a terminal changes nothing. */
static void test_resize_without_tty_ignored(void **state) {
  agent *a = *state;
  const char *const argv[] = {"/bin/sh", "-c", "cat", NULL};
  bytes b = {0};
  add_call(&b, 1, "/", argv, NULL);
  unsigned char size[4];
  agent_frame_size_put(size, 40, 120);
  add_frame(&b, SM_FRAME_RESIZE, 1, size, 4);
  add_stdin(&b, 1, (const unsigned char *)"x", 1);
  result r;
  exchange(a, &b, 1, &r);
  assert_true(r.exited);
  assert_int_equal(r.code, 0);
  assert_true(output_is(&r, "x", ""));
  result_dispose(&r);
  free(b.p);
}

/* A terminal of 0 rows is a protocol error. */
static void test_tty_bad_size_exits_2(void **state) {
  agent *a = *state;
  const char *const argv[] = {"/bin/true", NULL};
  bytes b = {0};
  add_tty_call(&b, 1, 0, 80, argv);
  send_all(a, &b);
  int st = agent_wait(a);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
  free(b.p);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_output_and_exit_code),
      T(test_five_megabytes_through_cat),
      T(test_exec_and_chdir_failures),
      T(test_not_after),
      T(test_not_after_bad_length_exits_2),
      T(test_environment),
      T(test_child_starts_clean),
      T(test_killed_by_signal),
      T(test_background_processes),
      T(test_stale_stdin_ignored),
      T(test_many_calls_leak_nothing),
      cmocka_unit_test_setup_teardown(test_out_of_fds_fails_the_call, setup_few_fds, teardown),
      T(test_protocol_error_exits_2),
      T(test_unknown_type_exits_2),
      T(test_call_during_call_exits_2),
      T(test_close_while_idle_exits_0),
      T(test_close_during_call_kills_group),
      T(test_tty_size_resize_and_input),
      T(test_tty_ctrl_c_interrupts),
      T(test_resize_without_tty_ignored),
      T(test_tty_bad_size_exits_2),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
