/* The runner service's side of the operations: a scope from its runner,
 * and the periodic idle reap (idle_timeout in the configuration). */
#include <string.h>

#include <sandman/log.h>
#include <sandman/ops.h>

int sm_ops_scope_from_runner(sm_ops_scope *out, sm_runner *runner, sm_error *err) {
  sm_ops_scope init = SM_OPS_SCOPE_INIT;
  *out = init;
  if (runner == NULL) return sm_error_set(err, SM_EINVAL, "no runner given");
  int rc = sm_runner_engine(runner, &out->engine, err);
  if (rc) return rc;
  out->state_dir = sm_runner_state_dir(runner);
  out->instance = sm_runner_instance(runner);
  out->backend = sm_runner_backend(runner);
  return 0;
}

int sm_ops_reap_idle(sm_runner *runner, double idle_timeout_s, sm_ops_report *out,
                     sm_error *err) {
  sm_ops_scope scope;
  sm_ops_report local;
  sm_ops_report *report = out ? out : &local;
  memset(report, 0, sizeof *report);
  int rc = sm_ops_scope_from_runner(&scope, runner, err);
  if (rc) return rc;
  sm_ops_reap_options opts = SM_OPS_REAP_OPTIONS_INIT;
  opts.older_than_s = idle_timeout_s > 0 ? idle_timeout_s : -1;
  opts.keep_pool = 1; /* the pool keeps idle containers on purpose */
  opts.own_first = 1; /* a sandbox's own idle timeout is its owner's word */
  rc = sm_ops_reap(&scope, &opts, report, err);
  if (rc == 0) sm_ops_report_audit(report, "sandbox.reaped", sm_runner_audit(runner));
  /* The service's log is where an operator sees what went away. */
  for (size_t i = 0; rc == 0 && i < report->n_removed; i++)
    sm_log(SM_LOG_INFO, "idle reap removed %s %s: %s",
           report->removed[i].kind == SM_OPS_ITEM_VOLUME ? "volume" : "sandbox",
           report->removed[i].name, report->removed[i].reason);
  for (size_t i = 0; rc == 0 && i < report->n_spared; i++)
    if (report->spared[i].failed)
      sm_log(SM_LOG_WARN, "idle reap could not remove %s: %s", report->spared[i].name,
             report->spared[i].reason);
  if (out == NULL) sm_ops_report_dispose(&local);
  return rc;
}

void sm_ops_report_audit(const sm_ops_report *report, const char *event, sm_audit *audit) {
  if (audit == NULL || report->dry_run) return;
  for (size_t i = 0; i < report->n_removed; i++) {
    const sm_ops_item *it = &report->removed[i];
    if (it->kind != SM_OPS_ITEM_SANDBOX) continue;
    sm_audit_event ev = SM_AUDIT_EVENT_INIT;
    ev.name = event;
    ev.request_id = sm_log_request_id();
    ev.sandbox = it->name;
    ev.message = it->reason;
    sm_error err = SM_ERROR_INIT;
    if (sm_audit_record(audit, &ev, &err) != 0) sm_log(SM_LOG_WARN, "audit: %s", err.message);
  }
}
