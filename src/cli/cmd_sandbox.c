/* sandman sandbox doctor | list | reap | rm: operating the sandboxes of
 * this instance. The work is in the library (sandman/ops.h); this file
 * parses flags, prints and picks exit codes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/ops.h>

#include "cli.h"

/* Loads the configuration (exit 2 on a bad file, as everywhere) and fills
 * the engine options: --host > DOCKER_HOST > the file's engine host >
 * the default socket. *cfg may be NULL when none was needed. */
static int setup(const cli_globals *g, sm_config **cfg, sm_engine_options *eo) {
  sm_error err = SM_ERROR_INIT;
  *cfg = NULL;
  if (sm_config_load(cfg, g->config_path, &err) != 0) return cli_fail(&err);
  cli_engine_options(g, *cfg, eo);
  return CLI_EXIT_OK;
}

/* setup() and a negotiated engine client; on failure nothing is left to
 * free and the exit code is returned. */
static int open_engine(const cli_globals *g, sm_config **cfg, sm_engine **out) {
  sm_engine_options eo;
  sm_error err = SM_ERROR_INIT;
  *out = NULL;
  int rc = setup(g, cfg, &eo);
  if (rc) return rc;
  if (sm_engine_new(out, &eo, &err) != 0 || sm_engine_negotiate(*out, &err) != 0) {
    sm_engine_free(*out);
    *out = NULL;
    sm_config_free(*cfg);
    *cfg = NULL;
    return cli_fail(&err);
  }
  return CLI_EXIT_OK;
}

static void print_owned(char *text) {
  if (text == NULL) {
    cli_error("out of memory");
    return;
  }
  fputs(text, stdout);
  fflush(stdout);
  free(text);
}

static int print_json_owned(json_object *o) {
  if (o == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAILURE;
  }
  cli_print_json(o);
  json_object_put(o);
  return CLI_EXIT_OK;
}

/* ---- doctor ---- */

int cmd_sandbox_doctor(const cli_call *call) {
  const cli_globals *g = call->g;
  int as_json = cli_has(call, "json");
  const char *mode_flag = cli_str(call, "mode"), *env_flag = cli_str(call, "project-environment");
  sm_config *cfg = NULL;
  sm_ops_doctor_options o = SM_OPS_DOCTOR_OPTIONS_INIT;
  int rc = setup(g, &cfg, &o.engine);
  if (rc) return rc;

  /* What a call with no agent would use: its image, runtime and mode. */
  sm_resolved *res = calloc(1, sizeof *res);
  sm_error err = SM_ERROR_INIT;
  if (res == NULL) {
    sm_config_free(cfg);
    cli_error("out of memory");
    return CLI_EXIT_FAILURE;
  }
  sm_config_flags flags;
  memset(&flags, 0, sizeof flags);
  flags.mode = mode_flag;
  flags.project_environment = env_flag;
  if (sm_config_resolve(cfg, NULL, NULL, NULL, &flags, res, &err) != 0) {
    rc = cli_fail(&err);
    free(res);
    sm_config_free(cfg);
    return rc;
  }
  o.image = res->settings.image;
  o.runtime = res->settings.runtime;
  o.mode = res->settings.mode;
  o.project_environment = res->project_environment[0] ? res->project_environment : NULL;

  sm_ops_doctor_report *report = calloc(1, sizeof *report);
  if (report == NULL || sm_ops_doctor(&o, report, &err) != 0) {
    rc = report ? cli_fail(&err) : CLI_EXIT_FAILURE;
  } else {
    if (as_json) print_json_owned(sm_ops_doctor_to_json(report));
    else print_owned(sm_ops_doctor_text(report));
    rc = report->healthy ? CLI_EXIT_OK : CLI_EXIT_UNHEALTHY;
  }
  free(report);
  free(res);
  sm_config_free(cfg);
  return rc;
}

/* ---- list ---- */

int cmd_sandbox_list(const cli_call *call) {
  const cli_globals *g = call->g;
  int all = cli_has(call, "all"), as_json = cli_has(call, "json");
  sm_config *cfg = NULL;
  sm_engine *engine = NULL;
  int rc = open_engine(g, &cfg, &engine);
  if (rc) return rc;
  sm_ops_scope scope = SM_OPS_SCOPE_INIT;
  scope.engine = engine;
  sm_ops_sandbox_list list = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_list(&scope, all, &list, &err) != 0) {
    rc = cli_fail(&err);
  } else if (as_json) {
    rc = print_json_owned(sm_ops_list_to_json(&list));
  } else {
    print_owned(sm_ops_list_table(&list, sm_now()));
  }
  sm_ops_sandbox_list_dispose(&list);
  sm_engine_free(engine);
  sm_config_free(cfg);
  return rc;
}

/* ---- reap and rm share their output ---- */

static int finish_report(sm_ops_report *report, int as_json) {
  if (as_json) print_json_owned(sm_ops_report_to_json(report));
  else print_owned(sm_ops_report_text(report));
  int rc = report->n_failed ? CLI_EXIT_UNHEALTHY : CLI_EXIT_OK;
  sm_ops_report_dispose(report);
  return rc;
}

int cmd_sandbox_reap(const cli_call *call) {
  const cli_globals *g = call->g;
  sm_ops_reap_options ro = SM_OPS_REAP_OPTIONS_INIT;
  int as_json = cli_has(call, "json");
  sm_error err = SM_ERROR_INIT;
  if (cli_str(call, "older-than"))
    sm_parse_duration(cli_str(call, "older-than"), &ro.older_than_s, &err); /* checked by the table */
  ro.dry_run = cli_has(call, "dry-run");
  ro.force = cli_has(call, "force");
  sm_config *cfg = NULL;
  sm_engine *engine = NULL;
  int rc = open_engine(g, &cfg, &engine);
  if (rc) return rc;
  sm_ops_scope scope = SM_OPS_SCOPE_INIT;
  scope.engine = engine;
  sm_ops_report report;
  if (sm_ops_reap(&scope, &ro, &report, &err) != 0) rc = cli_fail(&err);
  else rc = finish_report(&report, as_json);
  sm_engine_free(engine);
  sm_config_free(cfg);
  return rc;
}

int cmd_sandbox_rm(const cli_call *call) {
  const cli_globals *g = call->g;
  sm_ops_rm_options ro = SM_OPS_RM_OPTIONS_INIT;
  int as_json = cli_has(call, "json");
  ro.run_id = cli_str(call, "run-id");
  ro.worker_id = cli_str(call, "worker-id");
  ro.force = cli_has(call, "force");
  ro.refs = (const char *const *)call->args;
  ro.n_refs = (size_t)call->n_args;
  if (ro.n_refs == 0 && !ro.run_id && !ro.worker_id)
    return cli_usage_error(call->cmd, as_json, "name a sandbox, or give --run-id or --worker-id");
  sm_config *cfg = NULL;
  sm_engine *engine = NULL;
  int rc = open_engine(g, &cfg, &engine);
  if (rc) return rc;
  sm_ops_scope scope = SM_OPS_SCOPE_INIT;
  scope.engine = engine;
  sm_ops_report report;
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_rm(&scope, &ro, &report, &err) != 0) {
    rc = cli_fail(&err);
  } else {
    if (report.n_removed == 0 && report.n_spared == 0 && !as_json)
      cli_note("no sandbox of instance '%s' matched", sm_ops_scope_instance(&scope));
    rc = finish_report(&report, as_json);
  }
  sm_engine_free(engine);
  sm_config_free(cfg);
  return rc;
}

