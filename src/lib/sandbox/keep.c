/* The public side of sandboxes that keep their state (sandman/keep.h):
 * pause and resume on the runner's engine (the work in rest.c), snapshots
 * (snapshot.c takes them, snap_store.c keeps them). */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/keep.h>
#include <sandman/log.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/durable.h"
#include "sandbox/backend.h"
#include "sandbox/context.h"
#include "sandbox/fork.h"
#include "sandbox/rest.h"
#include "sandbox/snap_store.h"
#include "sandbox/snapshot.h"
#include "sandbox/spec.h"

int sm_keep_supported(sm_runner *runner, const char *op, sm_error *err) {
  if (runner == NULL || op == NULL) return sm_error_set(err, SM_EINVAL, "needs a runner and an operation");
  const sandbox_backend *b = sandbox_runner_ctx(runner)->backend;
  return b->keeps ? b->keeps(op, err) : 0;
}

/* The runner's ctx and this thread's engine, where its backend keeps state. */
static int keep_begin(sm_runner *runner, const char *name, const char *what,
                      const sandbox_ctx **ctx, sm_engine **e, sm_error *err) {
  if (runner == NULL || name == NULL || *name == '\0')
    return sm_error_set(err, SM_EINVAL, "%s: needs a runner and a sandbox", what);
  *ctx = sandbox_runner_ctx(runner);
  /* The backend says which it does (backend.h): refused before anything is touched. */
  int rc = sm_keep_supported(runner, what, err);
  if (rc) return rc;
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
  rc = sandbox_rest_resume(ctx, e, name, o, out ? out : &ignore, err);
  /* Resumed on purpose is a use: the idle lifecycle counts from here. */
  sm_error te = SM_ERROR_INIT;
  if (rc == 0 && sm_state_touch(ctx->state_dir, name, sm_now(), &te) != 0)
    sm_log(SM_LOG_WARN, "recording last use of %s: %s", name, te.message);
  return rc;
}

int sm_run_keyed_sandbox(sm_runner *runner, const sm_run_request *req, char *out, size_t len,
                         sm_error *err) {
  if (runner == NULL || req == NULL || out == NULL || len == 0)
    return sm_error_set(err, SM_EINVAL, "needs a runner, a request and room for the name");
  sm_mode mode = req->settings.mode;
  if (mode != SM_MODE_PER_RUN && mode != SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL, "only keyed sandboxes (per_run, per_worker) keep their state; "
                        "this one is made for each call");
  if (req->sandbox) {
    if (strlen(req->sandbox) >= len) return sm_error_set(err, SM_EINVAL, "sandbox name too long");
    snprintf(out, len, "%s", req->sandbox);
    return 0;
  }
  char key[SM_KEY_MAX];
  int rc = sandbox_scope_key(req, mode, key, sizeof key, err);
  if (rc == 0)
    rc = sandbox_keyed_name(sandbox_runner_ctx(runner)->instance, mode, key, out, len, err);
  return rc;
}

/* ---- snapshots ---- */

int sm_sandbox_snapshot(sm_runner *runner, const char *sandbox, const sm_snapshot_options *o,
                        sm_snapshot *out, sm_error *err) {
  const sandbox_ctx *ctx = NULL;
  sm_engine *e = NULL;
  sm_snapshot ignore;
  int rc = keep_begin(runner, sandbox, "snapshot", &ctx, &e, err);
  if (rc) return rc;
  return sandbox_snapshot_take(ctx, e, sandbox, o, out ? out : &ignore, err);
}

int sm_snapshots_list(sm_runner *runner, const char *owner, sm_snapshot_list *out, sm_error *err) {
  out->n = 0;
  out->items = NULL;
  if (runner == NULL) return sm_error_set(err, SM_EINVAL, "snapshot list: needs a runner");
  const sandbox_ctx *ctx = sandbox_runner_ctx(runner);
  return sandbox_snap_list(ctx->state_dir, ctx->instance, owner, out, err);
}

int sm_snapshot_get(sm_runner *runner, const char *name, const char *owner, sm_snapshot *out,
                    sm_error *err) {
  if (runner == NULL || name == NULL) return sm_error_set(err, SM_EINVAL, "snapshot: needs a runner and a name");
  const sandbox_ctx *ctx = sandbox_runner_ctx(runner);
  return sandbox_snap_find(ctx->state_dir, ctx->instance, name, owner, out, err);
}

