/* sandman mcp: an MCP server over stdio (for desktop agents and IDEs).
 *
 * The session's tools (execute, read_file, write_file, edit_file, ls,
 * glob, grep) run in one keyed sandbox: a per_run sandbox of its own by
 * default, removed when the session ends. Settings follow the
 * configuration like `sandman run` (flags > agent entry > defaults); the
 * mode defaults to per_run rather than the project environment's, since
 * file tools need a sandbox that outlives one call. Every call passes the
 * configuration's tool policy (execute is the tool "shell", the others
 * their MCP names). stdout carries only MCP messages; logs go to stderr. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* What every call of the session shares. */
typedef struct mcp_ctx {
  sm_config *cfg;
  sm_config_flags flags;
  const char *agent, *project, *project_env, *worker_id, *workspace;
  char run_id[64];
  int own_run;            /* run_id was made here: the sandbox goes with the session */
  sm_sync_mode sync;
  sm_sandbox_settings settings; /* resolved once: every tool shares one sandbox */
  sm_scope scope;          /* the configuration's scope (SM_SCOPE_NONE: the run or worker key) */
  sm_config_egress egress; /* network allowlist: the agent's lists (borrowed from cfg) */
} mcp_ctx;

/* The table checked every value's form; what is left are the rules that
 * join flags. */
static int parse_args(const cli_call *call, mcp_ctx *c, int *keep, const char **run_id) {
  sm_error err = SM_ERROR_INIT;
  cli_sandbox_flags(call, "", &c->flags);
  *run_id = cli_str(call, "run-id");
  c->worker_id = cli_str(call, "worker-id");
  *keep = cli_has(call, "keep");
  c->agent = cli_str(call, "agent");
  c->project = cli_str(call, "project");
  const char *sync;
  int rc = cli_add_list(call, "exclude", &c->flags.excludes, 0);
  if (cli_has(call, "copy-env-files")) c->flags.copy_env_files = "true";
  if (rc == 0) rc = cli_workspace_flags(call, 0, &c->workspace, &sync);
  if (rc) return rc;
  if (sync && sm_sync_mode_parse(sync, &c->sync, &err) != 0)
    return cli_usage_error(call->cmd, 0, "--sync: %s", err.message);
  return 0;
}

/* One tool call: the configuration's policy for that tool, the session's
 * sandbox. */
static int prepare(void *ud, const char *tool, sm_run_request *req, sm_error *err) {
  mcp_ctx *c = ud;
  sm_resolved res;
  if (sm_config_resolve(c->cfg, c->agent, tool, NULL, &c->flags, &res, err) != 0) return err->code;
  if (!res.allowed)
    return sm_error_set(err, SM_EPOLICY, "tool '%s' is refused by the configuration (%s)", tool,
                        res.rule);
  if (!res.sandboxed)
    return sm_error_set(err, SM_EPOLICY,
                        "the configuration runs tool '%s' on the host (%s); sandman mcp runs "
                        "tools only in its sandbox",
                        tool, res.sandbox_rule);
  req->settings = c->settings;
  req->project = c->project;
  req->project_environment = c->project_env;
  req->agent = c->agent;
  req->tool = tool;
  req->run_id = c->run_id[0] ? c->run_id : NULL;
  req->worker_id = c->worker_id;
  req->scope = c->scope;
  req->workspace = c->workspace;
  req->sync = c->sync;
  req->egress = c->egress.levels;
  req->n_egress = c->egress.n_levels;
  return 0;
}


static int source_is_configured(const sm_resolved *res, const char *name) {
  for (size_t i = 0; i < res->n_sources; i++)
    if (strcmp(res->sources[i].name, name) == 0)
      return res->sources[i].source == SM_SOURCE_FLAG || res->sources[i].source == SM_SOURCE_AGENT ||
             res->sources[i].source == SM_SOURCE_DEFAULTS;
  return 0;
}

static void remove_own_sandbox(sm_runner *runner, const mcp_ctx *c) {
  sm_ops_scope scope;
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_scope_from_runner(&scope, runner, &err) != 0) {
    cli_note("the session's sandbox was left for a reap: %s", err.message);
    return;
  }
  sm_ops_rm_options o = SM_OPS_RM_OPTIONS_INIT;
  o.run_id = c->run_id;
  o.force = 1;
  sm_ops_report rep;
  if (sm_ops_rm(&scope, &o, &rep, &err) != 0)
    cli_note("the session's sandbox was left for a reap: %s", err.message);
  else
    sm_ops_report_dispose(&rep);
}

/* The session's sandbox from the configuration: its mode (flag > agent >
 * defaults, else per_run: the project environment's default mode is for
 * one-shot calls), settings, scope and run. On failure prints why, frees
 * the configuration and returns the exit code. */
