/* sandman run [OPTIONS] -- CMD [ARG...]: one tool call.
 *
 * Flags become sm_config_flags; the configuration resolves them into the
 * call's settings (and may refuse the tool); the fallback rule picks the
 * mode the engine's health allows; sm_run does the call. Plain output is
 * the tool's own stdout and stderr, streamed as they arrive; --json prints
 * the contract's object. The exit status is the tool's, or 124 (timeout),
 * 125 (sandman, engine or policy), 126, 127, 137. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define MAX_ENV 256

typedef struct run_args {
  sm_config_flags flags;
  sm_call_names names; /* project as given (NULL: the configuration's) */
  const char *workspace;
  const char *sync;
  const char **env;
  size_t n_env;
  int use_stdin, json;
  const char *mode_source; /* where the mode came from (--json's mode_source) */
} run_args;

static void run_args_dispose(run_args *a) {
  free(a->env);
  a->env = NULL;
}

/* The library's environment rule, applied when the flag is read so that
 * `-e DOCKER_HOST=...` is a usage error rather than a failed call. The home
 * contract is the caller's to change here (-e HOME=...), unlike a runner
 * request's. */
static int env_refused(const cli_call *call, int json, const char *entry) {
  const char *eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  sm_env_name_class cls = sm_env_name_classify(entry, n);
  if (cls != SM_ENV_NAME_INVALID && cls != SM_ENV_NAME_BLOCKED) return 0;
  return cli_usage_error(call->cmd, json, "-e %.*s: %s (docs/run.md, Environment)",
                         (int)(n > 200 ? 200 : n), entry, sm_env_name_refusal(cls));
}

/* The table checked every value's form; what is left are the rules that
 * join flags. */
static int parse_args(const cli_call *call, run_args *a) {
  memset(a, 0, sizeof *a);
  a->json = cli_has(call, "json");
  cli_sandbox_flags(call, "", &a->flags);
  a->names = (sm_call_names){.project = cli_str(call, "project"),
                             .agent = cli_str(call, "agent"),
                             .tool = cli_str(call, "tool"),
                             .user = cli_str(call, "user"),
                             .run_id = cli_str(call, "run-id"),
                             .worker_id = cli_str(call, "worker-id")};
  a->use_stdin = cli_has(call, "stdin");
  a->n_env = cli_list(call, "env", &a->env);
  if (a->n_env > MAX_ENV)
    return cli_usage_error(call->cmd, a->json, "-e: at most %d variables", MAX_ENV);
  for (size_t i = 0; i < a->n_env; i++)
    if (a->env[i][0] == '\0' || a->env[i][0] == '=')
      return cli_usage_error(call->cmd, a->json, "-e: takes NAME=VALUE or NAME, not '%s'",
                             a->env[i]);
  for (size_t i = 0; i < a->n_env; i++) {
    int rc = env_refused(call, a->json, a->env[i]);
    if (rc) return rc;
  }
  int rc = cli_add_list(call, "env-passthrough", &a->flags.env_passthrough, a->json);
  if (rc == 0) rc = cli_add_list(call, "exclude", &a->flags.excludes, a->json);
  if (cli_has(call, "copy-env-files")) a->flags.copy_env_files = "true";
  if (rc == 0) rc = cli_protect_flags(call, &a->flags.protect, a->json);
  if (rc) return rc;
  return cli_workspace_flags(call, a->json, &a->workspace, &a->sync);
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

/* True when all of data reached fd. */
static bool write_all_ok(int fd, const char *data, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR) continue;
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

/* One WARN line per entry the copy out did not apply (capped): a plain run
 * must not lose them. A replaced sandbox has its WARN line from the library
 * already, when it happens. */
#define REFUSED_LINES 10

static void report_workspace(const sm_run_result *r) {
  const char *ws = r->replaced_workspace ? r->replaced_workspace : "";
  if (r->replaced_previous[0])
    cli_warn("the sandbox was replaced (%s); %s", r->replaced_because,
             strcmp(ws, "kept") == 0 || strcmp(ws, "copied") == 0
                 ? "its /workspace was carried over; what was installed elsewhere is gone"
             : strcmp(ws, "gone") == 0 ? "it had stopped: its /workspace had gone with it"
                                       : "its /workspace was not carried over (--replace)");
  for (size_t i = 0; i < r->n_refused && i < REFUSED_LINES; i++)
    cli_warn("not applied to the workspace: %s: %s", r->refused[i].path,
             sm_workspace_refusal_text(r->refused[i].reason));
  if (r->n_refused > REFUSED_LINES)
    cli_warn("... and %zu more not applied (%zu in all; --json lists them)",
             r->n_refused - REFUSED_LINES, r->n_refused);
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

/* The contract's object with where the mode came from. */
static void print_result_json(const run_args *a, const sm_run_result *r) {
  json_object *o = sm_run_result_to_json(r);
  if (o == NULL) {
    cli_error("out of memory");
    return;
  }
  if (a->mode_source)
    json_object_object_add(o, "mode_source", json_object_new_string(a->mode_source));
  cli_print_json(o);
  json_object_put(o);
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
    print_result_json(a, &r);
  } else {
    cli_error("%s", err->message);
  }
  return CLI_EXIT_FAILURE;
}

/* Prints the result (--json: the contract's object; plain: the errors and
 * notes the tool's own output lacks) and returns the exit status. */
static int report_result(const run_args *a, const sm_run_result *result, int rc,
                         const sm_error *err) {
  int code = exit_code_for(result);
  if (a->json) {
    print_result_json(a, result);
  } else {
    if (result->failure_kind == SM_FAIL_SANDBOX || result->failure_kind == SM_FAIL_ENGINE ||
        result->failure_kind == SM_FAIL_POLICY || rc != 0) {
      cli_error("%s", result->error[0] ? result->error : err->message);
    } else if (result->timed_out || result->oom_killed) {
      cli_note("%s", result->error);
    }
    if (result->stdout_truncated) cli_note("stdout truncated: more than the output cap");
    if (result->stderr_truncated) cli_note("stderr truncated: more than the output cap");
    for (size_t i = 0; i < result->n_conflicts; i++)
      cli_note("conflict: %s changed on both sides; the sandbox's version was kept beside it",
               result->conflicts[i]);
    report_workspace(result);
  }
  return code;
}

static int run_call(const cli_call *call, run_args *a);

/* call.allowed / call.refused in the trail, when the configuration keeps one
 * (audit.enabled: true; off by default for sandman run). */
static void audit_call(const sm_config *cfg, sm_runner *runner, const char *event, const run_args *a,
                       const sm_resolved *res, sm_mode mode) {
  sm_audit *audit = NULL;
  if (cli_audit_open(cfg, 0, &audit) != CLI_EXIT_OK || audit == NULL) return;
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = event;
  ev.agent = a->names.agent;
  ev.user = a->names.user;
  ev.project = a->names.project ? a->names.project : sm_config_project_id(cfg);
  ev.run_id = a->names.run_id;
  ev.worker = a->names.worker_id;
  ev.tool = a->names.tool ? a->names.tool : "exec";
  ev.mode = sm_mode_name(mode);
  ev.rule = res->rule[0] ? res->rule : NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_audit_record(audit, &ev, &err) != 0) cli_note("audit: %s", err.message);
  if (runner) sm_runner_set_audit(runner, audit); /* its sandboxes' lives too; closed with it */
  else sm_audit_close(audit);
}

