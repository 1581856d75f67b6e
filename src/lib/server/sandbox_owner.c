/* A sandbox a request names by its id, as its caller may see it: the
 * control token any sandbox of the runner's instance; a worker (its token,
 * or the control token acting for it) only the keyed sandboxes of its own
 * principal. Another's sandbox is told exactly as a missing one, so a
 * worker learns nothing about the others'. */
#include <stdio.h>
#include <string.h>

#include "server/sandbox_owner.h"

int server_sandbox_find(sm_server *srv, const char *ref, const char *worker_key, int keyed_only,
                        sm_ops_sandbox *out, sm_error *err) {
  if (srv->opts.runner == NULL) return sm_error_set(err, SM_EUNSUPPORTED, "this runner has no engine");
  sm_ops_scope scope;
  int rc = sm_ops_scope_from_runner(&scope, srv->opts.runner, err);
  if (rc) return rc;
  sm_error e = SM_ERROR_INIT;
  rc = sm_ops_get(&scope, ref, out, &e);
  if (rc && rc != SM_ENOTFOUND) {
    *err = e;
    return rc;
  }
  char principal[SM_PRINCIPAL_MAX] = "";
  if (worker_key) snprintf(principal, sizeof principal, "worker:%s", worker_key);
  int keyed = strcmp(out->mode, "per_run") == 0 || strcmp(out->mode, "per_worker") == 0;
  if (rc == 0 && (!worker_key || strcmp(out->principal, principal) == 0) && (keyed || !keyed_only))
    return 0;
  memset(out, 0, sizeof *out);
  return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s", ref);
}
