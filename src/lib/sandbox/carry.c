/* A keyed sandbox replaced because a call changes its settings, with its
 * /workspace carried into the new one (carry.h).
 *
 * /workspace is a named tmpfs volume: the engine mounts it while a
 * container that uses it runs and drops it (and its files) when the last
 * one stops. So a volume whose options the new sandbox keeps (size, owner)
 * is handed over while the old sandbox still runs: the old container is
 * renamed aside, the new one starts on the same volume, then the old one
 * goes. When the options change, the files are copied instead: the old
 * /workspace as a tar into an unlinked file in the state directory, then
 * into the new volume, owned by the new sandbox's user (tar_carry.c). What
 * cannot be carried (larger than the new disk, unreadable) refuses the
 * call, unless it said replace. A sandbox that had stopped has nothing
 * left to carry. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/state.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "sandbox/carry.h"
#include "sandbox/lifecycle.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"

#define CARRY_SLACK (1 << 20) /* tar headers beyond the files themselves */

/* The options the volume was made with ("" when unknown). */
static void volume_options_of(sm_engine *e, const char *volume, char *out, size_t len) {
  json_object *v = NULL;
  sm_error ignore = SM_ERROR_INIT;
  out[0] = '\0';
  if (sm_engine_volume_inspect(e, volume, &v, &ignore) != 0) return;
  const char *o = sandbox_json_str(v, "Options", "o");
  snprintf(out, len, "%s", o ? o : "");
  json_object_put(v);
}

static void manifest_path(const sandbox_ctx *ctx, const char *name, char *out, size_t len) {
  snprintf(out, len, "%s/workspaces/%s.manifest", ctx->state_dir, name);
}

/* The next copy of the call's workspace starts from what was carried. */
static void retarget(const sandbox_ctx *ctx, const sandbox_box *sb, const char *old_id) {
  char path[4096];
  manifest_path(ctx, sb->name, path, sizeof path);
  sm_error err = SM_ERROR_INIT;
  if (sm_workspace_manifest_retarget(path, old_id, sb->id, &err) != 0)
    sm_log(SM_LOG_WARN, "sandbox %s: its workspace manifest: %s (the next copy is a full one)",
           sb->name, err.message);
}

/* Same options: the new sandbox starts on the old one's volume while the
 * old one (renamed aside) still holds it mounted. */
static int carry_keep(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                      sandbox_box *sb, sm_error *err) {
  char aside[SM_NAME_MAX + 32], rnd[9];
  if (sm_random_hex(rnd, 4, err) != 0) return err->code;
  snprintf(aside, sizeof aside, "%s-old-%s", sb->name, rnd);
  /* A reaper must not take the old one while it still holds the volume
   * alone: it skips a sandbox whose reap lock is held. */
  char key[SM_NAME_MAX + 48];
  snprintf(key, sizeof key, "reap-%s", aside);
  sm_state_lock *reap = NULL;
  int rc = sm_state_key_lock(ctx->state_dir, key, &reap, err);
  if (rc) return rc;
  /* Its egress relay is named after the sandbox: the new one gets its own. */
  sm_error ignore = SM_ERROR_INIT;
  sm_egress_revoke(e, sb->name, &ignore);
  rc = sm_engine_container_rename(e, sb->name, aside, err);
  if (rc) {
    sm_state_unlock(reap);
    return sm_error_wrap(err, "setting sandbox %s aside", sb->name);
  }
  rc = sandbox_create(ctx, e, req, sb, err);
  sm_error_clear(&ignore);
  if (rc) {
    /* The old one takes its name back; its files are still there. */
    if (sm_engine_container_rename(e, aside, sb->name, &ignore) != 0)
      sm_log(SM_LOG_WARN, "sandbox %s: cannot take its name back: %s", aside, ignore.message);
  } else if (sm_engine_container_remove(e, aside, 1, 1, &ignore) != 0 &&
             ignore.code != SM_ENOTFOUND) {
    sm_log(SM_LOG_WARN, "sandbox %s (replaced): %s (a reap will remove it)", aside, ignore.message);
  }
  sm_state_unlock(reap);
  sm_state_forget(ctx->state_dir, aside);
  if (rc == 0) sb->carried = "kept";
  return rc;
}

/* The old /workspace as a tar in an unlinked file of the state directory;
 * SM_ETOOBIG past cap bytes. */
