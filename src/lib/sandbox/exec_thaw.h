/* Internal to src/lib/sandbox: the first call into a frozen sandbox,
 * sent ahead of the engine's thaw (exec_thaw.c, docs/state.md). */
#ifndef SANDMAN_SANDBOX_EXEC_THAW_H
#define SANDMAN_SANDBOX_EXEC_THAW_H

#include <sandman/error.h>
#include <sandman/run.h>

#include "sandbox/agent.h"
#include "sandbox/exec.h"

/* How long after it is sent a call into a frozen sandbox may still start
 * (its SM_FRAME_NOT_AFTER), and how long past that a failed thaw waits
 * for the agent's answer before it says the call never ran. */
#define SM_THAW_LATE_MS 2000
#define SM_THAW_SLACK_MS 1000

/* The call in f (started on t->agent with f->not_after_ms, nothing sent
 * yet) into a sandbox still frozen: its frame goes to the frozen agent
 * first, then t->thaw unfreezes the sandbox, and the call is driven.
 * Returns as sandbox_agent_drive. When the thaw fails: the call goes on if
 * the agent answers it all the same (something else thawed the sandbox),
 * else the thaw's error, once the call's time has passed (nothing can
 * start it after that), the session broken. */
int sandbox_exec_thaw_drive(const sandbox_exec_target *t, const sm_run_request *req,
                            sandbox_agent_feed *f, double deadline, sm_error *err);

#endif
