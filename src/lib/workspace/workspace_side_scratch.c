/* The side of a copy in mode none: a scratch folder on the host, which the
 * copy in fills with the same packer and extractor a copy out uses (no
 * engine, no sandbox), and which the copy out lists and packs from. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/error.h>
#include <sandman/workspace.h>

#include "common/cleanup.h"
#include "workspace/workspace_side.h"
#include "workspace/workspace_sync.h"
#include "workspace/ws.h"

/* Empties a scratch directory (mode none), keeping stage directories. */
static int scratch_wipe(int fd, sm_error *err) {
  int dfd = dup(fd);
  if (dfd < 0) return sm_error_set_errno(err, SM_EIO, errno, "clearing the scratch directory");
  DIR *d = fdopendir(dfd);
  if (d == NULL) {
    close(dfd);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(d)) != NULL && rc == 0) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (workspace_is_reserved(de->d_name)) continue;
    int r = workspace_remove_tree(fd, de->d_name);
    if (r) rc = sm_error_set_errno(err, SM_EIO, -r, "clearing the scratch directory");
  }
  closedir(d);
  return rc;
}

int workspace_scratch_open(const char *path, sm_error *err) {
  /* Made on demand (0700), like mkdir -p. */
  cleanup_free char *p = strdup(path);
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  for (char *c = p + 1; *c; c++) {
    if (*c != '/') continue;
    *c = '\0';
    mkdir(p, 0700);
    *c = '/';
  }
  mkdir(p, 0700);
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, errno, "scratch directory %s", path);
  return fd;
}

static int copy_in_local(sm_workspace_sync *s, const sm_workspace_target *t, int scratch_fd,
                         ws_packer *pk, sm_error *err) {
  cleanup_free char *stage = NULL;
  int stage_fd = workspace_stage_create(scratch_fd, t->sandbox_path, &stage, err);
  if (stage_fd < 0) return stage_fd;
  ws_extract x;
  workspace_extract_init(&x);
  x.stage_fd = stage_fd;
  x.root_fd = scratch_fd;
  x.trusted = 1;
  x.max_bytes = s->max_bytes;
  x.max_entries = s->max_entries;
  x.max_path = s->max_path;
  int rc = workspace_extract_run(&x, workspace_packer_read, pk, err);
  if (rc && workspace_packer_error(pk)->code) *err = *workspace_packer_error(pk);
  ws_apply_result res = {0};
  if (rc == 0) rc = workspace_apply(scratch_fd, &x, 0, 0, &res, err);
  workspace_apply_result_dispose(&res);
  workspace_stage_remove(scratch_fd, stage, stage_fd);
  workspace_extract_dispose(&x);
  return rc;
}

/* Mode none: deletes dels in the scratch directory. */
static int scratch_delete(int scratch_fd, char **dels, size_t ndel, sm_error *err) {
  int rc = 0;
  ws_dircache sdc;
  workspace_dircache_init(&sdc, scratch_fd);
  for (size_t i = 0; rc == 0 && i < ndel; i++) {
    const char *name;
    int dfd = workspace_dircache_parent(&sdc, dels[i], &name, 0);
    if (dfd < 0) continue;
    int r = workspace_remove_tree(dfd, name);
    if (r) rc = sm_error_set_errno(err, SM_EIO, -r, "deleting '%s' in the scratch directory",
                                   dels[i]);
  }
  workspace_dircache_dispose(&sdc);
  return rc;
}

/* Mode none: packs what the plan sends into the scratch directory. */
static int put_scratch(sm_workspace_sync *s, const sm_workspace_target *t, int root_fd,
                       int scratch_fd, const in_plan *p, sm_error *err) {
  ws_packer *pk = NULL;
  int rc = workspace_packer_new(&pk, root_fd, p->pack, p->npack, "", t->uid, t->gid, err);
  if (rc) return rc;
  if (s->abort_after >= 0) workspace_packer_abort_after(pk, workspace_sync_abort_budget(s));
  rc = copy_in_local(s, t, scratch_fd, pk, err);
  if (rc) workspace_packer_reason(pk, err);
  workspace_packer_stats(pk, &s->bytes_in, &s->entries_in);
  workspace_packer_free(pk);
  return rc;
}

