/* Workspace sync: the public API and the sync object's life. Copy in sends
 * a tar of what changed on the host (since the manifest) into the sandbox
 * and deletes there what the host deleted (workspace_in.c); copy out reads
 * the sandbox's tar through the checking extractor, stages it inside the
 * host workspace and applies it file by file (workspace_out.c). Mode none
 * runs the very same packer and extractor against a scratch directory: the
 * copy's side is an ops table (workspace_side.h) with two implementations,
 * workspace_side_engine.c and workspace_side_scratch.c. This file makes,
 * loads and frees the sync object, holds its settings and statistics, and
 * the helpers on it that both copies and both sides share. The commands run
 * in the sandbox are in workspace_box.c, the listing started ahead of an
 * upload in prelist.c, the upload started ahead of the scan in early.c, the
 * download's pipe into the extractor in ring.c. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sandman/log.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "common/cleanup.h"
#include "common/thread.h"
#include "workspace/workspace_sync.h"
#include "workspace/ws.h"

int workspace_sync_last_out_listed(const sm_workspace_sync *sync) { return sync->last_out_listed; }

int workspace_sync_last_out_quick(const sm_workspace_sync *sync) { return sync->last_out_quick; }

void workspace_sync_abort_after(sm_workspace_sync *sync, int64_t bytes) {
  sync->abort_after = bytes;
}

int64_t workspace_sync_abort_budget(const sm_workspace_sync *s) {
  if (s->abort_after < 0) return -1;
  return s->abort_after > s->abort_spent ? s->abort_after - s->abort_spent : 0;
}

/* The sync object without its manifest (sync_load reads it). */
static int sync_alloc(sm_workspace_sync **out, const char *host_dir, const char *manifest_path,
                      const sm_string_list *excludes, const sm_workspace_limits *limits,
                      sm_error *err) {
  *out = NULL;
  if (host_dir == NULL || host_dir[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no workspace directory given");
  struct stat st;
  if (stat(host_dir, &st) != 0)
    return sm_error_set_errno(err, SM_EINVAL, errno, "workspace %s", host_dir);
  if (!S_ISDIR(st.st_mode))
    return sm_error_set(err, SM_EINVAL, "workspace %s is not a directory", host_dir);
  sm_workspace_sync *s = calloc(1, sizeof *s);
  if (s == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  s->host_dir = strdup(host_dir);
  s->manifest_path = manifest_path ? strdup(manifest_path) : NULL;
  if (s->host_dir == NULL || (manifest_path && s->manifest_path == NULL)) {
    sm_workspace_sync_free(s);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  if (excludes) s->excludes = *excludes;
  s->max_bytes = limits && limits->max_bytes > 0 ? limits->max_bytes : WS_DEFAULT_MAX_BYTES;
  s->max_entries = limits && limits->max_entries > 0 ? limits->max_entries : WS_DEFAULT_MAX_ENTRIES;
  s->max_path = limits && limits->max_path > 0 ? limits->max_path : WS_DEFAULT_MAX_PATH;
  /* As workspace_box_list's cap: past it the listing is dropped, not the copy. */
  int64_t listing_cap = s->max_entries * 352;
  common_buf_init(&s->sent_listing,
                  (size_t)(listing_cap > ((int64_t)64 << 20) ? (int64_t)64 << 20 : listing_cap));
  s->abort_after = -1;
  workspace_manifest_init(&s->base);
  workspace_manifest_init(&s->held);
  workspace_manifest_init(&s->prescan);
  /* Protected by default: the built-in list until the caller says otherwise. */
  sm_string_list builtin;
  sm_workspace_protect_defaults(&builtin);
  int prc = workspace_protect_new(&s->protect, &builtin, err);
  if (prc) {
    sm_workspace_sync_free(s);
    return prc;
  }
  *out = s;
  return 0;
}

/* Reads the manifest; a damaged one is ignored (a full copy next). */
static void sync_load(sm_workspace_sync *s) {
  if (s->manifest_path == NULL) return;
  sm_error lerr = SM_ERROR_INIT;
  if (workspace_manifest_load(&s->base, &s->held, s->manifest_path, s->max_entries, &lerr) != 0) {
    sm_log(SM_LOG_WARN, "workspace: ignoring the manifest (%s); the next copy is a full one",
           lerr.message);
    workspace_manifest_clear(&s->base);
    s->wipe_first = 1;
  } else {
    s->have_base = s->base.root != NULL;
    s->had_manifest = s->have_base;
    s->disk_current = s->have_base;
  }
}

int sm_workspace_sync_new(sm_workspace_sync **out, const char *host_dir, const char *manifest_path,
                          const sm_string_list *excludes, const sm_workspace_limits *limits,
                          sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  int rc = sync_alloc(out, host_dir, manifest_path, excludes, limits, err);
  if (rc == 0) sync_load(*out);
  return rc;
}

static int prescan_walk(sm_workspace_sync *s, sm_error *err) {
  s->have_prescan = 0;
  int64_t stamp = workspace_now_ns();
  cleanup_fd int root_fd = workspace_sync_open_host(s, err);
  if (root_fd < 0) return root_fd;
  ws_scan_opts so = {&s->excludes, s->max_bytes, s->max_entries, s->max_path, 0};
  int rc = workspace_scan(root_fd, s->host_dir, &so, &s->prescan, err);
  if (rc) {
    workspace_manifest_clear(&s->prescan);
    return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
  }
  s->have_prescan = 1;
  s->prescan_stamp = stamp;
  return 0;
}

typedef struct walk_job {
  sm_workspace_sync *s;
  char request_id[64];
} walk_job;

static void *walk_main(void *ud) {
  walk_job *j = ud;
  if (j->request_id[0]) sm_log_set_request_id(j->request_id);
  sm_error err = SM_ERROR_INIT;
  /* A failed walk is made again by the copy in, which reports it. */
  if (prescan_walk(j->s, &err) != 0)
    sm_log(SM_LOG_DEBUG, "workspace: walking the host folder ahead: %s", err.message);
  return NULL;
}

int sm_workspace_sync_new_walked(sm_workspace_sync **out, const char *host_dir,
                                 const char *manifest_path, const sm_string_list *excludes,
                                 const sm_workspace_limits *limits, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  int rc = sync_alloc(out, host_dir, manifest_path, excludes, limits, err);
  if (rc) return rc;
  /* The walk fills prescan, the load base and held: apart until joined. */
  walk_job j = {.s = *out};
  const char *rid = sm_log_request_id();
  if (rid) snprintf(j.request_id, sizeof j.request_id, "%s", rid);
  pthread_t th;
  int threaded = common_thread_start(&th, NULL, walk_main, &j) == 0;
  sync_load(*out);
  if (threaded) pthread_join(th, NULL);
  else walk_main(&j);
  return 0;
}

void sm_workspace_sync_free(sm_workspace_sync *sync) {
  if (sync == NULL) return;
  workspace_manifest_dispose(&sync->base);
  workspace_manifest_dispose(&sync->held);
  workspace_manifest_dispose(&sync->prescan);
  workspace_protect_free(sync->protect);
  workspace_refusal_list_dispose(&sync->refused);
  workspace_redact_dispose(&sync->redact);
  common_buf_dispose(&sync->sent_listing);
  free(sync->host_dir);
  free(sync->manifest_path);
  free(sync);
}

void sm_workspace_sync_stats(const sm_workspace_sync *s, int64_t *bytes_in, int64_t *entries_in,
                             int64_t *bytes_out, int64_t *entries_out) {
  if (bytes_in) *bytes_in = s->bytes_in;
  if (entries_in) *entries_in = s->entries_in;
  if (bytes_out) *bytes_out = s->bytes_out;
  if (entries_out) *entries_out = s->entries_out;
}

int sm_workspace_sync_set_protect(sm_workspace_sync *s, const sm_string_list *globs,
                                  sm_error *err) {
  ws_protect *p = NULL;
  int rc = workspace_protect_new(&p, globs, err);
  if (rc) return rc;
  workspace_protect_free(s->protect);
  s->protect = p;
  return 0;
}

int sm_workspace_sync_set_redact(sm_workspace_sync *s, const char *const *kv, size_t n,
                                 sm_error *err) {
  return workspace_redact_set(&s->redact, kv, n, err);
}

size_t sm_workspace_sync_refused(const sm_workspace_sync *s, const sm_workspace_refusal **out) {
  if (out) *out = s->refused.v;
  return s->refused.n;
}

const char *sm_workspace_refusal_text(const char *reason) {
  return workspace_reason_text(workspace_reason_parse(reason));
}

int sm_workspace_protect_check(const char *glob, sm_error *err) {
  return workspace_protect_glob_check(glob ? glob : "", err);
}

void sm_workspace_free_list(char **list, size_t n) {
  if (list == NULL) return;
  for (size_t i = 0; i < n; i++) free(list[i]);
  free(list);
}

int workspace_sync_check_target(const sm_workspace_target *t, sm_error *err) {
  if (t == NULL || t->sandbox_path == NULL || t->sandbox_path[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no sandbox workspace path given");
  if (t->engine && (t->container_id == NULL || t->container_id[0] == '\0'))
    return sm_error_set(err, SM_EINVAL, "no container given for the workspace copy");
  if (t->engine && t->sandbox_path[0] != '/')
    return sm_error_set(err, SM_EINVAL, "sandbox workspace path '%s' is not absolute",
                        t->sandbox_path);
  return 0;
}

const char *workspace_sync_target_container(const sm_workspace_target *t) {
  if (!t->engine) return "";
  return t->workspace_of && t->workspace_of[0] ? t->workspace_of : t->container_id;
}

/* Does the manifest describe this very sandbox? */
int workspace_sync_base_matches(const sm_workspace_sync *s, const sm_workspace_target *t) {
  return s->have_base && s->base.root &&
         strcmp(s->base.container, workspace_sync_target_container(t)) == 0 &&
         strcmp(s->base.root, t->sandbox_path) == 0;
}

int workspace_sync_open_host(const sm_workspace_sync *s, sm_error *err) {
  int fd = open(s->host_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, errno, "workspace %s", s->host_dir);
  return fd;
}

int workspace_cmp_cstr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}
