/* `sandman worker start` (alias `sandman serve`): the runner service.
 *
 * Reads the control token, the configuration and the worker's sandbox
 * flags, applies the health check and the fallback rule, starts the HTTP
 * API and waits for SIGTERM or SIGINT, then stops cleanly (calls in flight
 * finish, per_tool sandboxes are removed) and exits 0. */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/hostroute.h>
#include <sandman/server.h>

#include "cli.h"

typedef struct worker_args {
  sm_config_flags flags;
  const char *pool, *project, *listen, *token_file, *creds, *ws_root;
  unsigned threads, max_connections, mcp_per_token;
  unsigned pool_size, pool_max, pool_parallel;
  int have_pool_size;
  size_t max_body, max_file_body, host_tool_memory;
  double background_max;
  double mcp_session_idle, reap_interval;
  unsigned code_queue, code_max_contexts;
  size_t code_max_output;
  double terminal_grace;
  unsigned terminals_per_sandbox, max_terminals;
  size_t terminal_scrollback;
  unsigned watches_per_sandbox, watches_per_token;
  size_t watch_queue;
} worker_args;

/* The terminals' flags (docs/terminals.md) and the file events' (docs/http-api.md). */
static int terminal_args(const cli_call *call, worker_args *a) {
  sm_error err = SM_ERROR_INIT;
  int64_t v;
  const char *grace = cli_str(call, "terminal-grace");
  if (grace && (sm_parse_duration(grace, &a->terminal_grace, &err) != 0 || a->terminal_grace <= 0))
    return cli_usage_error(call->cmd, 0,
                           "--terminal-grace: takes a duration such as 30s or 10m, not '%s'",
                           grace);
  if (cli_str(call, "terminals-per-sandbox") &&
      sm_parse_int(cli_str(call, "terminals-per-sandbox"), 1, 256, &v, &err) == 0)
    a->terminals_per_sandbox = (unsigned)v;
  if (cli_str(call, "max-terminals") &&
      sm_parse_int(cli_str(call, "max-terminals"), 1, 1024, &v, &err) == 0)
    a->max_terminals = (unsigned)v;
  /* File events (docs/http-api.md#file-events); the ranges are the flags'. */
  if (cli_str(call, "watches-per-sandbox") &&
      sm_parse_int(cli_str(call, "watches-per-sandbox"), 1, 256, &v, &err) == 0)
    a->watches_per_sandbox = (unsigned)v;
  if (cli_str(call, "watches-per-token") &&
      sm_parse_int(cli_str(call, "watches-per-token"), 1, 256, &v, &err) == 0)
    a->watches_per_token = (unsigned)v;
  if (cli_str(call, "watch-queue") && sm_parse_int(cli_str(call, "watch-queue"), 16, 1000000, &v, &err) == 0)
    a->watch_queue = (size_t)v;
  const char *sb = cli_str(call, "terminal-scrollback");
  if (sb) {
    if (sm_parse_size(sb, &v, &err) != 0 || v < 1024 || v > (int64_t)64 << 20)
      return cli_usage_error(call->cmd, 0,
                             "--terminal-scrollback: takes a size from 1k to 64m, not '%s'", sb);
    a->terminal_scrollback = (size_t)v;
  }
  return 0;
}

/* --code-queue, --code-max-contexts, --code-max-output (docs/code.md). */
static int code_limits(const cli_call *call, worker_args *a) {
  sm_error err = SM_ERROR_INIT;
  int64_t v;
  if (cli_str(call, "code-queue") && sm_parse_int(cli_str(call, "code-queue"), 1, 1024, &v, &err) == 0)
    a->code_queue = (unsigned)v;
  if (cli_str(call, "code-max-contexts") &&
      sm_parse_int(cli_str(call, "code-max-contexts"), 1, 64, &v, &err) == 0)
    a->code_max_contexts = (unsigned)v;
  if (cli_str(call, "code-max-output")) {
    if (sm_parse_size(cli_str(call, "code-max-output"), &v, &err) != 0 || v < 1024 ||
        v > (int64_t)SM_CODE_MAX_OUTPUT_LIMIT)
      return cli_usage_error(call->cmd, 0, "--code-max-output: takes a size from 1k to 256m, not '%s'",
                             cli_str(call, "code-max-output"));
    a->code_max_output = (size_t)v;
  }
  return 0;
}

