/* The fake engine's execs (fake_engine.h): POST /exec/{id}/start answers
 * 101 and from then on the socket carries the process's stdin one way and
 * its stdout and stderr the other, each chunk behind the engine's 8-byte
 * header (stream, 0, 0, 0, length big-endian). The process runs on the host
 * with the container's paths mapped (fake_engine_fs.c); a session of
 * sandman's agent gets the paths in its call frames (a terminal's too)
 * mapped the same way. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/frame.h"
#include "support/fake_engine_internal.h"
#include "support/sock.h"
#include "support/xalloc.h"

#define CHUNK 65536
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

typedef struct bytes {
  char *data;
  size_t len, off;
} bytes;

static int bytes_add(bytes *b, const void *p, size_t n) {
  char *bigger = realloc(b->data, b->len + n + 1);
  if (bigger == NULL) return -1;
  b->data = bigger;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

static void bytes_drop(bytes *b, size_t n) {
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}

/* What one exec runs: argv, envp and its folder, mapped; freed by spec_free. */
typedef struct spec {
  char **argv, **envp;
  char *cwd;
  int stdin_attached;
  int agent; /* a session of sandman's agent: its call frames are mapped */
} spec;

static void strv_free(char **v) {
  for (size_t i = 0; v && v[i]; i++) free(v[i]);
  free(v);
}

static void spec_free(spec *s) {
  strv_free(s->argv);
  strv_free(s->envp);
  free(s->cwd);
}

/* The container's Env, then the exec's over it (the same names replaced). */
static char **merge_env(const fe_container *c, json_object *exec_env) {
  json_object *cfg_env = NULL;
  json_object_object_get_ex(c->config, "Env", &cfg_env);
  size_t n1 = fe_len(cfg_env), n2 = fe_len(exec_env);
  char **v = xcalloc(n1 + n2 + 2, sizeof *v);
  size_t n = 0;
  int has_path = 0;
  for (size_t k = 0; k < n1 + n2; k++) {
    json_object *src = k < n1 ? cfg_env : exec_env;
    const char *kv = json_object_get_string(json_object_array_get_idx(src, k < n1 ? k : k - n1));
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (eq == NULL) continue;
    size_t klen = (size_t)(eq - kv) + 1;
    size_t at = n;
    for (size_t i = 0; i < n; i++)
      if (strncmp(v[i], kv, klen) == 0) at = i;
    char *mapped = fe_fs_map(c, kv);
    if (at < n) free(v[at]);
    v[at] = mapped;
    if (at == n) n++;
    if (strncmp(kv, "PATH=", 5) == 0) has_path = 1;
  }
  if (!has_path) v[n++] = xstrdup("PATH=" DEFAULT_PATH);
  return v;
}

static int spec_make(const fe_container *c, json_object *config, spec *s) {
  memset(s, 0, sizeof *s);
  json_object *cmd = NULL, *env = NULL, *wd = NULL, *in = NULL;
  json_object_object_get_ex(config, "Cmd", &cmd);
  json_object_object_get_ex(config, "Env", &env);
  size_t argc = fe_len(cmd);
  s->argv = calloc(argc + 1, sizeof *s->argv);
  for (size_t i = 0; s->argv && i < argc; i++)
    s->argv[i] = fe_fs_map(c, json_object_get_string(json_object_array_get_idx(cmd, i)));
  s->envp = merge_env(c, env);
  const char *dir = "/";
  if (json_object_object_get_ex(config, "WorkingDir", &wd) && json_object_get_string_len(wd))
    dir = json_object_get_string(wd);
  else if (json_object_object_get_ex(c->config, "WorkingDir", &wd) &&
           json_object_get_string_len(wd))
    dir = json_object_get_string(wd);
  char host[FE_PATH_MAX];
  fe_fs_host_path(c, dir, host, sizeof host);
  s->cwd = strdup(host);
  s->stdin_attached =
      json_object_object_get_ex(config, "AttachStdin", &in) && json_object_get_boolean(in);
  const char *first = json_object_get_string(json_object_array_get_idx(cmd, 0));
  s->agent = argc == 1 && first && strncmp(first, "/.sandman/agent-", 16) == 0;
  return s->argv && s->envp && s->cwd ? 0 : -1;
}

/* argv[0] found along the exec's PATH (as the engine looks in the
 * container's). */
static void resolve(const spec *s, char *out, size_t len) {
  snprintf(out, len, "%s", s->argv[0]);
  if (strchr(s->argv[0], '/')) return;
  const char *path = DEFAULT_PATH;
  for (size_t i = 0; s->envp[i]; i++)
    if (strncmp(s->envp[i], "PATH=", 5) == 0) path = s->envp[i] + 5;
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    snprintf(out, len, "%.*s/%s", (int)n, path, s->argv[0]);
    if (access(out, X_OK) == 0) return;
    path += n + (end ? 1 : 0);
  }
  snprintf(out, len, "%s", s->argv[0]);
}

