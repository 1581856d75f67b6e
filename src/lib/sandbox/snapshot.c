/* A snapshot of a keyed sandbox (sandman/keep.h, docs/state.md): its
 * writable layer committed as an image, its /workspace as a tar with a
 * manifest, one moment of it.
 *
 * The sandbox is held as for a pause (its key lock, its busy lock alone:
 * calls in flight are waited for, none starts) and frozen while its layer
 * and /workspace are read. A call with leased credentials runs in a
 * container of its own beside the sandbox (lease_box.h), sharing its
 * /workspace: a snapshot is refused while one runs, and never reads that
 * container. Everything is made in a temporary folder and renamed into
 * place last (snap_store.h): a crash leaves no half snapshot listed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/durable.h"
#include "common/thread.h"
#include "sandbox/lifecycle.h"
#include "sandbox/rest.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/snap_direct.h"
#include "sandbox/snap_manifest.h"
#include "sandbox/snap_memory.h"
#include "sandbox/snap_store.h"
#include "sandbox/snapshot.h"
#include "sandbox/ws_save.h"

/* How long the commit goes ahead of the read of /workspace once its
 * thread runs (see capture). Measured here (bench/snapshot): 10 ms was
 * enough for the engine to take the commit's look at the container; the
 * 100 ms this was before cost 100 ms of every snapshot. */
#define COMMIT_HEAD_START_MS 10

static int is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* Is a call with leased credentials running beside the sandbox? */
static int leased_call_running(sm_engine *e, const char *instance, const char *name) {
  char inst[200], lease[SM_NAME_MAX + 32];
  snprintf(inst, sizeof inst, "io.sandman.instance=%s", instance);
  snprintf(lease, sizeof lease, "io.sandman.lease=%s", name);
  const char *labels[2] = {inst, lease};
  json_object *list = NULL;
  sm_error ignore = SM_ERROR_INIT;
  int n = 0;
  if (sm_engine_container_list(e, 0, labels, 2, &list, &ignore) == 0 && list)
    n = (int)json_object_array_length(list);
  json_object_put(list);
  return n > 0;
}

static void default_name(char *out, size_t len) {
  char when[40], hex[9];
  sm_error ignore = SM_ERROR_INIT;
  sm_format_time(sm_now(), when, sizeof when);
  for (char *p = when; *p; p++)
    if (*p == ':') *p = '-';
  if (sm_random_hex(hex, 4, &ignore) != 0) snprintf(hex, sizeof hex, "0000");
  snprintf(out, len, "snap-%s-%s", when, hex);
}

/* The image's own layer: the first entry of its history. */
static int64_t layer_size(sm_engine *e, const char *image_id) {
  char path[SM_ENGINE_ID_MAX + 32];
  snprintf(path, sizeof path, "/images/%s/history", image_id);
  json_object *h = NULL;
  sm_error ignore = SM_ERROR_INIT;
  int64_t size = 0;
  if (sm_engine_request_json(e, "GET", path, NULL, NULL, &h, &ignore) == 0 &&
      json_object_is_type(h, json_type_array) && json_object_array_length(h) > 0) {
    json_object *s = NULL;
    if (json_object_object_get_ex(json_object_array_get_idx(h, 0), "Size", &s))
      size = json_object_get_int64(s);
  }
  json_object_put(h);
  return size;
}

/* What a fork needs of the source: its config, host config and image. */
static json_object *source_config(json_object *insp) {
  json_object *o = json_object_new_object(), *v = NULL;
  if (o == NULL) return NULL;
  if (json_object_object_get_ex(insp, "Config", &v)) json_object_object_add(o, "Config", json_object_get(v));
  if (json_object_object_get_ex(insp, "HostConfig", &v)) json_object_object_add(o, "HostConfig", json_object_get(v));
  if (json_object_object_get_ex(insp, "Image", &v)) json_object_object_add(o, "Image", json_object_get(v));
  return o;
}

static json_object *image_labels(const sm_snapshot *s, const char *instance) {
  json_object *c = json_object_new_object(), *l = json_object_new_object();
  char when[40];
  sm_format_time(s->created_at, when, sizeof when);
  json_object_object_add(l, "io.sandman.snapshot", json_object_new_string("true"));
  json_object_object_add(l, "io.sandman.snapshot.instance", json_object_new_string(instance));
  json_object_object_add(l, "io.sandman.snapshot.name", json_object_new_string(s->name));
  json_object_object_add(l, "io.sandman.snapshot.key", json_object_new_string(s->key));
  json_object_object_add(l, "io.sandman.snapshot.owner", json_object_new_string(s->owner));
  json_object_object_add(l, "io.sandman.snapshot.source", json_object_new_string(s->source));
  json_object_object_add(l, "io.sandman.snapshot.created", json_object_new_string(when));
  json_object_object_add(c, "Labels", l);
  return c;
}

