/* sandman: sandboxes that keep their state (docs/state.md).
 *
 * A keyed sandbox (per_run, per_worker, a configuration's scope, one made
 * by id) can rest in one of three tiers and come back:
 *   freeze     the engine's pause (the cgroup freezer): memory kept, no CPU;
 *   stop       its processes end; /workspace is saved in the state
 *              directory and put back when it starts again;
 *   hibernate  its processes' memory is written by the engine's
 *              checkpoint and restored with them running (gVisor here; runc
 *              needs a working CRIU).
 * A call into a resting sandbox resumes it by itself. The state of each
 * sandbox is the engine's (paused, exited, created) read with a small
 * record in the state directory (<state>/rest/<name>.json), written before
 * and after every change so that a crash in the middle is finished or
 * undone by the next process that looks.
 *
 * Ownership: what *_to_json returns is the caller's. */
#ifndef SANDMAN_KEEP_H
#define SANDMAN_KEEP_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/sandbox.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SM_TIER_FREEZE = 0,
  SM_TIER_STOP = 1,
  SM_TIER_HIBERNATE = 2,
} sm_tier;

/* "freeze", "stop", "hibernate". */
SM_API const char *sm_tier_name(sm_tier tier);
/* The state a tier leaves a sandbox in: "frozen", "stopped", "hibernated". */
SM_API const char *sm_tier_state(sm_tier tier);
SM_API int sm_tier_parse(const char *s, sm_tier *out, sm_error *err);

#define SM_REST_STATE_MAX 16

typedef struct sm_rest_options {
  sm_tier tier;          /* pause only */
  int no_wait;           /* a call in flight: SM_EBUSY at once instead of waiting */
  double wait_s;         /* how long calls in flight are waited for (0: 60 s) */
  const char *why;       /* for the audit trail ("requested", "idle for 10m") */
} sm_rest_options;

#define SM_REST_OPTIONS_INIT {SM_TIER_FREEZE, 0, 0, NULL}

/* What a pause or resume did. */
typedef struct sm_rest_report {
  char name[SM_NAME_MAX];
  char id[SM_ENGINE_ID_MAX];        /* its container now */
  char previous[SM_REST_STATE_MAX]; /* running, frozen, stopped, hibernated */
  char state[SM_REST_STATE_MAX];
  double since;                     /* when it entered state (epoch) */
  int changed;                      /* 0: it was in that state already */
  double duration_ms;
  int64_t workspace_bytes;          /* stop, hibernate: the /workspace saved */
} sm_rest_report;

/* Puts the keyed sandbox named name (its container name) to rest in
 * o->tier, waiting for calls in flight (o->no_wait: SM_EBUSY). From
 * frozen it may go on to stop or hibernate, from stopped nowhere else;
 * hibernated is refused where the engine cannot checkpoint it (SM_EUNSUPPORTED
 * saying what is missing), and the sandbox is left as it was. */
SM_API int sm_sandbox_pause(sm_runner *runner, const char *name, const sm_rest_options *o,
                            sm_rest_report *out, sm_error *err);
/* Brings it back to running (a no-op for a running one). */
SM_API int sm_sandbox_resume(sm_runner *runner, const char *name, const sm_rest_options *o,
                             sm_rest_report *out, sm_error *err);
/* {"id","name","previous","state","since","changed","duration_ms","workspace_bytes"}. */
SM_API json_object *sm_rest_report_to_json(const sm_rest_report *r);

/* A sandbox's state as `sandbox list` shows it: from the engine's state
 * ("running", "paused", "exited", "created", ...) and its record in
 * state_dir. out (SM_REST_STATE_MAX): "running", "frozen", "stopped",
 * "hibernated", or the engine's word for anything else ("exited": stopped
 * by something other than sandman, its /workspace gone). *since (may be
 * NULL): when it entered that state, 0 when unknown. */
SM_API void sm_sandbox_rest_state(const char *state_dir, const char *name,
                                  const char *engine_state, char *out, double *since);

/* ---- state changes, for other parts of a program ---- */

/* One change of a sandbox's state made by this process: state is the new
 * one ("frozen", "stopped", "hibernated", "running"); id the container
 * now, previous_id the one before (a hibernated sandbox comes back in a
 * new container). A terminal's preview URLs or a code context's kernel
 * can be let go here: processes are gone after "stopped", kept after
 * "frozen" and "hibernated". */
typedef struct sm_state_event {
  const char *name;
  const char *id;
  const char *previous_id;
  const char *state;
  const char *previous;
} sm_state_event;
typedef void (*sm_state_hook)(void *ud, const sm_state_event *ev);
/* Called after each change, on the thread that made it; NULL: none. */
SM_API void sm_runner_set_state_hook(sm_runner *runner, sm_state_hook hook, void *ud);

#ifdef __cplusplus
}
#endif
#endif
