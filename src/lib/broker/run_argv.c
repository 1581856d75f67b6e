/* argv host tools: substitution and the process (docs/host-tools.md
 * "How an argv tool runs"). fork + execve, no shell: a value with spaces or
 * shell metacharacters stays one argument. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sandman/util.h>

#include "broker/run_argv.h"

/* The text a value becomes as a command argument (num: room for a number);
 * NULL for a type that cannot be one. */
static const char *value_text(json_object *v, char num[64]) {
  if (json_object_is_type(v, json_type_string)) return json_object_get_string(v);
  if (json_object_is_type(v, json_type_boolean)) return json_object_get_boolean(v) ? "true" : "false";
  if (json_object_is_type(v, json_type_int)) {
    snprintf(num, 64, "%lld", (long long)json_object_get_int64(v));
    return num;
  }
  if (json_object_is_type(v, json_type_double)) {
    snprintf(num, 64, "%.17g", json_object_get_double(v));
    return num;
  }
  return NULL;
}

static int add_value(common_strv *out, json_object *v, sm_error *err) {
  char num[64];
  const char *s = value_text(v, num);
  if (s == NULL) return sm_error_set(err, SM_EINVAL, "an argument of this type cannot be a command argument");
  return common_strv_add(out, s) ? sm_error_set(err, SM_ENOMEM, "broker: out of memory") : 0;
}

static int listed(json_object *list, const char *name) {
  for (size_t i = 0; list && i < json_object_array_length(list); i++)
    if (strcmp(json_object_get_string(json_object_array_get_idx(list, i)), name) == 0) return 1;
  return 0;
}

/* 1 when v (or an item of it) would be an argument starting with '-'. */
static int dashed(json_object *v) {
  char num[64];
  if (json_object_is_type(v, json_type_array)) {
    for (size_t j = 0; j < json_object_array_length(v); j++)
      if (dashed(json_object_array_get_idx(v, j))) return 1;
    return 0;
  }
  const char *s = value_text(v, num);
  return s != NULL && s[0] == '-';
}

static int placeholder(const char *a, char *name, size_t len) {
  size_t n = strlen(a);
  if (n < 3 || a[0] != '{' || a[n - 1] != '}' || n - 2 >= len) return 0;
  memcpy(name, a + 1, n - 2);
  name[n - 2] = '\0';
  return strchr(name, '{') == NULL && strchr(name, '}') == NULL;
}

int broker_argv_dash_check(json_object *tmpl, json_object *args, json_object *allow_dash, char *why,
                           size_t len) {
  for (size_t i = 1; i < json_object_array_length(tmpl); i++) {
    const char *a = json_object_get_string(json_object_array_get_idx(tmpl, i));
    char name[128];
    json_object *v = NULL;
    if (!placeholder(a, name, sizeof name) || !json_object_object_get_ex(args, name, &v) ||
        listed(allow_dash, name) || !dashed(v))
      continue;
    snprintf(why, len,
             "argument '%s' may not start with '-' (the host program would read it as an option; "
             "the tool's allow_dash must name it)",
             name);
    return 1;
  }
  return 0;
}

int broker_argv_build(json_object *tmpl, json_object *args, common_strv *out, sm_error *err) {
  for (size_t i = 0; i < json_object_array_length(tmpl); i++) {
    const char *a = json_object_get_string(json_object_array_get_idx(tmpl, i));
    char name[128];
    json_object *v = NULL;
    int rc = 0;
    if (i == 0 || !placeholder(a, name, sizeof name)) {
      if (common_strv_add(out, a)) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
      continue;
    }
    if (!json_object_object_get_ex(args, name, &v) || json_object_is_type(v, json_type_null))
      continue;
    if (json_object_is_type(v, json_type_array)) {
      for (size_t j = 0; rc == 0 && j < json_object_array_length(v); j++)
        rc = add_value(out, json_object_array_get_idx(v, j), err);
    } else {
      rc = add_value(out, v, err);
    }
    if (rc) return rc;
  }
  if (out->n == 0) return sm_error_set(err, SM_EINVAL, "broker: empty command");
  return 0;
}

/* Where execve finds argv[0]: as given with a '/', else the first
 * executable on PATH of envp (the tool's own environment). */