/* The table checked every value's form; here they become the runner's
 * settings. */
static int parse_args(const cli_call *call, worker_args *a) {
  sm_error err = SM_ERROR_INIT;
  int64_t v;
  a->pool = cli_str(call, "pool");
  cli_sandbox_flags(call, "sandbox-", &a->flags);
  a->project = cli_str(call, "project");
  a->listen = cli_str(call, "listen");
  a->token_file = cli_str(call, "token-file");
  a->creds = cli_str(call, "credentials-file");
  a->ws_root = cli_str(call, "workspaces-root");
  int rc = cli_add_list(call, "env-passthrough", &a->flags.env_passthrough, 0);
  if (rc == 0) rc = code_limits(call, a);
  if (rc) return rc;
  if (cli_str(call, "threads") && sm_parse_int(cli_str(call, "threads"), 1, 1024, &v, &err) == 0)
    a->threads = (unsigned)v;
  if (cli_str(call, "max-connections") &&
      sm_parse_int(cli_str(call, "max-connections"), 4, 100000, &v, &err) == 0)
    a->max_connections = (unsigned)v;
  if (cli_str(call, "max-body")) {
    if (sm_parse_size(cli_str(call, "max-body"), &v, &err) != 0 || v < 1024 ||
        v > (int64_t)1 << 30)
      return cli_usage_error(call->cmd, 0, "--max-body: takes a size from 1k to 1g, not '%s'",
                             cli_str(call, "max-body"));
    a->max_body = (size_t)v;
  }
  if (cli_str(call, "max-file-body")) {
    if (sm_parse_size(cli_str(call, "max-file-body"), &v, &err) != 0 || v < 1024 ||
        v > (int64_t)1 << 40)
      return cli_usage_error(call->cmd, 0,
                             "--max-file-body: takes a size from 1k to 1t, not '%s'",
                             cli_str(call, "max-file-body"));
    a->max_file_body = (size_t)v;
  }
  if (cli_str(call, "mcp-sessions-per-token") &&
      sm_parse_int(cli_str(call, "mcp-sessions-per-token"), 1, 64, &v, &err) == 0)
    a->mcp_per_token = (unsigned)v;
  if (cli_str(call, "host-tool-memory")) {
    if (sm_parse_size(cli_str(call, "host-tool-memory"), &v, &err) != 0 ||
        v < (int64_t)SM_ROUTE_REQUEST_MAX || v > (int64_t)1 << 40)
      return cli_usage_error(call->cmd, 0,
                             "--host-tool-memory: takes a size from 4m to 1t, not '%s'",
                             cli_str(call, "host-tool-memory"));
    a->host_tool_memory = (size_t)v;
  }
  if (cli_str(call, "background-max")) {
    if (sm_parse_duration(cli_str(call, "background-max"), &a->background_max, &err) != 0 ||
        a->background_max <= 0)
      return cli_usage_error(call->cmd, 0,
                             "--background-max: takes a duration such as 10m or 1h, not '%s'",
                             cli_str(call, "background-max"));
  }
  const char *durations[] = {"mcp-session-idle", "reap-interval"};
  double *slots[] = {&a->mcp_session_idle, &a->reap_interval};
  for (size_t i = 0; i < 2; i++) {
    const char *d = cli_str(call, durations[i]);
    if (d && (sm_parse_duration(d, slots[i], &err) != 0 || *slots[i] <= 0))
      return cli_usage_error(call->cmd, 0, "--%s: takes a duration such as 30s or 10m, not '%s'",
                             durations[i], d);
  }
  if (cli_str(call, "sandbox-pool-size") &&
      sm_parse_int(cli_str(call, "sandbox-pool-size"), 0, SM_POOL_MAX_SIZE, &v, &err) == 0) {
    a->pool_size = (unsigned)v;
    a->have_pool_size = 1;
  }
  a->pool_max = SM_POOL_DEFAULT_MAX;
  if (cli_str(call, "sandbox-pool-max") &&
      sm_parse_int(cli_str(call, "sandbox-pool-max"), 0, SM_POOL_MAX_SIZE, &v, &err) == 0)
    a->pool_max = (unsigned)v;
  a->pool_parallel = SM_POOL_DEFAULT_PARALLEL;
  if (cli_str(call, "sandbox-pool-parallel") &&
      sm_parse_int(cli_str(call, "sandbox-pool-parallel"), 1, SM_POOL_MAX_PARALLEL, &v, &err) == 0)
    a->pool_parallel = (unsigned)v;
  return terminal_args(call, a);
}

