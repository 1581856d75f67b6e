/* A call's hold on its sandbox on the docker backend (acquire.h).
 *
 * Keyed sandboxes (per_run, per_worker) have a name derived from their
 * scope key. Creation is serialised across processes by the key lock
 * "create-<name>": under it we look the name up, check its labels, replace
 * it if its configuration hash differs (waiting for calls in flight to
 * end), create it if missing, and take the busy lock before letting go of
 * the key lock, so no replacement can slip in between. A 409 on create
 * means another sandman (with another state directory) made it first: we
 * look it up again. Any failure while creating or starting removes the
 * container and its volume (lifecycle.c). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/log.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "common/thread.h"
#include "sandbox/acquire.h"
#include "sandbox/carry.h"
#include "sandbox/fork.h"
#include "sandbox/lifecycle.h"
#include "sandbox/lookup.h"
#include "sandbox/network.h"
#include "sandbox/pool.h"
#include "sandbox/rest.h"
#include "sandbox/rest_record.h"
#include "sandbox/spec.h"
#include "sandbox/agent.h"

#define REPLACE_POLL_MS 100

static int is_running(json_object *inspect) {
  json_object *st = NULL, *r = NULL;
  return json_object_object_get_ex(inspect, "State", &st) &&
         json_object_object_get_ex(st, "Running", &r) && json_object_get_boolean(r);
}

static int is_paused(json_object *inspect) {
  json_object *st = NULL, *p = NULL;
  return json_object_object_get_ex(inspect, "State", &st) &&
         json_object_object_get_ex(st, "Paused", &p) && json_object_get_boolean(p);
}

static void ids_from_user(const char *user, int *uid, int *gid) {
  *uid = *gid = 1000;
  if (user == NULL || !isdigit((unsigned char)user[0])) return;
  char *end = NULL;
  *uid = (int)strtol(user, &end, 10);
  *gid = (end && *end == ':') ? (int)strtol(end + 1, NULL, 10) : *uid;
}

static int64_t json_int(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x) || !json_object_object_get_ex(x, b, &y)) return 0;
  return json_object_get_int64(y);
}

/* Why a keyed sandbox found with another configuration hash is replaced,
 * in the words of the settings that differ (the call's result says it). */
static void replace_reason(json_object *insp, const sm_sandbox_settings *s, int stale, char *out,
                           size_t len) {
  if (!stale) {
    snprintf(out, len, "it was not running");
    return;
  }
  const char *image = sandbox_json_str(insp, "Config", "Image");
  if (image && strcmp(image, s->image) != 0) {
    snprintf(out, len, "image changed (%.100s -> %.100s)", image, s->image);
    return;
  }
  const char *net = sandbox_json_str(insp, "HostConfig", "NetworkMode");
  const char *rt = sandbox_json_str(insp, "HostConfig", "Runtime");
  const char *names[7];
  size_t n = 0;
  if (net && strcmp(net, s->network) != 0) names[n++] = "network";
  if (rt && strcmp(rt, s->runtime[0] ? s->runtime : "runc") != 0) names[n++] = "runtime";
  if (json_int(insp, "HostConfig", "Memory") != (s->memory > 0 ? s->memory : 0)) names[n++] = "memory";
  if (json_int(insp, "HostConfig", "NanoCpus") != (s->cpu > 0 ? (int64_t)(s->cpu * 1e9 + 0.5) : 0))
    names[n++] = "cpu";
  if (json_int(insp, "HostConfig", "PidsLimit") != (s->pids > 0 ? s->pids : 0)) names[n++] = "pids";
  const char *disk = sandbox_label_of(insp, "disk");
  if (disk && strtoll(disk, NULL, 10) != s->disk) names[n++] = "disk";
  if (n == 0) {
    snprintf(out, len, "its configuration changed");
    return;
  }
  size_t used = 0;
  for (size_t i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "", names[i]);
  if (used < len) snprintf(out + used, len - used, " changed");
}

