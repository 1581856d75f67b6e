/* Internal to src/lib/sandbox: a running sandbox's /workspace read for a
 * snapshot by its own agent (`sandman-agent tar /workspace --stop`,
 * src/agent/tar_out.h) through an engine exec (snap_agent.c), instead of
 * the engine's archive of a frozen sandbox.
 *
 * The agent first stops every process of the sandbox's user (SIGSTOP),
 * then streams the tar; it continues them once the host says the rest of
 * the snapshot (its layer's commit) is done, or once the host is gone.
 * Anything it cannot read or represent makes it give up: the caller then
 * reads /workspace as before. */
#ifndef SANDMAN_SANDBOX_SNAP_AGENT_H
#define SANDMAN_SANDBOX_SNAP_AGENT_H

#include <stdint.h>

#include <sandman/engine.h>
#include <sandman/error.h>

typedef struct sandbox_snap_agent_hooks {
  /* Called once, on the reading thread, when the tar's first bytes come:
   * the sandbox's processes are stopped from then on. */
  void (*stopped)(void *ud);
  /* Polled on the reading thread: 1 once the rest of the snapshot is
   * done and the processes may go on. */
  int (*done)(void *ud);
  void *ud;
} sandbox_snap_agent_hooks;

/* The tar of container cid's /workspace (entries "./...") read by its
 * agent as user and written whole at path (a temporary file beside it,
 * fsync, rename), every byte also written to tee (-1: none) as it comes;
 * *bytes its size. 0 with *fell_back 0: done. 0 with *fell_back 1: the
 * agent could not (why is in the debug log; nothing is at path): read it
 * another way. An error: the engine failed. */
int sandbox_snap_agent_read(sm_engine *e, const char *cid, const char *user, const char *path,
                            int tee, const sandbox_snap_agent_hooks *hooks, int64_t *bytes,
                            int *fell_back, sm_error *err);

#endif
