/* Sandboxes made from a snapshot (docs/state.md): forks (new keyed
 * sandboxes, `sandbox fork`, `run --from-snapshot`), a rollback (a
 * sandbox returned to a snapshot in place) and the difference between a
 * sandbox's /workspace and a snapshot.
 *
 * A fork is a new sandbox in every way that matters for trust: a new
 * container (the snapshot's image: the source's writable layer) with a
 * new id, a new /workspace volume filled from the snapshot's tar, its own
 * name and keys, so its own agent sessions, host-tool route and egress
 * relay, all made on its first call as for any sandbox. Nothing else of
 * the source goes with it: no processes, no leases (they belong to calls),
 * no handles, approvals or tokens (they belong to the runner and its
 * callers). It carries the source's config-hash, so calls with the
 * source's settings use it as it is. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/egress.h>
#include <sandman/log.h>
#include <sandman/state.h>
#include <sandman/util.h>
#include <sandman/name.h>

#include "common/cleanup.h"
#include "sandbox/agent.h"
#include "sandbox/fork.h"
#include "sandbox/lifecycle.h"
#include "sandbox/rest.h"
#include "sandbox/snap_manifest.h"
#include "sandbox/snap_memory.h"
#include "sandbox/snap_store.h"
#include "sandbox/spec.h"
#include "sandbox/ws_fill.h"
#include "sandbox/ws_save.h"

static void set_label(json_object *labels, const char *key, const char *value) {
  char full[128];
  snprintf(full, sizeof full, SM_LABEL_PREFIX "%s", key);
  if (value && *value) json_object_object_add(labels, full, json_object_new_string(value));
  else json_object_object_del(labels, full);
}

/* The identity labels of the new container (and of its volume). */
static void identity_labels(json_object *labels, const fork_target *t, const sm_snapshot *s,
                            int volume) {
  char created[40];
  sm_format_time(sm_now(), created, sizeof created);
  set_label(labels, "mode", t->mode);
  set_label(labels, "project", t->project);
  set_label(labels, "run", t->run_id);
  set_label(labels, "worker", t->worker_id);
  set_label(labels, "scope-key", t->scope_key);
  set_label(labels, "principal", strcmp(t->principal, SM_PRINCIPAL_CONTROL) ? t->principal : NULL);
  set_label(labels, "created", created);
  set_label(labels, "origin", NULL);
  set_label(labels, "snapshot", s->key);
  set_label(labels, "forked-from", s->source);
  set_label(labels, "resource", t->resource ? "true" : NULL);
  if (!volume) {
    set_label(labels, "volume", t->volume);
    set_label(labels, "image", s->image);
  }
}

/* The snapshot's source config as the new sandbox's: the snapshot's image,
 * the new identity, the new volume. */
static json_object *fork_config(json_object *source, const fork_target *t, const sm_snapshot *s) {
  json_object *cfg = NULL, *hc = NULL, *c = NULL, *h = NULL, *labels = NULL, *mounts = NULL;
  if (!json_object_object_get_ex(source, "Config", &cfg) ||
      !json_object_object_get_ex(source, "HostConfig", &hc) ||
      json_object_deep_copy(cfg, &c, NULL) != 0)
    return NULL;
  if (json_object_deep_copy(hc, &h, NULL) != 0) {
    json_object_put(c);
    return NULL;
  }
  json_object_object_add(c, "Image", json_object_new_string(s->image_id));
  if (!json_object_object_get_ex(c, "Labels", &labels) || !json_object_is_type(labels, json_type_object)) {
    labels = json_object_new_object();
    json_object_object_add(c, "Labels", labels);
  }
  identity_labels(labels, t, s, 0);
  /* Who makes it: a fork cut short (its maker killed) still has its
   * "-forking-" name, and reap removes it once this process is gone. */
  char maker[SM_NAME_MAX];
  sm_sandbox_owner_label(maker, sizeof maker);
  set_label(labels, "making", maker);
  /* Nothing of the source's but its /workspace mount (made anew below)
   * and, where the source has one, an anonymous volume for /.sandman (the
   * engine makes the fork its own, empty: spec.c): no bind, no other
   * container's volumes or links. */
  json_object_object_del(h, "Binds");
  json_object_object_del(h, "VolumesFrom");
  json_object_object_del(h, "Links");
  json_object *kept = json_object_new_array();
  if (json_object_object_get_ex(h, "Mounts", &mounts) && json_object_is_type(mounts, json_type_array))
    for (size_t i = 0; i < json_object_array_length(mounts); i++) {
      json_object *m = json_object_array_get_idx(mounts, i), *vo = NULL, *vl = NULL;
      const char *target = sandbox_json_str(m, "Target", NULL);
      const char *type = sandbox_json_str(m, "Type", NULL), *src = sandbox_json_str(m, "Source", NULL);
      if (target && strcmp(target, "/.sandman") == 0 && (src == NULL || *src == '\0') && type &&
          strcmp(type, "volume") == 0) {
        json_object_array_add(kept, json_object_get(m));
        continue;
      }
      if (target == NULL || strcmp(target, "/workspace") != 0) continue;
      json_object_array_add(kept, json_object_get(m));
      json_object_object_add(m, "Source", json_object_new_string(t->volume));
      if (json_object_object_get_ex(m, "VolumeOptions", &vo) &&
          json_object_object_get_ex(vo, "Labels", &vl) && json_object_is_type(vl, json_type_object))
        identity_labels(vl, t, s, 1);
    }
  json_object_object_add(h, "Mounts", kept);
  json_object_object_add(c, "HostConfig", h);
  return c;
}