/* Waits (up to the call's timeout) until no call is in flight in sandbox
 * name, then returns holding its exclusive lock. */
static int wait_exclusive(const char *state_dir, const char *name, double wait_s,
                          const char *why, sm_state_lock **out, sm_error *err) {
  double deadline = sm_monotonic_ms() + (wait_s > 1 ? wait_s : 1) * 1000.0;
  for (;;) {
    int rc = sm_state_exclusive_try(state_dir, name, out, err);
    if (rc != SM_EBUSY) return rc;
    if (sm_monotonic_ms() >= deadline)
      return sm_error_set(err, SM_EBUSY,
                          "sandbox %s %s, but a call is still running in it; retry when it has "
                          "finished",
                          name, why);
    common_sleep_ms(REPLACE_POLL_MS);
  }
}

/* The call's hold on its sandbox: shared with other calls, or (a leased
 * call) the sandbox to itself, waiting up to the call's timeout. */
static int take_busy(const char *state_dir, const sm_run_request *req, sandbox_box *sb,
                     sm_error *err) {
  if (req->n_secret_env == 0) return sm_state_busy_acquire(state_dir, sb->name, &sb->busy, err);
  return wait_exclusive(state_dir, sb->name,
                        req->settings.timeout_s > 0 ? req->settings.timeout_s : 3600,
                        "is needed alone by a call with leased credentials", &sb->busy, err);
}

static int is_keyed_label(const char *mode) {
  return mode && (strcmp(mode, "per_run") == 0 || strcmp(mode, "per_worker") == 0);
}

static const char *project_of(const sm_run_request *req) {
  return req->project && *req->project ? req->project : "default";
}

static const char *principal_of(const sm_run_request *req) {
  return req->principal ? req->principal : "";
}

/* What the audit row of a thaw names: the sandbox as the cache and the
 * call know it (sandbox_rest_thaw_known). */
static json_object *cached_view(const sm_run_request *req, const sandbox_box *sb,
                                const char *id, const char *project) {
  json_object *o = json_object_new_object(), *cfg = json_object_new_object(),
              *labels = json_object_new_object();
  if (o == NULL || cfg == NULL || labels == NULL) {
    json_object_put(o);
    json_object_put(cfg);
    json_object_put(labels);
    return NULL; /* the row names the sandbox alone */
  }
  const char *v[][2] = {{"mode", sm_mode_name(sb->mode)}, {"project", project},
                        {"run", req->run_id},            {"worker", req->worker_id},
                        {"agent", req->agent}};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    char key[64];
    snprintf(key, sizeof key, SM_LABEL_PREFIX "%s", v[i][0]);
    if (v[i][1] && *v[i][1]) json_object_object_add(labels, key, json_object_new_string(v[i][1]));
  }
  json_object_object_add(o, "Id", json_object_new_string(id));
  json_object_object_add(cfg, "Labels", labels);
  json_object_object_add(o, "Config", cfg);
  return o;
}

/* Whether a call into a frozen sandbox may leave its thaw to its exec
 * (thaw_later): nothing before the exec needs the sandbox running (no
 * workspace to copy in, no host-tool route or helper to set up, no egress
 * policy to apply, no terminal or leased container), and a session of
 * its agent is parked for the call's frame. */
static int thaw_may_wait(const sandbox_ctx *ctx, const sm_run_request *req, const char *id) {
  return !req->workspace && !req->host_route && !req->helper && !req->tty &&
         req->n_secret_env == 0 && !sandbox_allowlist(&req->settings) &&
         sandbox_agents_enabled(ctx->agents) && sandbox_agents_parked(ctx->agents, id);
}

