/* The first call into a frozen sandbox (exec_thaw.h): its frame ahead of
 * the thaw.
 *
 * The engine's unpause answers a few ms after the runtime has thawed the
 * sandbox (measured here: a process woke 5 ms before the engine's 204).
 * A call sent to the frozen agent first runs at the thaw itself, and its
 * answer is there when the engine's is. The frame carries a time after
 * which the agent will not start it (SM_FRAME_NOT_AFTER): when the
 * unpause fails, nothing that thaws the sandbox later can start a call
 * its caller was told failed. */
#include "sandbox/exec_thaw.h"

int sandbox_exec_thaw_drive(const sandbox_exec_target *t, const sm_run_request *req,
                            sandbox_agent_feed *f, double deadline, sm_error *err) {
  sandbox_agent_session *s = t->agent;
  int rc = sandbox_agent_flush(s, f, SM_THAW_LATE_MS, err);
  /* Thawed even when the frame could not go (the call then fails): no
   * call leaves its sandbox frozen. */
  sm_error terr = SM_ERROR_INIT;
  int trc = t->thaw(t->thaw_ud, &terr);
  if (rc == 0 && trc == 0) return sandbox_agent_drive(s, f, deadline, req->cancel, err);
  if (rc) {
    sm_error_clear(&terr);
    return rc;
  }
  /* Not thawed by this call. Gone: nothing can ever start it. Else it
   * goes on if the agent answers it before its time is out (something
   * else thawed the sandbox). */
  if (trc != SM_ENOTFOUND && sandbox_agent_await_answer(s, f->not_after_ms + SM_THAW_SLACK_MS) &&
      !sandbox_agent_came_late(s)) {
    sm_error_clear(&terr);
    return sandbox_agent_drive(s, f, deadline, req->cancel, err);
  }
  sandbox_agent_mark_broken(s);
  *err = terr;
  return trc;
}
