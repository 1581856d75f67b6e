/* Mode none: the tool runs on the host, in a scratch directory under the
 * state directory, with a scrubbed environment, resource limits and its own
 * process group.
 *
 * posix_spawn cannot set rlimits, and setting them on sandman itself would
 * limit every thread of a worker. So the child is /bin/sh running a tiny
 * wrapper that waits on a pipe (fd 3); sandman applies the limits to it
 * with prlimit(2) and then says "go"; the wrapper execs the tool, which
 * inherits the limits. If sandman dies first the pipe closes and the tool
 * never runs. The shell also gives the usual 126/127 for a command that is
 * not executable or not found. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "common/thread.h"
#include "sandbox/capture.h"
#include "sandbox/env.h"
#include "sandbox/host.h"
#include "sandbox/sandbox_result.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"
#include "sandbox/ws_copy_out.h"

extern char **environ;

#define READ_CHUNK 65536
#define DRAIN_GRACE_MS 1000.0

/* ---- removing a scratch tree ---- */
static int make_writable(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)ftw;
  if (flag == FTW_D || flag == FTW_DNR) chmod(path, (st->st_mode & 07777) | S_IRWXU);
  return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (flag == FTW_DP || flag == FTW_D || flag == FTW_DNR) rmdir(path);
  else unlink(path);
  return 0;
}

int sandbox_remove_tree(const char *path, sm_error *err) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : sm_error_set_errno(err, SM_EIO, errno, "%s", path);
  /* Directories the tool made unreadable are opened up first (no symlink
   * is ever followed: FTW_PHYS; no other file system: FTW_MOUNT). */
  nftw(path, make_writable, 32, FTW_PHYS | FTW_MOUNT);
  nftw(path, remove_entry, 32, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
  if (lstat(path, &st) == 0)
    return sm_error_set(err, SM_EIO, "could not remove all of %s", path);
  return 0;
}

/* ---- stdin feeder: the request's reader may block (a terminal), so it
 * gets a thread that owns its pipe end and its own memory. ---- */
typedef struct feeder {
  sm_read_fn read;
  void *ud;
  int fd;
} feeder;

static void *feed_stdin(void *p) {
  feeder *f = p;
  /* A tool that stops reading must not kill sandman with SIGPIPE: blocked
   * here, write fails with EPIPE instead. */
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
  char buf[16384];
  for (;;) {
    ssize_t n = f->read(f->ud, buf, sizeof buf);
    if (n <= 0) break;
    ssize_t off = 0;
    while (off < n) {
      ssize_t w = write(f->fd, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) goto done; /* the tool closed its stdin */
      off += w;
    }
  }
done:
  close(f->fd);
  free(f);
  return NULL;
}

static int set_limit(pid_t pid, int resource, rlim_t value, const char *what, sm_error *err) {
  struct rlimit rl = {value, value};
  if (prlimit(pid, resource, &rl, NULL) != 0)
    return sm_error_set_errno(err, SM_ESANDBOX, errno, "setting the %s limit", what);
  return 0;
}

static int apply_limits(pid_t pid, const sm_sandbox_settings *s, sm_error *err) {
  int rc = 0;
  if (s->timeout_s > 0)
    rc = set_limit(pid, RLIMIT_CPU, (rlim_t)ceil(s->timeout_s) + 1, "CPU time", err);
  if (rc == 0 && s->memory > 0) rc = set_limit(pid, RLIMIT_AS, (rlim_t)s->memory, "address space", err);
  if (rc == 0 && s->pids > 0) rc = set_limit(pid, RLIMIT_NPROC, (rlim_t)s->pids, "process", err);
  if (rc == 0 && s->disk > 0) rc = set_limit(pid, RLIMIT_FSIZE, (rlim_t)s->disk, "file size", err);
  if (rc == 0 && s->nofile > 0) rc = set_limit(pid, RLIMIT_NOFILE, (rlim_t)s->nofile, "open files", err);
  return rc;
}

static int make_dir(const char *path, sm_error *err) {
  if (mkdir(path, 0700) != 0 && errno != EEXIST)
    return sm_error_set_errno(err, SM_EIO, errno, "creating %s", path);
  return 0;
}