int sandbox_acquire_thaw(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                         sandbox_box *sb, sm_error *err) {
  sb->thaw_later = 0;
  json_object *who = cached_view(req, sb, sb->id, project_of(req));
  int thawed = 0;
  int rc = sandbox_rest_thaw_finish(ctx, e, sb->name, sb->id, who, &thawed, err);
  json_object_put(who);
  if (rc == 0 && !thawed) sb->resumed[0] = '\0'; /* it ran already: nothing was resumed */
  return rc;
}

int sandbox_acquire_thaw_start(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                               const sandbox_box *sb, sandbox_thaw_job **out, sm_error *err) {
  json_object *who = cached_view(req, sb, sb->id, project_of(req));
  return sandbox_thaw_job_start(ctx, e, sb->name, sb->id, who, out, err);
}

/* Frozen by sandman since this runner cached it, nothing else changed:
 * thawed by its id under the key lock, with no look at it (its agent
 * sessions, parked, serve again), or left for the call's exec to thaw
 * (thaw_may_wait). 1 (taken, or *rc an error) or 0 (look the long way). */
static int keyed_thaw_cached(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                             sandbox_box *sb, const sandbox_lookup_entry *hit, int *rc,
                             sm_error *err) {
  char k[SM_NAME_MAX + 16];
  snprintf(k, sizeof k, "create-%s", sb->name);
  sm_state_lock *key = NULL;
  sm_error ignore = SM_ERROR_INIT;
  if (sm_state_key_lock(ctx->state_dir, k, &key, &ignore) != 0) return 0;
  json_object *who = cached_view(req, sb, hit->id, hit->project);
  int later = thaw_may_wait(ctx, req, hit->id);
  int thawed = sandbox_rest_thaw_known(ctx, e, sb->name, hit->id, hit->generation, who, later);
  json_object_put(who);
  if (thawed) *rc = take_busy(ctx->state_dir, req, sb, err);
  if (thawed && *rc == 0) {
    snprintf(sb->id, sizeof sb->id, "%s", hit->id);
    sb->uid = hit->uid;
    sb->gid = hit->gid;
    sb->reused = 1;
    sb->cached = 1;
    sb->thaw_later = later;
    snprintf(sb->resumed, sizeof sb->resumed, "frozen");
    sandbox_lookup_put(ctx->lookup, sb->name, hit);
  }
  sm_state_unlock(key);
  return thawed;
}

/* Found before by this runner with this configuration: no inspect. If it
 * has gone or stopped since, the exec fails and the call looks again.
 * 1 (taken, or *rc an error) or 0 (not in the cache). */
static int keyed_from_cache(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                            sandbox_box *sb, int thawing, int *rc, sm_error *err) {
  sandbox_lookup_entry hit;
  /* A call with from_snapshot looks: the sandbox found must be made from it. */
  if (req->from_snapshot) return 0;
  /* Only for the principal whose call found it: another's call looks at
   * the engine and its owner label (keyed_check_found). */
  if (!sandbox_lookup_get(ctx->lookup, sb->name, sb->hash, &hit) ||
      (sb->mode == SM_MODE_PER_WORKER && strcmp(hit.project, project_of(req)) != 0) ||
      strcmp(hit.principal, principal_of(req)) != 0)
    return 0;
  /* At rest, or started again since (rest.h): looked at under the key lock.
   * Not while a thaw of ours is in flight whose call had its answer: the
   * sandbox runs, its record says so once the engine has answered, and no
   * pause can come before (the thaw holds the busy lock). */
  if (!thawing && sandbox_rest_unsettled(ctx->state_dir, sb->name, hit.generation)) {
    sandbox_lookup_invalidate(ctx->lookup, sb->name);
    /* A freeze ends no process: the agent sessions serve again once thawed. */
    if (sandbox_rest_only_frozen(ctx->state_dir, sb->name, hit.generation))
      return keyed_thaw_cached(ctx, e, req, sb, &hit, rc, err);
    sandbox_agents_forget(ctx->agents, hit.id);
    return 0;
  }
  *rc = take_busy(ctx->state_dir, req, sb, err);
  if (*rc) return 1;
  /* A pause holds the busy lock alone: one that ended while this call
   * waited for it left its record. */
  if (!thawing && sandbox_rest_unsettled(ctx->state_dir, sb->name, hit.generation)) {
    sm_state_unlock(sb->busy);
    sb->busy = NULL;
    sandbox_lookup_drop(ctx->lookup, sb->name);
    return 0;
  }
  snprintf(sb->id, sizeof sb->id, "%s", hit.id);
  if (hit.volume[0]) snprintf(sb->volume, sizeof sb->volume, "%s", hit.volume);
  sb->uid = hit.uid;
  sb->gid = hit.gid;
  sb->reused = 1;
  sb->cached = 1;
  return 1;
}