/* Configurations replaced by a reload: calls in flight may still use
 * them, so they live until the runner stops (a reload is rare). */
#define MAX_RELOADS 1024
typedef struct reloads {
  sm_config *v[MAX_RELOADS];
  sm_broker *brokers[MAX_RELOADS]; /* the host-tool broker of each (routes keep them) */
  size_t n;
  sm_audit *audit;
} reloads;

/* SIGHUP: the configuration file again. Calls that come afterwards resolve
 * with it; running allowlist sandboxes get their egress lists from it at
 * once (docs/network.md#live-policy). A bad file changes nothing. */
static void reload(const cli_globals *g, sm_server *srv, sm_runner *runner, sm_config **cfg,
                   sm_broker **brokerp, reloads *old) {
  sm_error err = SM_ERROR_INIT;
  sm_config *fresh = NULL;
  if (old->n == MAX_RELOADS) {
    sm_log(SM_LOG_WARN, "reload refused: %d reloads already; restart the runner", MAX_RELOADS);
    return;
  }
  if (sm_config_load(&fresh, g->config_path, &err) != 0) {
    sm_log(SM_LOG_WARN, "reload refused, the configuration in force stays: %s", err.message);
    return;
  }
  sm_broker *broker = NULL;
  if (cli_broker_new(fresh, old->audit, 1, &broker) != CLI_EXIT_OK) {
    sm_log(SM_LOG_WARN, "reload refused, the configuration in force stays");
    sm_config_free(fresh);
    return;
  }
  sm_egress_proxy_options eo;
  sm_config_egress_proxy(fresh, &eo);
  if (sm_runner_set_egress(runner, &eo, &err) != 0) {
    sm_log(SM_LOG_WARN, "reload refused, the configuration in force stays: %s", err.message);
    sm_broker_free(broker);
    sm_config_free(fresh);
    return;
  }
  sm_server_set_config(srv, fresh);
  sm_server_set_broker(srv, broker);
  old->v[old->n] = *cfg;
  old->brokers[old->n++] = *brokerp;
  *brokerp = broker;
  *cfg = fresh;
  size_t n = 0;
  if (cli_egress_reapply(runner, fresh, &n, &err) != 0)
    sm_log(SM_LOG_WARN, "reload: the egress lists of running sandboxes: %s", err.message);
  sm_log(SM_LOG_INFO, "configuration reloaded (%s); egress policy applied to %zu running sandbox(es)",
         sm_config_path(fresh) ? sm_config_path(fresh) : "built-in defaults", n);
}

/* The warm pool: per_tool calls take containers made ahead of time. On a
 * per_tool runner the default configuration's pool fills at once. Used
 * per_tool containers are removed off the calls' time (stop waits). Its
 * size: --sandbox-pool-size > defaults.pool_size > built-in. */
