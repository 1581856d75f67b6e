/* sandman run [OPTIONS] -- CMD [ARG...]: one tool call.
 *
 * Flags become sm_config_flags; the configuration resolves them into the
 * call's settings (and may refuse the tool); the fallback rule picks the
 * mode the engine's health allows; sm_run does the call. Plain output is
 * the tool's own stdout and stderr, streamed as they arrive; --json prints
 * the contract's object. The exit status is the tool's, or 124 (timeout),
 * 125 (sandman, engine or policy), 126, 127, 137. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define MAX_ENV 256

static void usage(FILE *out) {
  fprintf(out,
          "Usage: sandman run [OPTIONS] -- CMD [ARG...]\n"
          "\n"
          "Runs one tool call in a sandbox and returns its result.\n"
          "\n"
          "Where it runs:\n"
          "  --mode MODE              none | per_tool | per_run | per_worker\n"
          "  --project ID             project (default: the config's project.id, else \"default\")\n"
          "  --project-environment E  production | staging | development (picks the default mode)\n"
          "  --agent NAME             agent making the call (configuration entry)\n"
          "  --tool NAME              tool being called (tool policy)\n"
          "  --user ID                end user on whose behalf the call runs\n"
          "  --run-id ID              per_run: the run whose sandbox is used\n"
          "  --worker-id ID           per_worker: the worker whose sandbox is used\n"
          "\n"
          "Sandbox settings (defaults: built in, or from the configuration):\n"
          "  --image REF              image (default sandman/minimal:latest)\n"
          "  --network none|bridge    network (default none)\n"
          "  --cpu N                  CPUs, fractions allowed (default 1)\n"
          "  --mem SIZE               memory, no swap (default 512m)\n"
          "  --pids N                 processes (default 256)\n"
          "  --disk SIZE              size of /workspace (default 1g)\n"
          "  --runtime NAME           engine runtime, e.g. runsc for gVisor\n"
          "  --timeout SECONDS        per call (default 120)\n"
          "\n"
          "The call:\n"
          "  --workspace DIR          copy DIR into /workspace (and changes back)\n"
          "  --sync none|in|inout     workspace direction (default inout with a workspace)\n"
          "  --exclude GLOB           workspace paths not copied (repeatable)\n"
          "  -e, --env K=V            set a variable; K alone passes the host's value (repeatable)\n"
          "  --env-passthrough GLOB   pass host variables matching GLOB (repeatable; never SANDMAN_*)\n"
          "  -i, --stdin              pass standard input to the tool\n"
          "  --json                   print the result as one JSON object\n"
          "  -h, --help               this help\n"
          "\n"
          "Sizes take k, m, g suffixes (powers of 1024). Exit status: the tool's own, or\n"
          "124 timeout, 125 sandman/engine/policy failure, 126 not executable, 127 not\n"
          "found, 137 killed (out of memory included).\n");
}

enum {
  OPT_MODE = 256, OPT_PROJECT, OPT_PROJECT_ENV, OPT_AGENT, OPT_TOOL, OPT_USER, OPT_RUN_ID,
  OPT_WORKER_ID, OPT_IMAGE, OPT_NETWORK, OPT_CPU, OPT_MEM, OPT_PIDS, OPT_DISK, OPT_RUNTIME,
  OPT_WORKSPACE, OPT_SYNC, OPT_TIMEOUT, OPT_PASSTHROUGH, OPT_JSON, OPT_EXCLUDE,
};

static const struct option run_opts[] = {
    {"mode", required_argument, NULL, OPT_MODE},
    {"project", required_argument, NULL, OPT_PROJECT},
    {"project-environment", required_argument, NULL, OPT_PROJECT_ENV},
    {"agent", required_argument, NULL, OPT_AGENT},
    {"tool", required_argument, NULL, OPT_TOOL},
    {"user", required_argument, NULL, OPT_USER},
    {"run-id", required_argument, NULL, OPT_RUN_ID},
    {"worker-id", required_argument, NULL, OPT_WORKER_ID},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"network", required_argument, NULL, OPT_NETWORK},
    {"cpu", required_argument, NULL, OPT_CPU},
    {"mem", required_argument, NULL, OPT_MEM},
    {"memory", required_argument, NULL, OPT_MEM},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"disk", required_argument, NULL, OPT_DISK},
    {"runtime", required_argument, NULL, OPT_RUNTIME},
    {"workspace", required_argument, NULL, OPT_WORKSPACE},
    {"sync", required_argument, NULL, OPT_SYNC},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"env", required_argument, NULL, 'e'},
    {"env-passthrough", required_argument, NULL, OPT_PASSTHROUGH},
    {"exclude", required_argument, NULL, OPT_EXCLUDE},
    {"stdin", no_argument, NULL, 'i'},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct run_args {
  sm_config_flags flags;
  const char *project, *agent, *tool, *user, *run_id, *worker_id, *workspace;
  const char *sync;
  const char *env[MAX_ENV];
  size_t n_env;
  int use_stdin, json;
} run_args;

static int usage_error(const char *fmt, const char *arg) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, arg);
  cli_error("%s", msg);
  cli_note("see `sandman run --help`");
  return CLI_EXIT_USAGE;
}

/* Checks a value early so a typo is a usage error (exit 2), not a failed
 * call. */
