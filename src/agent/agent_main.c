/* sandman-agent: runs inside a sandbox as one long-lived exec and starts
 * each tool call itself, so a call costs a process start instead of an
 * engine round trip. Frames (see frame.h) come in on fd 0 and go out on fd 1; fd 2
 * carries only the agent's own diagnostics. Linked statically (musl when
 * available) because the sandbox image may have no libc at all, so it uses
 * nothing but libc and frame.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/call_preamble.h"
#include "agent/agent_code.h"
#include "agent/digest_walk.h"
#include "agent/frame.h"
#include "agent/untar.h"
#include "agent/fs.h"
#include "agent/route.h"
#include "agent/port_relay.h"
#include "agent/agent_watch.h"
#include "common/unconst.h"

#define MAX_ARGV 65536
#define MAX_ENV 8192
/* Stop reading fd 0 while this much stdin waits for the child: the host
 * keeps reading our output while it writes, so nothing deadlocks. */
#define STDIN_HIGH (1u << 20)
/* How long output pipes may stay open after the call's process exited (a
 * background process can hold them); docker exec waits about as long. */
#define GRACE_MS 2000

extern char **environ;

/* The call in progress, if any. Our ends of its pipes are -1 once closed.
 * On a terminal (tty), out is the terminal's master and in a duplicate of
 * it; err is not used. */
static struct {
  int active;
  int tty;
  uint32_t id;
  pid_t pid;
  int in, out, err;
  unsigned char *buf; /* stdin not yet written to the child: [off, len) */
  size_t off, len, cap;
  int eof;            /* the host ended stdin: close it once buf is written */
  int exited, code;
  long long deadline; /* ms, monotonic: when to stop waiting for output */
} call = {.in = -1, .out = -1, .err = -1};

static int sigfd = -1, host_eof;
static char *argv_slots[MAX_ARGV + 1], *env_slots[MAX_ENV + 1];
/* One outgoing frame: output is read straight into the payload part. */
static unsigned char frame_out[SM_FRAME_HEADER + SM_FRAME_DATA_MAX];

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* Reaps every zombie of ours (the call's process, and orphans when we run
 * as a container's pid 1), noting the call's status. */
static void reap(void) {
  int st;
  pid_t p;
  while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
    if (call.active && p == call.pid && !call.exited) {
      call.exited = 1;
      call.code = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
      call.deadline = now_ms() + GRACE_MS;
    }
  }
}

/* The host is gone or broke the protocol: nothing may outlive the call. */
static void kill_call(void) {
  if (!call.active) return;
  /* The group outlives its leader while a background member lives. */
  kill(-call.pid, SIGKILL);
  if (call.exited) return;
  kill(call.pid, SIGKILL);
  while (waitpid(call.pid, NULL, 0) < 0 && errno == EINTR) {
  }
  call.exited = 1;
}

static void host_gone(void) {
  kill_call();
  exit(0);
}

static void protocol_error(const char *what) {
  fprintf(stderr, "sandman-agent: protocol error: %s\n", what);
  kill_call();
  exit(2);
}

/* Blocking writes are fine: the host always reads our output. A failure
 * means the host's end is closed (SIGPIPE is ignored, so EPIPE). */
static void send_frame(int type, uint32_t id, uint32_t len) {
  agent_frame_header(frame_out, type, id, len);
  size_t done = 0, total = SM_FRAME_HEADER + (size_t)len;
  while (done < total) {
    ssize_t n = write(1, frame_out + done, total - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) host_gone();
    done += (size_t)n;
  }
}

static void send_fail(uint32_t id, int err, const char *what, const char *arg) {
  unsigned char *p = frame_out + SM_FRAME_HEADER;
  p[0] = (unsigned char)(err >> 24);
  p[1] = (unsigned char)(err >> 16);
  p[2] = (unsigned char)(err >> 8);
  p[3] = (unsigned char)err;
  int n = snprintf((char *)p + 4, 4096 - 4, "%s %s: %s", what, arg, strerror(err));
  if (n < 0) n = 0;
  if (n > 4096 - 5) n = 4096 - 5; /* snprintf kept the first 4091 */
  send_frame(SM_FRAME_FAIL, id, 4 + (uint32_t)n);
}

