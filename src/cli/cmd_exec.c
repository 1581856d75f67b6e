/* sandman exec [-i] [-t] (--run-id ID | --worker-id ID | SANDBOX) -- CMD:
 * a command in a keyed sandbox that exists already, like `docker exec`
 * (docs/terminals.md).
 *
 * It runs as the sandbox's user in /workspace with the environment every
 * call of the sandbox gets, through sandman's agent. With -t on a
 * pseudo-terminal the agent opens in the sandbox, of this terminal's size:
 * this terminal in raw mode (restored on every way out), its size changes
 * (SIGWINCH) passed on. With -i, standard input goes to the command as it
 * comes. The call runs on a thread of its own; this one moves the input,
 * the size and the signals. The exit status is the command's, or the
 * contract's codes (125 when the sandbox is missing or stopped). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

#define MAX_ENV 256
#define INPUT_CHUNK 65536

typedef struct exec_args {
  int interactive, tty;
  cli_keyed k;
  const char *workdir;
  const char **env;
  size_t n_env;
  char *const *cmd;
  size_t n_cmd;
} exec_args;

/* ---- the caller's terminal ---- */

static struct termios saved_termios;
static int termios_saved;

static void restore_terminal(void) {
  if (termios_saved) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
  termios_saved = 0;
}

static int raw_terminal(void) {
  struct termios t;
  if (tcgetattr(STDIN_FILENO, &t) != 0) return -1;
  saved_termios = t;
  termios_saved = 1;
  atexit(restore_terminal);
  cfmakeraw(&t);
  return tcsetattr(STDIN_FILENO, TCSADRAIN, &t);
}

static void terminal_size(unsigned *rows, unsigned *cols) {
  struct winsize ws;
  *rows = 24;
  *cols = 80;
  int fds[] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  for (size_t i = 0; i < 3; i++) {
    if (ioctl(fds[i], TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
      *rows = ws.ws_row > SM_TTY_DIM_MAX ? SM_TTY_DIM_MAX : ws.ws_row;
      *cols = ws.ws_col > SM_TTY_DIM_MAX ? SM_TTY_DIM_MAX : ws.ws_col;
      return;
    }
  }
}

/* ---- signals: a pipe the input loop polls ---- */

static int sig_pipe[2] = {-1, -1};
static volatile int cancelled;
static volatile sig_atomic_t cancel_signal;

static void on_signal(int sig) {
  if (sig != SIGWINCH) {
    cancel_signal = sig;
    cancelled = 1;
  }
  int e = errno;
  unsigned char b = (unsigned char)sig;
  (void)!write(sig_pipe[1], &b, 1);
  errno = e;
}

static int catch_signals(void) {
  if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

/* ---- the flags ---- */

static int parse_args(const cli_call *call, exec_args *a) {
  memset(a, 0, sizeof *a);
  a->interactive = cli_has(call, "interactive");
  a->tty = cli_has(call, "tty");
  cli_keyed_flags(call, &a->k);
  a->workdir = cli_str(call, "workdir");
  a->n_env = cli_list(call, "env", &a->env);
  if (a->n_env > MAX_ENV) return cli_usage_error(call->cmd, 0, "-e: at most %d variables", MAX_ENV);
  for (size_t i = 0; i < a->n_env; i++) {
    const char *eq = strchr(a->env[i], '=');
    size_t n = eq ? (size_t)(eq - a->env[i]) : strlen(a->env[i]);
    sm_env_name_class cls = sm_env_name_classify(a->env[i], n);
    if (cls == SM_ENV_NAME_INVALID || cls == SM_ENV_NAME_BLOCKED)
      return cli_usage_error(call->cmd, 0, "-e %.*s: %s", (int)(n > 200 ? 200 : n), a->env[i],
                             sm_env_name_refusal(cls));
  }
  char *const *args = call->args;
  size_t n = (size_t)call->n_args;
  if (!a->k.run_id && !a->k.worker_id) {
    /* SANDBOX [--] CMD... */
    if (n < 1)
      return cli_usage_error(call->cmd, 0, "name the sandbox: --run-id, --worker-id or SANDBOX");
    a->k.sandbox = args[0];
    args++, n--;
    if (n > 0 && strcmp(args[0], "--") == 0) args++, n--;
  } else if (a->k.run_id && a->k.worker_id) {
    return cli_usage_error(call->cmd, 0, "--run-id and --worker-id name two sandboxes: give one");
  }
  if (n == 0) return cli_usage_error(call->cmd, 0, "no command to run (give it after --)");
  if (a->workdir && a->workdir[0] != '/')
    return cli_usage_error(call->cmd, 0, "--workdir must be an absolute path in the sandbox");
  if (a->k.mode && a->k.run_id && strcmp(a->k.mode, "per_run") != 0)
    return cli_usage_error(call->cmd, 0, "--run-id names a per_run sandbox");
  if (a->k.mode && a->k.worker_id && strcmp(a->k.mode, "per_worker") != 0)
    return cli_usage_error(call->cmd, 0, "--worker-id names a per_worker sandbox");
  a->cmd = args;
  a->n_cmd = n;
  return 0;
}

/* ---- the call's thread ---- */

/* True when all of data reached fd. */
static bool write_all_ok(int fd, const char *data, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd p = {fd, POLLOUT, 0};
      poll(&p, 1, 1000);
      continue;
    }
    if (w <= 0) return false;
    data += w;
    len -= (size_t)w;
  }
  return true;
}