typedef struct host_call {
  pid_t pid;
  int out_fd, err_fd, go_fd;
  pthread_t feeder_thread;
  int feeder_started;
} host_call;

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/* Spawns the wrapper (not yet running the tool) with its pipes. */
static int spawn_wrapper(const sm_run_request *req, const char *workdir, const common_strv *env,
                         host_call *hc, sm_error *err) {
  int out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, go_p[2] = {-1, -1}, in_p[2] = {-1, -1};
  int rc = 0;
  if (pipe2(out_p, O_CLOEXEC) != 0 || pipe2(err_p, O_CLOEXEC) != 0 || pipe2(go_p, O_CLOEXEC) != 0 ||
      (req->stdin_read && pipe2(in_p, O_CLOEXEC) != 0)) {
    rc = sm_error_set_errno(err, SM_EIO, errno, "creating pipes");
    goto out;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  if (req->stdin_read) posix_spawn_file_actions_adddup2(&fa, in_p[0], 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_p[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_p[1], 2);
  posix_spawn_file_actions_adddup2(&fa, go_p[0], 3);
  posix_spawn_file_actions_addchdir_np(&fa, workdir);
  sigset_t none, dfl;
  sigemptyset(&none);
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  sigaddset(&dfl, SIGINT);
  sigaddset(&dfl, SIGTERM);
  sigaddset(&dfl, SIGQUIT);
  sigaddset(&dfl, SIGCHLD);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);

  common_strv argv = {0};
  int arc = common_strv_add(&argv, "sh");
  if (!arc) arc = common_strv_add(&argv, "-c");
  if (!arc) arc = common_strv_add(&argv, sm_host_wrapper_script);
  if (!arc) arc = common_strv_add(&argv, "sh");
  for (size_t i = 0; !arc && i < req->argc; i++) arc = common_strv_add(&argv, req->argv[i]);
  if (arc) {
    rc = sm_error_set(err, SM_ENOMEM, NULL);
  } else {
    int e = posix_spawn(&hc->pid, "/bin/sh", &fa, &attr, argv.v, env->v);
    if (e != 0) rc = sm_error_set_errno(err, SM_ESANDBOX, e, "starting /bin/sh for the tool");
  }
  common_strv_dispose(&argv);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc) goto out;
  hc->out_fd = out_p[0];
  hc->err_fd = err_p[0];
  hc->go_fd = go_p[1];
  out_p[0] = err_p[0] = go_p[1] = -1;
  if (req->stdin_read) {
    feeder *f = malloc(sizeof *f);
    if (f) {
      f->read = req->stdin_read;
      f->ud = req->stdin_ud;
      f->fd = in_p[1];
      if (common_thread_start(&hc->feeder_thread, NULL, feed_stdin, f) == 0) {
        hc->feeder_started = 1;
        in_p[1] = -1;
      } else {
        free(f);
      }
    }
  }
out:
  for (int i = 0; i < 2; i++) {
    if (out_p[i] >= 0) close(out_p[i]);
    if (err_p[i] >= 0) close(err_p[i]);
    if (go_p[i] >= 0) close(go_p[i]);
    if (in_p[i] >= 0) close(in_p[i]);
  }
  return rc;
}

static int read_some(int *fd, int stream, sandbox_capture *cap) {
  char buf[READ_CHUNK];
  ssize_t n = read(*fd, buf, sizeof buf);
  if (n > 0) {
    sandbox_capture_output(cap, stream, buf, (size_t)n);
    return 1;
  }
  if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    close(*fd);
    *fd = -1;
  }
  return 0;
}

static int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 125;
}

/* Reads output until the tool exits (or the timeout or cancel kills its
 * group), then drains what is left for a moment. */
