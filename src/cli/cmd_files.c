/* sandman files watch (--run-id ID | --worker-id ID | SANDBOX) [-r] [PATH]:
 * the file events of a folder of a keyed sandbox that exists already, one NDJSON
 * line each as GET /v1/files/watch streams them (docs/file-events.md),
 * until SIGINT, SIGTERM or SIGHUP, or until the folder itself goes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct watch_out {
  int failed; /* stdout went away */
} watch_out;

static int print_line(watch_out *o, json_object *j) {
  const char *text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE);
  if (printf("%s\n", text) < 0 || fflush(stdout) != 0) o->failed = 1;
  json_object_put(j);
  return o->failed ? SM_EIO : 0;
}

static int on_ready(void *ud, const sm_run_result *call) {
  json_object *j = json_object_new_object();
  json_object_object_add(j, "event", json_object_new_string("ready"));
  json_object_object_add(j, "sandbox_id", json_object_new_string(call->sandbox_id));
  return print_line(ud, j);
}

static int on_event(void *ud, const sm_watch_event *ev) {
  return print_line(ud, sm_watch_event_to_json(ev, -1));
}

/* The arguments: the sandbox by its keys or SANDBOX, then PATH. */
static int parse_args(const cli_call *call, cli_keyed *k, const char **path) {
  cli_keyed_flags(call, k);
  size_t n = (size_t)call->n_args;
  if (k->run_id && k->worker_id)
    return cli_usage_error(call->cmd, 0, "--run-id and --worker-id name two sandboxes: give one");
  int named = k->run_id || k->worker_id;
  if (!named && n == 0)
    return cli_usage_error(call->cmd, 0, "name the sandbox: --run-id, --worker-id or SANDBOX");
  if (named && n > 1)
    return cli_usage_error(call->cmd, 0, "give PATH only (the sandbox is named)");
  if (!named) k->sandbox = call->args[0];
  *path = n > (named ? 0u : 1u) ? call->args[n - 1] : ".";
  if (k->mode && k->run_id && strcmp(k->mode, "per_run") != 0)
    return cli_usage_error(call->cmd, 0, "--run-id names a per_run sandbox");
  if (k->mode && k->worker_id && strcmp(k->mode, "per_worker") != 0)
    return cli_usage_error(call->cmd, 0, "--worker-id names a per_worker sandbox");
  return 0;
}

/* The watch in k's sandbox as it is, until a signal or the folder's end. */
static int watch_in(const cli_call *call, const cli_keyed *k, const char *path, sm_config *cfg,
                    const sm_resolved *res, sm_runner *runner) {
  sm_broker *broker = NULL;
  int code = cli_broker_new(cfg, NULL, 0, &broker);
  if (code != CLI_EXIT_OK) return code;
  sm_run_request req;
  sm_config_egress eg;
  cli_keyed_request(k, &req, &eg, cfg, res, broker);
  req.settings.timeout_s = 0; /* until it is stopped */
  req.cancel = cli_catch_stop_signals();
  watch_out out = {0};
  sm_files_watch_opts o = {cli_has(call, "recursive"), on_ready, on_event, &out};
  sm_run_result result;
  memset(&result, 0, sizeof result);
  sm_error err = SM_ERROR_INIT;
  int ended = 0;
  int rc = sm_files_watch(runner, &req, path, &o, &ended, &result, &err);
  if (rc == 0 && ended) {
    json_object *j = json_object_new_object();
    json_object_object_add(j, "event", json_object_new_string("end"));
    json_object_object_add(j, "reason", json_object_new_string("deleted"));
    print_line(&out, j);
  }
  /* Stopped by a signal (or its reader gone): the way a watch ends. */
  if (rc == SM_ECANCELLED || out.failed) rc = 0;
  /* What the path met (refused here, or by the agent that ran) is 1; the
   * sandbox missing, sandman or the engine, 125. */
  if (rc == 0) code = CLI_EXIT_OK;
  else if (rc == SM_EUNSAFE || result.started) code = 1;
  else code = rc == SM_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  if (rc) cli_error("%s", err.message);
  sm_run_result_dispose(&result);
  sm_broker_free(broker);
  return code;
}

int cmd_files_watch(const cli_call *call) {
  cli_keyed k;
  const char *path = ".";
  int rc = parse_args(call, &k, &path);
  if (rc) return rc;
  sm_config *cfg = NULL;
  sm_resolved res;
  sm_config_flags flags;
  memset(&flags, 0, sizeof flags);
  flags.mode = k.run_id ? "per_run" : k.worker_id ? "per_worker" : NULL;
  rc = cli_load_resolve(call->g, k.agent, NULL, k.user, &flags, &cfg, &res);
  sm_runner *runner = NULL;
  if (rc == 0) rc = cli_runner_new(call->g, cfg, NULL, &runner);
  if (rc == 0 && k.sandbox) rc = cli_keyed_resolve(runner, &k, "files watch");
  if (rc == 0) rc = watch_in(call, &k, path, cfg, &res, runner);
  sm_runner_free(runner);
  sm_config_free(cfg);
  return rc;
}
