/* The copy in: the host's walk compared with the manifest (what to send,
 * what to delete), the sandbox's side cleared and trimmed, the upload, the
 * listing of what it wrote (the ctimes the copy out tells the tool's
 * changes from ours by), and the manifest saved. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "common/cleanup.h"
#include "workspace/early.h"
#include "workspace/prelist.h"
#include "workspace/workspace_box.h"
#include "workspace/workspace_side.h"
#include "workspace/workspace_sync.h"
#include "workspace/ws.h"

static int ancestor_listed(const ws_manifest *set, const char *path) {
  size_t len = strlen(path);
  char *buf = malloc(len + 1);
  if (buf == NULL) return 0;
  memcpy(buf, path, len + 1);
  int hit = 0;
  for (size_t i = len; i > 0 && !hit; i--) {
    if (buf[i - 1] != '/') continue;
    buf[i - 1] = '\0';
    hit = workspace_manifest_get(set, buf) != NULL;
  }
  free(buf);
  return hit;
}

/* Is the host entry e the same as what the sandbox has (base entry b)? */
static int same_as_base(int root_fd, ws_dircache *dc, ws_entry *e, const ws_entry *b) {
  if (b == NULL || b->type != e->type || b->mode != e->mode) return 0;
  if (e->type == 'd') return 1;
  if (e->type == 'l') return strcmp(b->link, e->link) == 0;
  if (b->size != e->size || !b->has_hash || b->box_mtime == WS_UNKNOWN_MTIME) return 0;
  if (b->host_mtime_ns == e->host_mtime_ns && !(b->racy & WS_RACY_HOST)) return 1;
  /* Touched but maybe not changed: a hash decides, no re-send if equal. The
   * sandbox keeps its mtime; box_mtime stays what it has. */
  const char *name;
  int dfd = workspace_dircache_parent(dc, e->path, &name, 0);
  int fd = dfd >= 0 ? openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
  if (fd < 0) return 0;
  unsigned char h[32];
  int64_t n = 0;
  int ok = workspace_hash_fd_ok(fd, h, &n) && n == e->size && memcmp(h, b->hash, 32) == 0;
  close(fd);
  (void)root_fd;
  return ok;
}

/* Would the manifest file say the same for e as it says for b? (Every
 * field it saves.) */
static int same_record(const ws_entry *e, const ws_entry *b) {
  if (b == NULL || e->type != b->type || e->racy != b->racy || e->mode != b->mode ||
      e->size != b->size || e->host_mtime_ns != b->host_mtime_ns ||
      e->box_mtime != b->box_mtime || e->box_ctime != b->box_ctime ||
      e->has_hash != b->has_hash || (e->has_hash && memcmp(e->hash, b->hash, 32) != 0))
    return 0;
  if (!e->link || !b->link) return e->link == b->link;
  return strcmp(e->link, b->link) == 0;
}

/* Notes the ctime each entry just sent has in the sandbox, so that the copy
 * out can tell the tool's changes from ours exactly. Without a listing the
 * sent entries are compared in full next time. */
