/* Where a call with leased credentials runs: its lease container, or its
 * per_tool sandbox, bound to this process by a watcher (lease_box.h). */
#include <stdio.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/state.h>

#include "sandbox/helper.h"
#include "sandbox/lease_box.h"
#include "sandbox/lifecycle.h"
#include "sandbox/spec.h"

/* How long the end of a lease container the engine is removing already
 * is waited for. */
#define LEASE_GONE_WAIT_MS 30000

/* The watcher: a root exec in container cid reading its stdin, which is
 * the stream this process keeps (see sm_exec_watch_script). */
static int watch_open(sm_engine *e, const char *cid, sm_exec_stream **out, sm_error *err) {
  const char *argv[] = {"/bin/sh", "-c", sm_exec_watch_script, "sandman-watch"};
  json_object *cfg = sandbox_exec_config(argv, 4, "0:0", 1);
  if (cfg == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  char id[SM_ENGINE_ID_MAX];
  int rc = sm_engine_exec_create(e, cid, cfg, id, err);
  json_object_put(cfg);
  if (rc == 0) rc = sm_engine_exec_open(e, id, NULL, NULL, out, err);
  if (rc) return sm_error_wrap(err, "binding the leased call's container to this process");
  return 0;
}

/* The keyed sandbox must be there and running: its volume is what the
 * lease container mounts, and a volume gone with its sandbox (a forced
 * reap) would be made again empty by the mount. */
static int keyed_running(sm_engine *e, const sandbox_box *sb, sm_error *err) {
  json_object *insp = NULL, *st = NULL, *run = NULL;
  int rc = sm_engine_container_inspect(e, sb->id, &insp, err);
  if (rc) return rc == SM_ENOTFOUND ? sm_error_set(err, rc, "the sandbox %s is gone", sb->name) : rc;
  int running = json_object_object_get_ex(insp, "State", &st) &&
                json_object_object_get_ex(st, "Running", &run) && json_object_get_boolean(run);
  json_object_put(insp);
  if (!running) return sm_error_set(err, SM_ECONFLICT, "the sandbox %s is not running", sb->name);
  return 0;
}

/* The lease container of keyed sandbox sb: sb's settings, a name of its
 * own, sb's volume. */
static int lease_create(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                        const sandbox_box *sb, sandbox_lease *l, sm_error *err) {
  sandbox_box lb;
  memset(&lb, 0, sizeof lb);
  lb.mode = sb->mode;
  snprintf(lb.hash, sizeof lb.hash, "%s", sb->hash);
  int rc = sandbox_fresh_names(ctx, "lease", &lb, err);
  if (rc) return rc;
  snprintf(lb.volume, sizeof lb.volume, "%s", sb->volume);
  snprintf(lb.scope_key, sizeof lb.scope_key, "%s", sb->scope_key);
  snprintf(lb.lease_of, sizeof lb.lease_of, "%s", sb->name);
  double t = req->settings.timeout_s > 0 ? req->settings.timeout_s : SANDBOX_LEASE_NO_TIMEOUT_S;
  lb.lease_deadline_s = t + SANDBOX_LEASE_MARGIN_S;
  snprintf(l->name, sizeof l->name, "%s", lb.name);
  /* Busy from the start: a reap spares it while the call runs. */
  rc = sm_state_busy_acquire(ctx->state_dir, lb.name, &l->busy, err);
  if (rc == 0) rc = sandbox_create(ctx, e, req, &lb, err);
  if (rc == SM_ECONFLICT) rc = sm_error_set(err, SM_ESANDBOX, "sandbox name %s is taken", lb.name);
  if (rc) return sm_error_wrap(err, "making the leased call's own container");
  snprintf(l->id, sizeof l->id, "%s", lb.id);
  l->mode = lb.mode;
  return 0;
}

int sandbox_lease_open(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       const sandbox_box *sb, sandbox_lease *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  int rc = 0;
  if (sb->mode != SM_MODE_PER_TOOL) {
    rc = keyed_running(e, sb, err);
    if (rc == 0) rc = lease_create(ctx, e, req, sb, out, err);
  }
  if (rc == 0) rc = watch_open(e, out->id[0] ? out->id : sb->id, &out->watch, err);
  if (rc) sandbox_lease_close(ctx, e, req, out);
  return rc;
}

void sandbox_lease_close(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                         sandbox_lease *l) {
  if (l->id[0]) {
    /* Now, not when the keeper gets round to it: nothing the leased call
     * left may run on beside the sandbox's next call. 409: the engine is
     * removing it already (it stopped: AutoRemove), wait for the end. */
    sm_error err = SM_ERROR_INIT;
    int rc = sm_engine_container_remove(e, l->id, 1, 0, &err);
    if (rc == SM_ECONFLICT) {
      sm_error_clear(&err);
      rc = sm_engine_container_wait(e, l->id, "removed", LEASE_GONE_WAIT_MS, NULL, &err);
    }
    if (rc && rc != SM_ENOTFOUND)
      sm_log(SM_LOG_WARN, "removing the leased call's container %s: %s (it ends by itself when "
             "its watcher sees the call end)", l->name, err.message);
    sandbox_box lb;
    memset(&lb, 0, sizeof lb);
    lb.mode = l->mode;
    snprintf(lb.name, sizeof lb.name, "%s", l->name);
    sandbox_audit(ctx, "sandbox.removed", req, &lb, "a leased call's own container goes after its call");
    l->id[0] = '\0';
  }
  if (l->watch) {
    sm_exec_stream_shutdown(l->watch);
    sm_exec_stream_close(l->watch);
    l->watch = NULL;
  }
  if (l->busy) {
    sm_state_unlock(l->busy);
    l->busy = NULL;
  }
  if (l->name[0]) {
    sm_state_forget(ctx->state_dir, l->name);
    l->name[0] = '\0';
  }
}