/* May this call use the container found under the sandbox's name? */
static int keyed_check_found(const sandbox_ctx *ctx, const sm_run_request *req,
                             const sandbox_box *sb, json_object *insp, sm_error *err) {
  const char *managed = sandbox_label_of(insp, "managed");
  const char *inst = sandbox_label_of(insp, "instance");
  const char *proj = sandbox_label_of(insp, "project");
  if (!managed || strcmp(managed, "true") != 0 || !inst || strcmp(inst, ctx->instance) != 0)
    return sm_error_set(err, SM_ESANDBOX,
                        "a container named %s exists that this sandman instance did not make; "
                        "remove or rename it",
                        sb->name);
  if (req->sandbox && !is_keyed_label(sandbox_label_of(insp, "mode")))
    return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s", sb->name);
  if (!sm_principal_may_use(req->principal, sandbox_label_of(insp, "principal")))
    /* Only a key collision or a hand-made container gets here: a
     * worker's keys carry its principal. */
    return sm_error_set(err, SM_EPOLICY,
                        "sandbox %s belongs to another worker; this call may not use it",
                        sb->name);
  if (!req->sandbox && sb->mode == SM_MODE_PER_WORKER && proj && strcmp(proj, project_of(req)) != 0)
    return sm_error_set(err, SM_EPOLICY,
                        "worker '%s' is pinned to project '%s'; a call for project '%s' is "
                        "refused",
                        req->worker_id ? req->worker_id : sb->scope_key, proj, project_of(req));
  return 0;
}

/* The sandbox found is used as it is. */
static void keyed_use(sandbox_box *sb, json_object *insp) {
  const char *id = sandbox_json_str(insp, "Id", NULL);
  snprintf(sb->id, sizeof sb->id, "%s", id ? id : sb->name);
  /* Its calls' user: the label (the container itself runs as root);
   * Config.User for a sandbox made before the label existed. */
  const char *u = sandbox_label_of(insp, "user");
  ids_from_user(u && *u ? u : sandbox_json_str(insp, "Config", "User"), &sb->uid, &sb->gid);
  /* Its /workspace volume: "<name>-ws", or another after a rollback. */
  const char *v = sandbox_label_of(insp, "volume");
  if (v && *v) snprintf(sb->volume, sizeof sb->volume, "%s", v);
  sb->reused = 1;
}

/* The container found under the sandbox's name: used when it runs with
 * the call's configuration (or is pinned: named by its id, or made as a
 * resource), else replaced with its /workspace carried over, holding its
 * exclusive lock (*excl) so that no call is in flight in it. */