/* Mode none: the scratch directory's listing, in the probe's terms. */
static int list_local(const sm_workspace_sync *s, int sfd, const char *path, int64_t base_total,
                      ws_manifest *listing, sm_error *err) {
  ws_scan_opts so = {&s->excludes, s->max_bytes + base_total, s->max_entries, s->max_path, 1};
  int rc = workspace_scan(sfd, path, &so, listing, err);
  for (size_t i = 0; rc == 0 && i < listing->n; i++) {
    ws_entry *e = &listing->v[i];
    int64_t ns = e->host_mtime_ns;
    e->box_mtime = ns >= 0 ? ns / 1000000000 : -((-ns + 999999999) / 1000000000);
    if (e->type == 'l') e->size = (int64_t)strlen(e->link);
  }
  return rc;
}

/* Mode none: packs root (NULL: everything) of the scratch listing into the
 * extractor, named as the engine would name it. */
static int fetch_local(sm_workspace_sync *s, int sfd, ws_manifest *listing, ws_extract *x,
                       const char *root, const char *prefix, sm_error *err) {
  ws_entry **items = calloc(listing->n + 1, sizeof *items);
  if (items == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t n = 0, rlen = root ? strlen(root) : 0;
  for (size_t i = 0; i < listing->n; i++) {
    const char *p = listing->v[i].path;
    if (listing->v[i].type == 's') continue; /* never in a tar: workspace_refusal_sockets */
    if (root == NULL || strcmp(p, root) == 0 || (strncmp(p, root, rlen) == 0 && p[rlen] == '/'))
      items[n++] = &listing->v[i];
  }
  size_t cut = 0;
  if (root && strrchr(root, '/')) cut = (size_t)(strrchr(root, '/') - root) + 1;
  ws_packer *pk = NULL;
  int rc = workspace_packer_new(&pk, sfd, items, n, root ? "" : prefix, 0, 0, err);
  if (rc == 0) {
    workspace_packer_set_cut(pk, cut);
    if (s->abort_after >= 0) workspace_packer_abort_after(pk, workspace_sync_abort_budget(s));
    rc = workspace_extract_run(x, workspace_packer_read, pk, err);
    if (rc && workspace_packer_error(pk)->code) *err = *workspace_packer_error(pk);
    s->abort_spent += workspace_packer_produced(pk);
  }
  workspace_packer_free(pk);
  free(items);
  return rc;
}

/* A local fetch is cheap: many single-path reads before one full read. */
#define PROBE_MAX_ROOTS_LOCAL 512

static int scratch_wipe_op(const side *d, sm_error *err) { return scratch_wipe(d->fd, err); }

static int scratch_remove(const side *d, char **paths, size_t n, sm_error *err) {
  return scratch_delete(d->fd, paths, n, err);
}

static int scratch_put(const side *d, sm_workspace_sync *s, int root_fd, const in_plan *p,
                       sm_error *err) {
  return put_scratch(s, d->t, root_fd, d->fd, p, err);
}

static int scratch_list(const side *d, const sm_workspace_sync *s, int64_t base_total,
                        ws_manifest *listing, sm_error *err) {
  return list_local(s, d->fd, d->t->sandbox_path, base_total, listing, err);
}

static int scratch_list_sent(const side *d, const sm_workspace_sync *s, ws_entry **sent,
                             size_t n, int64_t base_total, ws_manifest *listing, sm_error *err) {
  (void)sent;
  (void)n;
  return list_local(s, d->fd, d->t->sandbox_path, base_total, listing, err);
}

/* Packs from the listing, which a scratch folder always has before a read
 * (without one there is nothing to read from). */
static int scratch_fetch(const side *d, sm_workspace_sync *s, ws_extract *x, ws_manifest *listing,
                         const char *root, const char *prefix, sm_error *err) {
  if (listing == NULL)
    return sm_error_set(err, SM_EIO, "the scratch folder has no listing to read from");
  return fetch_local(s, d->fd, listing, x, root, prefix, err);
}

const side_ops ws_side_scratch = {
    .local = 1,
    .max_roots = PROBE_MAX_ROOTS_LOCAL,
    .wipe = scratch_wipe_op,
    .remove = scratch_remove,
    .put = scratch_put,
    .list = scratch_list,
    .list_sent = scratch_list_sent,
    .fetch = scratch_fetch,
};