static int snapshot_files(const sandbox_ctx *ctx, const sm_snapshot *s, char *tar, size_t len,
                          json_object **source, sm_error *err) {
  char dir[PATH_MAX], inst[80];
  sm_snapshot again;
  int rc = sandbox_snap_dir(ctx->state_dir, s->key, dir, sizeof dir, err);
  if (rc == 0) rc = sandbox_snap_meta_read(dir, inst, sizeof inst, &again, source, err);
  if (rc == 0 && *source == NULL) rc = sm_error_set(err, SM_EPROTOCOL, "snapshot %s keeps no config", s->name);
  if (rc == 0 && snprintf(tar, len, "%s/workspace.tar", dir) >= (int)len)
    rc = sm_error_set(err, SM_EINVAL, "path too long");
  return rc;
}

static int fork_from_memory(const sandbox_ctx *ctx, sm_engine *e, const sm_snapshot *s,
                            const char *id, const char *making, sm_error *err) {
  char dir[PATH_MAX];
  int rc = sandbox_snap_dir(ctx->state_dir, s->key, dir, sizeof dir, err);
  return rc ? rc : sandbox_snap_memory_restore(ctx, e, id, making, dir, err);
}

/* A sandbox being made from a snapshot, step by step (fork_build_*):
 * created under a name of its own, started, its /tmp and /workspace set,
 * and only then given the sandbox's name (or, for a rollback, swapped in
 * for the old one). Each step's time goes to the debug log. */
typedef struct fork_build {
  const sandbox_ctx *ctx;
  sm_engine *e;
  const sm_snapshot *s;
  const fork_target *t;
  char tar[PATH_MAX];
  char making[SM_NAME_MAX + 24];
  char id[SM_ENGINE_ID_MAX];
  double ms_create, ms_start, ms_fill;
  const char *fill_how; /* "agent" or "engine" (ws_fill.h) */
} fork_build;

/* Removes what a build made (its container and volume). */
static void fork_build_discard(fork_build *b) {
  sm_error ignore = SM_ERROR_INIT;
  if (b->id[0]) sandbox_remove_keep_state(b->e, b->id, b->t->volume, 0, &ignore);
  else sm_engine_volume_remove(b->e, b->t->volume, 1, &ignore);
  b->id[0] = '\0';
}

/* The user of its calls (the container itself runs as root). */
static const char *fork_user(json_object *config) {
  json_object *labels = NULL, *v = NULL;
  if (json_object_object_get_ex(config, "Labels", &labels) &&
      json_object_object_get_ex(labels, SM_LABEL_PREFIX "user", &v))
    return json_object_get_string(v);
  return NULL;
}

/* Makes and starts the container under b->making with its /workspace
 * filled from the snapshot's tar. On failure nothing of it is left. */