/* The agent's environment with the request's entries applied the way an
 * exec's Env is: "K=V" replaces K or is added, a bare "K" removes K. */
static char **merge_env(char **req, size_t nreq) {
  size_t n = 0, base = 0;
  while (environ[base]) base++;
  char **env = malloc((base + nreq + 1) * sizeof *env);
  if (env == NULL) return NULL;
  for (size_t i = 0; i < base; i++) env[n++] = environ[i];
  for (size_t r = 0; r < nreq; r++) {
    const char *eq = strchr(req[r], '=');
    size_t klen = eq ? (size_t)(eq - req[r]) : strlen(req[r]);
    size_t i = 0;
    while (i < n && !(strncmp(env[i], req[r], klen) == 0 && env[i][klen] == '=')) i++;
    if (eq == NULL) {
      if (i < n) env[i] = env[--n];
    } else {
      env[i] = req[r];
      if (i == n) n++;
    }
  }
  env[n] = NULL;
  return env;
}

/* Closes every fd from 3 up except keep, in the child (so only
 * async-signal-safe calls). close_range where the kernel has it; gVisor of
 * 2022 does not, and a close() loop up to RLIMIT_NOFILE costs it half a
 * second per call, so next the list in /proc/self/fd, read with getdents64
 * (procfs lists by fd number, so closing as we go skips nothing). */
static void close_others(int keep) {
#ifdef SYS_close_range
  if ((keep == 3 || syscall(SYS_close_range, 3u, (unsigned)keep - 1, 0u) == 0) &&
      syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u) == 0)
    return;
#endif
  int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    /* No /proc: every fd the agent opens is close-on-exec anyway; this
     * only catches descriptors someone handed to the agent itself. */
    for (int fd = 3; fd < 1024; fd++)
      if (fd != keep) close(fd);
    return;
  }
  struct entry { /* struct linux_dirent64 */
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
  };
  _Alignas(8) char buf[4096];
  long n;
  while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
    for (long off = 0; off < n;) {
      const struct entry *e = (const struct entry *)(buf + off);
      off += e->reclen;
      int fd = 0;
      for (const char *c = e->name; *c >= '0' && *c <= '9'; c++) fd = fd * 10 + (*c - '0');
      if (e->name[0] != '.' && fd >= 3 && fd != keep && fd != dir) close(fd);
    }
  }
  close(dir);
}

/* What the child needs; it shares our memory until it execs. */
struct spawn {
  int in, out, err, fail; /* its ends of the pipes; fail is close-on-exec */
  int tty;                /* in, out and err are a terminal's slave */
  const char *cwd;
  char **argv, **env;
};

/* Runs in the child made by clone(CLONE_VM | CLONE_VFORK), on its own
 * stack, while we are suspended: only async-signal-safe calls, nothing
 * that changes our memory but errno. Reports a chdir or exec failure as
 * {stage, errno} on the fail pipe; success closes it, and we read EOF. */
static int child(void *arg) {
  const struct spawn *sp = arg;
  /* The host kills the call's group without hitting us. On a terminal the
   * call leads a session of its own, whose controlling terminal it is
   * (so ^C reaches its foreground group and SIGWINCH its size). */
  if (sp->tty) {
    setsid();
    ioctl(sp->in, TIOCSCTTY, 0);
  } else {
    setpgid(0, 0);
  }
  /* main reset every other signal to the default; ignoring survives
   * execve, and so does the mask (SIGCHLD is blocked for the signalfd). */
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* Our fds 0-2 are always open (see main), so the pipe ends are >= 3. */
  dup2(sp->in, 0);
  dup2(sp->out, 1);
  dup2(sp->err, 2);
  close_others(sp->fail);
  int report[2] = {0, 0};
  if (chdir(sp->cwd) != 0) {
    report[1] = errno;
  } else {
    execve(sp->argv[0], sp->argv, sp->env);
    report[0] = 1;
    report[1] = errno;
  }
  ssize_t w = write(sp->fail, report, sizeof report);
  (void)w;
  _exit(127);
}

static int make_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

/* A new pseudo-terminal of the given size: fds[0] its master, fds[1] its
 * slave (both close-on-exec). By ioctl rather than posix_openpt and
 * friends, which differ between the C libraries the agent is built with. */
