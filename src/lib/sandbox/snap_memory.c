/* Snapshots that keep their processes' memory (snap_memory.h,
 * docs/state.md).
 *
 * The engine (Docker 20.10) cannot checkpoint a gVisor container and
 * leave it running (runsc's --leave-running fails under the engine), and
 * starts a container only from a checkpoint in its own checkpoint folder.
 * So a memory snapshot is a hibernate (rest_hibernate.c: the sandbox
 * frozen, its /workspace saved, its checkpoint written into a successor
 * container) during which, once the old container has stopped and before
 * it goes, its writable layer is committed and the checkpoint copied into
 * the snapshot's folder: layer, /workspace and memory are of the same
 * frozen moment. The sandbox is then restored as a resume would, and goes
 * on in its successor. A fork copies the checkpoint into its own new
 * container's checkpoint folder and is restored from it, its /workspace
 * put back first through a keeper (rest.h), as a resume does. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "sandbox/lifecycle.h"
#include "sandbox/rest.h"
#include "sandbox/snap_memory.h"
#include "sandbox/ws_save.h"

#define TREE_DEPTH_MAX 8
#define COPY_CHUNK (1 << 16)

static int is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

static int copy_file(const char *src, const char *dst, int64_t *bytes, sm_error *err) {
  cleanup_fd int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return sm_error_set_errno(err, SM_EIO, errno, "reading %s", src);
  cleanup_fd int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) return sm_error_set_errno(err, SM_EIO, errno, "writing %s", dst);
  char buf[COPY_CHUNK];
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sm_error_set_errno(err, SM_EIO, errno, "reading %s", src);
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(out, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return sm_error_set_errno(err, SM_EIO, errno, "writing %s", dst);
      off += w;
    }
    *bytes += n;
  }
  if (fsync(out) != 0) return sm_error_set_errno(err, SM_EIO, errno, "syncing %s", dst);
  return 0;
}

/* Copies folder src into a new folder dst: regular files and folders only
 * (a checkpoint holds nothing else). */
static int copy_tree(const char *src, const char *dst, int depth, int64_t *bytes, sm_error *err) {
  if (depth > TREE_DEPTH_MAX) return sm_error_set(err, SM_EPROTOCOL, "%s is nested too deep", src);
  cleanup_dir DIR *d = opendir(src);
  if (d == NULL) return sm_error_set_errno(err, SM_EIO, errno, "reading the folder %s", src);
  if (mkdir(dst, 0700) != 0 && errno != EEXIST)
    return sm_error_set_errno(err, SM_EIO, errno, "making %s", dst);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (is(de->d_name, ".") || is(de->d_name, "..")) continue;
    char from[PATH_MAX], to[PATH_MAX];
    if (snprintf(from, sizeof from, "%s/%s", src, de->d_name) >= (int)sizeof from ||
        snprintf(to, sizeof to, "%s/%s", dst, de->d_name) >= (int)sizeof to)
      return sm_error_set(err, SM_EINVAL, "a path in %s is too long", src);
    struct stat st;
    if (lstat(from, &st) != 0) return sm_error_set_errno(err, SM_EIO, errno, "reading %s", from);
    int rc = S_ISDIR(st.st_mode)   ? copy_tree(from, to, depth + 1, bytes, err)
             : S_ISREG(st.st_mode) ? copy_file(from, to, bytes, err)
                                   : sm_error_set(err, SM_EPROTOCOL, "%s is neither a file nor a folder", from);
    if (rc) return rc;
  }
  return 0;
}

/* ---- taking one ---- */

typedef struct memory_hook {
  snapshot_take *t;
  const char *tmp;
} memory_hook;

/* The old container has stopped, its checkpoint is in the successor: its
 * layer and the checkpoint go into the snapshot. */
static int on_checkpoint(sandbox_rest_op *op, const char *old_id, void *ud, sm_error *err) {
  memory_hook *h = ud;
  char src[PATH_MAX], dst[PATH_MAX];
  int rc = h->t->commit(h->t, old_id, err);
  if (rc == 0) rc = sandbox_rest_checkpoint_folder(op->e, op->rec.next_id, src, sizeof src, err);
  if (rc) return rc;
  snprintf(dst, sizeof dst, "%s/" SANDBOX_SNAP_CHECKPOINT, h->tmp);
  rc = copy_tree(src, dst, 0, &h->t->snap.checkpoint_bytes, err);
  if (rc)
    return sm_error_wrap(err, "keeping the checkpoint (a memory snapshot reads it from the engine's "
                              "folder, so the engine must run on this host and sandman may read it)");
  return 0;
}

/* The sandbox, hibernated by the snapshot, runs again (frozen again when
 * it was frozen). A failure leaves it hibernated and whole: the next call
 * resumes it. */