int sm_snapshot_manifest(sm_runner *runner, const sm_snapshot *s, json_object **out, sm_error *err) {
  *out = NULL;
  const sandbox_ctx *ctx = sandbox_runner_ctx(runner);
  char dir[PATH_MAX], path[PATH_MAX + 16];
  int rc = sandbox_snap_dir(ctx->state_dir, s->key, dir, sizeof dir, err);
  if (rc) return rc;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  cleanup_free char *text = NULL;
  rc = common_file_read_small(path, 256u << 20, &text, NULL, err);
  if (rc == SM_ENOTFOUND) return sm_error_set(err, rc, "snapshot %s has no manifest", s->name);
  if (rc) return rc;
  *out = json_tokener_parse(text);
  if (*out == NULL) return sm_error_set(err, SM_EPROTOCOL, "%s is not a manifest", path);
  return 0;
}

/* The folder first (the snapshot is gone from then on), then its image
 * unless a sandbox forked from it still runs it. */
static int remove_snapshot(const sandbox_ctx *ctx, sm_engine *e, const sm_snapshot *s, sm_error *err) {
  char dir[PATH_MAX];
  int rc = sandbox_snap_dir(ctx->state_dir, s->key, dir, sizeof dir, err);
  if (rc == 0) rc = sandbox_snap_remove_dir(dir, err);
  if (rc) return rc;
  sm_error ie = SM_ERROR_INIT;
  int irc = e ? sm_engine_image_remove(e, s->image, 0, &ie) : 0;
  if (irc && irc != SM_ENOTFOUND)
    sm_log(SM_LOG_DEBUG, "snapshot %s: its image %s stays while sandboxes use it (%s)", s->name,
           s->image, ie.message);
  if (ctx->audit) {
    sm_audit_event ev = SM_AUDIT_EVENT_INIT;
    ev.name = "snapshot.removed";
    ev.request_id = sm_log_request_id();
    ev.sandbox = s->source;
    ev.project = s->project;
    ev.run_id = s->run_id;
    ev.message = s->name;
    sm_error ae = SM_ERROR_INIT;
    if (sm_audit_record(ctx->audit, &ev, &ae) != 0) sm_log(SM_LOG_WARN, "audit: %s", ae.message);
  }
  return 0;
}

int sm_snapshot_remove(sm_runner *runner, const char *name, const char *owner, sm_error *err) {
  sm_snapshot s;
  int rc = sm_snapshot_get(runner, name, owner, &s, err);
  if (rc) return rc;
  const sandbox_ctx *ctx = sandbox_runner_ctx(runner);
  sm_engine *e = NULL;
  sm_error ee = SM_ERROR_INIT;
  if (ctx->engine(runner, &e, &ee) != 0) e = NULL; /* the folder goes; a reap takes the image */
  return remove_snapshot(ctx, e, &s, err);
}

json_object *sm_snapshot_to_json(const sm_snapshot *s, double now) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  char when[40];
  sm_format_time(s->created_at, when, sizeof when);
  const char *keys[][2] = {{"name", s->name},       {"key", s->key},           {"owner", s->owner},
                           {"source", s->source},   {"source_id", s->source_id}, {"mode", s->mode},
                           {"project", s->project}, {"run_id", s->run_id},     {"worker_id", s->worker_id},
                           {"image", s->image},     {"image_id", s->image_id}};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    json_object_object_add(o, keys[i][0], keys[i][1][0] ? json_object_new_string(keys[i][1]) : NULL);
  json_object_object_add(o, "created_at", json_object_new_string(when));
  json_object_object_add(o, "age_s", json_object_new_double(now > s->created_at ? now - s->created_at : 0));
  json_object *size = json_object_new_object();
  json_object_object_add(size, "workspace", json_object_new_int64(s->workspace_bytes));
  json_object_object_add(size, "layer", json_object_new_int64(s->layer_bytes));
  json_object_object_add(size, "checkpoint", json_object_new_int64(s->checkpoint_bytes));
  json_object_object_add(o, "size", size);
  json_object_object_add(o, "memory", json_object_new_boolean(s->memory));
  json_object_object_add(o, "files", json_object_new_int64(s->files));
  if (s->duration_ms > 0) json_object_object_add(o, "duration_ms", json_object_new_double(s->duration_ms));
  return o;
}

/* 1 when a snapshot of key is being made (its temporary folder is there):
 * its image is committed before its folder is renamed into place. */
static int in_progress(const char *root, const char *key) {
  char prefix[40];
  snprintf(prefix, sizeof prefix, ".tmp-%s-", key);
  cleanup_dir DIR *d = opendir(root);
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL)
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) return 1;
  return 0;
}

/* What a crash left: temporary folders no process holds (snap_store.h),
 * and images of this instance's snapshots whose folder is gone and none is
 * being made (used ones stay: the engine refuses to remove them). */