static int fork_build_run(fork_build *b, sm_error *err) {
  cleanup_json json_object *source = NULL;
  int rc = snapshot_files(b->ctx, b->s, b->tar, sizeof b->tar, &source, err);
  if (rc) return rc;
  cleanup_json json_object *config = fork_config(source, b->t, b->s);
  if (config == NULL) return sm_error_set(err, SM_EPROTOCOL, "snapshot %s: its config cannot be read", b->s->name);
  /* A volume left under the new name by a crash would carry old files. */
  sm_error ignore = SM_ERROR_INIT;
  sm_engine_volume_remove(b->e, b->t->volume, 1, &ignore);
  char hex[9];
  rc = sm_random_hex(hex, 4, err);
  if (rc) return rc;
  snprintf(b->making, sizeof b->making, "%s-forking-%s", b->t->name, hex);
  b->id[0] = '\0';
  double t0 = sm_monotonic_ms();
  rc = sm_engine_container_create(b->e, b->making, config, b->id, NULL, err);
  double t1 = sm_monotonic_ms();
  /* A memory snapshot's fork comes back from its checkpoint (snap_memory.h),
   * its /workspace with it. */
  int memory = rc == 0 && b->s->memory;
  if (memory) rc = fork_from_memory(b->ctx, b->e, b->s, b->id, b->making, err);
  if (rc == 0 && !memory) rc = sm_engine_container_start(b->e, b->id, err);
  double t2 = sm_monotonic_ms();
  if (rc == 0 && !memory) rc = sandbox_fix_tmp(b->e, b->id, b->t->name, b->s->image_id, err);
  if (rc == 0 && !memory)
    /* No session: forks run on worker threads of their own, and a fork's
     * first call may be far off (sandbox_ws_fill's engine exec instead). */
    rc = sandbox_ws_fill(b->ctx->agents, 0, b->e, b->id, fork_user(config), b->tar, &b->fill_how,
                         err);
  b->ms_create = t1 - t0;
  b->ms_start = t2 - t1;
  b->ms_fill = sm_monotonic_ms() - t2;
  if (rc) fork_build_discard(b);
  return rc;
}

static void fork_build_log(const fork_build *b, double ms_name) {
  sm_log_event(SM_LOG_DEBUG, "sandbox.fork.steps",
               SM_LOG_FIELDS(SM_LOG_STR("name", b->t->name), SM_LOG_STR("snapshot", b->s->name),
                             SM_LOG_NUM("create_ms", b->ms_create), SM_LOG_NUM("start_ms", b->ms_start),
                             SM_LOG_NUM("fill_ms", b->ms_fill), SM_LOG_NUM("name_ms", ms_name),
                             SM_LOG_STR("fill", b->fill_how ? b->fill_how : "")),
               "sandbox %s from snapshot %s: create %.0f ms, start %.0f ms, /tmp and /workspace "
               "%.0f ms (%s), named %.0f ms",
               b->t->name, b->s->name, b->ms_create, b->ms_start, b->ms_fill,
               b->fill_how ? b->fill_how : "memory", ms_name);
}

/* The engine's failure to make it is the sandbox's (exit code of a call). */
static int fork_failed(const fork_build *b, int rc, sm_error *err) {
  sm_error_wrap(err, "making sandbox %s from snapshot %s", b->t->name, b->s->name);
  return rc == SM_EENGINE ? (err->code = SM_ESANDBOX) : rc;
}

int sandbox_fork_make(const sandbox_ctx *ctx, sm_engine *e, const sm_snapshot *s,
                      const fork_target *t, char *id_out, sm_error *err) {
  fork_build b = {.ctx = ctx, .e = e, .s = s, .t = t};
  id_out[0] = '\0';
  int rc = fork_build_run(&b, err);
  if (rc) return fork_failed(&b, rc, err);
  /* The sandbox's name last: a fork cut short (a SIGKILL) is never found
   * by a call under it with half its /workspace. */
  double t0 = sm_monotonic_ms();
  rc = sm_engine_container_rename(e, b.id, t->name, err);
  if (rc == SM_ECONFLICT) rc = sm_error_set(err, rc, "sandbox %s exists already", t->name);
  if (rc) {
    fork_build_discard(&b);
    return fork_failed(&b, rc, err);
  }
  sm_state_forget(ctx->state_dir, t->name);
  fork_build_log(&b, sm_monotonic_ms() - t0);
  snprintf(id_out, SM_ENGINE_ID_MAX, "%s", b.id);
  return 0;
}

