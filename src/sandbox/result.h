/* Internal to src/sandbox: filling a call's result (result.c). */
#ifndef SANDMAN_SANDBOX_RESULT_H
#define SANDMAN_SANDBOX_RESULT_H

#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>
#include <sandman/workspace.h>

/* Fills failure_kind, exit code 125 and the error text from err. */
void sm_result_fail(sm_run_result *r, sm_failure_kind kind, const sm_error *err);
/* The copy out after the tool ran: the changed files, conflicts and
 * refusals go into the result; -1 with sync_err set when it failed (the
 * tool's result stands: pass sync_err to sm_result_sync_failed). */
int sm_result_copy_out(sm_run_result *r, sm_workspace_sync *ws, const sm_workspace_target *t,
                       const char *where, sm_error *sync_err);
/* A copy out that failed after the tool ran: failure kind "sandbox" and
 * why, the tool's own exit code, output and duration kept. */
void sm_result_sync_failed(sm_run_result *r, const sm_error *err);

/* How a call ended (exec.c, host.c). */
typedef struct sm_exec_outcome {
  int exit_code;
  int timed_out;
  int oom_killed;
  int cancelled;
  double duration_ms;
} sm_exec_outcome;

/* Fills exit code, flags, ok, failure kind and message from an outcome
 * (container and host calls alike). */
void sm_result_apply_outcome(sm_run_result *out, const sm_exec_outcome *oc,
                             const sm_sandbox_settings *s);

#endif