static int check_value(int opt, const char *v) {
  sm_error err = SM_ERROR_INIT;
  int64_t i64;
  double d;
  sm_mode mode;
  sm_sync_mode sync;
  int rc = 0;
  switch (opt) {
    case OPT_MODE: rc = sm_mode_parse(v, &mode, &err); break;
    case OPT_SYNC: rc = sm_sync_mode_parse(v, &sync, &err); break;
    case OPT_MEM: case OPT_DISK: rc = sm_parse_size(v, &i64, &err); break;
    case OPT_PIDS: rc = sm_parse_int(v, 1, 4194304, &i64, &err); break;
    case OPT_CPU: rc = sm_parse_double(v, 0.01, 1024, &d, &err); break;
    case OPT_TIMEOUT: rc = sm_parse_duration(v, &d, &err); break;
    case OPT_NETWORK:
      if (strcmp(v, "none") != 0 && strcmp(v, "bridge") != 0)
        rc = sm_error_set(&err, SM_EINVAL, "--network takes none or bridge, not '%s'", v);
      break;
    default: break;
  }
  if (rc) {
    cli_error("%s", err.message);
    return CLI_EXIT_USAGE;
  }
  return 0;
}

/* The library's environment rule, applied when the flag is read so that
 * `-e DOCKER_HOST=...` is a usage error rather than a failed call. The home
 * contract is the caller's to change here (-e HOME=...), unlike a runner
 * request's. */
static int env_refused(const char *entry) {
  const char *eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  sm_env_name_class cls = sm_env_name_classify(entry, n);
  if (cls != SM_ENV_NAME_INVALID && cls != SM_ENV_NAME_BLOCKED) return 0;
  cli_error("-e %.*s: %s", (int)(n > 200 ? 200 : n), entry, sm_env_name_refusal(cls));
  cli_note("see `sandman run --help` and docs/run.md (Environment)");
  return 1;
}

