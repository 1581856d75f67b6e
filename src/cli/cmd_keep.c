/* sandman sandbox pause | resume: a keyed sandbox's tiers of rest
 * (sandman/keep.h, docs/state.md). The sandbox is named as for `sandbox
 * rm`: SANDBOX (a name, id or unique id prefix), --run-id or --worker-id;
 * it must be one keyed sandbox of this instance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/keep.h>
#include <sandman/ops.h>

#include "cli.h"
#include "cmd_keep.h"

static int is_keyed(const sm_ops_sandbox *sb) {
  return strcmp(sb->mode, "per_run") == 0 || strcmp(sb->mode, "per_worker") == 0;
}

/* The one keyed sandbox a label names; a usage error when none or several. */
static int by_label(const cli_call *call, const sm_ops_scope *scope, const char *key,
                    const char *value, const char *flag, char *name, int json) {
  char filter[SM_NAME_MAX + 64];
  snprintf(filter, sizeof filter, "%s=%s", key, value);
  const char *filters[1] = {filter};
  sm_ops_sandbox_list l = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_list_filtered(scope, 1, filters, 1, &l, &err) != 0) return cli_fail(&err);
  const sm_ops_sandbox *hit = NULL;
  size_t n = 0;
  char names[1024] = "";
  for (size_t i = 0; i < l.n; i++) {
    if (!is_keyed(&l.items[i])) continue;
    hit = &l.items[i];
    size_t used = strlen(names);
    if (used < sizeof names - 2)
      snprintf(names + used, sizeof names - used, "%s%s", n ? ", " : "", l.items[i].name);
    n++;
  }
  if (n == 1) snprintf(name, SM_NAME_MAX, "%s", hit->name);
  sm_ops_sandbox_list_dispose(&l);
  if (n == 1) return CLI_EXIT_OK;
  if (n == 0) {
    cli_error("no sandbox of %s %s in instance '%s'", flag + 2, value, sm_ops_scope_instance(scope));
    return CLI_EXIT_UNHEALTHY;
  }
  return cli_usage_error(call->cmd, json, "%s %s names %zu sandboxes (%s): name one", flag, value,
                         n, names);
}

int keep_target(const cli_call *call, sm_runner *runner, const char *op, char *name, int json) {
  const char *run = cli_str(call, "run-id"), *worker = cli_str(call, "worker-id");
  int given = (call->n_args > 0) + (run != NULL) + (worker != NULL);
  if (given != 1)
    return cli_usage_error(call->cmd, json, "name one sandbox: SANDBOX, --run-id ID or --worker-id ID");
  sm_ops_scope scope;
  sm_error err = SM_ERROR_INIT;
  if (sm_keep_supported(runner, op, &err) != 0) return cli_fail(&err);
  if (sm_ops_scope_from_runner(&scope, runner, &err) != 0) return cli_fail(&err);
  if (run) return by_label(call, &scope, SM_OPS_LABEL_RUN, run, "--run-id", name, json);
  if (worker) return by_label(call, &scope, SM_OPS_LABEL_WORKER, worker, "--worker-id", name, json);
  sm_ops_sandbox sb;
  if (sm_ops_get(&scope, call->args[0], &sb, &err) != 0) {
    cli_error("%s", err.message);
    return err.code == SM_ENOTFOUND ? CLI_EXIT_UNHEALTHY : cli_fail(&err);
  }
  if (!is_keyed(&sb))
    return cli_usage_error(call->cmd, json, "sandbox %s is %s: only per_run and per_worker "
                           "sandboxes keep their state", sb.name, sb.mode[0] ? sb.mode : "not keyed");
  snprintf(name, SM_NAME_MAX, "%s", sb.name);
  return CLI_EXIT_OK;
}

int keep_session_open(const cli_call *call, keep_session *s) {
  memset(s, 0, sizeof *s);
  sm_error err = SM_ERROR_INIT;
  if (sm_config_load(&s->cfg, call->g->config_path, &err) != 0) return cli_fail(&err);
  int rc = cli_runner_new(call->g, s->cfg, NULL, &s->runner);
  if (rc) {
    sm_config_free(s->cfg);
    s->cfg = NULL;
    return rc;
  }
  if (cli_audit_open(s->cfg, 0, &s->audit) != CLI_EXIT_OK) s->audit = NULL;
  sm_runner_set_audit(s->runner, s->audit);
  return CLI_EXIT_OK;
}

void keep_session_close(keep_session *s) {
  sm_runner_free(s->runner);
  sm_audit_close(s->audit);
  sm_config_free(s->cfg);
  memset(s, 0, sizeof *s);
}

int keep_exit(const sm_error *err) {
  /* What the sandbox is (missing, busy, in another state): 1, as rm. */
  if (err->code == SM_ENOTFOUND || err->code == SM_EBUSY || err->code == SM_ECONFLICT) {
    cli_error("%s", err->message);
    return CLI_EXIT_UNHEALTHY;
  }
  return cli_fail(err);
}

static int print_report(const sm_rest_report *r, int json, const char *verb) {
  if (json) return cli_print_json_owned(sm_rest_report_to_json(r));
  if (!r->changed)
    printf("%s (%.12s) is %s already\n", r->name, r->id, r->state);
  else
    printf("%s %s (%.12s): %s -> %s in %.0f ms\n", verb, r->name, r->id, r->previous, r->state,
           r->duration_ms);
  return CLI_EXIT_OK;
}

static int rest_command(const cli_call *call, int pause) {
  int json = cli_has(call, "json");
  sm_rest_options o = SM_REST_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  if (pause && cli_str(call, "tier") && sm_tier_parse(cli_str(call, "tier"), &o.tier, &err) != 0)
    return cli_usage_error(call->cmd, json, "%s", err.message);
  if (pause) {
    /* Only a pause waits for calls in flight (resume's table has no such flags). */
    o.no_wait = cli_has(call, "no-wait");
    if (cli_str(call, "wait") && sm_parse_duration(cli_str(call, "wait"), &o.wait_s, &err) != 0)
      return cli_usage_error(call->cmd, json, "--wait: %s", err.message);
  }
  o.why = "requested (sandman sandbox)";
  keep_session s;
  int rc = keep_session_open(call, &s);
  if (rc) return rc;
  char name[SM_NAME_MAX];
  rc = keep_target(call, s.runner,
                   !pause ? "resume" : o.tier == SM_TIER_FREEZE ? "pause" : sm_tier_name(o.tier), name,
                   json);
  if (rc == CLI_EXIT_OK) {
    sm_rest_report r;
    int op = pause ? sm_sandbox_pause(s.runner, name, &o, &r, &err)
                   : sm_sandbox_resume(s.runner, name, &o, &r, &err);
    rc = op ? keep_exit(&err) : print_report(&r, json, pause ? "paused" : "resumed");
  }
  keep_session_close(&s);
  return rc;
}

int cmd_sandbox_pause(const cli_call *call) { return rest_command(call, 1); }
int cmd_sandbox_resume(const cli_call *call) { return rest_command(call, 0); }