static void supervise(host_call *hc, const sm_run_request *req, sandbox_capture *cap,
                      sandbox_exec_outcome *oc) {
  double t0 = sm_monotonic_ms();
  double deadline = req->settings.timeout_s > 0 ? t0 + req->settings.timeout_s * 1000.0 : 0;
  int status = 0, exited = 0;
  double drain_until = 0;
  set_nonblock(hc->out_fd);
  set_nonblock(hc->err_fd);
  for (;;) {
    if (!exited) {
      pid_t w = waitpid(hc->pid, &status, WNOHANG);
      if (w == hc->pid) {
        exited = 1;
        oc->duration_ms = sm_monotonic_ms() - t0;
        /* Whatever the tool left running in its group goes with it. */
        kill(-hc->pid, SIGKILL);
        drain_until = sm_monotonic_ms() + DRAIN_GRACE_MS;
      }
    }
    if (hc->out_fd < 0 && hc->err_fd < 0 && exited) break;
    double now = sm_monotonic_ms();
    if (exited && now >= drain_until) break;
    if (!exited && ((deadline > 0 && now >= deadline) || (req->cancel && *req->cancel))) {
      if (deadline > 0 && now >= deadline) oc->timed_out = 1;
      else oc->cancelled = 1;
      kill(-hc->pid, SIGKILL);
      waitpid(hc->pid, &status, 0);
      exited = 1;
      oc->duration_ms = sm_monotonic_ms() - t0;
      drain_until = sm_monotonic_ms() + DRAIN_GRACE_MS;
      continue;
    }
    struct pollfd pf[2];
    int n = 0;
    if (hc->out_fd >= 0) pf[n++] = (struct pollfd){hc->out_fd, POLLIN, 0};
    if (hc->err_fd >= 0) pf[n++] = (struct pollfd){hc->err_fd, POLLIN, 0};
    int wait_ms = 50;
    if (n == 0) {
      /* Both pipes closed but the tool still runs: just wait for it. */
      struct timespec ts = {0, 20 * 1000000L};
      nanosleep(&ts, NULL);
      continue;
    }
    int pr = poll(pf, (nfds_t)n, wait_ms);
    if (pr <= 0) continue;
    for (int i = 0; i < n; i++) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (pf[i].fd == hc->out_fd) read_some(&hc->out_fd, 1, cap);
      else if (pf[i].fd == hc->err_fd) read_some(&hc->err_fd, 2, cap);
    }
  }
  if (hc->out_fd >= 0) close(hc->out_fd);
  if (hc->err_fd >= 0) close(hc->err_fd);
  hc->out_fd = hc->err_fd = -1;
  if (oc->timed_out) oc->exit_code = 124;
  else if (oc->cancelled) oc->exit_code = 137;
  else oc->exit_code = exit_code_of(status);
}

/* The call's scratch directory under the state directory: work (its
 * home and workspace) and tmp. */
static int scratch_dirs(const char *state_dir, char *scratch, char *work, char *tmp,
                        sm_error *err) {
  char id[17], base[PATH_MAX];
  int rc = sm_random_hex(id, 8, err);
  if (rc) return rc;
  snprintf(base, sizeof base, "%s/scratch", state_dir);
  if (snprintf(scratch, PATH_MAX, "%s/%s", base, id) >= PATH_MAX) {
    scratch[0] = '\0'; /* nothing made, nothing to remove */
    return sm_error_set(err, SM_EINVAL, "state directory path too long");
  }
  snprintf(work, PATH_MAX, "%s/work", scratch);
  snprintf(tmp, PATH_MAX, "%s/tmp", scratch);
  if ((rc = make_dir(state_dir, err)) || (rc = make_dir(base, err)) ||
      (rc = make_dir(scratch, err)) || (rc = make_dir(work, err)) || (rc = make_dir(tmp, err)))
    return rc;
  return 0;
}

/* The workspace copied into work (*ws NULL: no copy). */
static int host_workspace_in(const sm_run_request *req, sm_sync_mode sync,
                             sm_workspace_target *target, sm_workspace_sync **ws, sm_error *err) {
  const sm_sandbox_settings *s = &req->settings;
  *ws = NULL;
  if (!req->workspace || sync == SM_SYNC_NONE) return 0;
  sm_string_list excludes = s->excludes;
  if (req->extra_excludes)
    for (size_t i = 0; i < req->extra_excludes->n; i++)
      if (sm_string_list_add(&excludes, req->extra_excludes->items[i], NULL) != 0) break;
  int rc = sm_workspace_sync_new(ws, req->workspace, NULL, &excludes, NULL, err);
  if (rc == 0) rc = sm_workspace_sync_set_protect(*ws, &s->protect, err);
  if (rc == 0) rc = sm_workspace_sync_set_redact(*ws, req->secret_env, req->n_secret_env, err);
  if (rc == 0) rc = sm_workspace_sync_in(*ws, target, err);
  if (rc) {
    sm_error_wrap(err, "copying the workspace into %s", target->sandbox_path);
    if (*ws) sm_workspace_sync_free(*ws);
    *ws = NULL;
  }
  return rc;
}

/* The tool's scrubbed environment on the host: the host's PATH and USER,
 * home in work, TMPDIR in tmp. */
