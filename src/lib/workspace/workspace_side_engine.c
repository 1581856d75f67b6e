/* The side of a copy that is a sandbox, reached through its engine: the
 * copy's commands run there (workspace_box.c), its upload goes through
 * sandman's unpacker or the engine's archive upload, and its reads are the
 * engine's archive downloads piped into the extractor (ring.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/error.h>
#include <sandman/workspace.h>

#include "workspace/ring.h"
#include "workspace/workspace_box.h"
#include "workspace/workspace_side.h"
#include "workspace/workspace_sync.h"
#include "workspace/ws.h"

/* Streams box_path through the extractor, counting what it read against
 * the copy's abort budget. */
static int fetch_engine(sm_workspace_sync *s, const sm_workspace_target *t, ws_extract *x,
                        const char *box_path, sm_error *err) {
  int64_t pushed = 0;
  int rc = workspace_ring_fetch(t, box_path, x, workspace_sync_abort_budget(s), &pushed, err);
  s->abort_spent += pushed;
  return rc;
}

/* Sends pack (a packer each try: a missing unpacker is installed once and
 * the copy starts again). */
static int put_entries(sm_workspace_sync *s, const sm_workspace_target *t, int root_fd,
                       ws_entry **pack, size_t npack, common_buf *listing, sm_error *err) {
  for (int attempt = 0;; attempt++) {
    ws_packer *pk = NULL;
    int rc = workspace_packer_new(&pk, root_fd, pack, npack, "", t->uid, t->gid, err);
    if (rc) return rc;
    if (s->abort_after >= 0) workspace_packer_abort_after(pk, workspace_sync_abort_budget(s));
    int missing = 0;
    if (listing) common_buf_reset(listing);
    rc = workspace_box_put(t, workspace_packer_read, pk, &missing, listing, err);
    if (rc) workspace_packer_reason(pk, err);
    workspace_packer_stats(pk, &s->bytes_in, &s->entries_in);
    workspace_packer_free(pk);
    if (!missing || attempt > 0) return rc;
    sm_error_clear(err);
    rc = workspace_box_install_unpacker(t, err);
    if (rc) return rc;
  }
}

/* Each fetch is one archive request, which costs the engine a mount and a
 * tar process (tens of ms): past a few, one full read is cheaper. */
#define PROBE_MAX_ROOTS_ENGINE 8

static int engine_wipe(const side *d, sm_error *err) { return workspace_box_wipe(d->t, err); }

static int engine_remove(const side *d, char **paths, size_t n, sm_error *err) {
  return workspace_box_delete(d->t, paths, n, err);
}

static int engine_put(const side *d, sm_workspace_sync *s, int root_fd, const in_plan *p,
                      sm_error *err) {
  return p->npack > 0 ? put_entries(s, d->t, root_fd, p->pack, p->npack, &s->sent_listing, err)
                      : 0;
}

static int engine_list(const side *d, const sm_workspace_sync *s, int64_t base_total,
                       ws_manifest *listing, sm_error *err) {
  (void)base_total;
  return workspace_box_list(d->t->engine, d->t, s->max_entries, s->max_path, NULL, NULL, listing,
                            err);
}

static int engine_list_sent(const side *d, const sm_workspace_sync *s, ws_entry **sent, size_t n,
                            int64_t base_total, ws_manifest *listing, sm_error *err) {
  (void)base_total;
  return workspace_box_list_sent(d->t, s->max_entries, s->max_path, sent, n, listing, err);
}

/* The sandbox's tar of root (under the workspace path), or of the whole
 * workspace. */
static int engine_fetch(const side *d, sm_workspace_sync *s, ws_extract *x, ws_manifest *listing,
                        const char *root, const char *prefix, sm_error *err) {
  (void)listing;
  (void)prefix;
  const char *top = d->t->sandbox_path;
  if (root == NULL) return fetch_engine(s, d->t, x, top, err);
  size_t rlen = strlen(top);
  while (rlen > 1 && top[rlen - 1] == '/') rlen--;
  size_t len = rlen + strlen(root) + 2;
  char *path = malloc(len);
  if (path == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  snprintf(path, len, "%.*s/%s", (int)rlen, top, root);
  int rc = fetch_engine(s, d->t, x, path, err);
  free(path);
  return rc;
}

const side_ops ws_side_engine = {
    .local = 0,
    .max_roots = PROBE_MAX_ROOTS_ENGINE,
    .wipe = engine_wipe,
    .remove = engine_remove,
    .put = engine_put,
    .list = engine_list,
    .list_sent = engine_list_sent,
    .fetch = engine_fetch,
};
