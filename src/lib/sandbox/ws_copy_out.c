/* The workspace's copy out after the tool ran (see ws_copy_out.h). */
#include "sandbox/ws_copy_out.h"

#include "sandbox/sandbox_result.h"

int sandbox_ws_copy_out(sm_run_result *r, sm_workspace_sync *ws, const sm_workspace_target *t,
                        const char *where, sm_error *sync_err) {
  if (sm_workspace_sync_out(ws, t, &r->files_changed, &r->n_files_changed, &r->conflicts,
                            &r->n_conflicts, sync_err) != 0) {
    sm_error_wrap(sync_err, "copying the workspace out of %s", where);
    return -1;
  }
  const sm_workspace_refusal *rv = NULL;
  size_t nr = sm_workspace_sync_refused(ws, &rv);
  if (sandbox_result_add_refusals(r, rv, nr, sync_err) != 0) return -1;
  return 0;
}