static int keyed_found(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       sandbox_box *sb, json_object *insp, sm_state_lock **excl, sm_error *err) {
  int rc = keyed_check_found(ctx, req, sb, insp, err);
  if (rc) return rc;
  const char *hash = sandbox_label_of(insp, "config-hash");
  const char *resource = sandbox_label_of(insp, "resource");
  int stale = !hash || strcmp(hash, sb->hash) != 0;
  int running = is_running(insp);
  if (running && is_paused(insp)) {
    /* Paused outside sandman (docker pause): a call resumes it too. */
    rc = sm_engine_container_unpause(e, sb->name, err);
    if (rc && rc != SM_ECONFLICT) return sm_error_wrap(err, "unfreezing sandbox %s", sb->name);
    sm_error_clear(err);
    snprintf(sb->resumed, sizeof sb->resumed, "frozen");
  }
  /* Named by its id, asked to exist (`sandman exec`), or made as a
   * resource: the sandbox as it is, never replaced. */
  if (req->sandbox || req->existing || (resource && strcmp(resource, "true") == 0)) {
    if (!running)
      return sm_error_set(err, SM_ESANDBOX,
                          "sandbox %s is not running (%s): it keeps the settings it was made "
                          "with and is never replaced by a call; remove it and make another",
                          sb->name, sandbox_json_str(insp, "State", "Status") ? sandbox_json_str(insp, "State", "Status") : "stopped");
    /* A leased call runs in a container of its own made with the call's
     * settings beside the sandbox: never with others than the sandbox's. */
    if (stale && req->n_secret_env > 0 && !req->sandbox)
      return sm_error_set(err, SM_EPOLICY,
                          "sandbox %s was made with other settings than this call's: a call with "
                          "leased credentials runs in a container of the call's settings beside it, "
                          "so it is refused here; name the sandbox by its id (\"sandbox_id\"), "
                          "whose calls take its own settings",
                          sb->name);
    keyed_use(sb, insp);
    sb->uncached = stale; /* each call looks again: a leased one is refused above */
    return 0;
  }
  if (!stale && running) {
    keyed_use(sb, insp);
    return 0;
  }
  const char *old = sandbox_json_str(insp, "Id", NULL);
  snprintf(sb->replaced, sizeof sb->replaced, "%s", old ? old : sb->name);
  replace_reason(insp, &req->settings, stale, sb->because, sizeof sb->because);
  /* Replaced (new configuration) or broken (not running): never while
   * a call is in flight in it. */
  rc = wait_exclusive(ctx->state_dir, sb->name,
                      req->settings.timeout_s > 0 ? req->settings.timeout_s : 3600,
                      "must be replaced (its configuration changed)", excl, err);
  if (rc) return rc;
  rc = sandbox_replace(ctx, e, req, sb, running, err);
  if (rc == 0) {
    sm_log(SM_LOG_DEBUG, "replaced sandbox %s: %s; its /workspace: %s", sb->name, sb->because,
           sb->carried);
    sandbox_audit(ctx, "sandbox.replaced", req, sb, sb->because);
    sb->made = 1;
  }
  sm_state_unlock(*excl);
  *excl = NULL;
  return rc;
}

/* The next call of this runner in the sandbox skips the inspect. */
static void keyed_remember(const sandbox_ctx *ctx, const sm_run_request *req,
                           const sandbox_box *sb) {
  sandbox_lookup_entry c;
  memset(&c, 0, sizeof c);
  snprintf(c.id, sizeof c.id, "%s", sb->id);
  snprintf(c.hash, sizeof c.hash, "%s", sb->hash);
  snprintf(c.volume, sizeof c.volume, "%s", sb->volume);
  snprintf(c.project, sizeof c.project, "%s", project_of(req));
  snprintf(c.principal, sizeof c.principal, "%s", principal_of(req));
  c.uid = sb->uid;
  c.gid = sb->gid;
  c.generation = sandbox_rest_generation(ctx->state_dir, sb->name);
  sandbox_lookup_put(ctx->lookup, sb->name, &c);
}

/* A call's sandbox made from a snapshot: it takes the snapshot's settings
 * and user. */