/* The commit of the writable layer, on an engine client of its own so
 * that it runs beside the read of /workspace. */
typedef struct snapshot_commit {
  sm_engine *e;
  const char *id;
  char repo[SM_NAME_MAX];
  char tag[17];
  json_object *labels;
  char *image_id;
  int rc;
  sm_error err;
  double ms;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int running; /* its thread has started: the request goes now */
} snapshot_commit;

static void *snapshot_commit_run(void *ud) {
  snapshot_commit *c = ud;
  pthread_mutex_lock(&c->mu);
  c->running = 1;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  double t0 = sm_monotonic_ms();
  c->rc = sm_engine_container_commit(c->e, c->id, c->repo, c->tag, c->labels, 0, c->image_id, &c->err);
  c->ms = sm_monotonic_ms() - t0;
  return NULL;
}

/* The manifest, hashed from a pipe while the tar is written to disk. */
typedef struct snapshot_hash {
  int fd; /* the pipe's read end */
  json_object *manifest;
  int64_t files;
  int rc;
  sm_error err;
} snapshot_hash;

static void *snapshot_hash_run(void *ud) {
  snapshot_hash *h = ud;
  h->rc = sandbox_snap_manifest_of_tar(h->fd, &h->manifest, &h->files, &h->err);
  /* What is left (the tar's padding, or all after a failure) is read to
   * the end: the writer never blocks on a reader gone. */
  char buf[16384];
  ssize_t n;
  while ((n = read(h->fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) continue;
  return NULL;
}

/* The tar of the frozen sandbox's /workspace at path, hashed as it comes
 * (else, when no thread can be made, after): written by sandman from the
 * volume's folder open as root (root >= 0; *fallback set when the engine
 * should read this tree instead), else the engine's archive. */
static int workspace_read(snapshot_take *t, const char *path, int root, int *fallback,
                          sm_error *err) {
  int p[2];
  snapshot_hash h = {.fd = -1, .err = SM_ERROR_INIT};
  pthread_t th;
  *fallback = 0;
  int threaded = pipe2(p, O_CLOEXEC) == 0;
  if (threaded) {
    h.fd = p[0];
    if (common_thread_start(&th, NULL, snapshot_hash_run, &h) != 0) {
      close(p[0]);
      close(p[1]);
      threaded = 0;
    }
  }
  int tee = threaded ? p[1] : -1;
  int rc = root >= 0
               ? sandbox_snap_direct_save(root, path, tee, &t->snap.workspace_bytes, fallback, err)
               : sandbox_ws_save_tee(t->op.e, t->id, path, 0, tee, &t->snap.workspace_bytes, err);
  if (!threaded) return rc;
  close(p[1]);
  pthread_join(th, NULL);
  close(p[0]);
  if (rc == 0 && h.rc) {
    *err = h.err;
    rc = sm_error_wrap(err, "hashing /workspace");
  }
  if (rc == 0) {
    t->manifest = h.manifest;
    t->snap.files = h.files;
  } else {
    json_object_put(h.manifest);
  }
  return rc;
}

static void log_read(snapshot_take *t, const char *how, const char *why) {
  sm_log_event(SM_LOG_DEBUG, "snapshot.read",
               SM_LOG_FIELDS(SM_LOG_STR("name", t->snap.name), SM_LOG_STR("path", how),
                             SM_LOG_STR("why", why)),
               "snapshot %s: /workspace read %s (%s)", t->snap.name,
               is(how, "direct") ? "from its volume on the host" : "through the engine's archive",
               why);
}

/* The /workspace tar: read from the frozen sandbox (from its volume when
 * root >= 0), or the one a stopped sandbox keeps. */
static int workspace_into(snapshot_take *t, const char *dir, int root, sm_error *err) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/workspace.tar", dir);
  if (!is(t->op.state, "stopped")) {
    int fallback = 0;
    int rc = workspace_read(t, path, root, &fallback, err);
    if (rc && fallback) {
      /* A tree sandman leaves to the engine (snap_direct.h): read again. */
      log_read(t, "engine", err->message);
      sm_error_clear(err);
      t->direct = 0;
      rc = workspace_read(t, path, -1, &fallback, err);
    }
    return rc;
  }
  char kept[PATH_MAX];
  int rc = sandbox_rest_ws_path(t->op.ctx->state_dir, t->op.name, kept, sizeof kept, err);
  if (rc) return rc;
  if (link(kept, path) != 0) return sm_error_set_errno(err, SM_EIO, errno, "linking %s", kept);
  t->snap.workspace_bytes = t->op.rec.workspace_bytes;
  return 0;
}

/* manifest.json: the one hashed while /workspace was read, else hashed
 * from the tar now. */
static int manifest_into(snapshot_take *t, const char *dir, sm_error *err) {
  char path[PATH_MAX];
  double t0 = sm_monotonic_ms();
  int rc = 0;
  if (t->manifest == NULL) {
    snprintf(path, sizeof path, "%s/workspace.tar", dir);
    cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "reading %s", path);
    rc = sandbox_snap_manifest_of_tar(fd, &t->manifest, &t->snap.files, err);
    if (rc) return rc;
  }
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  const char *text = json_object_to_json_string_ext(t->manifest, JSON_C_TO_STRING_PLAIN);
  rc = common_file_replace(path, text, strlen(text), err);
  t->ms_manifest = sm_monotonic_ms() - t0;
  return rc;
}