static int stream_output(void *ud, int stream, const char *data, size_t len) {
  (void)ud;
  return write_all_ok(stream == 2 ? STDERR_FILENO : STDOUT_FILENO, data, len) ? 0 : SM_EIO;
}

/* Standard input into the tty as it comes; 1 at its end. A full queue
 * (the sandbox is not reading) waits before reading more. */
static int pump_input(sm_tty *tty) {
  char buf[INPUT_CHUNK];
  ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (n <= 0) return 1;
  sm_error err = SM_ERROR_INIT;
  for (int i = 0; i < 1000 && sm_tty_write(tty, buf, (size_t)n, &err) == SM_EBUSY; i++)
    poll(NULL, 0, 10);
  return 0;
}

/* Moves input, sizes and signals until the call's thread is done. */
static void input_loop(cli_run_thread *r, sm_tty *tty, int interactive) {
  int in_open = interactive && tty != NULL;
  for (;;) {
    struct pollfd p[3] = {{r->done_pipe[0], POLLIN, 0},
                          {sig_pipe[0], POLLIN, 0},
                          {STDIN_FILENO, POLLIN, 0}};
    int n = poll(p, in_open ? 3 : 2, -1);
    if (n < 0 && errno != EINTR) break;
    if (p[0].revents) break;
    if (p[1].revents) {
      unsigned char b[64];
      ssize_t k = read(sig_pipe[0], b, sizeof b);
      for (ssize_t i = 0; i < k; i++) {
        if (b[i] == SIGWINCH && tty) {
          unsigned rows, cols;
          terminal_size(&rows, &cols);
          sm_error err = SM_ERROR_INIT;
          sm_tty_resize(tty, rows, cols, &err);
        }
      }
    }
    if (in_open && p[2].revents && pump_input(tty)) {
      in_open = 0;
      sm_tty_end_input(tty);
    }
  }
}

/* ---- the command ---- */

static int exit_code_for(const sm_run_result *r) {
  switch (r->failure_kind) {
  case SM_FAIL_SANDBOX:
  case SM_FAIL_ENGINE:
  case SM_FAIL_POLICY:
    return CLI_EXIT_FAILURE;
  case SM_FAIL_TIMEOUT:
    return CLI_EXIT_TIMEOUT;
  default:
    break;
  }
  return r->exit_code < 0 || r->exit_code > 255 ? CLI_EXIT_FAILURE : r->exit_code;
}

