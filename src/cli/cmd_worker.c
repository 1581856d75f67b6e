/* `sandman worker start` (alias `sandman serve`): the runner service.
 *
 * Reads the control token, the configuration and the worker's sandbox
 * flags, applies the health check and the fallback rule, starts the HTTP
 * API and waits for SIGTERM or SIGINT, then stops cleanly (calls in flight
 * finish, per_tool sandboxes are removed) and exits 0. */
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/server.h>

#include "cli.h"

static void usage(FILE *out, const char *name) {
  fprintf(out,
          "Usage: sandman %s [OPTIONS]\n\n"
          "Serves the runner's HTTP API (see docs/http-api.md).\n\n"
          "Sandboxes:\n"
          "  --pool NAME                 name of this runner's pool (logs, /healthz)\n"
          "  --sandbox-mode MODE         none | per_tool | per_run | per_worker\n"
          "  --sandbox-backend docker    the only backend\n"
          "  --sandbox-image REF         image of the sandboxes\n"
          "  --sandbox-network MODE      none | bridge\n"
          "  --sandbox-cpu N             CPUs per sandbox (fractions allowed)\n"
          "  --sandbox-mem SIZE          memory per sandbox (k, m, g)\n"
          "  --sandbox-pids N            processes per sandbox\n"
          "  --sandbox-disk SIZE         size of /workspace\n"
          "  --sandbox-runtime NAME      engine runtime, e.g. runsc\n"
          "  --sandbox-timeout SECONDS   default timeout of a call\n"
          "  --sandbox-pool-size N       per_tool containers kept ready per configuration,\n"
          "                              0 to 64 (0: no warm pool); overrides the config\n"
          "                              file's defaults.pool_size (default 2)\n"
          "  --env-passthrough GLOB      runner variables passed to tools (repeatable)\n"
          "  --project-environment ENV   production | staging | development\n"
          "  --project ID                default project of calls\n\n"
          "Service:\n"
          "  --listen ADDR               unix:PATH or tcp://HOST:PORT (default: a unix socket\n"
          "                              in $XDG_RUNTIME_DIR/sandman, /run/sandman for root)\n"
          "  --token-file FILE           control token (else $" SM_TOKEN_ENV ")\n"
          "  --credentials-file FILE     credentials for leases (JSON, mode 0600)\n"
          "  --workspaces-root DIR       the directory request workspaces live under\n"
          "  --threads N                 call threads (default 16)\n"
          "  --max-body SIZE             request body limit (default 4m)\n"
          "  --max-connections N         open connections (default 256)\n"
          "  --background-max DURATION   longest life of a backgrounded call (default 1h)\n",
          name);
}

enum {
  OPT_POOL = 256,
  OPT_MODE,
  OPT_BACKEND,
  OPT_IMAGE,
  OPT_NETWORK,
  OPT_CPU,
  OPT_MEM,
  OPT_PIDS,
  OPT_DISK,
  OPT_RUNTIME,
  OPT_TIMEOUT,
  OPT_PASSTHROUGH,
  OPT_PROJECT_ENV,
  OPT_PROJECT,
  OPT_LISTEN,
  OPT_TOKEN_FILE,
  OPT_CREDS,
  OPT_WS_ROOT,
  OPT_THREADS,
  OPT_MAX_BODY,
  OPT_MAX_CONN,
  OPT_BG_MAX,
  OPT_POOL_SIZE,
};

typedef struct worker_args {
  sm_config_flags flags;
  const char *pool, *project, *listen, *token_file, *creds, *ws_root;
  unsigned threads, max_connections;
  unsigned pool_size;
  int have_pool_size;
  size_t max_body;
  double background_max;
} worker_args;

static int parse_uint(const char *flag, const char *s, int64_t min, int64_t max,
                      unsigned *out) {
  int64_t v;
  sm_error err = SM_ERROR_INIT;
  if (sm_parse_int(s, min, max, &v, &err) != 0) {
    cli_error("%s: %s", flag, err.message);
    return CLI_EXIT_USAGE;
  }
  *out = (unsigned)v;
  return 0;
}

