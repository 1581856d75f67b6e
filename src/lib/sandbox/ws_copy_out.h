/* Internal to src/lib/sandbox: the workspace's copy out after the tool ran
 * (ws_copy_out.c), started by the call drivers: sandbox_call.c for the
 * container modes, host.c for mode none. */
#ifndef SANDMAN_SANDBOX_WS_COPY_OUT_H
#define SANDMAN_SANDBOX_WS_COPY_OUT_H

#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/workspace.h>
#include <sandman/run.h>

/* Copies the workspace out of `where` (the sandbox's name, or mode none's
 * scratch folder): the changed files, conflicts and refusals go into the
 * result; -1 with sync_err set when it failed (the tool's result stands:
 * pass sync_err to sandbox_result_sync_failed). */
int sandbox_ws_copy_out(sm_run_result *r, sm_workspace_sync *ws, const sm_workspace_target *t,
                        const char *where, sm_error *sync_err);

#endif