/* The request for the sandbox (its keys, the configuration's settings for
 * it), run on its thread with the caller's input. */
static int exec_in(const cli_call *call, exec_args *a, sm_config *cfg, const sm_resolved *res,
                   sm_runner *runner) {
  sm_broker *broker = NULL;
  int code = cli_broker_new(cfg, NULL, 0, &broker);
  if (code != CLI_EXIT_OK) return code;
  sm_run_request req;
  sm_config_egress eg;
  cli_keyed_request(&a->k, &req, &eg, cfg, res, broker);
  req.settings.timeout_s = 0; /* as docker exec: until it ends */
  req.argv = (const char *const *)a->cmd;
  req.argc = a->n_cmd;
  req.env = a->env;
  req.n_env = a->n_env;
  req.cwd = a->workdir;
  req.on_output = stream_output;
  req.stdout_forward_only = 1;
  req.cancel = &cancelled;
  sm_tty *tty = NULL;
  sm_error err = SM_ERROR_INIT;
  unsigned rows = 0, cols = 0;
  if (a->tty) terminal_size(&rows, &cols);
  if ((a->tty || a->interactive) && sm_tty_new(&tty, rows, cols, &err) != 0) {
    sm_broker_free(broker);
    return cli_fail(&err);
  }
  req.tty = tty;
  if (catch_signals() != 0) {
    sm_tty_free(tty);
    sm_broker_free(broker);
    cli_error("pipe: %s", strerror(errno));
    return CLI_EXIT_FAILURE;
  }
  if (a->tty && a->interactive && isatty(STDIN_FILENO) && raw_terminal() != 0)
    cli_warn("could not put this terminal in raw mode: %s", strerror(errno));
  cli_run_thread r;
  if (cli_run_thread_start(&r, runner, &req) != 0) {
    restore_terminal();
    sm_tty_free(tty);
    sm_broker_free(broker);
    cli_error("could not start a thread");
    return CLI_EXIT_FAILURE;
  }
  input_loop(&r, tty, a->interactive);
  cli_run_thread_join(&r);
  restore_terminal();
  code = exit_code_for(&r.result);
  if (r.rc != 0 || r.result.failure_kind == SM_FAIL_SANDBOX ||
      r.result.failure_kind == SM_FAIL_ENGINE || r.result.failure_kind == SM_FAIL_POLICY)
    cli_error("%s", r.result.error[0] ? r.result.error : r.err.message);
  if (r.rc == SM_EINVAL && code == CLI_EXIT_FAILURE) code = CLI_EXIT_USAGE;
  if (cancel_signal) code = 128 + cancel_signal;
  sm_run_result_dispose(&r.result);
  sm_tty_free(tty);
  sm_broker_free(broker);
  return code;
}

int cmd_exec(const cli_call *call) {
  exec_args a;
  int rc = parse_args(call, &a);
  if (rc) {
    free(a.env);
    return rc;
  }
  const cli_globals *g = call->g;
  sm_config *cfg = NULL;
  sm_resolved res;
  sm_config_flags flags;
  memset(&flags, 0, sizeof flags);
  flags.mode = a.k.run_id ? "per_run" : a.k.worker_id ? "per_worker" : NULL;
  rc = cli_load_resolve(g, a.k.agent, NULL, a.k.user, &flags, &cfg, &res);
  sm_runner *runner = NULL;
  if (rc == 0) rc = cli_runner_new(g, cfg, NULL, &runner);
  if (rc == 0 && a.k.sandbox) rc = cli_keyed_resolve(runner, &a.k, "exec");
  if (rc == 0) rc = exec_in(call, &a, cfg, &res, runner);
  sm_runner_free(runner);
  sm_config_free(cfg);
  free(a.env);
  return rc;
}