/* Starts the process in a session of its own, its stdio on pipes (fds:
 * stdin write end, stdout and stderr read ends). The process gets the
 * default signal dispositions and mask, whatever the test's threads have. */
static int spawn(const spec *s, pid_t *pid, int fds[3]) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  fds[0] = fds[1] = fds[2] = -1;
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      (s->stdin_attached && pipe2(in, O_CLOEXEC) != 0)) {
    int saved = errno;
    int all[] = {in[0], in[1], out[0], out[1], err[0], err[1]};
    for (size_t i = 0; i < 6; i++)
      if (all[i] >= 0) close(all[i]);
    return saved;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  if (s->stdin_attached) posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addchdir_np(&fa, s->cwd);
  sigset_t none, dfl;
  sigemptyset(&none);
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &dfl);
  posix_spawnattr_setflags(&at,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char prog[FE_PATH_MAX];
  resolve(s, prog, sizeof prog);
  int rc = posix_spawn(pid, prog, &fa, &at, s->argv, s->envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(out[1]);
  close(err[1]);
  if (in[0] >= 0) close(in[0]);
  fds[0] = in[1];
  fds[1] = out[0];
  fds[2] = err[0];
  if (rc != 0) {
    for (int i = 0; i < 3; i++)
      if (fds[i] >= 0) close(fds[i]);
  }
  return rc;
}

static int send_frame(int fd, int stream, const char *data, size_t len) {
  unsigned char h[8];
  ts_mux_head(h, stream, (uint32_t)len);
  return ts_send_all(fd, h, 8) == 0 && ts_send_all(fd, data, len) == 0 ? 0 : -1;
}

/* ---- an agent session's call frames, mapped on their way in ---- */

/* Moves every whole frame of in to out, each string of a call frame's
 * payload mapped (a terminal's call frame: after its size, 4 bytes).
 * -1 on a frame no agent would take. */
static int agent_frames(const fe_container *c, bytes *in, bytes *out) {
  while (in->len >= SM_FRAME_HEADER) {
    const unsigned char *h = (const unsigned char *)in->data;
    uint32_t len = (uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8];
    if (len > SM_FRAME_CALL_MAX) return -1;
    if (in->len < SM_FRAME_HEADER + (size_t)len) return 0;
    size_t keep = h[0] == SM_FRAME_TTY ? 4 : 0; /* the terminal's rows and columns */
    if ((h[0] != SM_FRAME_CALL && h[0] != SM_FRAME_TTY) || len < keep) {
      if (bytes_add(out, in->data, SM_FRAME_HEADER + len) != 0) return -1;
      bytes_drop(in, SM_FRAME_HEADER + len);
      continue;
    }
    bytes payload = {0};
    if (keep && bytes_add(&payload, in->data + SM_FRAME_HEADER, keep) != 0) return -1;
    const char *p = in->data + SM_FRAME_HEADER + keep, *end = in->data + SM_FRAME_HEADER + len;
    while (p < end) {
      size_t n = strnlen(p, (size_t)(end - p));
      char *raw = strndup(p, n);
      char *mapped = raw ? fe_fs_map(c, raw) : NULL;
      int rc = mapped ? bytes_add(&payload, mapped, strlen(mapped) + 1) : -1;
      free(raw);
      free(mapped);
      if (rc != 0) {
        free(payload.data);
        return -1;
      }
      p += n + 1;
    }
    unsigned char head[SM_FRAME_HEADER];
    agent_frame_header(head, h[0],
                       (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4],
                       (uint32_t)payload.len);
    int rc = bytes_add(out, head, sizeof head);
    if (rc == 0 && payload.len) rc = bytes_add(out, payload.data, payload.len);
    free(payload.data);
    if (rc != 0) return -1;
    bytes_drop(in, SM_FRAME_HEADER + len);
  }
  return 0;
}

/* ---- the stream ---- */

typedef struct pump {
  const fe_container *c;
  const spec *s;
  int sock, sock_open, sock_dead;
  int in_fd, out_fd, err_fd;
  bytes pending; /* for the process's stdin */
  bytes frames;  /* an agent session: stdin not yet a whole frame */
  pid_t pid;
  int exited, status;
} pump;

static void stdin_from(pump *p, const char *data, size_t n) {
  if (p->in_fd < 0) return;
  int rc = p->s->agent ? bytes_add(&p->frames, data, n) : bytes_add(&p->pending, data, n);
  if (rc == 0 && p->s->agent) rc = agent_frames(p->c, &p->frames, &p->pending);
  if (rc != 0) {
    close(p->in_fd);
    p->in_fd = -1;
  }
}

static void read_sock(pump *p) {
  char buf[CHUNK];
  ssize_t n = recv(p->sock, buf, sizeof buf, 0);
  if (n < 0 && errno == EINTR) return;
  if (n > 0) return stdin_from(p, buf, (size_t)n);
  /* The client half-closed (stdin ends) or went: the process runs on, as
   * under the engine, until it ends or the container is killed. */
  p->sock_open = 0;
  if (p->in_fd >= 0 && p->pending.len == 0) {
    close(p->in_fd);
    p->in_fd = -1;
  }
}

static void write_stdin(pump *p) {
  ssize_t n = write(p->in_fd, p->pending.data, p->pending.len);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n < 0) {
    p->pending.len = 0;
    close(p->in_fd);
    p->in_fd = -1;
    return;
  }
  bytes_drop(&p->pending, (size_t)n);
  if (p->pending.len == 0 && !p->sock_open) {
    close(p->in_fd);
    p->in_fd = -1;
  }
}