static int parse_args(int argc, char **argv, run_args *a, int *cmd_index) {
  memset(a, 0, sizeof *a);
  int c;
  sm_error err = SM_ERROR_INIT;
  /* '+': the command starts at the first non-option (or after --). */
  while ((c = getopt_long(argc, argv, "+e:ih", run_opts, NULL)) != -1) {
    if (c != 'e' && c != 'i' && c != 'h' && c != OPT_JSON && c != '?' && optarg) {
      int rc = check_value(c, optarg);
      if (rc) return rc;
    }
    switch (c) {
      case OPT_MODE: a->flags.mode = optarg; break;
      case OPT_PROJECT: a->project = optarg; break;
      case OPT_PROJECT_ENV: a->flags.project_environment = optarg; break;
      case OPT_AGENT: a->agent = optarg; break;
      case OPT_TOOL: a->tool = optarg; break;
      case OPT_USER: a->user = optarg; break;
      case OPT_RUN_ID: a->run_id = optarg; break;
      case OPT_WORKER_ID: a->worker_id = optarg; break;
      case OPT_IMAGE: a->flags.image = optarg; break;
      case OPT_NETWORK: a->flags.network = optarg; break;
      case OPT_CPU: a->flags.cpu = optarg; break;
      case OPT_MEM: a->flags.memory = optarg; break;
      case OPT_PIDS: a->flags.pids = optarg; break;
      case OPT_DISK: a->flags.disk = optarg; break;
      case OPT_RUNTIME: a->flags.runtime = optarg; break;
      case OPT_WORKSPACE: a->workspace = optarg; break;
      case OPT_SYNC: a->sync = optarg; break;
      case OPT_TIMEOUT: a->flags.timeout = optarg; break;
      case OPT_JSON: a->json = 1; break;
      case 'i': a->use_stdin = 1; break;
      case 'e':
        if (a->n_env >= MAX_ENV) return usage_error("too many -e (at most %s)", "256");
        if (optarg[0] == '\0' || optarg[0] == '=')
          return usage_error("-e takes NAME=VALUE or NAME, not '%s'", optarg);
        if (env_refused(optarg)) return CLI_EXIT_USAGE;
        a->env[a->n_env++] = optarg;
        break;
      case OPT_PASSTHROUGH:
        if (sm_string_list_add(&a->flags.env_passthrough, optarg, &err) != 0)
          return usage_error("--env-passthrough: %s", err.message);
        break;
      case OPT_EXCLUDE:
        if (sm_string_list_add(&a->flags.excludes, optarg, &err) != 0)
          return usage_error("--exclude: %s", err.message);
        break;
      case 'h': usage(stdout); return -1;
      default: cli_note("see `sandman run --help`"); return CLI_EXIT_USAGE;
    }
  }
  if (optind >= argc) return usage_error("%s", "no command given: sandman run [OPTIONS] -- CMD [ARG...]");
  if (a->sync && !a->workspace) return usage_error("%s", "--sync needs --workspace");
  struct stat st;
  if (a->workspace && (stat(a->workspace, &st) != 0 || !S_ISDIR(st.st_mode)))
    return usage_error("--workspace %s is not a directory", a->workspace);
  *cmd_index = optind;
  return 0;
}

/* SIGINT/SIGTERM/SIGHUP cancel the call: the library kills the tool and
 * removes a per_tool sandbox instead of leaving it to a reap. */
static volatile int cancelled;
static volatile sig_atomic_t cancel_signal;

static void on_signal(int sig) {
  cancel_signal = sig;
  cancelled = 1;
}

static void catch_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

static ssize_t read_stdin(void *ud, char *buf, size_t len) {
  (void)ud;
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, len);
    if (n >= 0) return n;
    if (errno != EINTR) return SM_EIO;
  }
}

static int write_all(int fd, const char *data, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return SM_EIO;
    data += w;
    len -= (size_t)w;
  }
  return 0;
}

static int stream_output(void *ud, int stream, const char *data, size_t len) {
  (void)ud;
  return write_all(stream == 2 ? STDERR_FILENO : STDOUT_FILENO, data, len);
}

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

/* A call that never ran (refused, bad setup): the same JSON object. */
static int report_failure(const run_args *a, sm_mode mode, sm_failure_kind kind,
                          const sm_error *err) {
  sm_run_result r;
  memset(&r, 0, sizeof r);
  r.mode = mode;
  r.failure_kind = kind;
  r.exit_code = CLI_EXIT_FAILURE;
  snprintf(r.error, sizeof r.error, "%s", err->message);
  if (a->json) {
    json_object *o = sm_run_result_to_json(&r);
    if (o) cli_print_json(o);
    json_object_put(o);
  } else {
    cli_error("%s", err->message);
  }
  return CLI_EXIT_FAILURE;
}