static int make_pty(unsigned rows, unsigned cols, int fds[2]) {
  fds[0] = fds[1] = -1;
  int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -1;
  int unlock = 0, n = -1;
  char name[32];
  if (ioctl(m, TIOCSPTLCK, &unlock) != 0 || ioctl(m, TIOCGPTN, &n) != 0) {
    int e = errno;
    close(m);
    errno = e;
    return -1;
  }
  snprintf(name, sizeof name, "/dev/pts/%d", n);
  int sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (sl < 0) {
    int e = errno;
    close(m);
    errno = e;
    return -1;
  }
  struct winsize ws = {(unsigned short)rows, (unsigned short)cols, 0, 0};
  ioctl(m, TIOCSWINSZ, &ws);
  fds[0] = m;
  fds[1] = sl;
  return 0;
}

/* The call's ends: pipes, or a terminal whose slave is all three of the
 * child's (pin[0], pout[1], perr[1]) and whose master is ours (pout[0],
 * and pin[1] a duplicate). */
static int make_ends(unsigned rows, unsigned cols, int pin[2], int pout[2], int perr[2]) {
  if (rows == 0) return make_pipe(pin) || make_pipe(pout) || make_pipe(perr) ? -1 : 0;
  int pt[2];
  if (make_pty(rows, cols, pt) != 0) return -1;
  int dup_m = fcntl(pt[0], F_DUPFD_CLOEXEC, 3);
  int dup_s1 = fcntl(pt[1], F_DUPFD_CLOEXEC, 3);
  int dup_s2 = fcntl(pt[1], F_DUPFD_CLOEXEC, 3);
  pout[0] = pt[0];
  pin[0] = pt[1];
  pin[1] = dup_m;
  pout[1] = dup_s1;
  perr[1] = dup_s2;
  perr[0] = -1;
  return dup_m < 0 || dup_s1 < 0 || dup_s2 < 0 ? -1 : 0;
}

