/* sandman files watch (--run-id ID | --worker-id ID) [-r] [PATH]: the file
 * events of a folder of a keyed sandbox that exists already, one NDJSON
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

/* The request for the sandbox of the keys, as `sandman exec` makes it. */
static int watch_in(const cli_call *call, sm_config *cfg, const sm_resolved *res,
                    sm_runner *runner) {
  sm_broker *broker = NULL;
  int code = cli_broker_new(cfg, NULL, 0, &broker);
  if (code != CLI_EXIT_OK) return code;
  const char *run_id = cli_str(call, "run-id"), *agent = cli_str(call, "agent");
  const char *project = cli_str(call, "project");
  sm_run_request req;
  sm_config_egress eg;
  sm_call_names names = {.project = project ? project : sm_config_project_id(cfg),
                         .agent = agent,
                         .user = cli_str(call, "user"),
                         .run_id = run_id,
                         .worker_id = cli_str(call, "worker-id")};
  sm_run_request_from_config(&req, &eg, cfg, res, &names);
  req.settings.mode = run_id ? SM_MODE_PER_RUN : SM_MODE_PER_WORKER;
  req.settings.timeout_s = 0; /* until it is stopped */
  req.existing = 1;
  req.cancel = cli_catch_stop_signals();
  req.agent_has_host_tools = sm_broker_agent_has_tools(broker, agent);
  watch_out out = {0};
  sm_files_watch_opts o = {cli_has(call, "recursive"), on_ready, on_event, &out};
  sm_run_result result;
  memset(&result, 0, sizeof result);
  sm_error err = SM_ERROR_INIT;
  int ended = 0;
  const char *path = call->n_args > 0 ? call->args[0] : ".";
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
  const char *run_id = cli_str(call, "run-id"), *worker_id = cli_str(call, "worker-id");
  if (!run_id == !worker_id)
    return cli_usage_error(call->cmd, 0, "name the sandbox: --run-id or --worker-id (one)");
  sm_config *cfg = NULL;
  sm_resolved res;
  sm_config_flags flags;
  memset(&flags, 0, sizeof flags);
  flags.mode = run_id ? "per_run" : "per_worker";
  int rc = cli_load_resolve(call->g, cli_str(call, "agent"), NULL, cli_str(call, "user"), &flags,
                            &cfg, &res);
  sm_runner *runner = NULL;
  if (rc == 0 && (rc = cli_runner_new(call->g, cfg, NULL, &runner)) != 0) cfg = NULL; /* freed */
  if (rc == 0) rc = watch_in(call, cfg, &res, runner);
  sm_runner_free(runner);
  sm_config_free(cfg);
  return rc;
}
