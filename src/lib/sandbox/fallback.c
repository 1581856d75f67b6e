/* The fallback rule: when the engine is unreachable at start and the mode
 * came from the configuration's defaults or the project environment,
 * outside production the mode steps down one at a time (per_worker ->
 * per_run -> per_tool -> none) with a WARN per step. Everything else that
 * cannot be had is refused: an explicit mode, a missing image, a runtime
 * the engine does not have, and anything in production. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sandman/image.h>
#include <sandman/log.h>
#include <sandman/fallback.h>

#include "sandbox/lifecycle.h"

#define DEFAULT_IMAGE_FOR_CHECK "sandman/minimal:latest"

static void add_reason(sm_fallback_decision *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_reason(sm_fallback_decision *d, const char *fmt, ...) {
  if (d->n_reasons >= SM_FALLBACK_MAX_REASONS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->reasons[d->n_reasons], sizeof d->reasons[0], fmt, ap);
  va_end(ap);
  d->n_reasons++;
}

int sm_fallback_decide(sm_runner *runner, sm_mode requested, int may_step_down,
                       const char *project_environment, const char *runtime, const char *image,
                       sm_fallback_decision *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  out->requested = requested;
  out->mode = requested;
  out->may_step_down = may_step_down;
  out->production = project_environment && strcmp(project_environment, "production") == 0;
  out->engine_ok = out->runtime_ok = out->image_ok = 1;
  if (requested == SM_MODE_NONE) return 0;
  out->checked = 1;

  sm_engine *e = NULL;
  sm_error ce = SM_ERROR_INIT;
  int engine_rc = sm_runner_engine(runner, &e, &ce);
  if (engine_rc == 0) engine_rc = sm_engine_ping(e, &ce);
  if (engine_rc != 0) {
    out->engine_ok = out->runtime_ok = out->image_ok = 0;
    add_reason(out, "engine unreachable: %s", ce.message);
  } else {
    /* Asking for a runtime (gVisor) is asking for its isolation: one the
     * engine does not have is refused, never traded for the host. */
    if (runtime && *runtime) {
      sm_error re = SM_ERROR_INIT;
      int rrc = sandbox_runtime_present(e, runtime, NULL, &re);
      if (rrc != 0) {
        out->runtime_ok = 0;
        out->refused = 1;
        add_reason(out, "%s", re.message);
        return sm_error_set(err, rrc == SM_EUNREACHABLE ? rrc : SM_ESANDBOX,
                            "refusing to run without runtime '%s' (sandman never runs the "
                            "call with less isolation instead): %s",
                            runtime, re.message);
      }
    }
    /* A missing image, or one whose digest differs from its pin, is not an
     * unhealthy engine: stepping down would run the tool unsandboxed because
     * of a typo or a swapped image. It is refused in every environment. */
    sm_error ie = SM_ERROR_INIT;
    const char *img = image && *image ? image : DEFAULT_IMAGE_FOR_CHECK;
    char pinned_id[SM_ENGINE_ID_MAX] = "";
    int irc = sm_image_check_pinned(e, img, NULL, pinned_id, &ie);
    if (irc == 0 && pinned_id[0] == '\0') irc = sandbox_image_present(e, img, NULL, &ie);
    if (irc != 0) {
      out->image_ok = 0;
      out->refused = 1;
      add_reason(out, "%s", ie.message);
      return sm_error_set(err, irc == SM_EPOLICY || irc == SM_EINVAL ? SM_EPOLICY : SM_ESANDBOX,
                          "%s", ie.message);
    }
  }
  if (out->n_reasons == 0) return 0;

  char cause[SM_FALLBACK_MAX_REASONS * 512];
  cause[0] = '\0';
  for (size_t i = 0; i < out->n_reasons; i++) {
    size_t used = strlen(cause);
    snprintf(cause + used, sizeof cause - used, "%s%s", i ? "; " : "", out->reasons[i]);
  }
  if (out->production) {
    out->refused = 1;
    return sm_error_set(err, out->engine_ok ? SM_ESANDBOX : SM_EUNREACHABLE,
                        "refusing to run in production with mode %s: %s",
                        sm_mode_name(requested), cause);
  }
  int wants_runtime = runtime && *runtime;
  if (!may_step_down || wants_runtime) {
    out->refused = 1;
    return sm_error_set(err, out->engine_ok ? SM_ESANDBOX : SM_EUNREACHABLE,
                        "refusing to run: %s %s was asked for explicitly and cannot be had "
                        "(%s); sandman never runs the call on the host instead: start the "
                        "engine or point --host/DOCKER_HOST at one (sandman sandbox doctor "
                        "shows what is wrong), or ask for --mode none",
                        wants_runtime ? "runtime" : "mode",
                        wants_runtime ? runtime : sm_mode_name(requested), cause);
  }
  /* Every container mode needs the same healthy engine, runtime and image,
   * so the steps go all the way down; each one is logged. */
  for (int m = (int)requested; m > SM_MODE_NONE; m--) {
    sm_log(SM_LOG_WARN, "mode %s unavailable (%s): stepping down to %s",
           sm_mode_name((sm_mode)m), cause, sm_mode_name((sm_mode)(m - 1)));
  }
  out->mode = SM_MODE_NONE;
  return 0;
}

json_object *sm_fallback_decision_to_json(const sm_fallback_decision *d) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "requested", json_object_new_string(sm_mode_name(d->requested)));
  json_object_object_add(o, "mode", json_object_new_string(sm_mode_name(d->mode)));
  json_object_object_add(o, "refused", json_object_new_boolean(d->refused));
  json_object_object_add(o, "production", json_object_new_boolean(d->production));
  json_object_object_add(o, "may_step_down", json_object_new_boolean(d->may_step_down));
  json_object_object_add(o, "engine_ok", json_object_new_boolean(d->engine_ok));
  json_object_object_add(o, "runtime_ok", json_object_new_boolean(d->runtime_ok));
  json_object_object_add(o, "image_ok", json_object_new_boolean(d->image_ok));
  json_object *r = json_object_new_array();
  for (size_t i = 0; i < d->n_reasons; i++)
    json_object_array_add(r, json_object_new_string(d->reasons[i]));
  json_object_object_add(o, "reasons", r);
  return o;
}
