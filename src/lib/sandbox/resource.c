/* sm_sandbox_create: a keyed sandbox made as a resource, before any call
 * (POST /v1/sandboxes, `sandman sandbox create`). It is made exactly as
 * a call would make it (acquire.c's key lock, lifecycle.c's hardened
 * container), with its meta written as labels (meta.c), and nothing runs
 * in it. */
#include <stdio.h>
#include <string.h>

#include <sandman/image.h>
#include <sandman/name.h>

#include "sandbox/acquire.h"
#include "sandbox/backend.h"
#include "sandbox/meta.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"

static int check_create(const sm_run_request *req, sm_error *err) {
  const sm_sandbox_settings *s = &req->settings;
  if (s->mode != SM_MODE_PER_RUN && s->mode != SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL, "a sandbox made ahead is per_run or per_worker, not %s",
                        sm_mode_name(s->mode));
  if (s->image[0] == '\0') return sm_error_set(err, SM_EINVAL, "no image given");
  if (s->memory > 0 && s->memory < 6 * 1024 * 1024)
    return sm_error_set(err, SM_EINVAL, "memory limit too small: the engine needs at least 6m");
  if (s->memory < 0 || s->pids < 0 || s->disk < 0 || !(s->cpu >= 0))
    return sm_error_set(err, SM_EINVAL, "limits must not be negative");
  if (strcmp(s->network, "none") != 0 && strcmp(s->network, "bridge") != 0 &&
      strcmp(s->network, "allowlist") != 0)
    return sm_error_set(err, SM_EINVAL, "network '%s' is not allowed (use none, bridge or allowlist)",
                        s->network);
  const char *names[][2] = {{"project", req->project}, {"run id", req->run_id},
                            {"worker id", req->worker_id}, {"agent", req->agent}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int rc;
    if (names[i][1] && *names[i][1] && (rc = sm_name_check(names[i][0], names[i][1], err)))
      return rc;
  }
  if (req->sandbox) return sm_error_set(err, SM_EINVAL, "a new sandbox has no id to name");
  return sandbox_meta_check(req->meta, err);
}

int sm_sandbox_create(sm_runner *runner, const sm_run_request *req, char *id_out,
                      char *name_out, sm_error *err) {
  if (id_out) id_out[0] = '\0';
  if (name_out) name_out[0] = '\0';
  if (runner == NULL || req == NULL)
    return sm_error_set(err, SM_EINVAL, "sm_sandbox_create: needs a runner and a request");
  int rc = check_create(req, err);
  if (rc) return rc;
  const sandbox_ctx *ctx = sandbox_runner_ctx(runner);
  if (strcmp(ctx->backend->name, "docker") != 0)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "sandboxes made ahead need the docker backend (not %s)", ctx->backend->name);
  sm_engine *e = NULL;
  rc = ctx->engine(runner, &e, err);
  if (rc) return rc;
  sm_run_request made = *req;
  /* A digest pin runs only on the image it names, by its id (as sm_run). */
  if (strchr(req->settings.image, '@') != NULL) {
    char id[SM_ENGINE_ID_MAX] = "";
    rc = sm_image_check_pinned(e, req->settings.image, NULL, id, err);
    if (rc) return rc == SM_EINVAL ? sm_error_set(err, SM_EPOLICY, "%s", err->message) : rc;
    snprintf(made.settings.image, sizeof made.settings.image, "%s", id);
  }
  /* A run of its own when none is named: random, never another's. */
  char run_id[24];
  if (made.settings.mode == SM_MODE_PER_RUN && (made.run_id == NULL || *made.run_id == '\0')) {
    char hex[17];
    if ((rc = sm_random_hex(hex, 8, err)) != 0) return rc;
    snprintf(run_id, sizeof run_id, "sbx-%s", hex);
    made.run_id = run_id;
  }
  sandbox_box sb;
  memset(&sb, 0, sizeof sb);
  sb.mode = made.settings.mode;
  sm_sandbox_settings_hash(&made.settings, sb.hash);
  rc = sandbox_scope_key(&made, sb.mode, sb.scope_key, sizeof sb.scope_key, err);
  if (rc == 0)
    rc = sandbox_keyed_name(ctx->instance, sb.mode, sb.scope_key, sb.name, sizeof sb.name, err);
  if (rc) return rc;
  snprintf(sb.volume, sizeof sb.volume, "%s-ws", sb.name);
  rc = sandbox_make_keyed(ctx, e, &made, &sb, err);
  if (id_out) snprintf(id_out, SM_ENGINE_ID_MAX, "%s", sb.id);
  if (name_out) snprintf(name_out, SM_NAME_MAX, "%s", sb.name);
  return rc;
}
