/* Internal to src/lib/sandbox: filling a call's result (sandbox_result.c). */
#ifndef SANDMAN_SANDBOX_RESULT_H
#define SANDMAN_SANDBOX_RESULT_H

#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>
#include <sandman/workspace.h>

/* Fills failure_kind, exit code 125 and the error text from err. */
void sandbox_result_fail(sm_run_result *r, sm_failure_kind kind, const sm_error *err);
/* Adds the copy out's n refusals v to the result (ws_copy_out.c): 0, or
 * SM_ENOMEM. */
int sandbox_result_add_refusals(sm_run_result *r, const sm_workspace_refusal *v, size_t n,
                                sm_error *err);
/* A copy out that failed after the tool ran: failure kind "sandbox" and
 * why, the tool's own exit code, output and duration kept. */
void sandbox_result_sync_failed(sm_run_result *r, const sm_error *err);

/* How a call ended (exec.c, host.c). */
typedef struct sandbox_exec_outcome {
  int exit_code;
  int timed_out;
  int oom_killed;
  int cancelled;
  double duration_ms;
  int began;            /* the tool was started (its preamble came): never run it again */
} sandbox_exec_outcome;

/* Fills exit code, flags, ok, failure kind and message from an outcome
 * (container and host calls alike). */
void sandbox_result_apply_outcome(sm_run_result *out, const sandbox_exec_outcome *oc,
                                  const sm_sandbox_settings *s);

#endif