static void reap_leftovers(const sandbox_ctx *ctx, sm_engine *e, int dry_run) {
  char root[PATH_MAX];
  sm_error ignore = SM_ERROR_INIT;
  if (dry_run || sandbox_snap_root(ctx->state_dir, root, sizeof root, &ignore) != 0) return;
  sandbox_snap_tmp_sweep(root, sm_now());
  if (e == NULL) return;
  char inst[200];
  snprintf(inst, sizeof inst, "io.sandman.snapshot.instance=%s", ctx->instance);
  json_object *filters = json_object_new_object(), *lab = json_object_new_array();
  json_object_array_add(lab, json_object_new_string(inst));
  json_object_object_add(filters, "label", lab);
  json_object *images = NULL;
  if (sm_engine_image_list(e, filters, &images, &ignore) == 0 && images)
    for (size_t i = 0; i < json_object_array_length(images); i++) {
      json_object *img = json_object_array_get_idx(images, i), *labels = NULL, *k = NULL, *id = NULL;
      if (!json_object_object_get_ex(img, "Labels", &labels) ||
          !json_object_object_get_ex(labels, "io.sandman.snapshot.key", &k) ||
          !json_object_object_get_ex(img, "Id", &id))
        continue;
      char dir[PATH_MAX];
      if (sandbox_snap_dir(ctx->state_dir, json_object_get_string(k), dir, sizeof dir, &ignore) ==
              0 &&
          access(dir, F_OK) != 0 && !in_progress(root, json_object_get_string(k)))
        sm_engine_image_remove(e, json_object_get_string(id), 0, &ignore);
    }
  json_object_put(images);
  json_object_put(filters);
}

static int reap_pick(const sm_snapshot_list *all, size_t i, double now, double max_age_s, size_t keep) {
  const sm_snapshot *s = &all->items[i];
  if (max_age_s > 0 && now - s->created_at >= max_age_s) return 1;
  if (keep == 0) return 0;
  size_t newer = 0; /* the list is newest first */
  for (size_t j = 0; j < i; j++) newer += strcmp(all->items[j].owner, s->owner) == 0;
  return newer >= keep;
}

int sm_snapshot_reap(sm_runner *runner, double max_age_s, size_t keep, int dry_run,
                     sm_snapshot_list *removed, sm_error *err) {
  if (removed) removed->n = 0, removed->items = NULL;
  if (runner == NULL) return sm_error_set(err, SM_EINVAL, "snapshot reap: needs a runner");
  const sandbox_ctx *ctx = sandbox_runner_ctx(runner);
  sm_engine *e = NULL;
  sm_error ee = SM_ERROR_INIT;
  if (ctx->engine(runner, &e, &ee) != 0) e = NULL;
  sm_snapshot_list all;
  int rc = sandbox_snap_list(ctx->state_dir, ctx->instance, NULL, &all, err);
  if (rc) return rc;
  double now = sm_now();
  size_t n_out = 0;
  sm_snapshot *out = all.n ? calloc(all.n, sizeof *out) : NULL;
  for (size_t i = 0; rc == 0 && i < all.n; i++) {
    if (!reap_pick(&all, i, now, max_age_s, keep)) continue;
    if (!dry_run && remove_snapshot(ctx, e, &all.items[i], err) != 0) {
      sm_log(SM_LOG_WARN, "snapshot %s: %s", all.items[i].name, err->message);
      sm_error_clear(err);
      continue;
    }
    if (out) out[n_out++] = all.items[i];
  }
  sm_snapshot_list_dispose(&all);
  reap_leftovers(ctx, e, dry_run);
  if (removed) {
    removed->items = out;
    removed->n = n_out;
  } else {
    free(out);
  }
  return 0;
}

/* ---- forks, rollbacks, differences ---- */

#define FORK_THREADS 4

typedef struct fork_job {
  sm_runner *runner;
  const sm_snapshot *snap;
  const sm_fork_request *req;
  sm_fork_item *items;
  size_t next;
  pthread_mutex_t mu;
} fork_job;