static int commit_layer(snapshot_take *t, const char *id, sm_error *err) {
  char repo[SM_NAME_MAX], tag[17];
  char *colon = NULL;
  snprintf(repo, sizeof repo, "%s", t->snap.image);
  if ((colon = strrchr(repo, ':')) != NULL) *colon = '\0';
  snprintf(tag, sizeof tag, "%s", t->snap.key);
  json_object *labels = image_labels(&t->snap, t->op.ctx->instance);
  int rc = sm_engine_container_commit(t->op.e, id, repo, tag, labels, 0, t->snap.image_id, err);
  json_object_put(labels);
  if (rc) sm_error_wrap(err, "committing its writable layer");
  t->committed = rc == 0;
  return rc;
}

/* Starts the commit beside the caller (on a clone of the engine client),
 * or runs it here when no thread can be made: 1 when started. */
static int commit_start(snapshot_take *t, snapshot_commit *c, pthread_t *th) {
  sm_error ignore = SM_ERROR_INIT;
  c->e = NULL;
  if (sm_engine_clone(&c->e, t->op.e, &ignore) == 0 &&
      common_thread_start(th, NULL, snapshot_commit_run, c) == 0) {
    pthread_mutex_lock(&c->mu);
    while (!c->running) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return 1;
  }
  sm_engine_free(c->e);
  c->e = t->op.e;
  snapshot_commit_run(c);
  return 0;
}

/* May /workspace be read from its volume (snap_direct.h)? Asked before the
 * freeze: 1 with the volume's folder in source, else 0 with why. */
static int direct_candidate(snapshot_take *t, char *source, size_t source_len, char *why,
                            size_t why_len) {
  if (is(t->op.state, "stopped")) return 0;
  json_object *info = NULL;
  sm_error ierr = SM_ERROR_INIT;
  if (sm_engine_info(t->op.e, &info, &ierr) != 0) {
    snprintf(why, why_len, "the engine's /info: %s", ierr.message);
    return 0;
  }
  int ok = sandbox_snap_direct_eligible(sm_engine_host(t->op.e), info, t->op.insp, source,
                                        source_len, why, why_len);
  json_object_put(info);
  return ok;
}

/* The volume's folder opened and checked to be the engine's /workspace of
 * this container (its stat, taken now, while frozen): its descriptor, or
 * -1 with why. */
static int direct_root(snapshot_take *t, const char *source, char *why, size_t why_len) {
  sm_engine_path_info engine;
  sm_error serr = SM_ERROR_INIT;
  if (sm_engine_path_stat(t->op.e, t->id, "/workspace", &engine, &serr) != 0) {
    snprintf(why, why_len, "the engine's stat of /workspace: %s", serr.message);
    return -1;
  }
  return sandbox_snap_direct_open(source, &engine, why, why_len);
}

/* The layer (committed) and /workspace (read) at once while frozen; the
 * sandbox is thawed as soon as both are read. */