/* The target of a fork: a new per_run sandbox of the snapshot's owner. */
int sandbox_fork_target(const sandbox_ctx *ctx, const sm_snapshot *s, const char *project,
                        const char *run_id, fork_target *t, sm_error *err) {
  /* Its keys as a call of the source's agent would make them (an agent
   * with host tools has sandboxes of its own: ":ht:<agent>"). */
  char tar[PATH_MAX];
  cleanup_json json_object *source = NULL;
  int rc = snapshot_files(ctx, s, tar, sizeof tar, &source, err);
  if (rc) return rc;
  json_object *cfg = NULL, *labels = NULL, *v = NULL;
  const char *agent = NULL, *key = NULL;
  if (json_object_object_get_ex(source, "Config", &cfg) && json_object_object_get_ex(cfg, "Labels", &labels)) {
    if (json_object_object_get_ex(labels, SM_LABEL_PREFIX "agent", &v)) agent = json_object_get_string(v);
    if (json_object_object_get_ex(labels, SM_LABEL_PREFIX "scope-key", &v)) key = json_object_get_string(v);
  }
  int host_tools = key && strstr(key, ":ht:") != NULL;
  memset(t, 0, sizeof *t);
  snprintf(t->mode, sizeof t->mode, "per_run");
  snprintf(t->project, sizeof t->project, "%s", project && *project ? project : s->project[0] ? s->project : "default");
  snprintf(t->run_id, sizeof t->run_id, "%s", run_id);
  snprintf(t->principal, sizeof t->principal, "%s", s->owner);
  t->resource = 1;
  sm_run_request req;
  sm_run_request_init(&req);
  req.project = t->project;
  req.run_id = t->run_id;
  req.principal = strcmp(s->owner, SM_PRINCIPAL_CONTROL) ? s->owner : NULL;
  req.agent = agent && *agent ? agent : NULL;
  req.agent_has_host_tools = host_tools;
  rc = sm_name_check("run id", run_id, err);
  if (rc == 0)
    rc = sandbox_scope_key(&req, SM_MODE_PER_RUN, t->scope_key, sizeof t->scope_key, err);
  if (rc == 0)
    rc = sandbox_keyed_name(ctx->instance, SM_MODE_PER_RUN, t->scope_key, t->name, sizeof t->name,
                            err);
  if (rc == 0) snprintf(t->volume, sizeof t->volume, "%s-ws", t->name);
  return rc;
}

/* A worker's call reaches only its own snapshots; the control token's and
 * the operator's any. */
static const char *call_owner(const sm_run_request *req) {
  return req->principal && strcmp(req->principal, SM_PRINCIPAL_CONTROL) != 0 ? req->principal : NULL;
}

int sandbox_fork_snapshot_key(const sandbox_ctx *ctx, const sm_run_request *req, char key[17],
                              sm_error *err) {
  sm_snapshot s;
  int rc = sandbox_snap_find(ctx->state_dir, ctx->instance, req->from_snapshot, call_owner(req), &s,
                             err);
  if (rc == 0) snprintf(key, 17, "%s", s.key);
  return rc;
}

int sandbox_fork_for_call(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          const char *name, const char *volume, const char *scope_key, char *id_out,
                          sm_error *err) {
  sm_snapshot s;
  int rc = sandbox_snap_find(ctx->state_dir, ctx->instance, req->from_snapshot, call_owner(req), &s,
                             err);
  if (rc) return rc;
  fork_target t;
  memset(&t, 0, sizeof t);
  snprintf(t.name, sizeof t.name, "%s", name);
  snprintf(t.volume, sizeof t.volume, "%s", volume);
  snprintf(t.scope_key, sizeof t.scope_key, "%s", scope_key);
  snprintf(t.mode, sizeof t.mode, "%s", sm_mode_name(req->settings.mode));
  snprintf(t.project, sizeof t.project, "%s", req->project && *req->project ? req->project : "default");
  snprintf(t.run_id, sizeof t.run_id, "%s", req->settings.mode == SM_MODE_PER_RUN && req->run_id ? req->run_id : "");
  snprintf(t.worker_id, sizeof t.worker_id, "%s", req->settings.mode == SM_MODE_PER_WORKER && req->worker_id ? req->worker_id : "");
  snprintf(t.principal, sizeof t.principal, "%s", req->principal ? req->principal : SM_PRINCIPAL_CONTROL);
  t.resource = 1;
  rc = sandbox_fork_make(ctx, e, &s, &t, id_out, err);
  if (rc == 0 && ctx->audit) {
    sm_audit_event ev = SM_AUDIT_EVENT_INIT;
    char msg[300];
    snprintf(msg, sizeof msg, "from snapshot %s of %s", s.name, s.source);
    ev.name = "sandbox.forked";
    ev.request_id = sm_log_request_id();
    ev.sandbox = name;
    ev.mode = t.mode;
    ev.project = t.project;
    ev.run_id = req->run_id;
    ev.agent = req->agent;
    ev.message = msg;
    sm_error ae = SM_ERROR_INIT;
    if (sm_audit_record(ctx->audit, &ev, &ae) != 0) sm_log(SM_LOG_WARN, "audit: %s", ae.message);
  }
  return rc;
}

