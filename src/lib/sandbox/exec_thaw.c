/* The first call into a frozen sandbox (exec_thaw.h): its frame ahead of
 * the thaw, its answer ahead of the engine's.
 *
 * The engine's unpause answers a few ms after the runtime has thawed the
 * sandbox (measured here: a process woke 5 ms before the engine's 204).
 * A call sent to the frozen agent first runs at the thaw itself. The
 * unpause runs beside it (thaw_job.h), and a list of the engine's
 * containers, which takes no container's lock, says whether the sandbox
 * was still paused when the call came: if it was, and the agent answers,
 * the sandbox was thawed for this call ("resumed": "frozen"), and the
 * call's answer need not wait for the engine's; the job writes the
 * thaw's record and audit row when the engine answers, holding the
 * sandbox against a pause until then. Anything else waits for the
 * engine, as a thaw before the call would.
 *
 * The frame carries a time after which the agent will not start it
 * (SM_FRAME_NOT_AFTER): when the unpause fails, nothing that thaws the
 * sandbox later can start a call its caller was told failed. */
#include "sandbox/exec_thaw.h"

#include <sandman/log.h>
#include <sandman/util.h>

/* How often the wait for the first of the agent's answer and the
 * engine's looks at the engine's (the agent's wakes it at once). */
#define THAW_LOOK_MS 1

static uint64_t wall_ms(void) { return (uint64_t)(sm_now() * 1000.0); }

/* The thaw beside the call: 0 with the agent heard first and the sandbox
 * shown paused (the job left in *t->thaw_left), else the thaw's result
 * once the engine has answered (*thawed as sandbox_thaw_job_wait's). */
static int thaw_beside(const sandbox_exec_target *t, sandbox_thaw_job *j,
                       const sandbox_agent_feed *f, int *left, sm_error *err) {
  sandbox_agent_session *s = t->agent;
  sm_error ignore = SM_ERROR_INIT;
  int paused = 0;
  if (sm_engine_container_listed_paused(t->engine, t->container_id, &paused, &ignore) != 0)
    paused = 0; /* not known: the engine's answer says */
  uint64_t until = f->not_after_ms + SM_THAW_SLACK_MS;
  int heard = 0;
  double t0 = sm_monotonic_ms();
  while (!(heard = sandbox_agent_await_answer(s, wall_ms() + THAW_LOOK_MS)) &&
         !sandbox_thaw_job_done(j) && !sandbox_agent_broken(s) && wall_ms() <= until)
    continue;
  int early = heard && paused && t->thaw_left;
  sm_log_event(SM_LOG_DEBUG, "thaw.beside",
               SM_LOG_FIELDS(SM_LOG_STR("container", t->container_id),
                             SM_LOG_BOOL("paused", paused), SM_LOG_BOOL("heard", heard),
                             SM_LOG_BOOL("early", early),
                             SM_LOG_NUM("wait_ms", sm_monotonic_ms() - t0)),
               "thaw beside the call: listed paused %d, agent heard %d after %.1f ms: %s", paused,
               heard, sm_monotonic_ms() - t0,
               early ? "answered before the engine" : "waiting for the engine's answer");
  if (early) {
    *t->thaw_left = j;
    *left = 1;
    return 0;
  }
  int thawed = 0;
  int rc = sandbox_thaw_job_wait(j, &thawed, err);
  if (rc == 0 && t->thaw_settle) t->thaw_settle(t->thaw_ud, thawed);
  return rc;
}

int sandbox_exec_thaw_drive(const sandbox_exec_target *t, const sm_run_request *req,
                            sandbox_agent_feed *f, double deadline, sm_error *err) {
  sandbox_agent_session *s = t->agent;
  int rc = sandbox_agent_flush(s, f, SM_THAW_LATE_MS, err);
  /* Thawed even when the frame could not go (the call then fails): no
   * call leaves its sandbox frozen. */
  sm_error terr = SM_ERROR_INIT;
  sandbox_thaw_job *j = NULL;
  int trc = 0;
  if (rc == 0 && t->thaw_start && t->thaw_start(t->thaw_ud, &j, &terr) == 0) {
    int left = 0;
    trc = thaw_beside(t, j, f, &left, &terr);
    if (left) return sandbox_agent_drive(s, f, deadline, req->cancel, err);
  } else {
    sm_error_clear(&terr);
    trc = t->thaw(t->thaw_ud, &terr);
  }
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