/* Output of stream 1 or 2 to the client; -1 at its end. */
static int read_out(pump *p, int *fd, int stream) {
  char buf[CHUNK];
  ssize_t n = read(*fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (n <= 0) {
    close(*fd);
    *fd = -1;
    return -1;
  }
  if (!p->sock_dead && send_frame(p->sock, stream, buf, (size_t)n) != 0) p->sock_dead = 1;
  return 0;
}

/* The process's whole output, until both its streams end, or until it has
 * exited and nothing more is waiting (a child it left may hold them). */
static void pump_run(pump *p) {
  while (p->out_fd >= 0 || p->err_fd >= 0) {
    struct pollfd pf[4];
    int n = 0, i_sock = -1, i_in = -1, i_out = -1, i_err = -1;
    if (p->sock_open && p->pending.len == 0) pf[i_sock = n++] = (struct pollfd){p->sock, POLLIN, 0};
    if (p->in_fd >= 0 && p->pending.len > 0) pf[i_in = n++] = (struct pollfd){p->in_fd, POLLOUT, 0};
    if (p->out_fd >= 0) pf[i_out = n++] = (struct pollfd){p->out_fd, POLLIN, 0};
    if (p->err_fd >= 0) pf[i_err = n++] = (struct pollfd){p->err_fd, POLLIN, 0};
    int r = poll(pf, (nfds_t)n, p->exited ? 0 : 50);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && !p->exited && waitpid(p->pid, &p->status, WNOHANG) == p->pid) p->exited = 1;
    else if (r == 0 && p->exited) break;
    if (i_sock >= 0 && pf[i_sock].revents) read_sock(p);
    if (i_in >= 0 && pf[i_in].revents) write_stdin(p);
    if (i_out >= 0 && pf[i_out].revents) read_out(p, &p->out_fd, 1);
    if (i_err >= 0 && pf[i_err].revents) read_out(p, &p->err_fd, 2);
  }
  if (!p->exited) waitpid(p->pid, &p->status, 0);
}

/* What one exec start has: its command, its container as it is when it
 * starts (the mounts, for the mapping), an injected failure. */
typedef struct start {
  spec s;
  fe_container snap;
  json_object *cmd;
  int fail_code; /* 0: none */
  char fail_message[512];
} start;

/* An injected failure for this command (fe->mu held): 1 and st filled. */
static int take_exec_fault(fake_engine *fe, json_object *cmd, start *st) {
  for (fe_fault *f = fe->exec_faults; f; f = f->next) {
    if (f->times <= 0) continue;
    for (size_t i = 0; i < fe_len(cmd); i++) {
      const char *a = json_object_get_string(json_object_array_get_idx(cmd, i));
      if (a && strstr(a, f->part)) {
        f->times--;
        st->fail_code = f->status;
        snprintf(st->fail_message, sizeof st->fail_message, "%s\r\n", f->message);
        return 1;
      }
    }
  }
  return 0;
}

/* The exec and its container as they are when it starts; 0, or an answer. */
static int exec_begin(fake_engine *fe, const char *id, start *st, fe_reply *r) {
  pthread_mutex_lock(&fe->mu);
  fe_exec *x = fe_exec_find(fe, id);
  fe_container *c = x ? fe_container_find(fe, x->container) : NULL;
  json_object *cmd = NULL;
  if (x) json_object_object_get_ex(x->config, "Cmd", &cmd);
  if (x == NULL) fe_reply_error(r, 404, "No such exec instance: %s", id);
  else if (x->started) fe_reply_error(r, 409, "Exec %s has already run", id);
  else if (c == NULL || !c->running)
    fe_reply_error(r, 409, "Container %s is not running", x->container);
  else if (spec_make(c, x->config, &st->s) != 0) fe_reply_error(r, 500, "out of memory");
  if (r->status == 0) {
    st->snap = *c;
    st->snap.config = NULL;
    st->cmd = json_object_get(cmd);
    take_exec_fault(fe, cmd, st);
    x->started = 1;
    x->running = 1;
  }
  pthread_mutex_unlock(&fe->mu);
  return r->status ? -1 : 0;
}