static int resolve_session(const cli_call *call, mcp_ctx *c, const char *run_id, int keep) {
  sm_error err = SM_ERROR_INIT;
  sm_resolved res;
  int rc = cli_load_resolve(call->g, c->agent, "shell", NULL, &c->flags, &c->cfg, &res);
  if (rc) return rc;
  if (!source_is_configured(&res, "mode")) {
    c->flags.mode = "per_run";
    if (sm_config_resolve(c->cfg, c->agent, "shell", NULL, &c->flags, &res, &err) != 0)
      rc = cli_fail(&err);
  }
  sm_mode mode = res.sandboxed ? res.settings.mode : SM_MODE_NONE;
  if (rc == 0 && mode != SM_MODE_PER_RUN && mode != SM_MODE_PER_WORKER) {
    cli_error("sandman mcp needs a per_run or per_worker sandbox (its file tools work on a "
              "sandbox that outlives one call); the configuration gives mode %s: pass --mode "
              "per_run",
              sm_mode_name(mode));
    rc = CLI_EXIT_USAGE;
  }
  if (rc == 0 && mode == SM_MODE_PER_WORKER && c->worker_id == NULL)
    rc = cli_usage_error(call->cmd, 0, "--mode per_worker: needs --worker-id");
  if (rc) {
    sm_config_free(c->cfg);
    c->cfg = NULL;
    return rc;
  }
  c->settings = res.settings;
  c->settings.mode = mode;
  sm_config_egress_get(c->cfg, c->agent, &c->egress);
  c->scope = res.scope_kind;
  c->project = c->project ? c->project : sm_config_project_id(c->cfg);
  c->project_env = res.project_environment[0] ? res.project_environment
                                              : sm_config_project_environment(c->cfg);
  if (mode == SM_MODE_PER_RUN && run_id == NULL) {
    /* A run of its own: random, so that two sessions never share one. */
    char rnd[17];
    sm_error rerr = SM_ERROR_INIT;
    if (sm_random_hex(rnd, 8, &rerr) != 0) {
      sm_config_free(c->cfg);
      c->cfg = NULL;
      cli_error("no randomness for the session's run id: %s", rerr.message);
      return CLI_EXIT_FAILURE;
    }
    snprintf(c->run_id, sizeof c->run_id, "mcp-%s", rnd);
    c->own_run = !keep && c->scope == SM_SCOPE_NONE;
  } else if (run_id) {
    snprintf(c->run_id, sizeof c->run_id, "%s", run_id);
  }
  return 0;
}

/* Serves the session on stdio until stdin ends or a signal. */
static int serve(sm_runner *runner, mcp_ctx *c, sm_error *err) {
  sm_mcp_sandbox_options so = {
      .runner = runner,
      .prepare = prepare,
      .prepare_ud = c,
      .network = strcmp(c->settings.network, "none") != 0,
  };
  sm_mcp_provider provider;
  sm_mcp_session *session = NULL;
  sm_mcp_server_info info = {
      .name = "sandman",
      .title = "sandman sandbox",
      .version = sm_version(),
      .instructions = "Every tool runs in one sandbox (a container) that keeps its files between "
                      "calls: paths are relative to /workspace.",
  };
  int rc = sm_mcp_sandbox_provider(&provider, &so, err);
  if (rc == 0 && sm_mcp_session_new(&session, &info, &provider, err) != 0) {
    provider.free(provider.ud);
    rc = err->code;
  }
  if (rc == 0) {
    volatile int *stop = cli_catch_stop_signals();
    signal(SIGPIPE, SIG_IGN); /* a client that went away: a write error, not a kill */
    sm_log(SM_LOG_INFO, "sandman mcp: serving on stdio, sandbox %s %s",
           sm_mode_name(c->settings.mode),
           c->settings.mode == SM_MODE_PER_RUN ? c->run_id : c->worker_id);
    rc = sm_mcp_serve_stdio(session, STDIN_FILENO, STDOUT_FILENO, stop, err);
  }
  sm_mcp_session_free(session);
  return rc;
}

int cmd_mcp(const cli_call *call) {
  mcp_ctx c;
  memset(&c, 0, sizeof c);
  c.sync = SM_SYNC_DEFAULT;
  int keep = 0;
  const char *run_id = NULL;
  int rc = parse_args(call, &c, &keep, &run_id);
  if (rc == 0) rc = resolve_session(call, &c, run_id, keep);
  if (rc) return rc;
  sm_runner *runner = NULL;
  rc = cli_runner_new(call->g, c.cfg, NULL, &runner);
  if (rc) {
    sm_config_free(c.cfg);
    return rc;
  }
  /* A session is a long-running process: from a sandbox's second call on,
   * calls go over the in-sandbox agent (a few ms each). */
  sm_runner_set_background_removal(runner, 1);
  /* Fail closed: an unhealthy engine or a missing runtime or image is an
   * error here, never a step down to a weaker mode. */
  sm_error err = SM_ERROR_INIT;
  sm_fallback_decision fb;
  rc = sm_fallback_decide(runner, c.settings.mode, 0, "production", c.settings.runtime,
                          c.settings.image, &fb, &err);
  if (rc == 0) {
    rc = serve(runner, &c, &err);
    if (c.own_run) remove_own_sandbox(runner, &c);
  }
  sm_runner_free(runner);
  sm_config_free(c.cfg);
  return rc ? cli_fail(&err) : CLI_EXIT_OK;
}