static int start_pool(const worker_args *a, const sm_config *cfg, sm_runner *runner,
                      const sm_resolved *res, sm_mode mode, const char *project, sm_error *err) {
  unsigned pool_size = SM_POOL_DEFAULT_SIZE;
  if (a->have_pool_size) pool_size = a->pool_size;
  else if (sm_config_pool_size(cfg) >= 0) pool_size = (unsigned)sm_config_pool_size(cfg);
  if (sm_runner_pool_set_size(runner, pool_size, err) != 0 ||
      sm_runner_pool_set_limits(runner, a->pool_max, a->pool_parallel, err) != 0)
    return -1;
  sm_runner_set_background_removal(runner, 1);
  if (mode == SM_MODE_PER_TOOL) {
    static sm_run_request warm; /* large (settings): not on the stack */
    sm_run_request_init(&warm);
    warm.settings = res->settings;
    warm.settings.mode = SM_MODE_PER_TOOL;
    warm.project = project;
    if (sm_runner_pool_prepare(runner, &warm, err) != 0)
      sm_log(SM_LOG_WARN, "warm pool: %s", err->message);
  }
  return 0;
}

/* Signals are taken by sigwait in this thread only: every thread the
 * server starts inherits the blocked mask. */
static void block_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, set, NULL);
  signal(SIGPIPE, SIG_IGN);
}

/* The server's options from the flags (the runner, configuration and mode
 * are the caller's to add). */
static void server_options(sm_server_options *so, worker_args *a, const char *token,
                           const char *project, const char *project_env) {
  memset(so, 0, sizeof *so);
  so->listen = a->listen;
  so->token = token;
  so->threads = a->threads;
  so->max_connections = a->max_connections;
  so->max_body = a->max_body;
  so->max_file_body = a->max_file_body;
  so->mcp_sessions_per_token = a->mcp_per_token;
  so->code_queue = a->code_queue;
  so->code_max_contexts = a->code_max_contexts;
  so->code_max_output = a->code_max_output;
  so->credentials_file = a->creds;
  so->workspaces_root = a->ws_root;
  so->pool = a->pool;
  so->project = project;
  so->project_environment = project_env;
  so->background_max_s = a->background_max;
  so->mcp_session_idle_s = a->mcp_session_idle;
  so->reap_interval_s = a->reap_interval;
  so->terminal_grace_s = a->terminal_grace;
  so->terminals_per_sandbox = a->terminals_per_sandbox;
  so->max_terminals = a->max_terminals;
  so->terminal_scrollback = a->terminal_scrollback;
  so->watches_per_sandbox = a->watches_per_sandbox;
  so->watches_per_token = a->watches_per_token;
  so->watch_queue = a->watch_queue;
  so->flags = &a->flags;
}

/* Serves until SIGTERM or SIGINT (SIGHUP reloads the configuration), then
 * stops and frees everything. */