static int capture(snapshot_take *t, const char *tmp, sm_error *err) {
  int thaw = 0;
  int rc = 0;
  char source[PATH_MAX], why[PATH_MAX + 200] = "";
  int direct = direct_candidate(t, source, sizeof source, why, sizeof why);
  cleanup_fd int root = -1;
  if (is(t->op.state, "running")) {
    rc = sm_engine_container_pause(t->op.e, t->id, err);
    if (rc == SM_ECONFLICT) rc = 0, sm_error_clear(err);
    thaw = rc == 0;
  }
  snapshot_commit c = {.id = t->id,
                       .image_id = t->snap.image_id,
                       .err = SM_ERROR_INIT,
                       .mu = PTHREAD_MUTEX_INITIALIZER,
                       .cv = PTHREAD_COND_INITIALIZER};
  char *colon = NULL;
  snprintf(c.repo, sizeof c.repo, "%s", t->snap.image);
  if ((colon = strrchr(c.repo, ':')) != NULL) *colon = '\0';
  snprintf(c.tag, sizeof c.tag, "%s", t->snap.key);
  c.labels = image_labels(&t->snap, t->op.ctx->instance);
  pthread_t th;
  if (rc == 0 && direct) root = direct_root(t, source, why, sizeof why);
  if (rc == 0 && !is(t->op.state, "stopped")) {
    t->direct = root >= 0;
    log_read(t, root >= 0 ? "direct" : "engine",
             root >= 0 ? "its volume's folder is the engine's /workspace" : why);
  }
  if (rc == 0) {
    int threaded = commit_start(t, &c, &th);
    /* The engine's read of /workspace holds the container's lock until its
     * stream ends, and a commit looks at the container's state under that
     * lock before it exports the layer, without it after: the commit gets
     * a head start, counted from when its thread runs. One that has not
     * looked by then runs after the read, as it would in series. A read
     * from the volume takes no lock: both start at once. */
    if (threaded && root < 0) common_sleep_ms(COMMIT_HEAD_START_MS);
    double t0 = sm_monotonic_ms();
    rc = workspace_into(t, tmp, root, err);
    t->ms_workspace = sm_monotonic_ms() - t0;
    if (threaded) {
      pthread_join(th, NULL);
      sm_engine_free(c.e);
    }
    t->committed = c.rc == 0;
    t->ms_commit = c.ms;
    if (rc == 0 && c.rc) {
      *err = c.err;
      rc = sm_error_wrap(err, "committing its writable layer");
    }
  }
  json_object_put(c.labels);
  if (thaw) {
    sm_error e = SM_ERROR_INIT;
    if (sm_engine_container_unpause(t->op.e, t->id, &e) != 0 && e.code != SM_ECONFLICT && rc == 0)
      rc = sm_error_set(err, e.code, "unfreezing it: %s", e.message);
  }
  return rc;
}

static int take_held(snapshot_take *t, sm_error *err) {
  const char *st = t->op.state;
  if (!is(st, "running") && !is(st, "frozen") && !is(st, "stopped"))
    return sm_error_set(err, SM_ECONFLICT, "sandbox %s is %s: %s", t->op.name, st,
                        is(st, "hibernated") ? "resume it first, then take its snapshot"
                                             : "nothing of it is kept to take");
  char dir[PATH_MAX], tmp[PATH_MAX];
  int rc = sandbox_snap_dir(t->op.ctx->state_dir, t->snap.key, dir, sizeof dir, err);
  if (rc) return rc;
  if (access(dir, F_OK) == 0)
    return sm_error_set(err, SM_ECONFLICT, "a snapshot named %s exists already", t->snap.name);
  cleanup_fd int held = -1; /* the folder is ours while held: a reap leaves it */
  rc = sandbox_snap_tmp_dir(t->op.ctx->state_dir, t->snap.key, tmp, sizeof tmp, &held, err);
  if (rc) return rc;
  rc = t->snap.memory ? sandbox_snap_memory_take(t, tmp, err) : capture(t, tmp, err);
  if (rc == 0) rc = manifest_into(t, tmp, err);
  if (rc == 0) {
    t->snap.layer_bytes = layer_size(t->op.e, t->snap.image_id);
    t->snap.duration_ms = sm_monotonic_ms() - t->op.t0;
    json_object *config = source_config(t->op.insp);
    rc = sandbox_snap_meta_write(tmp, t->op.ctx->instance, &t->snap, config, err);
    json_object_put(config);
  }
  /* The commit point: the folder under its key is a whole snapshot. */
  if (rc == 0 && rename(tmp, dir) != 0) rc = sm_error_set_errno(err, SM_EIO, errno, "renaming %s", tmp);
  if (rc == 0) {
    common_sync_dir_of(dir);
    sm_log_event(SM_LOG_DEBUG, "snapshot.steps",
                 SM_LOG_FIELDS(SM_LOG_STR("name", t->snap.name),
                               SM_LOG_STR("read", is(t->op.state, "stopped") ? "kept"
                                                  : t->direct                ? "direct"
                                                                             : "engine"),
                               SM_LOG_NUM("commit_ms", t->ms_commit),
                               SM_LOG_NUM("workspace_ms", t->ms_workspace),
                               SM_LOG_NUM("manifest_ms", t->ms_manifest)),
                 "snapshot %s: layer committed in %.0f ms beside /workspace read and hashed in "
                 "%.0f ms; manifest written in %.0f ms",
                 t->snap.name, t->ms_commit, t->ms_workspace, t->ms_manifest);
    return 0;
  }
  sm_error ignore = SM_ERROR_INIT;
  sandbox_snap_remove_dir(tmp, &ignore);
  if (t->committed) sm_engine_image_remove(t->op.e, t->snap.image, 0, &ignore);
  return rc;
}