/* ---- rollback ---- */

static void target_of(sandbox_rest_op *op, fork_target *t) {
  memset(t, 0, sizeof *t);
  const char *v;
  snprintf(t->name, sizeof t->name, "%s", op->name);
  if ((v = sandbox_label_of(op->insp, "mode"))) snprintf(t->mode, sizeof t->mode, "%s", v);
  if ((v = sandbox_label_of(op->insp, "project"))) snprintf(t->project, sizeof t->project, "%s", v);
  if ((v = sandbox_label_of(op->insp, "run"))) snprintf(t->run_id, sizeof t->run_id, "%s", v);
  if ((v = sandbox_label_of(op->insp, "worker"))) snprintf(t->worker_id, sizeof t->worker_id, "%s", v);
  if ((v = sandbox_label_of(op->insp, "scope-key"))) snprintf(t->scope_key, sizeof t->scope_key, "%s", v);
  v = sandbox_label_of(op->insp, "principal");
  snprintf(t->principal, sizeof t->principal, "%s", v && *v ? v : SM_PRINCIPAL_CONTROL);
  v = sandbox_label_of(op->insp, "resource");
  t->resource = v && strcmp(v, "true") == 0;
  v = sandbox_label_of(op->insp, "volume");
  if (v && *v) snprintf(t->volume, sizeof t->volume, "%s", v);
  else snprintf(t->volume, sizeof t->volume, "%s-ws", op->name);
}

/* The new container (built) takes the sandbox's name from the old one,
 * which goes only then: set aside, the new one named, the old one and its
 * /workspace removed. A failure before the new one has the name gives the
 * old one its name back. */
static int rollback_swap(fork_build *b, const char *old_id, const char *old_volume,
                         sm_error *err) {
  const char *name = b->t->name;
  char aside[SM_NAME_MAX + 32], rnd[9], key[SM_NAME_MAX + 48];
  int rc = sm_random_hex(rnd, 4, err);
  if (rc) return rc;
  snprintf(aside, sizeof aside, "%s-old-%s", name, rnd);
  /* A reaper must not take the old one while it is set aside. */
  snprintf(key, sizeof key, "reap-%s", aside);
  sm_state_lock *reap = NULL;
  rc = sm_state_key_lock(b->ctx->state_dir, key, &reap, err);
  if (rc) return rc;
  /* Its egress relay is named after the sandbox: the next call that needs
   * one makes it for the new container. */
  sm_error ignore = SM_ERROR_INIT;
  sm_egress_revoke(b->e, name, &ignore);
  rc = sm_engine_container_rename(b->e, old_id, aside, err);
  if (rc == 0) {
    rc = sm_engine_container_rename(b->e, b->id, name, err);
    if (rc && sm_engine_container_rename(b->e, aside, name, &ignore) != 0)
      sm_log(SM_LOG_WARN, "sandbox %s: cannot take its name back: %s", aside, ignore.message);
  }
  if (rc == 0) {
    sandbox_rest_drop(b->ctx->state_dir, name);
    sm_state_forget(b->ctx->state_dir, name);
    sandbox_agents_forget(b->ctx->agents, old_id);
    if (sandbox_remove_keep_state(b->e, aside, old_volume, 0, &ignore) != 0)
      sm_log(SM_LOG_WARN, "sandbox %s (rolled back): %s (a reap will remove it)", aside, ignore.message);
  }
  sm_state_unlock(reap);
  sm_state_forget(b->ctx->state_dir, aside);
  return rc;
}

/* Builds the snapshot's sandbox beside the old one (a /workspace volume of
 * its own) and swaps it in: until the new one is whole, the old one is
 * there as it was (running, frozen or stopped, its files the same). */