/* rows 0: a call on pipes; else on a terminal of rows x cols. */
static void start_call(uint32_t id, unsigned char *payload, uint32_t len, unsigned rows,
                       unsigned cols) {
  const char *cwd;
  size_t argc, envc;
  if (agent_frame_parse_call(payload, len, &cwd, argv_slots, MAX_ARGV, &argc, env_slots, MAX_ENV,
                             &envc) != 0) {
    send_fail(id, EINVAL, "call", "frame");
    return;
  }
  char **env = merge_env(env_slots, envc);
  if (env == NULL) {
    send_fail(id, ENOMEM, "exec", argv_slots[0]);
    return;
  }
  int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1}, pfail[2] = {-1, -1};
  if (make_ends(rows, cols, pin, pout, perr) || make_pipe(pfail)) {
    int e = errno;
    int *all[] = {&pin[0], &pin[1], &pout[0], &pout[1], &perr[0], &perr[1], &pfail[0], &pfail[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) close_fd(all[i]);
    free(env);
    send_fail(id, e, rows ? "pty" : "pipe", argv_slots[0]);
    return;
  }
  /* Like posix_spawn: no copy of our address space (a fork costs gVisor a
   * new one, ~4 ms), and we resume once the child has exec'd or failed. */
  static _Alignas(16) unsigned char stack[64 << 10];
  struct spawn sp = {pin[0], pout[1], perr[1], pfail[1], rows != 0, cwd, argv_slots, env};
  pid_t pid = clone(child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &sp);
  int fork_errno = errno;
  free(env);
  close_fd(&pin[0]);
  close_fd(&pout[1]);
  close_fd(&perr[1]);
  close_fd(&pfail[1]);
  if (pid < 0) {
    close_fd(&pin[1]);
    close_fd(&pout[0]);
    close_fd(&perr[0]);
    close_fd(&pfail[0]);
    send_fail(id, fork_errno, "clone", argv_slots[0]);
    return;
  }
  int report[2];
  ssize_t n;
  while ((n = read(pfail[0], report, sizeof report)) < 0 && errno == EINTR) {
  }
  close_fd(&pfail[0]);
  if (n == (ssize_t)sizeof report) {
    close_fd(&pin[1]);
    close_fd(&pout[0]);
    close_fd(&perr[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    send_fail(id, report[1], report[0] ? "exec" : "chdir", report[0] ? argv_slots[0] : cwd);
    return;
  }
  fcntl(pin[1], F_SETFL, O_NONBLOCK);
  call.active = 1;
  call.tty = rows != 0;
  call.id = id;
  call.pid = pid;
  call.in = pin[1];
  call.out = pout[0];
  call.err = perr[0];
  call.off = call.len = 0;
  call.eof = call.exited = call.code = 0;
}

static void end_call(void) {
  close_fd(&call.in);
  close_fd(&call.out);
  close_fd(&call.err);
  free(call.buf);
  call.buf = NULL;
  call.off = call.len = call.cap = 0;
  call.active = 0;
  unsigned char *p = frame_out + SM_FRAME_HEADER;
  uint32_t c = (uint32_t)call.code;
  p[0] = (unsigned char)(c >> 24);
  p[1] = (unsigned char)(c >> 16);
  p[2] = (unsigned char)(c >> 8);
  p[3] = (unsigned char)c;
  send_frame(SM_FRAME_EXIT, call.id, 4);
}

static int stdin_open(void) { return call.active && call.in >= 0 && !call.eof; }

static void append_stdin(const unsigned char *data, uint32_t len) {
  if (call.off > 0 && call.len + len > call.cap) {
    memmove(call.buf, call.buf + call.off, call.len - call.off);
    call.len -= call.off;
    call.off = 0;
  }
  if (call.len + len > call.cap) {
    size_t cap = call.cap ? call.cap : 65536;
    while (cap < call.len + len) cap *= 2;
    unsigned char *b = realloc(call.buf, cap);
    if (b == NULL) protocol_error("out of memory for stdin");
    call.buf = b;
    call.cap = cap;
  }
  memcpy(call.buf + call.len, data, len);
  call.len += len;
}

/* Writes what the child will take now. EPIPE: the child closed its stdin,
 * so whatever is pending can never be delivered. */
static void flush_stdin(void) {
  while (call.in >= 0 && call.off < call.len) {
    ssize_t n = write(call.in, call.buf + call.off, call.len - call.off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n < 0) {
      close_fd(&call.in);
      break;
    }
    call.off += (size_t)n;
  }
  call.off = call.len = 0;
  if (call.eof) close_fd(&call.in);
}

/* The current call's terminal takes a new size (its program gets SIGWINCH). */
static void resize(uint32_t id, const unsigned char *payload, uint32_t len) {
  unsigned rows, cols;
  if (agent_frame_size_get(payload, len, &rows, &cols) != 0) protocol_error("bad terminal size");
  if (!call.active || !call.tty || id != call.id || call.out < 0) return;
  struct winsize ws = {(unsigned short)rows, (unsigned short)cols, 0, 0};
  ioctl(call.out, TIOCSWINSZ, &ws);
}

/* The time after which the call of id may no longer start
 * (SM_FRAME_NOT_AFTER), if the host gave one. */
static struct {
  int set;
  uint32_t id;
  uint64_t ms;
} not_after;

/* Whether the call frame of id came after its time: it is then refused
 * (never started) and the host told so. */
static int came_late(uint32_t id) {
  int late = 0;
  if (not_after.set && not_after.id == id) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    late = now > not_after.ms;
  }
  not_after.set = 0;
  if (late) send_fail(id, ETIME, SM_AGENT_LATE, "(frozen past its time)");
  return late;
}

static int on_frame(void *ud, int type, uint32_t id, const unsigned char *payload, uint32_t len) {
  (void)ud;
  unsigned rows = 0, cols = 0;
  switch (type) {
  case SM_FRAME_NOT_AFTER:
    if (len != 8) protocol_error("bad not-after time");
    not_after.set = 1;
    not_after.id = id;
    not_after.ms = agent_frame_get_u64(payload);
    return 0;
  case SM_FRAME_CALL:
    if (call.active) protocol_error("a call frame while a call runs");
    if (came_late(id)) return 0;
    start_call(id, SM_UNCONST(payload), len, 0, 0); /* read only: argv points into it */
    return 0;
  case SM_FRAME_TTY:
    if (call.active) protocol_error("a call frame while a call runs");
    if (agent_frame_size_get(payload, len, &rows, &cols) != 0) protocol_error("bad terminal size");
    if (came_late(id)) return 0;
    start_call(id, (unsigned char *)SM_UNCONST(payload) + 4, len - 4, rows, cols);
    return 0;
  case SM_FRAME_RESIZE:
    resize(id, payload, len);
    return 0;
  case SM_FRAME_STDIN:
    /* Other ids are stale: they crossed the previous call's exit. */
    if (stdin_open() && id == call.id && len > 0) {
      append_stdin(payload, len);
      flush_stdin();
    }
    return 0;
  case SM_FRAME_EOF:
    /* A terminal's input has no end (^D is a byte like any other). */
    if (stdin_open() && id == call.id && !call.tty) {
      call.eof = 1;
      if (call.off == call.len) close_fd(&call.in);
    }
    return 0;
  default: {
    char what[64];
    snprintf(what, sizeof what, "frame type '%c' goes the other way", type);
    protocol_error(what);
    return -1;
  }
  }
}

/* One read from a child's output pipe, sent as one frame; EOF closes it. */
static void pump(int *fd, int type) {
  ssize_t n = read(*fd, frame_out + SM_FRAME_HEADER, SM_FRAME_DATA_MAX);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close_fd(fd);
    return;
  }
  send_frame(type, call.id, (uint32_t)n);
}