static void describe_source(snapshot_take *t) {
  sm_snapshot *s = &t->snap;
  json_object *insp = t->op.insp;
  const char *p = sandbox_label_of(insp, "principal");
  snprintf(s->owner, sizeof s->owner, "%s", p && *p ? p : SM_PRINCIPAL_CONTROL);
  snprintf(s->source, sizeof s->source, "%s", t->op.name);
  snprintf(s->source_id, sizeof s->source_id, "%s", t->id);
  const char *v;
  if ((v = sandbox_label_of(insp, "mode"))) snprintf(s->mode, sizeof s->mode, "%s", v);
  if ((v = sandbox_label_of(insp, "project"))) snprintf(s->project, sizeof s->project, "%s", v);
  if ((v = sandbox_label_of(insp, "run"))) snprintf(s->run_id, sizeof s->run_id, "%s", v);
  if ((v = sandbox_label_of(insp, "worker"))) snprintf(s->worker_id, sizeof s->worker_id, "%s", v);
  sandbox_snap_key(t->op.ctx->instance, s->owner, s->name, s->key);
  sandbox_snap_image_ref(t->op.ctx->instance, s->key, s->image, sizeof s->image);
  s->created_at = sm_now();
}

int sandbox_snapshot_take(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                          const sm_snapshot_options *o, sm_snapshot *out, sm_error *err) {
  snapshot_take t;
  memset(&t, 0, sizeof t);
  if (o && o->name && !sandbox_snap_name_valid(o->name))
    return sm_error_set(err, SM_EINVAL,
                        "snapshot name '%s' is not valid: 1 to 100 letters, digits, '_', '.' or "
                        "'-', not starting with '.' or '-'",
                        o->name);
  t.snap.memory = o && o->memory;
  t.commit = commit_layer;
  if (o && o->name) snprintf(t.snap.name, sizeof t.snap.name, "%s", o->name);
  else default_name(t.snap.name, sizeof t.snap.name);
  if (leased_call_running(e, ctx->instance, name))
    return sm_error_set(err, SM_EBUSY,
                        "a call with leased credentials is running beside sandbox %s: a snapshot "
                        "never runs beside one; retry when it has finished",
                        name);
  sm_rest_options ro = SM_REST_OPTIONS_INIT;
  ro.no_wait = o && o->no_wait;
  ro.wait_s = o ? o->wait_s : 0;
  sm_state_lock *key = NULL, *busy = NULL;
  int rc = sandbox_rest_hold(ctx, name, &ro, 1, &key, &busy, err);
  if (rc) return rc;
  rc = sandbox_rest_open(ctx, e, name, &t.op, err);
  if (rc == 0) {
    snprintf(t.id, sizeof t.id, "%s", sandbox_json_str(t.op.insp, "Id", NULL) ? sandbox_json_str(t.op.insp, "Id", NULL) : name);
    describe_source(&t);
    rc = take_held(&t, err);
    json_object_put(t.manifest);
  }
  if (rc == 0) {
    char why[160];
    snprintf(why, sizeof why, "snapshot %s (%lld files)", t.snap.name, (long long)t.snap.files);
    sandbox_rest_notify(&t.op, "snapshot.created", "snapshot", t.op.state, t.id, why);
    *out = t.snap;
  }
  sandbox_rest_close(&t.op);
  sm_state_unlock(busy);
  sm_state_unlock(key);
  if (rc) return sm_error_wrap(err, "snapshot of sandbox %s", name);
  return 0;
}
