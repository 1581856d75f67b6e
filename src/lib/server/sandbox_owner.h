/* A sandbox named by its id, with the owner rules of the runner
 * (sandbox_owner.c): used by the sandboxes routes and by calls that name
 * a "sandbox_id". */
#ifndef SANDMAN_SERVER_SANDBOX_OWNER_H
#define SANDMAN_SERVER_SANDBOX_OWNER_H

#include <sandman/ops.h>

#include "server/server_core.h"

/* The sandbox ref (a name, full id or unique id prefix) when the caller
 * may see it: worker_key NULL for the control token acting for itself (any
 * sandbox of the instance), else only those whose principal is
 * worker:<worker_key>. keyed_only: per_run and per_worker ones only.
 * SM_ENOTFOUND with "no such sandbox: <ref>" for a missing sandbox and for
 * another's alike; another code when the engine fails. */
int server_sandbox_find(sm_server *srv, const char *ref, const char *worker_key, int keyed_only,
                        sm_ops_sandbox *out, sm_error *err);

#endif
