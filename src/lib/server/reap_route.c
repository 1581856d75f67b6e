/* POST /v1/sandboxes/reap (reap_route.h): the options from the body, the
 * configuration's idle lifecycle then the reap through the ops module (as
 * `sandman sandbox reap` does), the report audited and answered. */
#include <string.h>

#include <sandman/log.h>
#include <sandman/ops.h>

#include "server/reap_route.h"

/* The options of the request; 0, or SM_EINVAL with err filled. */
static int reap_options(const char *body, size_t len, sm_ops_reap_options *ro, sm_error *err) {
  sm_error bad = SM_ERROR_INIT;
  json_object *o = NULL;
  int rc = len > 0 ? server_json_object(body, len, &o, &bad) : 0;
  if (rc == 0) rc = sm_ops_reap_options_from_json(o, ro, &bad);
  if (o) json_object_put(o);
  /* Whatever the parser's code, a body it refuses is a bad request. */
  if (rc != 0) return sm_error_set(err, SM_EINVAL, "%s", bad.message);
  return 0;
}

void server_reap_route(sm_server *srv, const char *body, size_t len, server_answer *a) {
  sm_error err = SM_ERROR_INIT;
  sm_ops_reap_options ro = SM_OPS_REAP_OPTIONS_INIT;
  if (reap_options(body, len, &ro, &err) != 0) {
    server_answer_from_error(a, &err);
    return;
  }
  if (srv->opts.runner == NULL) {
    server_answer_error(a, 503, "engine", "this runner has no engine");
    return;
  }
  sm_ops_scope scope;
  sm_ops_report rep, moved;
  memset(&rep, 0, sizeof rep);
  memset(&moved, 0, sizeof moved);
  /* The lifecycle first (docs/state.md#the-idle-lifecycle): a sandbox due
   * to rest goes to rest rather than away; its moves are audited by the
   * rest module as they happen. */
  int rc = sm_ops_lifecycle(srv->opts.runner, sm_server_config(srv), ro.dry_run, &moved, &err);
  if (rc == 0) rc = sm_ops_scope_from_runner(&scope, srv->opts.runner, &err);
  if (rc == 0) rc = sm_ops_reap(&scope, &ro, &rep, &err);
  if (rc == 0) rc = sm_ops_report_merge(&rep, &moved, &err);
  sm_ops_report_dispose(&moved);
  if (rc != 0) {
    sm_ops_report_dispose(&rep);
    sm_error_wrap(&err, "reaping sandboxes");
    server_answer_from_error(a, &err);
    return;
  }
  sm_log(SM_LOG_INFO, "reap: %zu moved to rest, %zu removed, %zu spared%s", rep.n_moved,
         rep.n_removed, rep.n_spared, ro.dry_run ? " (dry run)" : "");
  sm_ops_report_audit(&rep, "sandbox.reaped", srv->opts.audit);
  a->status = 200;
  a->body = sm_ops_report_to_json(&rep);
  sm_ops_report_dispose(&rep);
}