/* Where the call's mode came from: "flag", "agent", "defaults",
 * "project_environment" or "built_in". */
static const char *mode_source_of(const sm_resolved *res) {
  for (size_t i = 0; i < res->n_sources; i++)
    if (strcmp(res->sources[i].name, "mode") == 0)
      return sm_setting_source_name(res->sources[i].source);
  return sm_setting_source_name(SM_SOURCE_BUILT_IN);
}

/* What the configuration refuses before anything starts: the tool, a
 * command root would run on the host only because nothing chose a mode,
 * or --runtime for a call that would run on the host. 0 with the call's
 * mode, or the refusal's exit code (reported). */
static int refusal(const run_args *a, const char *cmd, const sm_config *cfg,
                   const sm_resolved *res, sm_mode *mode) {
  sm_error err = SM_ERROR_INIT;
  *mode = res->settings.mode;
  if (!res->allowed) {
    /* No --tool: the configuration checks a plain command as "exec". */
    sm_error_set(&err, SM_EPOLICY, "tool '%s' refused by the configuration (%s)%s",
                 a->names.tool ? a->names.tool : "exec", res->rule,
                 a->names.tool ? "" : "; without --tool a plain command is the tool 'exec'");
    audit_call(cfg, NULL, "call.refused", a, res, *mode);
    return report_failure(a, *mode, SM_FAIL_POLICY, &err);
  }
  if (!res->sandboxed) *mode = SM_MODE_NONE;
  /* The built-in mode none runs a command on the host as its caller: for
   * root, only when asked for. */
  if (res->mode_unchosen && geteuid() == 0) {
    sm_error_set(&err, SM_EPOLICY,
                 "refusing to run '%s' on the host as root: no mode was chosen (no --mode, no "
                 "mode in the configuration, no project environment). Run it in a sandbox with "
                 "--mode per_tool, or on the host on purpose with --mode none",
                 cmd ? cmd : "");
    audit_call(cfg, NULL, "call.refused", a, res, *mode);
    return report_failure(a, *mode, SM_FAIL_POLICY, &err);
  }
  /* --runtime asks for a container under that runtime: never the host. */
  if (*mode == SM_MODE_NONE && a->flags.runtime && *a->flags.runtime) {
    sm_error_set(&err, SM_ESANDBOX,
                 "--runtime %s asks for a sandbox, but the call would run on the host (%s): "
                 "add --mode per_tool (or per_run, per_worker)",
                 a->flags.runtime, res->sandbox_rule);
    return report_failure(a, *mode, SM_FAIL_POLICY, &err);
  }
  return 0;
}