static void exec_end(fake_engine *fe, const char *id, int code) {
  pthread_mutex_lock(&fe->mu);
  fe_exec *x = fe_exec_find(fe, id);
  if (x) {
    x->exit_code = code;
    x->running = 0;
    x->pid = 0;
  }
  pthread_cond_broadcast(&fe->cv);
  pthread_mutex_unlock(&fe->mu);
}

/* The process, its stream until it ends; its exit code. */
static int run_process(fake_engine *fe, fe_conn *c, const char *id, start *st, int sock_dead) {
  pump p = {.c = &st->snap, .s = &st->s, .sock = c->fd, .sock_open = 1, .in_fd = -1};
  int fds[3];
  int src = spawn(&st->s, &p.pid, fds);
  if (src != 0) {
    /* As runc says it, on the stream, with its exit code. */
    char msg[FE_PATH_MAX + 200];
    int n = snprintf(msg, sizeof msg,
                     "OCI runtime exec failed: exec failed: unable to start "
                     "container process: exec: \"%s\": %s: unknown\r\n",
                     st->s.argv[0], strerror(src));
    if (!sock_dead) send_frame(c->fd, 1, msg, (size_t)n);
    return src == ENOENT ? 127 : 126;
  }
  pthread_mutex_lock(&fe->mu);
  fe_exec *x = fe_exec_find(fe, id);
  if (x) x->pid = p.pid;
  pthread_mutex_unlock(&fe->mu);
  p.in_fd = fds[0];
  p.out_fd = fds[1];
  p.err_fd = fds[2];
  p.sock_dead = sock_dead;
  /* What came with the request head is stdin already. */
  if (c->len > c->off) stdin_from(&p, c->buf + c->off, c->len - c->off);
  c->off = c->len = 0;
  pump_run(&p);
  if (p.in_fd >= 0) close(p.in_fd);
  if (p.out_fd >= 0) close(p.out_fd);
  if (p.err_fd >= 0) close(p.err_fd);
  free(p.pending.data);
  free(p.frames.data);
  return WIFEXITED(p.status) ? WEXITSTATUS(p.status) : 128 + WTERMSIG(p.status);
}

/* A leased call's watcher: when its stdin ends (the runner closed the
 * stream, or went) or brings a line, the container ends, as the watcher's
 * kill would end it. */
static void watch(fake_engine *fe, fe_conn *c, const char *cid) {
  int line = c->len > c->off && memchr(c->buf + c->off, '\n', c->len - c->off) != NULL;
  char buf[4096];
  while (!line) {
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    line = memchr(buf, '\n', (size_t)n) != NULL;
  }
  fe_container_end(fe, cid);
}

/* What the fake does instead of running a command: its exit code, or -1
 * when the command is to run. sandman's own helpers first (the watcher's
 * script kills every process, in its container), then the refusals. */
static int instead(fake_engine *fe, fe_conn *c, start *st, int sock_dead) {
  if (st->fail_code == 0) {
    switch (fe_helper_emulate(fe, st->snap.id, st->cmd)) {
    case FE_HELPER_DONE: return 0;
    case FE_HELPER_WATCH: watch(fe, c, st->snap.id); return 137;
    default: break;
    }
  }
  const char *refused = st->fail_code ? NULL : fe_refused(st->cmd);
  if (refused) {
    fprintf(stderr, "fake engine: not run on this host (it signals every process): %s\n",
            refused);
    snprintf(st->fail_message, sizeof st->fail_message,
             "the fake engine does not run what signals every process\r\n");
    st->fail_code = 126;
  }
  if (!st->fail_code) return -1;
  if (!sock_dead) send_frame(c->fd, 1, st->fail_message, strlen(st->fail_message));
  return st->fail_code;
}

void fe_exec_start(fake_engine *fe, fe_conn *c, const char *id, fe_reply *r) {
  start st;
  memset(&st, 0, sizeof st);
  if (exec_begin(fe, id, &st, r) != 0) return spec_free(&st.s);
  r->hijacked = 1;
  static const char upgraded[] = "HTTP/1.1 101 UPGRADED\r\nContent-Type: "
                                 "application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\n"
                                 "Upgrade: tcp\r\nApi-Version: " FE_API "\r\n\r\n";
  int sock_dead = ts_send_all(c->fd, upgraded, sizeof upgraded - 1) != 0;
  int code = instead(fe, c, &st, sock_dead);
  if (code < 0) code = run_process(fe, c, id, &st, sock_dead);
  exec_end(fe, id, code);
  shutdown(c->fd, SHUT_RDWR);
  json_object_put(st.cmd);
  spec_free(&st.s);
}