static void serve(const cli_globals *g, sm_server *srv, sm_runner *runner, const sigset_t *set,
                  sm_config *cfg, sm_broker *broker, sm_audit *audit) {
  int sig = 0;
  static reloads old; /* large: not on the stack */
  old.audit = audit;
  for (;;) {
    if (sigwait(set, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    reload(g, srv, runner, &cfg, &broker, &old);
  }
  sm_log(SM_LOG_INFO, "received %s", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  sm_server_stop(srv);
  sm_server_free(srv);
  sm_runner_free(runner); /* before the brokers: the sandboxes' routes hold them */
  sm_broker_free(broker);
  for (size_t i = 0; i < old.n; i++) sm_broker_free(old.brokers[i]);
  sm_audit_close(audit);
  sm_config_free(cfg);
  for (size_t i = 0; i < old.n; i++) sm_config_free(old.v[i]);
}

int cmd_worker_start(const cli_call *call) {
  const cli_globals *g = call->g;
  static worker_args a; /* large (string lists): not on the stack */
  memset(&a, 0, sizeof a);
#ifdef M_ARENA_MAX
  /* A long-running process with 16+ threads: glibc would give most of them
   * an arena of their own, each keeping its freed memory (about 1 MB more
   * resident with 100 sandboxes, measured). Two arenas are plenty for calls
   * that spend their time waiting on the engine. MALLOC_ARENA_MAX in the
   * environment still wins. */
  if (getenv("MALLOC_ARENA_MAX") == NULL) mallopt(M_ARENA_MAX, 2);
#endif
  int rc = parse_args(call, &a);
  if (rc) return rc;
  /* The token first, and out of the environment at once: nothing started
   * from here on (tools on the host included) can inherit it. */
  static char token[SM_TOKEN_MAX_LEN + 2];
  sm_error err = SM_ERROR_INIT;
  rc = sm_token_load(a.token_file, token, sizeof token, &err);
  unsetenv(SM_TOKEN_ENV);
  if (rc != 0) {
    cli_error("%s", err.message);
    return CLI_EXIT_USAGE;
  }

  sm_config *cfg = NULL;
  static sm_resolved res;
  rc = cli_load_resolve(g, NULL, NULL, NULL, &a.flags, &cfg, &res);
  if (rc) return rc;
  const char *project_env =
      res.project_environment[0] ? res.project_environment : sm_config_project_environment(cfg);
  const char *project = a.project ? a.project : sm_config_project_id(cfg);
  sm_runner *runner = NULL;
  rc = cli_runner_new(g, cfg, cli_str(call, "sandbox-backend"), &runner);
  if (rc) {
    sm_config_free(cfg);
    return rc;
  }
  if (a.host_tool_memory) sm_runner_set_route_memory(runner, a.host_tool_memory);
  /* The health check and the fallback rule, once at start. */
  sm_fallback_decision fb;
  if (sm_fallback_decide(runner, res.settings.mode, !res.mode_explicit, project_env,
                         res.settings.runtime, res.settings.image, &fb, &err) != 0) {
    cli_error("refusing to start: %s", err.message);
    sm_runner_free(runner);
    sm_config_free(cfg);
    return CLI_EXIT_FAILURE;
  }
  int degraded = fb.mode != res.settings.mode;

  if (start_pool(&a, cfg, runner, &res, fb.mode, project, &err) != 0) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  a.flags.mode = sm_mode_name(fb.mode);

  sigset_t set;
  block_signals(&set);

  sm_server_options so;
  server_options(&so, &a, token, project, project_env);
  so.runner = runner;
  so.config = cfg;
  so.mode = fb.mode;
  so.degraded = degraded;
  /* The audit trail: on by default for a runner (audit.enabled: false turns it off). */
  sm_audit *audit = NULL;
  if ((rc = cli_audit_open(cfg, 1, &audit)) != CLI_EXIT_OK) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return rc;
  }
  so.audit = audit;
  sm_runner_set_audit(runner, audit);
  sm_broker *broker = NULL;
  if ((rc = cli_broker_new(cfg, audit, 1, &broker)) != CLI_EXIT_OK) {
    sm_runner_free(runner);
    sm_audit_close(audit);
    sm_config_free(cfg);
    return rc;
  }
  so.broker = broker;
  sm_server *srv = NULL;
  rc = sm_server_start(&srv, &so, &err);
  memset(token, 0, sizeof token);
  if (rc != 0) {
    sm_runner_free(runner);
    sm_broker_free(broker);
    sm_audit_close(audit);
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  sm_log(SM_LOG_INFO, "sandman %s: pool %s, mode %s%s, project environment %s", sm_version(),
         a.pool ? a.pool : "-", sm_mode_name(fb.mode), degraded ? " (fallback)" : "",
         project_env ? project_env : "-");

  serve(g, srv, runner, &set, cfg, broker, audit);
  return CLI_EXIT_OK;
}