int cmd_run(int argc, char **argv, const cli_globals *g) {
  run_args a;
  int cmd_index = 0;
  int rc = parse_args(argc, argv, &a, &cmd_index);
  if (rc < 0) return CLI_EXIT_OK; /* --help */
  if (rc) return rc;

  sm_error err = SM_ERROR_INIT;
  sm_config *cfg = NULL;
  sm_resolved res;
  rc = cli_load_resolve(g, a.agent, a.tool, a.user, &a.flags, &cfg, &res);
  if (rc) return rc;
  sm_mode mode = res.settings.mode;
  if (!res.allowed) {
    sm_error_set(&err, SM_EPOLICY, "tool '%s' refused by the configuration (%s)",
                 a.tool ? a.tool : "(none)", res.rule);
    sm_config_free(cfg);
    return report_failure(&a, mode, SM_FAIL_POLICY, &err);
  }
  if (!res.sandboxed) mode = SM_MODE_NONE;

  const char *project = a.project ? a.project : sm_config_project_id(cfg);
  const char *project_env =
      res.project_environment[0] ? res.project_environment : sm_config_project_environment(cfg);
  sm_runner *runner = NULL;
  rc = cli_runner_new(g, cfg, &runner);
  if (rc) return rc;

  sm_fallback_decision fb;
  if (sm_fallback_decide(runner, mode, project_env, res.settings.runtime, res.settings.image,
                         &fb, &err) != 0) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return report_failure(&a, mode, sm_error_failure_kind(err.code), &err);
  }

  sm_run_request req;
  sm_run_request_init(&req);
  req.settings = res.settings;
  req.settings.mode = fb.mode;
  req.argv = (const char *const *)argv + cmd_index;
  req.argc = (size_t)(argc - cmd_index);
  req.env = a.env;
  req.n_env = a.n_env;
  req.project = project;
  req.project_environment = project_env;
  req.agent = a.agent;
  req.tool = a.tool;
  req.user = a.user;
  req.run_id = a.run_id;
  req.worker_id = a.worker_id;
  req.scope_key = res.scope_key[0] ? res.scope_key : NULL;
  req.workspace = a.workspace;
  if (a.sync && sm_sync_mode_parse(a.sync, &req.sync, &err) != 0) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  if (a.use_stdin) req.stdin_read = read_stdin;
  if (!a.json) req.on_output = stream_output;
  req.cancel = &cancelled;
  catch_signals();

  sm_run_result result;
  rc = sm_run(runner, &req, &result, &err);
  int code;
  if (a.json) {
    json_object *o = sm_run_result_to_json(&result);
    if (o) cli_print_json(o);
    else cli_error("out of memory");
    json_object_put(o);
    code = exit_code_for(&result);
  } else {
    code = exit_code_for(&result);
    if (result.failure_kind == SM_FAIL_SANDBOX || result.failure_kind == SM_FAIL_ENGINE ||
        result.failure_kind == SM_FAIL_POLICY || rc != 0) {
      cli_error("%s", result.error[0] ? result.error : err.message);
    } else if (result.timed_out || result.oom_killed) {
      cli_note("%s", result.error);
    }
    if (result.stdout_truncated) cli_note("stdout truncated: more than the output cap");
    if (result.stderr_truncated) cli_note("stderr truncated: more than the output cap");
    for (size_t i = 0; i < result.n_conflicts; i++)
      cli_note("conflict: %s changed on both sides; the sandbox's version was kept beside it",
               result.conflicts[i]);
  }
  if (rc == SM_EINVAL && code == CLI_EXIT_FAILURE) code = CLI_EXIT_USAGE;
  if (cancel_signal) code = 128 + cancel_signal; /* as a shell reports it */
  sm_run_result_dispose(&result);
  sm_runner_free(runner);
  sm_config_free(cfg);
  return code;
}