/* 0, -1 for --help, or an exit code. */
static int parse_args(int argc, char **argv, worker_args *a) {
  static const struct option opts[] = {
      {"pool", required_argument, NULL, OPT_POOL},
      {"sandbox-mode", required_argument, NULL, OPT_MODE},
      {"sandbox-backend", required_argument, NULL, OPT_BACKEND},
      {"sandbox-image", required_argument, NULL, OPT_IMAGE},
      {"sandbox-network", required_argument, NULL, OPT_NETWORK},
      {"sandbox-cpu", required_argument, NULL, OPT_CPU},
      {"sandbox-mem", required_argument, NULL, OPT_MEM},
      {"sandbox-pids", required_argument, NULL, OPT_PIDS},
      {"sandbox-disk", required_argument, NULL, OPT_DISK},
      {"sandbox-runtime", required_argument, NULL, OPT_RUNTIME},
      {"sandbox-timeout", required_argument, NULL, OPT_TIMEOUT},
      {"env-passthrough", required_argument, NULL, OPT_PASSTHROUGH},
      {"project-environment", required_argument, NULL, OPT_PROJECT_ENV},
      {"project", required_argument, NULL, OPT_PROJECT},
      {"listen", required_argument, NULL, OPT_LISTEN},
      {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
      {"credentials-file", required_argument, NULL, OPT_CREDS},
      {"workspaces-root", required_argument, NULL, OPT_WS_ROOT},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"max-body", required_argument, NULL, OPT_MAX_BODY},
      {"max-connections", required_argument, NULL, OPT_MAX_CONN},
      {"background-max", required_argument, NULL, OPT_BG_MAX},
      {"sandbox-pool-size", required_argument, NULL, OPT_POOL_SIZE},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c;
  sm_error err = SM_ERROR_INIT;
  optind = 1;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    switch (c) {
      case OPT_POOL: a->pool = optarg; break;
      case OPT_MODE: a->flags.mode = optarg; break;
      case OPT_BACKEND:
        if (strcmp(optarg, "docker") != 0) {
          cli_error("--sandbox-backend: only 'docker' is supported, not '%s'", optarg);
          return CLI_EXIT_USAGE;
        }
        break;
      case OPT_IMAGE: a->flags.image = optarg; break;
      case OPT_NETWORK: a->flags.network = optarg; break;
      case OPT_CPU: a->flags.cpu = optarg; break;
      case OPT_MEM: a->flags.memory = optarg; break;
      case OPT_PIDS: a->flags.pids = optarg; break;
      case OPT_DISK: a->flags.disk = optarg; break;
      case OPT_RUNTIME: a->flags.runtime = optarg; break;
      case OPT_TIMEOUT: a->flags.timeout = optarg; break;
      case OPT_PASSTHROUGH:
        if (sm_string_list_add(&a->flags.env_passthrough, optarg, &err) != 0) {
          cli_error("--env-passthrough: %s", err.message);
          return CLI_EXIT_USAGE;
        }
        break;
      case OPT_PROJECT_ENV: a->flags.project_environment = optarg; break;
      case OPT_PROJECT: a->project = optarg; break;
      case OPT_LISTEN: a->listen = optarg; break;
      case OPT_TOKEN_FILE: a->token_file = optarg; break;
      case OPT_CREDS: a->creds = optarg; break;
      case OPT_WS_ROOT: a->ws_root = optarg; break;
      case OPT_THREADS:
        if (parse_uint("--threads", optarg, 1, 1024, &a->threads)) return CLI_EXIT_USAGE;
        break;
      case OPT_MAX_CONN:
        if (parse_uint("--max-connections", optarg, 4, 100000, &a->max_connections))
          return CLI_EXIT_USAGE;
        break;
      case OPT_MAX_BODY: {
        int64_t v;
        if (sm_parse_size(optarg, &v, &err) != 0 || v < 1024 || v > (int64_t)1 << 30) {
          cli_error("--max-body takes a size from 1k to 1g, not '%s'", optarg);
          return CLI_EXIT_USAGE;
        }
        a->max_body = (size_t)v;
        break;
      }
      case OPT_BG_MAX:
        if (sm_parse_duration(optarg, &a->background_max, &err) != 0 || a->background_max <= 0) {
          cli_error("--background-max takes a duration such as 10m or 1h, not '%s'", optarg);
          return CLI_EXIT_USAGE;
        }
        break;
      case OPT_POOL_SIZE:
        if (parse_uint("--sandbox-pool-size", optarg, 0, SM_POOL_MAX_SIZE, &a->pool_size))
          return CLI_EXIT_USAGE;
        a->have_pool_size = 1;
        break;
      case 'h': return -1;
      default: return CLI_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    cli_error("unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
  if (a->flags.mode) {
    sm_mode m;
    if (sm_mode_parse(a->flags.mode, &m, &err) != 0) {
      cli_error("--sandbox-mode: %s", err.message);
      return CLI_EXIT_USAGE;
    }
  }
  return 0;
}

static int serve(int argc, char **argv, const cli_globals *g, const char *name) {
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
  int rc = parse_args(argc, argv, &a);
  if (rc < 0) {
    usage(stdout, name);
    return CLI_EXIT_OK;
  }
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
  rc = cli_runner_new(g, cfg, &runner);
  if (rc) return rc;
  /* The health check and the fallback rule, once at start. */
  sm_fallback_decision fb;
  if (sm_fallback_decide(runner, res.settings.mode, project_env, res.settings.runtime,
                         res.settings.image, &fb, &err) != 0) {
    cli_error("refusing to start: %s", err.message);
    sm_runner_free(runner);
    sm_config_free(cfg);
    return CLI_EXIT_FAILURE;
  }
  int degraded = fb.mode != res.settings.mode;

  /* The warm pool: per_tool calls take containers made ahead of time. On a
   * per_tool runner the default configuration's pool fills at once. Used
   * per_tool containers are removed off the calls' time (stop waits). */
  /* Its size: --sandbox-pool-size > defaults.pool_size > built-in. */
  unsigned pool_size = SM_POOL_DEFAULT_SIZE;
  if (a.have_pool_size) pool_size = a.pool_size;
  else if (sm_config_pool_size(cfg) >= 0) pool_size = (unsigned)sm_config_pool_size(cfg);
  if (sm_runner_pool_set_size(runner, pool_size, &err) != 0) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  sm_runner_set_background_removal(runner, 1);
  if (fb.mode == SM_MODE_PER_TOOL) {
    static sm_run_request warm; /* large (settings): not on the stack */
    sm_run_request_init(&warm);
    warm.settings = res.settings;
    warm.settings.mode = SM_MODE_PER_TOOL;
    warm.project = project;
    if (sm_runner_pool_prepare(runner, &warm, &err) != 0)
      sm_log(SM_LOG_WARN, "warm pool: %s", err.message);
  }
  a.flags.mode = sm_mode_name(fb.mode);

  /* Signals are taken by sigwait in this thread only: every thread the
   * server starts inherits the blocked mask. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  sm_server_options so;
  memset(&so, 0, sizeof so);
  so.listen = a.listen;
  so.token = token;
  so.threads = a.threads;
  so.max_connections = a.max_connections;
  so.max_body = a.max_body;
  so.credentials_file = a.creds;
  so.workspaces_root = a.ws_root;
  so.pool = a.pool;
  so.project = project;
  so.project_environment = project_env;
  so.background_max_s = a.background_max;
  so.runner = runner;
  so.config = cfg;
  so.flags = &a.flags;
  so.mode = fb.mode;
  so.degraded = degraded;
  sm_server *srv = NULL;
  rc = sm_server_start(&srv, &so, &err);
  memset(token, 0, sizeof token);
  if (rc != 0) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  sm_log(SM_LOG_INFO, "sandman %s: pool %s, mode %s%s, project environment %s", sm_version(),
         a.pool ? a.pool : "-", sm_mode_name(fb.mode), degraded ? " (fallback)" : "",
         project_env ? project_env : "-");

  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  sm_log(SM_LOG_INFO, "received %s", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  sm_server_stop(srv);
  sm_server_free(srv);
  sm_runner_free(runner);
  sm_config_free(cfg);
  return CLI_EXIT_OK;
}

int cmd_worker(int argc, char **argv, const cli_globals *g) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout, "worker start");
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "start") != 0) {
    cli_error("unknown worker command '%s' (try `sandman worker start --help`)", argv[1]);
    return CLI_EXIT_USAGE;
  }
  return serve(argc - 1, argv + 1, g, "worker start");
}

int cmd_serve(int argc, char **argv, const cli_globals *g) {
  return serve(argc, argv, g, "serve");
}