int cmd_run(const cli_call *call) {
  run_args a;
  int rc = parse_args(call, &a);
  if (rc == 0) rc = run_call(call, &a);
  run_args_dispose(&a);
  return rc;
}

static int run_call(const cli_call *call, run_args *a) {
  const cli_globals *g = call->g;
  int rc;

  sm_error err = SM_ERROR_INIT;
  sm_config *cfg = NULL;
  sm_resolved res;
  rc = cli_load_resolve(g, a->names.agent, a->names.tool, a->names.user, &a->flags, &cfg, &res);
  if (rc) return rc;
  a->mode_source = mode_source_of(&res);
  sm_mode mode;
  if ((rc = refusal(a, call->n_args > 0 ? call->args[0] : NULL, cfg, &res, &mode)) != 0) {
    sm_config_free(cfg);
    return rc;
  }

  const char *project = a->names.project ? a->names.project : sm_config_project_id(cfg);
  const char *project_env =
      res.project_environment[0] ? res.project_environment : sm_config_project_environment(cfg);
  sm_runner *runner = NULL;
  rc = cli_runner_new(g, cfg, NULL, &runner);
  if (rc) {
    sm_config_free(cfg);
    return rc;
  }

  sm_fallback_decision fb;
  if (sm_fallback_decide(runner, mode, !res.mode_explicit, project_env, res.settings.runtime,
                         res.settings.image, &fb, &err) != 0) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return report_failure(a, mode, sm_error_failure_kind(err.code), &err);
  }

  /* Never silently on the host: one line when nothing chose that, or a
   * rule (not the mode) put a container-mode call there. A step-down has
   * already said so in its WARN lines. */
  if (fb.mode == SM_MODE_NONE && res.mode_unchosen)
    cli_note("running on the host (mode none): no mode was chosen (no --mode, no mode in the "
             "configuration, no project environment); use --mode per_tool to sandbox it");
  else if (fb.mode == SM_MODE_NONE && res.host_by_rule)
    cli_note("running on the host (mode none): %s", res.sandbox_rule);

  sm_run_request req;
  sm_config_egress eg; /* network allowlist: the lists that govern the sandbox */
  sm_call_names names = a->names;
  names.project = project;
  names.project_environment = project_env;
  sm_run_request_from_config(&req, &eg, cfg, &res, &names);
  req.settings.mode = fb.mode;
  req.argv = (const char *const *)call->args;
  req.argc = (size_t)call->n_args;
  req.env = a->env;
  req.n_env = a->n_env;
  req.workspace = a->workspace;
  if (a->sync && sm_sync_mode_parse(a->sync, &req.sync, &err) != 0) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  if (a->use_stdin) req.stdin_read = read_stdin;
  req.replace = cli_has(call, "replace");
  req.from_snapshot = cli_str(call, "from-snapshot");
  if (!a->json) req.on_output = stream_output;
  req.cancel = &cancelled;
  catch_signals();

  audit_call(cfg, runner, "call.allowed", a, &res, fb.mode);
  /* Host tools through the route: a one-shot call has no operator, so a
   * tool that needs approval is refused with a message that says so. */
  sm_broker *broker = NULL;
  sm_host_route route;
  if ((rc = cli_broker_new(cfg, sm_runner_audit(runner), 0, &broker)) != CLI_EXIT_OK) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return rc;
  }
  if (sm_broker_offers(broker, a->names.agent, a->names.tool)) {
    route = sm_broker_route(broker);
    req.host_route = &route;
  }
  /* An agent that may use host tools has keyed sandboxes of its own. */
  req.agent_has_host_tools = sm_broker_agent_has_tools(broker, a->names.agent);
  sm_run_result result;
  rc = sm_run(runner, &req, &result, &err);
  int code = report_result(a, &result, rc, &err);
  if (rc == SM_EINVAL && code == CLI_EXIT_FAILURE) code = CLI_EXIT_USAGE;
  if (cancel_signal) code = 128 + cancel_signal; /* as a shell reports it */
  sm_run_result_dispose(&result);
  sm_audit *audit = sm_runner_audit(runner);
  sm_runner_free(runner);
  sm_broker_free(broker); /* after the runner: its sandboxes' routes hold it */
  sm_audit_close(audit);
  sm_config_free(cfg);
  return code;
}