static void record_sent(const sm_workspace_sync *s, const side *d, ws_prelist *pre,
                        ws_manifest *cur, ws_entry **sent, size_t nsent) {
  ws_manifest listing;
  workspace_manifest_init(&listing);
  sm_error lerr = SM_ERROR_INIT;
  int64_t t0 = workspace_now_ns();
  int rc = -1;
  if (s->sent_listing.len > 0) {
    /* The unpacker's own listing of what it wrote. */
    rc = workspace_probe_parse(s->sent_listing.data, s->sent_listing.len, s->max_entries,
                               s->max_path, &listing, &lerr);
    if (rc) {
      sm_log(SM_LOG_DEBUG, "workspace: the unpacker's listing is unusable (%s)", lerr.message);
      sm_error_clear(&lerr);
    } else if (pre) {
      workspace_prelist_drop(pre);
    }
  }
  if (rc == 0) {
  } else if (pre) {
    workspace_prelist_finish(pre, 1);
    t0 = pre->t_go;
    rc = pre->rc;
    lerr = pre->err;
    workspace_manifest_dispose(&listing);
    listing = pre->listing;
    workspace_manifest_init(&pre->listing);
  } else {
    rc = d->ops->list_sent(d, s, sent, nsent, cur->total_size, &listing, &lerr);
  }
  if (rc) sm_log(SM_LOG_DEBUG, "workspace: no listing after the copy in (%s)", lerr.message);
  else
    sm_log(SM_LOG_DEBUG, "workspace: listing after the copy in: %zu entries in %" PRId64 " ms",
           listing.n, (workspace_now_ns() - t0) / 1000000);
  workspace_probe_record(cur, rc == 0 ? &listing : NULL, WS_CHANGED);
  for (size_t i = 0; i < cur->n; i++) cur->v[i].state = WS_SAME;
  workspace_manifest_dispose(&listing);
}

static void in_plan_dispose(in_plan *p) {
  free(p->pack);
  free(p->later);
  free(p->send);
  free(p->dels);
  workspace_manifest_dispose(&p->delset);
}

/* Compares the host's scan cur with the base: what to send, what to delete. */
static int in_plan_compare(sm_workspace_sync *s, int root_fd, ws_manifest *cur, int valid,
                           int64_t stamp, in_plan *p, sm_error *err) {
  int rc = 0;
  p->send = calloc(cur->n + 1, sizeof *p->send);
  p->dels = calloc(s->base.n + 1, sizeof *p->dels);
  ws_dircache dc;
  workspace_dircache_init(&dc, root_fd);
  if (p->send == NULL || p->dels == NULL) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  /* The saved manifest already says all there is (nothing to send, nothing
   * gone, every record as it was): it is not written again. */
  p->same_records = valid && cur->n == s->base.n;
  for (size_t i = 0; rc == 0 && i < cur->n; i++) {
    ws_entry *e = &cur->v[i];
    const ws_entry *b = workspace_manifest_get(&s->base, e->path);
    if (same_as_base(root_fd, &dc, e, b)) {
      e->has_hash = b->has_hash;
      memcpy(e->hash, b->hash, 32);
      e->box_mtime = b->box_mtime;
      e->box_ctime = b->box_ctime;
      e->racy = b->racy;
      /* Checked by content just now: the host side is settled. */
      if (b->racy & WS_RACY_HOST || b->host_mtime_ns != e->host_mtime_ns)
        workspace_entry_mark_racy(e, stamp, 1, 0);
      if (p->same_records) p->same_records = same_record(e, b);
    } else {
      p->send[p->nsend++] = e;
    }
  }
  workspace_dircache_dispose(&dc);
  for (size_t i = 0; rc == 0 && i < s->base.n; i++) {
    const ws_entry *b = &s->base.v[i];
    const ws_entry *c = workspace_manifest_get(cur, b->path);
    if (c && c->type == b->type) continue;
    if (workspace_excluded(&s->excludes, b->path)) continue;
    p->dels[p->ndel++] = b->path;
  }
  return rc;
}

/* The whole plan: what the upload carries (with every directory above what
 * is sent), the links the engine would refuse, made after it, and the
 * deletions, sorted, each under no other (rm -rf of a directory covers what
 * is under it). */