static void read_host(agent_frame_reader *r) {
  static unsigned char in[65536];
  ssize_t n = read(0, in, sizeof in);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    /* With a call running the host is gone: nothing may outlive it. */
    if (call.active) host_gone();
    host_eof = 1;
    return;
  }
  if (agent_frame_reader_feed(r, in, (size_t)n) != 0) protocol_error("malformed frame");
}

static int called_as(const char *argv0, const char *name) {
  const char *base = strrchr(argv0, '/');
  return strcmp(base ? base + 1 : argv0, name) == 0;
}

/* One of the agent's commands (anything but the session: argc 1):
 * its exit status. */
static int command(int argc, char **argv) {
  /* `sandman-tools ...` (a link to this binary) or `sandman-agent tools
   * ...`: the host-tool route's command (tools_cli.c). */
  if (argc > 0 && called_as(argv[0], "sandman-tools")) return agent_tools_main(argc, argv);
  if (argc > 1 && strcmp(argv[1], "tools") == 0) return agent_tools_main(argc - 1, argv + 1);
  /* `sandman-agent route`: the host-tool route's relay (route.c). */
  if (argc == 2 && strcmp(argv[1], "route") == 0) return agent_route(argv[0]);
  /* `sandman-agent untar DIR [--list]`: a workspace copy in (untar.c). */
  if (argc == 3 && strcmp(argv[1], "untar") == 0) return agent_untar(argv[2], 0);
  if (argc == 4 && strcmp(argv[1], "untar") == 0 && strcmp(argv[3], "--list") == 0)
    return agent_untar(argv[2], 1);
  /* `sandman-agent ports`: TCP connections to the sandbox's loopback
   * (port_relay.c). */
  if (argc == 2 && strcmp(argv[1], "ports") == 0) return agent_ports();
  /* `sandman-agent watch ROOT PATH FLAGS`: file events (agent_watch.c). */
  if (argc == 5 && strcmp(argv[1], "watch") == 0) return agent_watch(argv[2], argv[3], argv[4]);
  /* `sandman-agent fs ...`: one file operation of the files API (fs.c). */
  if (argc > 1 && strcmp(argv[1], "fs") == 0) return sm_agent_fs_main(argc - 1, argv + 1);
  /* `sandman-agent wsdigest DIR MAX [EXCLUDE...]`: the workspace's digest
   * (digest_walk.c). */
  if (argc > 1 && strcmp(argv[1], "wsdigest") == 0)
    return sm_agent_wsdigest_main(argc - 1, argv + 1);
  /* `sandman-agent code start|send`: code contexts' driver (agent_code.c). */
  if (argc > 1 && strcmp(argv[1], "code") == 0) return agent_code_main(argc - 1, argv + 1);
  fprintf(stderr, "usage: sandman-agent [[call TOKEN] untar DIR [--list] | fs OP ROOT ARGS... | "
                  "wsdigest DIR MAX [EXCLUDE...] | route | tools ... | code start|send | ports |\n"
                  "       watch ROOT PATH FLAGS]\n");
  return 2;
}

