/* Internal to src/lib/sandbox: mode none, the tool on the host (host.c). */
#ifndef SANDMAN_SANDBOX_HOST_H
#define SANDMAN_SANDBOX_HOST_H

#include <sandman/error.h>
#include <sandman/run.h>

#include "sandbox/context.h"

/* Returns 0 with *out describing the call (its failure included). */
int sandbox_run_host(const sandbox_ctx *ctx, const sm_run_request *req, sm_run_result *out,
                     sm_error *err);

/* Removes a directory tree without following symlinks, making read-only
 * directories writable first. Missing is fine. */
int sandbox_remove_tree(const char *path, sm_error *err);

#endif