static int copy_out(const sandbox_ctx *ctx, sm_engine *e, const sandbox_box *sb, int64_t cap,
                    int *fd_out, int64_t *bytes, sm_error *err) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/carry", ctx->state_dir);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return sm_error_set_errno(err, SM_EIO, errno, "creating %s", dir);
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.XXXXXX", dir, sb->name);
  int fd = mkstemp(path);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "creating a file in %s", dir);
  unlink(path);
  sandbox_tar_sink sink = {fd, 0, cap};
  int rc = sm_engine_archive_get(e, sb->name, "/workspace", sandbox_tar_sink_write, &sink, err);
  if (rc == 0 && lseek(fd, 0, SEEK_SET) != 0)
    rc = sm_error_set_errno(err, SM_EIO, errno, "rewinding the copy of /workspace");
  if (rc) {
    close(fd);
    if (sink.bytes > cap)
      return sm_error_set(err, SM_ETOOBIG, "its /workspace holds more than the new disk (%lld bytes)",
                          (long long)(cap - CARRY_SLACK));
    return rc;
  }
  *fd_out = fd;
  *bytes = sink.bytes;
  return 0;
}

/* Other options: copied through the state directory into a new volume. */
static int carry_copy(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                      sandbox_box *sb, sm_error *err) {
  int fd = -1;
  int64_t bytes = 0;
  int64_t disk = req->settings.disk > 0 ? req->settings.disk : 1024LL * 1024 * 1024;
  int rc = copy_out(ctx, e, sb, disk + CARRY_SLACK, &fd, &bytes, err);
  if (rc) {
    char why[SM_ERROR_MESSAGE_MAX];
    snprintf(why, sizeof why, "%s", err->message);
    if (!req->replace)
      return sm_error_set(err, SM_EPOLICY,
                          "sandbox %s must be replaced (%s) and its /workspace cannot be carried "
                          "over: %s; nothing was changed. Pass --replace (\"replace\": true) to "
                          "replace it with an empty /workspace",
                          sb->name, sb->because, why);
    sm_log(SM_LOG_WARN, "sandbox %s: its /workspace is not carried over (%s): replace was asked",
           sb->name, err->message);
    sm_error_clear(err);
    rc = sandbox_remove(e, ctx->state_dir, sb->name, sb->volume, 1, err);
    if (rc == 0) rc = sandbox_create(ctx, e, req, sb, err);
    sb->carried = "dropped";
    return rc;
  }
  /* Made with other settings, perhaps another network: its relay is looked for. */
  rc = sandbox_remove_keep_state(e, sb->name, sb->volume, 1, err);
  if (rc == 0) rc = sandbox_create(ctx, e, req, sb, err);
  if (rc == 0) {
    sandbox_tar_source src;
    rc = sandbox_tar_source_open(&src, fd, "workspace", sb->uid, sb->gid, err);
    if (rc == 0) {
      rc = sm_engine_archive_put(e, sb->id, "/workspace", sandbox_tar_source_read, &src, err);
      if (rc == 0 && src.failed) rc = sm_error_set(err, src.err.code, "%s", src.err.message);
      sandbox_tar_source_close(&src);
    }
    if (rc) sm_error_wrap(err, "copying /workspace (%lld bytes) into the new sandbox", (long long)bytes);
  }
  close(fd);
  if (rc == 0) sb->carried = "copied";
  return rc;
}

int sandbox_replace(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                    sandbox_box *sb, int running, sm_error *err) {
  char old_id[SM_ENGINE_ID_MAX];
  snprintf(old_id, sizeof old_id, "%s", sb->replaced);
  int rc;
  if (!running) {
    /* Its tmpfs went when it stopped: nothing to carry. */
    rc = sandbox_remove(e, ctx->state_dir, sb->name, sb->volume, 1, err);
    if (rc == 0) rc = sandbox_create(ctx, e, req, sb, err);
    sb->carried = "gone";
    return rc;
  }
  /* The new sandbox's user decides its volume's owner. */
  sandbox_box plan = *sb;
  rc = sandbox_plan_user(ctx, e, &req->settings, &plan, err);
  if (rc) return rc;
  char want[128], have[128];
  sandbox_volume_options(&req->settings, plan.uid, plan.gid, want, sizeof want);
  volume_options_of(e, sb->volume, have, sizeof have);
  rc = strcmp(want, have) == 0 ? carry_keep(ctx, e, req, sb, err) : carry_copy(ctx, e, req, sb, err);
  if (rc == 0 && strcmp(sb->carried, "dropped") != 0) retarget(ctx, sb, old_id);
  return rc;
}