static int resolve(const char *cmd, char *const *envp, char *out, size_t len) {
  if (strchr(cmd, '/')) return snprintf(out, len, "%s", cmd) < (int)len ? 0 : -1;
  const char *path = "/usr/local/bin:/usr/bin:/bin";
  for (char *const *e = envp; e && *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  while (*path) {
    const char *c = strchr(path, ':');
    size_t n = c ? (size_t)(c - path) : strlen(path);
    if (n > 0 && (size_t)snprintf(out, len, "%.*s/%s", (int)n, path, cmd) < len &&
        access(out, X_OK) == 0)
      return 0;
    path += n + (c ? 1 : 0);
  }
  return -1;
}

/* In the child: only async-signal-safe calls until execve. */
static void child(const char *file, const bk_proc_opts *o, int out_w, int err_w) {
  setpgid(0, 0);
  int in = open("/dev/null", O_RDONLY);
  if (in < 0 || dup2(in, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0) _exit(126);
  if (close_range(3, ~0U, 0) != 0)
    for (int fd = 3; fd < 65536; fd++) close(fd);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
  if (chdir(o->cwd ? o->cwd : "/") != 0) _exit(126);
  execve(file, o->argv, o->envp);
  _exit(errno == ENOENT ? 127 : 126);
}

typedef struct stream {
  int fd;
  char *data;
  size_t len, cap;
  int truncated;
} stream;

static int pump(stream *s, size_t max) {
  char buf[16384];
  ssize_t r = read(s->fd, buf, sizeof buf);
  if (r < 0) return errno == EINTR || errno == EAGAIN ? 0 : -1;
  if (r == 0) return -1;
  size_t room = max > s->len ? max - s->len : 0, take = (size_t)r < room ? (size_t)r : room;
  if (take < (size_t)r) s->truncated = 1;
  if (take) {
    memcpy(s->data + s->len, buf, take);
    s->len += take;
  }
  return 0;
}

static void finish(stream *s, char **out, size_t *len, int *trunc) {
  s->data[s->len] = '\0';
  *out = s->data;
  *len = s->len;
  *trunc = s->truncated;
  if (s->fd >= 0) close(s->fd);
}

/* 1 when the program has ended (also when it cannot be waited for: an
 * application that ignores SIGCHLD has its children reaped for it). */
static int reaped(pid_t pid, int *status, int flags) {
  pid_t r;
  do r = waitpid(pid, status, flags);
  while (r < 0 && errno == EINTR);
  if (r < 0) *status = -1;
  return r == pid || r < 0;
}

/* 1 when the program has ended, without reaping it: its process group
 * cannot be reused while it is a zombie, so killing the group is safe. */
static int ended(pid_t pid, int block) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  int r;
  do r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
  while (r < 0 && errno == EINTR);
  return r < 0 || si.si_pid == pid;
}

/* The program ended: the rest of its group goes, then it is reaped. */
static void finish_group(pid_t pid, int *status) {
  kill(-pid, SIGKILL);
  reaped(pid, status, 0);
}

/* One loop: read both pipes, watch the deadline and the cancel flag, and
 * reap the program, killing its group when it ends. */
static void supervise(pid_t pid, const bk_proc_opts *o, stream st[2], bk_proc_result *r) {
  double start = sm_now(), deadline = start + o->timeout_s;
  int status = 0, exited = 0;
  while (st[0].fd >= 0 || st[1].fd >= 0 || !exited) {
    if (!exited && ended(pid, 0)) {
      exited = 1;
      finish_group(pid, &status); /* what it left behind goes with it */
    }
    double now = sm_now();
    if (exited && now >= deadline) {
      /* Something outside the group still holds a pipe: stop reading. */
      for (int i = 0; i < 2; i++)
        if (st[i].fd >= 0) close(st[i].fd), st[i].fd = -1, st[i].truncated = 1;
      break;
    }
    if (!exited && (now >= deadline || (o->cancel && *o->cancel))) {
      if (now >= deadline) r->timed_out = 1;
      else r->cancelled = 1;
      finish_group(pid, &status);
      exited = 1;
      continue;
    }
    struct pollfd p[2];
    nfds_t n = 0;
    for (int i = 0; i < 2; i++)
      if (st[i].fd >= 0) p[n++] = (struct pollfd){.fd = st[i].fd, .events = POLLIN};
    if (n == 0) {
      if (!exited && ended(pid, 1)) exited = 1, finish_group(pid, &status);
      continue;
    }
    int ms = (int)((deadline - now) * 1000) + 1;
    if (ms > 100) ms = 100; /* to see the cancel flag and the program's end */
    if (poll(p, n, ms) <= 0) continue;
    for (nfds_t k = 0; k < n; k++) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      stream *s = st[0].fd == p[k].fd ? &st[0] : &st[1];
      if (pump(s, o->max_output) < 0) {
        close(s->fd);
        s->fd = -1;
      }
    }
  }
  if (status != -1 && WIFEXITED(status)) r->exit_code = WEXITSTATUS(status);
  else if (status != -1 && WIFSIGNALED(status)) r->exit_code = 128 + WTERMSIG(status);
  r->duration_ms = (sm_now() - start) * 1000.0;
}

int broker_proc_run(const bk_proc_opts *o, bk_proc_result *r, sm_error *err) {
  memset(r, 0, sizeof *r);
  r->exit_code = -1;
  char file[4096];
  stream st[2] = {{.fd = -1}, {.fd = -1}};
  for (int i = 0; i < 2; i++)
    if (!(st[i].data = malloc(o->max_output + 1))) {
      free(st[0].data);
      return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
    }
  if (resolve(o->argv[0], o->envp, file, sizeof file) != 0) {
    st[0].data[0] = st[1].data[0] = '\0';
    r->exit_code = 127;
    r->out = st[0].data;
    r->errout = st[1].data;
    r->err_len = (size_t)snprintf(st[1].data, o->max_output + 1, "command not found");
    if (r->err_len > o->max_output) r->err_len = o->max_output;
    return 0;
  }
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (po[i] >= 0) close(po[i]);
      if (pe[i] >= 0) close(pe[i]);
    }
    free(st[0].data);
    free(st[1].data);
    return sm_error_set_errno(err, SM_EIO, e, "broker: pipe");
  }
  pid_t pid = fork();
  if (pid == 0) child(file, o, po[1], pe[1]);
  int e = errno;
  close(po[1]);
  close(pe[1]);
  st[0].fd = po[0];
  st[1].fd = pe[0];
  if (pid < 0) {
    finish(&st[0], &r->out, &r->out_len, &r->out_truncated);
    finish(&st[1], &r->errout, &r->err_len, &r->err_truncated);
    broker_proc_result_dispose(r);
    return sm_error_set_errno(err, SM_EIO, e, "broker: fork");
  }
  setpgid(pid, pid); /* also here: no race with the kill below */
  supervise(pid, o, st, r);
  finish(&st[0], &r->out, &r->out_len, &r->out_truncated);
  finish(&st[1], &r->errout, &r->err_len, &r->err_truncated);
  return 0;
}

void broker_proc_result_dispose(bk_proc_result *r) {
  free(r->out);
  free(r->errout);
  r->out = r->errout = NULL;
}