int main(int argc, char **argv) {
  /* `sandman-agent call TOKEN COMMAND...`: a helper call of the host's,
   * which prints the call's preamble first (call_preamble.c), then runs
   * COMMAND in this process. Never the session (no COMMAND), and never
   * as `sandman-tools`, whose own `call NAME ...` this is not. */
  if (argc > 3 && !called_as(argv[0], "sandman-tools") && strcmp(argv[1], "call") == 0) {
    if (agent_call_preamble_print(argv[2]) != 0) {
      fprintf(stderr, "sandman-agent: cannot say the call's preamble\n");
      return 125;
    }
    argv[2] = argv[0];
    argc -= 2;
    argv += 2;
  }
  if (argc != 1 || called_as(argv[0], "sandman-tools")) return command(argc, argv);
  /* Fds 0-2 must be taken so that no pipe end lands on them. */
  for (int fd = 0; fd < 3; fd++)
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 1;
  /* Every signal to the default (an inherited SIG_IGN of SIGCHLD would
   * make waitpid fail, and calls must start with defaults, which then only
   * SIGPIPE needs restoring in the child), but SIGPIPE: a closed host
   * shows as EPIPE. */
  for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    perror("sandman-agent: signalfd");
    return 1;
  }
  memcpy(frame_out + SM_FRAME_HEADER, SM_AGENT_HELLO, sizeof SM_AGENT_HELLO - 1);
  send_frame(SM_FRAME_HELLO, 0, sizeof SM_AGENT_HELLO - 1);

  agent_frame_reader reader;
  agent_frame_reader_init(&reader, SM_FRAME_CALL_MAX + 4, on_frame, NULL);
  while (!host_eof || call.active) {
    struct pollfd pf[5];
    int np = 0, i_host = -1, i_out = -1, i_err = -1, i_in = -1, timeout = -1;
    pf[np++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
    if (!host_eof && call.len - call.off < STDIN_HIGH) {
      i_host = np;
      pf[np++] = (struct pollfd){.fd = 0, .events = POLLIN};
    }
    if (call.active) {
      if (call.out >= 0) i_out = np, pf[np++] = (struct pollfd){.fd = call.out, .events = POLLIN};
      if (call.err >= 0) i_err = np, pf[np++] = (struct pollfd){.fd = call.err, .events = POLLIN};
      if (call.in >= 0 && call.off < call.len)
        i_in = np, pf[np++] = (struct pollfd){.fd = call.in, .events = POLLOUT};
      if (call.exited) {
        long long left = call.deadline - now_ms();
        timeout = left > 0 ? (int)left : 0;
      }
    }
    if (poll(pf, (nfds_t)np, timeout) < 0) {
      if (errno == EINTR) continue;
      perror("sandman-agent: poll");
      kill_call();
      return 1;
    }
    if (pf[0].revents) {
      struct signalfd_siginfo si;
      while (read(sigfd, &si, sizeof si) > 0) {
      }
      reap();
    }
    /* Output first, in the order read, so it precedes the exit frame. */
    if (i_out >= 0 && pf[i_out].revents) pump(&call.out, SM_FRAME_STDOUT);
    if (i_err >= 0 && pf[i_err].revents) pump(&call.err, SM_FRAME_STDERR);
    if (i_in >= 0 && pf[i_in].revents) flush_stdin();
    if (i_host >= 0 && pf[i_host].revents) {
      read_host(&reader);
      /* A terminal echoes what was just typed at once: read it now rather
       * than after one more poll (a keystroke's round trip). */
      if (call.active && call.tty && call.out >= 0) pump(&call.out, SM_FRAME_STDOUT);
    }
    if (call.active && call.exited &&
        ((call.out < 0 && call.err < 0) || now_ms() >= call.deadline))
      end_call();
  }
  agent_frame_reader_dispose(&reader);
  return 0;
}