static int host_env(const sm_run_request *req, const char *work, const char *tmp, common_strv *env,
                    sm_error *err) {
  char user[256] = "";
  const char *u = getenv("USER");
  snprintf(user, sizeof user, "%s", u ? u : "");
  const char *path = getenv("PATH");
  sandbox_env_spec es = {
      .path = path && *path ? path : "/usr/local/bin:/usr/bin:/bin",
      .user = user[0] ? user : NULL,
      .home = work,
      .tmpdir = tmp,
  };
  sandbox_env_from_request(&es, req);
  return sandbox_env_build(&es, env, err);
}

/* The stdin feeder may block on a terminal: wait a moment, then let it be. */
static void join_feeder(host_call *hc) {
  if (!hc->feeder_started) return;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += 200 * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  if (pthread_timedjoin_np(hc->feeder_thread, NULL, &until) != 0)
    pthread_detach(hc->feeder_thread);
}

int sandbox_run_host(const sandbox_ctx *ctx, const sm_run_request *req, sm_run_result *out,
                     sm_error *err) {
  const sm_sandbox_settings *s = &req->settings;
  char scratch[PATH_MAX] = "", work[PATH_MAX], tmp[PATH_MAX];
  int rc = scratch_dirs(ctx->state_dir, scratch, work, tmp, err);
  if (rc) goto fail;

  sm_workspace_sync *ws = NULL;
  sm_sync_mode sync = req->sync == SM_SYNC_DEFAULT ? SM_SYNC_INOUT : req->sync;
  sm_workspace_target target = {.sandbox_path = work, .uid = (int)getuid(), .gid = (int)getgid()};
  if ((rc = host_workspace_in(req, sync, &target, &ws, err)) != 0) goto fail;

  common_strv env = {0};
  rc = host_env(req, work, tmp, &env, err);
  host_call hc;
  memset(&hc, 0, sizeof hc);
  hc.out_fd = hc.err_fd = hc.go_fd = -1;
  if (rc == 0) rc = spawn_wrapper(req, work, &env, &hc, err);
  common_strv_dispose(&env);
  if (rc) {
    if (ws) sm_workspace_sync_free(ws);
    goto fail;
  }
  rc = apply_limits(hc.pid, s, err);
  if (rc == 0 && write(hc.go_fd, "go\n", 3) != 3)
    rc = sm_error_set_errno(err, SM_ESANDBOX, errno, "starting the tool");
  close(hc.go_fd);
  hc.go_fd = -1;
  out->started = rc == 0;
  /* The wrapper holds them, but runs the tool only after "go". */
  out->credentials_passed = out->started && req->n_secret_env > 0;
  sandbox_capture cap;
  sandbox_capture_init(&cap, s->stdout_cap, s->stderr_cap, req->on_output, req->on_output_ud);
  cap.forward_only = req->stdout_forward_only;
  sandbox_exec_outcome oc;
  memset(&oc, 0, sizeof oc);
  supervise(&hc, req, &cap, &oc); /* the wrapper exits 125 by itself if rc != 0 */
  join_feeder(&hc);
  int sync_failed = 0;
  sm_error sync_err = SM_ERROR_INIT;
  if (rc == 0 && ws && sync == SM_SYNC_INOUT) {
    /* The tool ran: a failed copy out is added to its result. */
    sync_failed = sandbox_ws_copy_out(out, ws, &target, work, &sync_err) != 0;
  }
  if (ws) sm_workspace_sync_free(ws);
  int kept = sandbox_capture_to_result(&cap, out);
  sandbox_capture_dispose(&cap);
  sm_error rm_err = SM_ERROR_INIT;
  if (sandbox_remove_tree(scratch, &rm_err) != 0)
    sm_log(SM_LOG_WARN, "removing scratch directory: %s", rm_err.message);
  if (rc) {
    sandbox_result_fail(out, sm_error_failure_kind(rc), err);
    return 0;
  }
  if (kept != 0) {
    /* The tool ran: its result says what was lost (sm_run's contract). */
    sm_error_set(err, SM_ENOMEM, "keeping the tool's output");
    sandbox_result_fail(out, SM_FAIL_SANDBOX, err);
    return 0;
  }
  sandbox_result_apply_outcome(out, &oc, s);
  if (sync_failed) sandbox_result_sync_failed(out, &sync_err);
  return 0;

fail:
  if (scratch[0]) {
    sm_error rm_err2 = SM_ERROR_INIT;
    sandbox_remove_tree(scratch, &rm_err2);
  }
  sandbox_result_fail(out, sm_error_failure_kind(rc), err);
  return 0;
}
