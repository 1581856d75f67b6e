/* A call's sm_run_request (the sandbox module's request) from what the
 * configuration resolved for it (sm_run_request_from_config): the one place
 * the CLI and the runner turn a resolution into a request. It lives here,
 * not in src/lib/sandbox, because the configuration depends on the sandbox
 * module and never the other way round. */
#include <sandman/config.h>

void sm_run_request_from_config(sm_run_request *out, sm_config_egress *egress,
                                const sm_config *cfg, const sm_resolved *res,
                                const sm_call_names *names) {
  sm_run_request_init(out);
  out->settings = res->settings;
  out->scope = res->scope_kind;
  out->project = names->project ? names->project : sm_config_project_id(cfg);
  out->project_environment = names->project_environment ? names->project_environment
                             : res->project_environment[0] ? res->project_environment
                                                           : sm_config_project_environment(cfg);
  out->agent = names->agent;
  out->tool = names->tool;
  out->user = names->user;
  out->run_id = names->run_id;
  out->worker_id = names->worker_id;
  sm_config_egress_get(cfg, names->agent, egress);
  out->egress = egress->levels;
  out->n_egress = egress->n_levels;
}
