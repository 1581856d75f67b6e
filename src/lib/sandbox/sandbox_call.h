/* Internal to src/lib/sandbox: the call driver of the container modes
 * (per_tool, per_run, per_worker), on either backend: find or make the
 * sandbox, copy the workspace in, run the call, copy it out, let go. */
#ifndef SANDMAN_SANDBOX_CALL_H
#define SANDMAN_SANDBOX_CALL_H

#include <sandman/error.h>
#include <sandman/run.h>

#include "sandbox/context.h"

/* sm_run's contract: 0 with *out describing the call (its failure
 * included); a negative code, *out filled too, only when the scope key
 * cannot be made. */
int sandbox_run_container(const sandbox_ctx *ctx, const sm_run_request *req, sm_run_result *out,
                          sm_error *err);

#endif
