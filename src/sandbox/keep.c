/* The public side of sandboxes that keep their state (sandman/keep.h):
 * pause and resume on the runner's engine, the work in rest.c. */
#include <string.h>

#include <sandman/keep.h>

#include "sandbox/backend.h"
#include "sandbox/context.h"
#include "sandbox/rest.h"

/* The runner's ctx and this thread's engine, on the docker backend. */
static int keep_begin(sm_runner *runner, const char *name, const char *what,
                      const sandbox_ctx **ctx, sm_engine **e, sm_error *err) {
  if (runner == NULL || name == NULL || *name == '\0')
    return sm_error_set(err, SM_EINVAL, "%s: needs a runner and a sandbox", what);
  *ctx = sm_runner_ctx(runner);
  if (strcmp((*ctx)->backend->name, "docker") != 0)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "%s is not available on the %s backend: a sandbox's state is kept on "
                        "the docker backend only (docs/state.md)",
                        what, (*ctx)->backend->name);
  return (*ctx)->engine(runner, e, err);
}

int sm_sandbox_pause(sm_runner *runner, const char *name, const sm_rest_options *o,
                     sm_rest_report *out, sm_error *err) {
  const sandbox_ctx *ctx = NULL;
  sm_engine *e = NULL;
  sm_rest_report ignore;
  int rc = keep_begin(runner, name, o && o->tier != SM_TIER_FREEZE ? sm_tier_name(o->tier) : "pause",
                      &ctx, &e, err);
  if (rc) return rc;
  return sandbox_rest_pause(ctx, e, name, o, out ? out : &ignore, err);
}

int sm_sandbox_resume(sm_runner *runner, const char *name, const sm_rest_options *o,
                      sm_rest_report *out, sm_error *err) {
  const sandbox_ctx *ctx = NULL;
  sm_engine *e = NULL;
  sm_rest_report ignore;
  int rc = keep_begin(runner, name, "resume", &ctx, &e, err);
  if (rc) return rc;
  return sandbox_rest_resume(ctx, e, name, o, out ? out : &ignore, err);
}