static int in_plan_make(sm_workspace_sync *s, const side *d, int root_fd, ws_manifest *cur,
                        int valid, int64_t stamp, in_plan *p, sm_error *err) {
  memset(p, 0, sizeof *p);
  workspace_manifest_init(&p->delset);
  int rc = in_plan_compare(s, root_fd, cur, valid, stamp, p, err);
  if (rc == 0)
    rc = workspace_upload_plan(cur, p->send, p->nsend, !d->ops->local && d->t->untouched, &p->pack,
                               &p->npack, &p->later, &p->nlater, err);
  if (rc == 0 && p->ndel > 1) qsort(p->dels, p->ndel, sizeof *p->dels, workspace_cmp_cstr);
  size_t nkeep = 0;
  for (size_t i = 0; rc == 0 && i < p->ndel; i++) {
    if (ancestor_listed(&p->delset, p->dels[i])) continue;
    ws_entry dir;
    memset(&dir, 0, sizeof dir);
    dir.path = p->dels[i];
    dir.type = 'd';
    if (workspace_manifest_add(&p->delset, &dir, NULL) != 0)
      rc = sm_error_set(err, SM_ENOMEM, "out of memory");
    p->dels[nkeep++] = p->dels[i];
  }
  p->ndel = nkeep;
  return rc;
}

/* Before the upload: clears the sandbox's side (wipe), then deletes there
 * what the host deleted. */
static int clear_in(sm_workspace_sync *s, const side *d, int wipe, const in_plan *p,
                    sm_error *err) {
  int rc = 0;
  if (wipe) {
    rc = d->ops->wipe(d, err);
    if (rc == 0) s->wipe_first = s->had_manifest = 0;
  }
  if (rc == 0 && p->ndel > 0) rc = d->ops->remove(d, p->dels, p->ndel, err);
  return rc;
}

/* Sends what the plan says: through the upload under way (up: a fresh
 * sandbox, where nothing was cleared or deleted), else a new one, or into
 * the scratch directory; then the links made after it. */
static int send_in(sm_workspace_sync *s, const side *d, int root_fd, const in_plan *p,
                   ws_early_put *up, int64_t stamp, sm_error *err) {
  int rc = 0;
  if (up) {
    workspace_packer_supply(up->pk, p->pack, p->npack);
    workspace_early_join(up);
    rc = up->rc;
    if (rc) *err = up->err;
    workspace_packer_stats(up->pk, &s->bytes_in, &s->entries_in);
    workspace_packer_free(up->pk);
    up->pk = NULL;
  } else {
    rc = d->ops->put(d, s, root_fd, p, err);
  }
  if (rc == 0 && p->nlater > 0) rc = workspace_box_links(d->t, p->later, p->nlater, err);
  for (size_t i = 0; i < p->nsend; i++) {
    workspace_entry_mark_racy(p->send[i], stamp, 1, 1);
    p->send[i]->state = WS_CHANGED;
  }
  return rc;
}

/* After a copy in that went well: cur is the base (taken), saved unless
 * the manifest on disk already says all of it (unchanged). */
static int commit_in(sm_workspace_sync *s, const sm_workspace_target *t, ws_manifest *cur,
                     int unchanged, size_t ndel, sm_error *err) {
  struct stat mst;
  int same_records = unchanged && s->disk_current && s->manifest_path &&
                     stat(s->manifest_path, &mst) == 0;
  workspace_manifest_dispose(&s->base);
  s->base = *cur;
  s->have_base = 1;
  s->disk_current = same_records;
  if (workspace_manifest_set_target(&s->base, workspace_sync_target_container(t),
                                    t->sandbox_path) != 0)
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  if (s->manifest_path && !same_records) {
    if (workspace_manifest_save(&s->base, &s->held, s->manifest_path, err) != 0)
      return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
    s->disk_current = 1;
  }
  sm_log(SM_LOG_DEBUG, "workspace: copied in %" PRId64 " entries, %" PRId64 " bytes; %zu deleted",
         s->entries_in, s->bytes_in, ndel);
  return 0;
}

/* The host's walk for a copy in; its records are compared with the
 * manifest as of *stamp (when the walk started). */
static int scan_host(sm_workspace_sync *s, int root_fd, ws_manifest *cur, int64_t *stamp,
                     sm_error *err) {
  if (s->have_prescan) {
    workspace_manifest_dispose(cur);
    *cur = s->prescan;
    workspace_manifest_init(&s->prescan);
    s->have_prescan = 0;
    /* Earlier than now: more entries count as racy, never fewer. */
    *stamp = s->prescan_stamp;
    return 0;
  }
  ws_scan_opts so = {&s->excludes, s->max_bytes, s->max_entries, s->max_path, 0};
  return workspace_scan(root_fd, s->host_dir, &so, cur, err);
}