static int rollback_held(const sandbox_ctx *ctx, sm_engine *e, sandbox_rest_op *op,
                         const sm_snapshot *s, sm_error *err) {
  fork_target t;
  target_of(op, &t);
  if (strcmp(t.principal, s->owner) != 0) return sm_error_set(err, SM_ENOTFOUND, "no such snapshot: %s", s->name);
  const char *oid = sandbox_json_str(op->insp, "Id", NULL);
  char old_id[SM_ENGINE_ID_MAX], old_volume[sizeof t.volume], hex[9];
  snprintf(old_id, sizeof old_id, "%s", oid ? oid : op->name);
  snprintf(old_volume, sizeof old_volume, "%s", t.volume);
  int rc = sm_random_hex(hex, 4, err);
  if (rc) return rc;
  snprintf(t.volume, sizeof t.volume, "%s-ws-%s", t.name, hex);
  fork_build b = {.ctx = ctx, .e = e, .s = s, .t = &t};
  rc = fork_build_run(&b, err);
  if (rc == 0) {
    double t0 = sm_monotonic_ms();
    rc = rollback_swap(&b, old_id, old_volume, err);
    if (rc) fork_build_discard(&b);
    else fork_build_log(&b, sm_monotonic_ms() - t0);
  }
  if (rc) {
    fork_failed(&b, rc, err);
    return sm_error_wrap(err, "sandbox %s is kept as it was", op->name);
  }
  json_object_put(op->insp);
  op->insp = NULL;
  return sm_engine_container_inspect(e, b.id, &op->insp, err);
}

int sandbox_rollback(const sandbox_ctx *ctx, sm_engine *e, const char *name, const sm_snapshot *s,
                     sm_rest_report *out, sm_error *err) {
  sm_state_lock *key = NULL, *busy = NULL;
  int rc = sandbox_rest_hold(ctx, name, NULL, 1, &key, &busy, err);
  if (rc) return rc;
  sandbox_rest_op op;
  rc = sandbox_rest_open(ctx, e, name, &op, err);
  char old_id[SM_ENGINE_ID_MAX] = "", prev[SM_REST_STATE_MAX] = "";
  if (rc == 0) {
    snprintf(old_id, sizeof old_id, "%s", sandbox_json_str(op.insp, "Id", NULL) ? sandbox_json_str(op.insp, "Id", NULL) : "");
    snprintf(prev, sizeof prev, "%s", op.state);
    rc = rollback_held(ctx, e, &op, s, err);
  }
  if (rc == 0) {
    char why[160];
    snprintf(why, sizeof why, "to snapshot %s", s->name);
    sandbox_rest_notify(&op, "sandbox.rolled_back", "rolled_back", prev, old_id, why);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->id, sizeof out->id, "%s", sandbox_json_str(op.insp, "Id", NULL));
    snprintf(out->previous, sizeof out->previous, "%s", prev);
    snprintf(out->state, sizeof out->state, "running");
    out->since = sm_now();
    out->changed = 1;
    out->duration_ms = sm_monotonic_ms() - op.t0;
  }
  sandbox_rest_close(&op);
  sm_state_unlock(busy);
  sm_state_unlock(key);
  return rc;
}

/* ---- diff ---- */

/* The manifest of the sandbox's /workspace now: read from it, or the tar
 * it keeps at rest. */
static int manifest_now(const sandbox_ctx *ctx, sandbox_rest_op *op, json_object **out, sm_error *err) {
  char path[PATH_MAX];
  int keep = strcmp(op->state, "stopped") == 0 || strcmp(op->state, "hibernated") == 0;
  int rc;
  if (keep) {
    rc = sandbox_rest_ws_path(ctx->state_dir, op->name, path, sizeof path, err);
  } else {
    char dir[PATH_MAX];
    rc = sandbox_snap_root(ctx->state_dir, dir, sizeof dir, err);
    if (rc == 0) snprintf(path, sizeof path, "%s/.tmp-diff-%ld-%p", dir, (long)getpid(), (void *)op);
    if (rc == 0) rc = sandbox_ws_save(op->e, sandbox_json_str(op->insp, "Id", NULL), path, 0, NULL, err);
  }
  if (rc) return rc;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (!keep) unlink(path);
  if (fd < 0) return sm_error_set(err, SM_EIO, "reading %s", path);
  rc = sandbox_snap_manifest_of_tar(fd, out, NULL, err);
  close(fd);
  return rc;
}

int sandbox_diff(const sandbox_ctx *ctx, sm_engine *e, const char *name, const sm_snapshot *s,
                 json_object *before, json_object **out, sm_error *err) {
  *out = NULL;
  sandbox_rest_op op;
  int rc = sandbox_rest_open(ctx, e, name, &op, err);
  cleanup_json json_object *now = NULL;
  if (rc == 0) rc = manifest_now(ctx, &op, &now, err);
  sandbox_rest_close(&op);
  if (rc) return rc;
  json_object *d = sandbox_snap_manifest_diff(before, now);
  if (d == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  json_object_object_add(d, "sandbox", json_object_new_string(name));
  json_object_object_add(d, "snapshot", json_object_new_string(s->name));
  *out = d;
  return 0;
}
