/* Internal to src/lib/sandbox: a tool's call in a container, through an engine
 * exec or an agent session (exec.c). */
#ifndef SANDMAN_SANDBOX_EXEC_H
#define SANDMAN_SANDBOX_EXEC_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/run.h>

#include "common/strv.h"
#include "sandbox/agent.h"
#include "sandbox/capture.h"
#include "sandbox/sandbox_result.h"
#include "sandbox/thaw_job.h"

typedef struct sandbox_exec_target {
  sm_engine *engine;
  const char *container_id;
  const char *user;      /* "uid:gid" every exec of the call runs as (the
                          * container's own processes run as root) */
  int per_tool;          /* a fresh container: timeouts kill the container */
  sandbox_agents *agents; /* with agent: the call goes over this session */
  sandbox_agent_session *agent;
  /* Told the call's first process (pid, start time) once the wrapper
   * names it: the host-tool route (tool_route.h). NULL: nobody. */
  void (*on_start)(void *ud, const char *pid, const char *start);
  void *on_start_ud;
  /* A frozen sandbox thawed under the call (set with agent): its frame is
   * sent first, then thaw(thaw_ud) unfreezes the sandbox (0, or the
   * engine's error). NULL: it runs already. */
  int (*thaw)(void *ud, sm_error *err);
  void *thaw_ud;
  /* The same thaw started beside the call (thaw_job.h; NULL, or an error:
   * thaw is used), and told what came of it once waited for (thawed: 1
   * when this thaw did it). A job the call does not wait for (its agent
   * answered, the engine showed the sandbox paused) is left in
   * *thaw_left, for the call to leave when it ends. */
  int (*thaw_start)(void *ud, sandbox_thaw_job **out, sm_error *err);
  void (*thaw_settle)(void *ud, int thawed);
  sandbox_thaw_job **thaw_left;
} sandbox_exec_target;

int sandbox_exec_call(const sandbox_exec_target *t, const sm_run_request *req,
                      const common_strv *env, sandbox_capture *cap, sandbox_exec_outcome *out,
                      sm_error *err);

#endif
