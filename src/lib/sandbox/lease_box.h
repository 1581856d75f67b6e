/* Internal to src/lib/sandbox: where a call with leased credentials runs
 * (lease_box.c).
 *
 * Such a call never shares a process namespace with a process it cannot
 * trust. In a keyed sandbox (per_run, per_worker, the configuration's
 * scopes) earlier calls may have left processes running: the call runs in
 * a container of its own, a lease container, made from the same settings
 * (image, limits, user, network and egress, runtime), that shares only the
 * sandbox's /workspace volume. A per_tool sandbox is the call's own
 * already and serves it as it is.
 *
 * Either container dies with its call, whatever happens to the runner: a
 * watcher (root, out of the tool's reach) reads an exec stream the runner
 * holds open, and when the stream ends (the runner closed it, or died and
 * the engine closed it) the watcher ends the container's keeper and the
 * container stops with everything in it. A lease container also stops at
 * a deadline (the call's timeout and a margin for the workspace copies),
 * the engine removes it when it stops (AutoRemove), and its labels
 * (io.sandman.lease, io.sandman.owner) let a reap find anything left. */
#ifndef SANDMAN_SANDBOX_LEASE_BOX_H
#define SANDMAN_SANDBOX_LEASE_BOX_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/mode.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>
#include <sandman/state.h>

#include "sandbox/sandbox_box.h"
#include "sandbox/context.h"

/* What the keeper's deadline adds to the call's timeout (copies in and
 * out), and the deadline of a call without a timeout. */
#define SANDBOX_LEASE_MARGIN_S 600.0
#define SANDBOX_LEASE_NO_TIMEOUT_S 86400.0

typedef struct sandbox_lease {
  char id[SM_ENGINE_ID_MAX]; /* the lease container; "" when the call runs in its per_tool sandbox */
  char name[SM_NAME_MAX];
  sm_mode mode;              /* its sandbox's (the audit trail's) */
  sm_state_lock *busy;       /* the lease container's busy lock (a reap spares it) */
  sm_exec_stream *watch;     /* the watcher's stream: closing it ends the container */
} sandbox_lease;

/* Readies where the leased call in sb runs: a lease container for a keyed
 * sb (its id in out->id), or sb itself (per_tool); in both a watcher binds
 * the container's life to this process. sb must be running: a keyed sb
 * found gone is SM_ENOTFOUND (not running: SM_ECONFLICT), so that the
 * call looks it up again. On failure nothing is left. */
int sandbox_lease_open(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       const sandbox_box *sb, sandbox_lease *out, sm_error *err);

/* Ends it: the watcher's stream closed, a lease container removed with
 * everything in it (its shared volume stays). Safe on a zeroed lease. */
void sandbox_lease_close(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                         sandbox_lease *l);

#endif