static int keyed_fork(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                      sandbox_box *sb, sm_error *err) {
  int rc = sandbox_fork_for_call(ctx, e, req, sb->name, sb->volume, sb->scope_key, sb->id, err);
  json_object *insp = NULL;
  if (rc == 0) rc = sm_engine_container_inspect(e, sb->id, &insp, err);
  if (rc == 0) {
    keyed_use(sb, insp);
    sb->reused = 0;
    sb->uncached = 1; /* its hash is the source's: each call looks */
  }
  json_object_put(insp);
  return rc;
}

/* A new keyed sandbox under its name (nothing found there). */
static int keyed_make(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                      sandbox_box *sb, sm_error *err) {
  if (req->from_snapshot) {
    int rc = keyed_fork(ctx, e, req, sb, err);
    if (rc == 0) sb->made = 1;
    return rc;
  }
  /* A volume left by a crash would carry old files and old options. */
  sm_error ignore = SM_ERROR_INIT;
  sm_engine_volume_remove(e, sb->volume, 1, &ignore);
  sm_state_forget(ctx->state_dir, sb->name);
  int rc = sandbox_create(ctx, e, req, sb, err);
  if (rc == 0) sb->made = 1;
  return rc;
}

/* A sandbox found under the name of a call with from_snapshot must be one
 * made from that snapshot. */
static int check_from_snapshot(const sandbox_ctx *ctx, const sm_run_request *req,
                               const sandbox_box *sb, json_object *insp, sm_error *err) {
  if (!req->from_snapshot) return 0;
  char key[17];
  int rc = sandbox_fork_snapshot_key(ctx, req, key, err);
  if (rc) return rc;
  const char *made_from = sandbox_label_of(insp, "snapshot");
  if (made_from && strcmp(made_from, key) == 0) return 0;
  return sm_error_set(err, SM_ECONFLICT,
                      "%s has a sandbox already (%s), not made from snapshot %s: --from-snapshot "
                      "makes a new one; name another run, or remove it first",
                      req->run_id ? "this run" : "this worker", sb->name, req->from_snapshot);
}

/* A sandbox at rest is brought back only for a call that may use it: its
 * owner label is looked at first (another's call leaves it at rest). */
static int keyed_may_wake(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          const sandbox_box *sb, sm_error *err) {
  sandbox_rest_record rec;
  sm_error ignore = SM_ERROR_INIT;
  if (sandbox_rest_read(ctx->state_dir, sb->name, &rec, &ignore) != 0 ||
      (strcmp(rec.state, "running") == 0 && !rec.pending[0]))
    return 0;
  json_object *insp = NULL;
  int rc = sm_engine_container_inspect(e, sb->name, &insp, err);
  if (rc == SM_ENOTFOUND) {
    sm_error_clear(err);
    return 0; /* gone: the look that follows says so */
  }
  if (rc) return sm_error_wrap(err, "looking up sandbox %s", sb->name);
  rc = keyed_check_found(ctx, req, sb, insp, err);
  json_object_put(insp);
  return rc;
}

/* One look under the key lock: found, replaced or created. *again when
 * another sandman created it meanwhile (look again). */
static int keyed_attempt(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                         sandbox_box *sb, int *again, sm_error *err) {
  json_object *insp = NULL;
  sm_state_lock *excl = NULL;
  /* A sandbox at rest runs again first (a call resumes it by itself). */
  int rc = keyed_may_wake(ctx, e, req, sb, err);
  if (rc == 0) rc = sandbox_rest_wake(ctx, e, sb->name, sb->resumed, &insp, err);
  if (rc) return rc;
  if (insp == NULL) rc = sm_engine_container_inspect(e, sb->name, &insp, err);
  if (rc == SM_ENOTFOUND && req->sandbox)
    return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s (removed since?)", sb->name);
  if (rc == SM_ENOTFOUND && req->existing)
    return sm_error_set(err, SM_ENOTFOUND,
                        "no sandbox %s: it is made by a call (sandman run) first", sb->name);
  if (rc == SM_ENOTFOUND) rc = 0;
  else if (rc) return sm_error_wrap(err, "looking up sandbox %s", sb->name);
  else if ((rc = check_from_snapshot(ctx, req, sb, insp, err)) == 0)
    rc = keyed_found(ctx, e, req, sb, insp, &excl, err);
  json_object_put(insp);
  if (rc) return rc;
  if (!sb->reused && !sb->made) {
    rc = keyed_make(ctx, e, req, sb, err);
    *again = rc == SM_ECONFLICT;
    if (rc) return rc;
  }
  rc = take_busy(ctx->state_dir, req, sb, err);
  if (rc == 0 && !sb->uncached) keyed_remember(ctx, req, sb);
  return rc;
}

