/* sandman: the fallback rule when the engine or the requested runtime is unhealthy. */
#ifndef SANDMAN_FALLBACK_H
#define SANDMAN_FALLBACK_H

#include <sandman/export.h>

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/mode.h>
#include <sandman/runner.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the fallback rule (contract: "Fallback when the engine or the
 * requested runtime is unhealthy at start") ---- */
#define SM_FALLBACK_MAX_REASONS 8

typedef struct sm_fallback_decision {
  sm_mode requested;
  sm_mode mode;            /* the mode to use */
  int refused;             /* run nothing */
  int production;          /* the project environment is "production" */
  int may_step_down;       /* the mode came from defaults or the project environment */
  int checked;             /* 0 when the requested mode needs no engine (none) */
  int engine_ok;           /* engine reachable */
  int runtime_ok;          /* requested runtime registered (1 when none asked) */
  int image_ok;            /* image present */
  size_t n_reasons;        /* what is unhealthy, one line each */
  char reasons[SM_FALLBACK_MAX_REASONS][512];
} sm_fallback_decision;

/* Checks the engine (reachable), the runtime (registered, when runtime is
 * non-empty) and the image (present; NULL: the built-in default) for a
 * container mode. Healthy: out->mode = requested.
 *
 * An isolation asked for explicitly is never weakened: a missing image, a
 * runtime the engine does not have (asking for gVisor never gives the
 * host) and, when may_step_down is 0 (a --mode flag, a request's mode, an
 * agent entry's mode, sandbox_tools.always), an unreachable engine refuse:
 * out->refused = 1 and a negative code (SM_EUNREACHABLE for the engine,
 * SM_EPOLICY for a digest pin, else SM_ESANDBOX) with what to do in err.
 * An unreachable engine with may_step_down (a mode from the configuration's
 * defaults or the project environment) outside production steps down one
 * mode at a time (per_worker -> per_run -> per_tool -> none), logging a
 * WARN per step that names the cause, and returns 0; in production it
 * refuses. */
SM_API int sm_fallback_decide(sm_runner *runner, sm_mode requested, int may_step_down,
                              const char *project_environment, const char *runtime,
                              const char *image, sm_fallback_decision *out, sm_error *err);
/* {"requested", "mode", "refused", "production", "engine_ok", "runtime_ok",
 * "image_ok", "reasons": [...]} (caller owns it), for doctor and logs. */
SM_API json_object *sm_fallback_decision_to_json(const sm_fallback_decision *d);

#ifdef __cplusplus
}
#endif
#endif