static void fork_one(fork_job *j, sm_fork_item *it) {
  const sandbox_ctx *ctx = sandbox_runner_ctx(j->runner);
  double t0 = sm_monotonic_ms();
  sm_error err = SM_ERROR_INIT;
  sm_engine *e = NULL;
  fork_target t;
  sm_state_lock *key = NULL;
  int rc = ctx->engine(j->runner, &e, &err);
  if (rc == 0) rc = sandbox_fork_target(ctx, j->snap, j->req->project, it->run_id, &t, &err);
  if (rc == 0) {
    snprintf(it->name, sizeof it->name, "%s", t.name);
    rc = sandbox_rest_hold(ctx, t.name, NULL, 0, &key, NULL, &err);
  }
  json_object *there = NULL;
  if (rc == 0 && sm_engine_container_inspect(e, t.name, &there, &err) == 0)
    rc = sm_error_set(&err, SM_ECONFLICT, "run %s has a sandbox already (%s)", it->run_id, t.name);
  else if (rc == 0)
    sm_error_clear(&err);
  json_object_put(there);
  if (rc == 0) rc = sandbox_fork_make(ctx, e, j->snap, &t, it->id, &err);
  sm_state_unlock(key);
  it->duration_ms = sm_monotonic_ms() - t0;
  if (rc) {
    snprintf(it->error, sizeof it->error, "%s", err.message);
    return;
  }
  if (ctx->audit) {
    sm_audit_event ev = SM_AUDIT_EVENT_INIT;
    char msg[300];
    snprintf(msg, sizeof msg, "from snapshot %s of %s", j->snap->name, j->snap->source);
    ev.name = "sandbox.forked";
    ev.request_id = sm_log_request_id();
    ev.sandbox = it->name;
    ev.mode = "per_run";
    ev.project = t.project;
    ev.run_id = it->run_id;
    ev.message = msg;
    ev.duration_ms = it->duration_ms;
    sm_error ae = SM_ERROR_INIT;
    if (sm_audit_record(ctx->audit, &ev, &ae) != 0) sm_log(SM_LOG_WARN, "audit: %s", ae.message);
  }
  if (ctx->state_hook) {
    sm_state_event se = {it->name, it->id, j->snap->source_id, "forked", NULL};
    ctx->state_hook(ctx->state_hook_ud, &se);
  }
}

static void *fork_worker(void *ud) {
  fork_job *j = ud;
  for (;;) {
    pthread_mutex_lock(&j->mu);
    size_t i = j->next < j->req->n ? j->next++ : j->req->n;
    pthread_mutex_unlock(&j->mu);
    if (i >= j->req->n) return NULL;
    fork_one(j, &j->items[i]);
  }
}

int sm_sandbox_fork(sm_runner *runner, const sm_fork_request *req, sm_fork_item *out, sm_error *err) {
  const sandbox_ctx *ctx = NULL;
  sm_engine *e = NULL;
  if (req == NULL || req->snapshot == NULL || (req->n > 0 && (out == NULL || req->run_ids == NULL)))
    return sm_error_set(err, SM_EINVAL, "fork: needs a snapshot and run ids");
  int rc = keep_begin(runner, req->snapshot, "fork", &ctx, &e, err);
  if (rc) return rc;
  sm_snapshot s;
  rc = sandbox_snap_find(ctx->state_dir, ctx->instance, req->snapshot, req->owner, &s, err);
  if (rc) return rc;
  for (size_t i = 0; i < req->n; i++) {
    memset(&out[i], 0, sizeof out[i]);
    snprintf(out[i].run_id, sizeof out[i].run_id, "%s", req->run_ids[i]);
  }
  fork_job j = {runner, &s, req, out, 0, PTHREAD_MUTEX_INITIALIZER};
  pthread_t th[FORK_THREADS];
  size_t n = req->n < FORK_THREADS ? req->n : FORK_THREADS, started = 0;
  for (size_t i = 1; i < n; i++)
    if (pthread_create(&th[started], NULL, fork_worker, &j) == 0) started++;
  fork_worker(&j);
  for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  pthread_mutex_destroy(&j.mu);
  return 0;
}

int sm_sandbox_rollback(sm_runner *runner, const char *sandbox, const char *snapshot,
                        const char *owner, sm_rest_report *out, sm_error *err) {
  const sandbox_ctx *ctx = NULL;
  sm_engine *e = NULL;
  sm_rest_report ignore;
  int rc = keep_begin(runner, sandbox, "rollback", &ctx, &e, err);
  if (rc) return rc;
  sm_snapshot s;
  rc = sandbox_snap_find(ctx->state_dir, ctx->instance, snapshot, owner, &s, err);
  if (rc == 0) rc = sandbox_rollback(ctx, e, sandbox, &s, out ? out : &ignore, err);
  return rc;
}

int sm_sandbox_diff(sm_runner *runner, const char *sandbox, const char *snapshot, const char *owner,
                    json_object **out, sm_error *err) {
  const sandbox_ctx *ctx = NULL;
  sm_engine *e = NULL;
  *out = NULL;
  int rc = keep_begin(runner, sandbox, "diff", &ctx, &e, err);
  if (rc) return rc;
  sm_snapshot s;
  rc = sandbox_snap_find(ctx->state_dir, ctx->instance, snapshot, owner, &s, err);
  cleanup_json json_object *before = NULL;
  if (rc == 0) rc = sm_snapshot_manifest(runner, &s, &before, err);
  if (rc == 0) rc = sandbox_diff(ctx, e, sandbox, &s, before, out, err);
  return rc;
}