int sm_workspace_sync_in(sm_workspace_sync *s, const sm_workspace_target *t, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  int rc = workspace_sync_check_target(t, err);
  if (rc) return rc;
  s->bytes_in = s->entries_in = 0;
  s->abort_spent = 0;
  int64_t stamp = workspace_now_ns();
  cleanup_fd int root_fd = workspace_sync_open_host(s, err);
  if (root_fd < 0) return root_fd;
  workspace_stage_sweep(root_fd);

  /* Without a base everything is sent: the listing's exec starts now, to be
   * running before the upload. With one, what is sent is often little and
   * the listing comes after the upload as usual. Through the sandbox
   * layer's own way in (t->run) a listing starts in a few ms: no exec
   * ahead of time then. */
  int valid = workspace_sync_base_matches(s, t);
  side d;
  workspace_side_init(&d, t);
  common_buf_reset(&s->sent_listing);
  /* sandman's unpacker lists what it writes: only the engine's upload
   * (an untouched sandbox) needs the listing's exec. */
  ws_prelist pre;
  int have_pre = !d.ops->local && !t->run && !valid && t->untouched &&
                 workspace_prelist_start(&pre, t, s->max_entries, s->max_path) == 0;
  /* A fresh sandbox: nothing to clear first, everything to send. */
  ws_early_put up;
  int early = !d.ops->local && !valid && !s->wipe_first && !s->had_manifest &&
              workspace_early_start(&up, t, root_fd, workspace_sync_abort_budget(s),
                                    have_pre ? &pre : NULL, &s->sent_listing) == 0;

  ws_manifest cur;
  workspace_manifest_init(&cur);
  rc = scan_host(s, root_fd, &cur, &stamp, err);
  if (rc) {
    if (early) workspace_early_cancel(&up, rc);
    if (have_pre) workspace_prelist_drop(&pre);
    workspace_manifest_dispose(&cur);
    return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
  }
  /* No usable record of what the sandbox holds, although one existed (the
   * sandbox was recreated, maybe over an old volume), or a scratch
   * directory: clear it, or stale files would come back as the tool's. */
  int wipe = s->wipe_first || (!valid && (s->had_manifest || d.ops->local));
  if (!valid) workspace_manifest_clear(&s->base);
  if (!valid || wipe) workspace_manifest_clear(&s->held);

  in_plan plan;
  rc = in_plan_make(s, &d, root_fd, &cur, valid, stamp, &plan, err);
  cleanup_fd int scratch_fd = -1;
  if (rc == 0) rc = workspace_side_open(&d, &scratch_fd, err);
  if (rc == 0) rc = clear_in(s, &d, wipe, &plan, err);
  if (rc == 0 && (early || plan.nsend > 0)) {
    rc = send_in(s, &d, root_fd, &plan, early ? &up : NULL, stamp, err);
    early = 0;
    if (rc == 0 && plan.nsend > 0) {
      record_sent(s, &d, have_pre ? &pre : NULL, &cur, plan.send, plan.nsend);
      have_pre = 0;
    }
  }
  if (early) workspace_early_cancel(&up, rc ? rc : SM_ECANCELLED);
  if (have_pre) workspace_prelist_drop(&pre);
  /* What was sent, not the directories that came along. */
  s->entries_in = rc == 0 ? (int64_t)plan.nsend : 0;
  int unchanged = plan.same_records && plan.nsend == 0 && plan.ndel == 0 && !wipe;
  size_t ndel = plan.ndel;
  in_plan_dispose(&plan);
  if (rc) {
    /* The sandbox may hold part of the copy: the old manifest still says
     * what to send next time, so it stays. */
    workspace_manifest_dispose(&cur);
    return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
  }
  return commit_in(s, t, &cur, unchanged, ndel, err);
}
