/* A keyed sandbox named on the command line by SANDBOX (sandman exec,
 * sandman sandbox port): found among this instance's sandboxes by name,
 * id or a unique id prefix; its keys come from its labels. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "cli.h"

static void take(cli_keyed_sandbox *out, const sm_ops_sandbox *s) {
  snprintf(out->name, sizeof out->name, "%s", s->name);
  snprintf(out->mode, sizeof out->mode, "%s", s->mode);
  snprintf(out->run_id, sizeof out->run_id, "%s", s->run_id);
  snprintf(out->worker_id, sizeof out->worker_id, "%s", s->worker_id);
  snprintf(out->project, sizeof out->project, "%s", s->project);
  snprintf(out->agent, sizeof out->agent, "%s", s->agent);
}

int cli_find_keyed_sandbox(sm_runner *runner, const char *ref, const char *what,
                           cli_keyed_sandbox *out) {
  memset(out, 0, sizeof *out);
  sm_ops_scope scope;
  sm_ops_sandbox_list list = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_scope_from_runner(&scope, runner, &err) != 0 ||
      sm_ops_list(&scope, 1, &list, &err) != 0)
    return cli_fail(&err);
  const sm_ops_sandbox *hit = NULL;
  size_t matches = 0, plen = strlen(ref);
  for (size_t i = 0; i < list.n; i++) {
    const sm_ops_sandbox *s = &list.items[i];
    if (strcmp(s->name, ref) == 0 || strcmp(s->id, ref) == 0) {
      hit = s;
      matches = 1;
      break;
    }
    if (strncmp(s->id, ref, plen) == 0) hit = s, matches++;
  }
  int found = hit && matches == 1;
  if (found) take(out, hit);
  sm_ops_sandbox_list_dispose(&list);
  if (matches > 1) {
    cli_error("'%s' names %zu sandboxes: give more of the id", ref, matches);
    return CLI_EXIT_FAILURE;
  }
  if (!found) {
    cli_error("no sandbox '%s' in this instance (sandman sandbox list)", ref);
    return CLI_EXIT_FAILURE;
  }
  if (strcmp(out->mode, "per_run") != 0 && strcmp(out->mode, "per_worker") != 0) {
    cli_error("sandbox '%s' is a %s sandbox: %s needs a per_run or per_worker one", ref,
              out->mode[0] ? out->mode : "per_tool", what);
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

void cli_keyed_flags(const cli_call *call, cli_keyed *k) {
  memset(k, 0, sizeof *k);
  k->run_id = cli_str(call, "run-id");
  k->worker_id = cli_str(call, "worker-id");
  k->mode = cli_str(call, "mode");
  k->project = cli_str(call, "project");
  k->agent = cli_str(call, "agent");
  k->user = cli_str(call, "user");
}

int cli_keyed_resolve(sm_runner *runner, cli_keyed *k, const char *what) {
  int rc = cli_find_keyed_sandbox(runner, k->sandbox, what, &k->found);
  if (rc) return rc;
  k->mode = k->found.mode;
  k->run_id = k->found.run_id[0] ? k->found.run_id : NULL;
  k->worker_id = k->found.worker_id[0] ? k->found.worker_id : NULL;
  if (!k->project && k->found.project[0]) k->project = k->found.project;
  if (!k->agent && k->found.agent[0]) k->agent = k->found.agent;
  return 0;
}

void cli_keyed_request(const cli_keyed *k, sm_run_request *req, sm_config_egress *eg,
                       sm_config *cfg, const sm_resolved *res, sm_broker *broker) {
  sm_call_names names = {.project = k->project ? k->project : sm_config_project_id(cfg),
                         .agent = k->agent,
                         .user = k->user,
                         .run_id = k->run_id,
                         .worker_id = k->worker_id};
  sm_run_request_from_config(req, eg, cfg, res, &names);
  req->settings.mode = k->run_id || (k->mode && strcmp(k->mode, "per_run") == 0)
                           ? SM_MODE_PER_RUN
                           : SM_MODE_PER_WORKER;
  req->existing = 1;
  req->sandbox = k->found.name[0] ? k->found.name : NULL; /* SANDBOX: by its name, whatever its keys */
  /* Its keyed sandbox is the agent's own when the agent has host tools;
   * the call itself never gets the route. */
  req->agent_has_host_tools = sm_broker_agent_has_tools(broker, k->agent);
}

static void *run_thread_main(void *arg) {
  cli_run_thread *r = arg;
  r->rc = sm_run(r->runner, r->req, &r->result, &r->err);
  (void)!write(r->done_pipe[1], "x", 1);
  return NULL;
}

int cli_run_thread_start(cli_run_thread *r, sm_runner *runner, sm_run_request *req) {
  memset(r, 0, sizeof *r);
  r->runner = runner;
  r->req = req;
  r->err = (sm_error)SM_ERROR_INIT;
  if (pipe2(r->done_pipe, O_CLOEXEC) != 0) return -1;
  if (pthread_create(&r->thread, NULL, run_thread_main, r) != 0) {
    close(r->done_pipe[0]);
    close(r->done_pipe[1]);
    return -1;
  }
  return 0;
}

void cli_run_thread_join(cli_run_thread *r) {
  pthread_join(r->thread, NULL);
  close(r->done_pipe[0]);
  close(r->done_pipe[1]);
}