static void source_back(snapshot_take *t, const char *was) {
  sandbox_rest_op *op = &t->op;
  sm_error e = SM_ERROR_INIT;
  json_object_put(op->insp);
  op->insp = NULL;
  int rc = sm_engine_container_inspect(op->e, op->name, &op->insp, &e);
  if (rc == 0) {
    snprintf(op->state, sizeof op->state, "hibernated");
    rc = sandbox_rest_restore(op, &e);
  }
  if (rc == 0 && is(was, "frozen")) {
    sm_engine_container_pause(op->e, op->rec.id, &e);
    sm_error ignore = SM_ERROR_INIT;
    op->rec.pending[0] = '\0';
    op->rec.since = sm_now();
    snprintf(op->rec.state, sizeof op->rec.state, "frozen");
    sandbox_rest_write(op->ctx->state_dir, op->name, &op->rec, &ignore);
  }
  if (rc) sm_log(SM_LOG_WARN, "sandbox %s stays hibernated after its memory snapshot: %s (a call resumes it)",
                 op->name, e.message);
  json_object *now = NULL;
  if (sm_engine_container_inspect(op->e, op->name, &now, &e) == 0) {
    json_object_put(op->insp);
    op->insp = now;
  }
}

int sandbox_snap_memory_take(snapshot_take *t, const char *tmp, sm_error *err) {
  sandbox_rest_op *op = &t->op;
  char was[SM_REST_STATE_MAX];
  snprintf(was, sizeof was, "%s", op->state);
  if (!is(was, "running") && !is(was, "frozen"))
    return sm_error_set(err, SM_ECONFLICT,
                        "sandbox %s is %s: its processes are gone, there is no memory to keep; "
                        "take its snapshot without --memory",
                        op->name, was);
  memory_hook h = {t, tmp};
  op->on_checkpoint = on_checkpoint;
  op->on_checkpoint_ud = &h;
  int rc = sandbox_rest_hibernate(op, err);
  op->on_checkpoint = NULL;
  op->on_checkpoint_ud = NULL;
  int hibernated = is(op->rec.state, "hibernated") && !op->rec.pending[0];
  if (rc == 0) {
    char kept[PATH_MAX], path[PATH_MAX];
    snprintf(path, sizeof path, "%s/workspace.tar", tmp);
    rc = sandbox_rest_ws_path(op->ctx->state_dir, op->name, kept, sizeof kept, err);
    if (rc == 0 && link(kept, path) != 0) rc = sm_error_set_errno(err, SM_EIO, errno, "linking %s", kept);
    t->snap.workspace_bytes = op->rec.workspace_bytes;
  }
  if (hibernated) source_back(t, was);
  if (rc == SM_EUNSUPPORTED || rc == SM_EBUSY)
    return sm_error_wrap(err, "--memory takes the engine's checkpoint as hibernate does");
  return rc;
}

/* ---- a sandbox made from one ---- */

/* The engine uploads a checkpoint into containerd's content store on each
 * restore, and two uploads of the same checkpoint at once fail ("already
 * exists"): this process's restores take turns, and one that met another
 * process's is tried once more. */
static pthread_mutex_t restore_turn = PTHREAD_MUTEX_INITIALIZER;

static int restore_one(sm_engine *e, const char *id, sm_error *err) {
  pthread_mutex_lock(&restore_turn);
  int rc = sm_engine_container_restore(e, id, SANDBOX_REST_CHECKPOINT, err);
  if (rc && strstr(err->message, "already exists")) {
    sm_error_clear(err);
    rc = sm_engine_container_restore(e, id, SANDBOX_REST_CHECKPOINT, err);
  }
  pthread_mutex_unlock(&restore_turn);
  return rc;
}

int sandbox_snap_memory_restore(const sandbox_ctx *ctx, sm_engine *e, const char *id,
                                const char *name, const char *dir, sm_error *err) {
  (void)ctx;
  cleanup_json json_object *insp = NULL;
  char keeper[SM_ENGINE_ID_MAX], tar[PATH_MAX], src[PATH_MAX], dst[PATH_MAX];
  int64_t bytes = 0;
  int rc = sm_engine_container_inspect(e, id, &insp, err);
  if (rc) return rc;
  snprintf(tar, sizeof tar, "%s/workspace.tar", dir);
  snprintf(src, sizeof src, "%s/" SANDBOX_SNAP_CHECKPOINT, dir);
  rc = sandbox_rest_checkpoint_folder(e, id, dst, sizeof dst, err);
  if (rc == 0) {
    /* Its checkpoints folder: made by the engine only with a checkpoint. */
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dst);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    if (mkdir(parent, 0700) != 0 && errno != EEXIST)
      rc = sm_error_set_errno(err, SM_EIO, errno, "making %s (a fork of a memory snapshot writes "
                                                  "the checkpoint into the engine's folder)", parent);
  }
  if (rc == 0) rc = copy_tree(src, dst, 0, &bytes, err);
  if (rc == 0) rc = sandbox_rest_keeper_up(e, insp, name, keeper, err);
  if (rc == 0) {
    rc = sandbox_ws_restore(e, keeper, tar, err);
    if (rc == 0) rc = restore_one(e, id, err);
    if (rc) sm_error_wrap(err, "restoring its processes from the snapshot's checkpoint");
    sandbox_rest_keeper_down(e, name);
  }
  sm_error ignore = SM_ERROR_INIT;
  sm_engine_checkpoint_remove(e, id, SANDBOX_REST_CHECKPOINT, &ignore);
  return rc;
}