int sandbox_acquire_keyed(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          sandbox_box *sb, sm_error *err) {
  int rc = 0;
  /* A thaw of ours still in flight (exec_thaw.c): when its call had its
   * answer, the sandbox runs and this call goes in; else the thaw ends
   * first. */
  int thawing = sandbox_thaws_answered(ctx->thaws, sb->name);
  if (!thawing) sandbox_thaws_wait(ctx->thaws, sb->name);
  if (keyed_from_cache(ctx, e, req, sb, thawing, &rc, err)) return rc;
  char key[SM_NAME_MAX + 16];
  snprintf(key, sizeof key, "create-%s", sb->name);
  sm_state_lock *key_lock = NULL;
  rc = sm_state_key_lock(ctx->state_dir, key, &key_lock, err);
  if (rc) return sm_error_wrap(err, "locking sandbox key %s", sb->name);
  for (int attempt = 0; attempt < 5; attempt++) {
    int again = 0;
    rc = keyed_attempt(ctx, e, req, sb, &again, err);
    if (!again) break;
    sm_log(SM_LOG_DEBUG, "sandbox %s was created elsewhere meanwhile: looking again", sb->name);
    common_sleep_ms(50);
  }
  sm_state_unlock(key_lock);
  return rc;
}

int sandbox_make_keyed(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                       sandbox_box *sb, sm_error *err) {
  char key[SM_NAME_MAX + 16];
  snprintf(key, sizeof key, "create-%s", sb->name);
  sm_state_lock *key_lock = NULL;
  int rc = sm_state_key_lock(ctx->state_dir, key, &key_lock, err);
  if (rc) return sm_error_wrap(err, "locking sandbox key %s", sb->name);
  json_object *insp = NULL;
  rc = sm_engine_container_inspect(e, sb->name, &insp, err);
  if (rc == 0) {
    const char *id = sandbox_json_str(insp, "Id", NULL);
    snprintf(sb->id, sizeof sb->id, "%s", id ? id : "");
    rc = sm_error_set(err, SM_ECONFLICT, "sandbox %s exists already (id %.12s)", sb->name, sb->id);
  } else if (rc == SM_ENOTFOUND) {
    sm_error_clear(err);
    rc = keyed_make(ctx, e, req, sb, err);
  }
  json_object_put(insp);
  sm_state_unlock(key_lock);
  return rc;
}

/* The call's sandbox is the warm pool's item. */
void sandbox_from_pool(sandbox_box *sb, const sandbox_pool_item *item) {
  snprintf(sb->name, sizeof sb->name, "%s", item->name);
  snprintf(sb->volume, sizeof sb->volume, "%s", item->volume);
  snprintf(sb->scope_key, sizeof sb->scope_key, "%s", item->scope_key);
  snprintf(sb->id, sizeof sb->id, "%s", item->id);
  snprintf(sb->pool_key, sizeof sb->pool_key, "%s", item->pool_key);
  sb->uid = item->uid;
  sb->gid = item->gid;
  sb->pooled = 1;
}

int sandbox_acquire_per_tool(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                            sandbox_box *sb, sm_error *err) {
  sandbox_pool_item item;
  if (sandbox_pool_take(ctx->pool, req, sb->hash, &item)) {
    sandbox_from_pool(sb, &item);
    int rc = sm_state_busy_acquire(ctx->state_dir, sb->name, &sb->busy, err);
    if (rc == 0) return 0;
    sandbox_pool_call_done(ctx->pool, sb->pool_key);
    sb->pool_key[0] = '\0';
    sm_error ignore = SM_ERROR_INIT;
    int relay = sandbox_allowlist(&req->settings);
    if (sandbox_pool_remove_later(ctx->pool, sb->name, sb->volume, NULL, relay) != 0)
      sandbox_remove(e, ctx->state_dir, sb->name, sb->volume, relay, &ignore);
    sb->id[0] = '\0';
    return rc;
  }
  int rc = sandbox_fresh_names(ctx, "tool", sb, err);
  if (rc) return rc;
  /* Busy from the start, so a reap never takes it while it is being set up. */
  rc = sm_state_busy_acquire(ctx->state_dir, sb->name, &sb->busy, err);
  if (rc) return rc;
  rc = sandbox_create(ctx, e, req, sb, err);
  if (rc == SM_ECONFLICT)
    rc = sm_error_set(err, SM_ESANDBOX, "sandbox name %s is taken", sb->name);
  if (rc) {
    sm_state_unlock(sb->busy);
    sb->busy = NULL;
    sm_state_forget(ctx->state_dir, sb->name);
  }
  return rc;
}

/* A sandbox found through the cache or the pool that has gone (or stopped)
 * since: the call looks once more. */
int sandbox_retry_gone(const sandbox_box *sb, int rc) {
  if (rc == SM_ENOTFOUND) return sb->mode != SM_MODE_PER_TOOL || sb->pooled;
  if (rc == SM_ECONFLICT) return sb->cached || sb->pooled;
  return 0;
}

void sandbox_release(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req, sandbox_box *sb) {
  const char *state_dir = ctx->state_dir;
  if (sb->pool_key[0]) {
    sandbox_pool_call_done(ctx->pool, sb->pool_key);
    sb->pool_key[0] = '\0';
  }
  if (sb->mode == SM_MODE_PER_TOOL && sb->id[0])
    sandbox_audit(ctx, "sandbox.removed", req, sb, "a per_tool sandbox goes after its call");
  if (sb->mode == SM_MODE_PER_TOOL) {
    /* Its settings (the pool's too: a pool is per settings) say whether it
     * has an egress relay to remove with it. */
    int relay = sandbox_allowlist(&req->settings);
    /* Off the caller's time; the queue now holds the busy lock. */
    if (sb->id[0] &&
        sandbox_pool_remove_later(ctx->pool, sb->name, sb->volume, sb->busy, relay) == 0) {
      sb->busy = NULL;
      return;
    }
    if (sb->id[0]) {
      sm_error err = SM_ERROR_INIT;
      if (sandbox_remove(e, state_dir, sb->name, sb->volume, relay, &err) != 0) {
        sm_log(SM_LOG_WARN, "%s (a reap will remove it)", err.message);
      } else {
        /* Gone: its busy lock file goes with it. */
        sm_state_unlock_remove(sb->busy);
        sb->busy = NULL;
      }
    }
  } else if (sb->id[0] && sandbox_lookup_touch_due(ctx->lookup, sb->name, sm_now())) {
    sm_error err = SM_ERROR_INIT;
    if (sm_state_touch(state_dir, sb->name, sm_now(), &err) != 0)
      sm_log(SM_LOG_WARN, "recording last use of %s: %s", sb->name, err.message);
  }
  sm_state_unlock(sb->busy);
  sb->busy = NULL;
}

void sandbox_release_gone(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          sandbox_box *sb) {
  if (sb->cached) sandbox_lookup_drop(ctx->lookup, sb->name);
  if (sb->pooled) sandbox_pool_forget(ctx->pool, req, sb->hash);
  sandbox_release(ctx, e, req, sb);
}
