/* Workspace sync: the public API. Copy in sends a tar of what changed on the
 * host (since the manifest) into the sandbox and deletes there what the host
 * deleted; copy out reads the sandbox's tar through the checking extractor,
 * stages it inside the host workspace and applies it file by file. Mode
 * none runs the very same packer and extractor against a scratch directory.
 * The commands run in the sandbox are in workspace_box.c, the listing started ahead
 * of an upload in prelist.c, the upload started ahead of the scan in
 * early.c, the download's pipe into the extractor in ring.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "common/cleanup.h"
#include "common/thread.h"
#include "workspace/workspace_box.h"
#include "workspace/early.h"
#include "workspace/prelist.h"
#include "workspace/ring.h"
#include "workspace/ws.h"

struct sm_workspace_sync {
  char *host_dir;
  char *manifest_path;
  sm_string_list excludes;
  int64_t max_bytes, max_entries, max_path;
  ws_manifest base;      /* state of both sides after the last sync */
  ws_manifest held;      /* the sandbox's versions of what the host did not get */
  ws_protect *protect;   /* changes never applied to the host (NULL: none) */
  ws_refusal_list refused; /* what the last copy out reports as not applied */
  ws_redact redact;      /* values log lines must not quote */
  int have_base;         /* base describes base.container / base.root */
  int wipe_first;        /* stale sandbox content may be there: clear it */
  int had_manifest;      /* a manifest was on disk (for some sandbox) */
  int disk_current;      /* the manifest file says what base says */
  int64_t bytes_in, entries_in, bytes_out, entries_out;
  int64_t abort_after;
  int64_t abort_spent;   /* bytes counted against abort_after in this copy */
  int last_out_listed;
  int last_out_quick;
  /* What sandman's unpacker wrote, as it listed it (ws_box_put): the ctimes
   * a copy in records, with no listing exec after it. Empty: none. */
  sm_buf sent_listing;
  /* The host's walk made ahead (sm_workspace_sync_new_walked), and when it
   * started: the next copy in's stamp. */
  ws_manifest prescan;
  int have_prescan;
  int64_t prescan_stamp;
};

int ws_sync_last_out_listed(const sm_workspace_sync *sync) { return sync->last_out_listed; }

int ws_sync_last_out_quick(const sm_workspace_sync *sync) { return sync->last_out_quick; }

void ws_sync_abort_after(sm_workspace_sync *sync, int64_t bytes) { sync->abort_after = bytes; }

static int64_t abort_budget(const sm_workspace_sync *s) {
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
  /* As ws_box_list's cap: past it the listing is dropped, not the copy. */
  int64_t listing_cap = s->max_entries * 352;
  sm_buf_init(&s->sent_listing,
              (size_t)(listing_cap > ((int64_t)64 << 20) ? (int64_t)64 << 20 : listing_cap));
  s->abort_after = -1;
  ws_manifest_init(&s->base);
  ws_manifest_init(&s->held);
  ws_manifest_init(&s->prescan);
  /* Protected by default: the built-in list until the caller says otherwise. */
  sm_string_list builtin;
  sm_workspace_protect_defaults(&builtin);
  int prc = ws_protect_new(&s->protect, &builtin, err);
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
  if (ws_manifest_load(&s->base, &s->held, s->manifest_path, s->max_entries, &lerr) != 0) {
    sm_log(SM_LOG_WARN, "workspace: ignoring the manifest (%s); the next copy is a full one",
           lerr.message);
    ws_manifest_clear(&s->base);
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

static int prescan_walk(sm_workspace_sync *s, sm_error *err);

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
  int threaded = sm_thread_start(&th, NULL, walk_main, &j) == 0;
  sync_load(*out);
  if (threaded) pthread_join(th, NULL);
  else walk_main(&j);
  return 0;
}

void sm_workspace_sync_free(sm_workspace_sync *sync) {
  if (sync == NULL) return;
  ws_manifest_dispose(&sync->base);
  ws_manifest_dispose(&sync->held);
  ws_manifest_dispose(&sync->prescan);
  ws_protect_free(sync->protect);
  ws_refusal_list_dispose(&sync->refused);
  ws_redact_dispose(&sync->redact);
  sm_buf_dispose(&sync->sent_listing);
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
  int rc = ws_protect_new(&p, globs, err);
  if (rc) return rc;
  ws_protect_free(s->protect);
  s->protect = p;
  return 0;
}

int sm_workspace_sync_set_redact(sm_workspace_sync *s, const char *const *kv, size_t n,
                                 sm_error *err) {
  if (ws_redact_set(&s->redact, kv, n) != 0) return sm_error_set(err, SM_ENOMEM, "out of memory");
  return 0;
}

size_t sm_workspace_sync_refused(const sm_workspace_sync *s, const sm_workspace_refusal **out) {
  if (out) *out = s->refused.v;
  return s->refused.n;
}

const char *sm_workspace_refusal_text(const char *reason) {
  return ws_reason_text(ws_reason_parse(reason));
}

int sm_workspace_protect_check(const char *glob, sm_error *err) {
  return ws_protect_glob_check(glob ? glob : "", err);
}

void sm_workspace_free_list(char **list, size_t n) {
  if (list == NULL) return;
  for (size_t i = 0; i < n; i++) free(list[i]);
  free(list);
}

static int check_target(const sm_workspace_target *t, sm_error *err) {
  if (t == NULL || t->sandbox_path == NULL || t->sandbox_path[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no sandbox workspace path given");
  if (t->engine && (t->container_id == NULL || t->container_id[0] == '\0'))
    return sm_error_set(err, SM_EINVAL, "no container given for the workspace copy");
  if (t->engine && t->sandbox_path[0] != '/')
    return sm_error_set(err, SM_EINVAL, "sandbox workspace path '%s' is not absolute",
                        t->sandbox_path);
  return 0;
}

static const char *target_container(const sm_workspace_target *t) {
  return t->engine ? t->container_id : "";
}

/* Does the manifest describe this very sandbox? */
static int base_matches(const sm_workspace_sync *s, const sm_workspace_target *t) {
  return s->have_base && s->base.root && strcmp(s->base.container, target_container(t)) == 0 &&
         strcmp(s->base.root, t->sandbox_path) == 0;
}

/* ---- the side a copy goes to and comes from: the sandbox (through its
 * engine) or, in mode none, a scratch folder on the host. The copy's steps
 * are the same; each side's ops do them its way. ---- */

typedef struct in_plan in_plan;
typedef struct side side;
typedef struct side_ops {
  /* A scratch folder: nothing runs in it between copies, so a copy in
   * clears it when no base describes it, and it is listed before any read
   * (its reads pack from the listing); nothing is started ahead. */
  int local;
  size_t max_roots; /* single-path reads worth making before one full read */
  int (*wipe)(const side *d, sm_error *err);
  int (*remove)(const side *d, char **paths, size_t n, sm_error *err);
  int (*put)(const side *d, sm_workspace_sync *s, int root_fd, const in_plan *p, sm_error *err);
  /* The listing; base_total: the bytes the base holds (a scan's cap). */
  int (*list)(const side *d, const sm_workspace_sync *s, int64_t base_total, ws_manifest *listing,
              sm_error *err);
  /* The listing of the n entries just sent (or all). */
  int (*list_sent)(const side *d, const sm_workspace_sync *s, ws_entry **sent, size_t n,
                   int64_t base_total, ws_manifest *listing, sm_error *err);
  /* Reads root (NULL: everything, named under prefix) into the extractor;
   * listing: the side's listing, or NULL when it has none. */
  int (*fetch)(const side *d, sm_workspace_sync *s, ws_extract *x, ws_manifest *listing,
               const char *root, const char *prefix, sm_error *err);
} side_ops;

struct side {
  const side_ops *ops;
  const sm_workspace_target *t;
  int fd; /* the scratch folder (borrowed), else -1 */
};

static const side_ops side_engine, side_scratch;

static void side_init(side *d, const sm_workspace_target *t) {
  d->ops = t->engine ? &side_engine : &side_scratch;
  d->t = t;
  d->fd = -1;
}

static int open_scratch(const char *path, sm_error *err);

/* Opens a scratch folder (made on demand) into *fd, which the caller
 * closes; the engine's side has nothing to open. */
static int side_open(side *d, int *fd, sm_error *err) {
  if (!d->ops->local) return 0;
  *fd = open_scratch(d->t->sandbox_path, err);
  if (*fd < 0) return *fd;
  d->fd = *fd;
  return 0;
}

static int open_host(const sm_workspace_sync *s, sm_error *err) {
  int fd = open(s->host_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, errno, "workspace %s", s->host_dir);
  return fd;
}

static const char *last_component(const char *path, char *buf, size_t len) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  size_t start = n;
  while (start > 0 && path[start - 1] != '/') start--;
  snprintf(buf, len, "%.*s", (int)(n - start), path + start);
  return buf;
}

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

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
    if (ws_is_reserved(de->d_name)) continue;
    int r = ws_remove_tree(fd, de->d_name);
    if (r) rc = sm_error_set_errno(err, SM_EIO, -r, "clearing the scratch directory");
  }
  closedir(d);
  return rc;
}

static int open_scratch(const char *path, sm_error *err) {
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

/* ---- copy in ---- */

static int ancestor_listed(const ws_manifest *set, const char *path) {
  size_t len = strlen(path);
  char *buf = malloc(len + 1);
  if (buf == NULL) return 0;
  memcpy(buf, path, len + 1);
  int hit = 0;
  for (size_t i = len; i > 0 && !hit; i--) {
    if (buf[i - 1] != '/') continue;
    buf[i - 1] = '\0';
    hit = ws_manifest_get(set, buf) != NULL;
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
  int dfd = ws_dircache_parent(dc, e->path, &name, 0);
  int fd = dfd >= 0 ? openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
  if (fd < 0) return 0;
  unsigned char h[32];
  int64_t n = 0;
  int ok = ws_hash_fd(fd, h, &n) == 0 && n == e->size && memcmp(h, b->hash, 32) == 0;
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

static int copy_in_local(sm_workspace_sync *s, const sm_workspace_target *t, int scratch_fd,
                         ws_packer *pk, sm_error *err) {
  cleanup_free char *stage = NULL;
  int stage_fd = ws_stage_create(scratch_fd, t->sandbox_path, &stage, err);
  if (stage_fd < 0) return stage_fd;
  ws_extract x;
  ws_extract_init(&x);
  x.stage_fd = stage_fd;
  x.root_fd = scratch_fd;
  x.trusted = 1;
  x.max_bytes = s->max_bytes;
  x.max_entries = s->max_entries;
  x.max_path = s->max_path;
  int rc = ws_extract_run(&x, ws_packer_read, pk, err);
  if (rc && ws_packer_error(pk)->code) *err = *ws_packer_error(pk);
  ws_apply_result res = {0};
  if (rc == 0) rc = ws_apply(scratch_fd, &x, 0, 0, &res, err);
  ws_apply_result_dispose(&res);
  ws_stage_remove(scratch_fd, stage, stage_fd);
  ws_extract_dispose(&x);
  return rc;
}

/* Notes the ctime each entry just sent has in the sandbox, so that the copy
 * out can tell the tool's changes from ours exactly. Without a listing the
 * sent entries are compared in full next time. */
static void record_sent(const sm_workspace_sync *s, const side *d, ws_prelist *pre,
                        ws_manifest *cur, ws_entry **sent, size_t nsent) {
  ws_manifest listing;
  ws_manifest_init(&listing);
  sm_error lerr = SM_ERROR_INIT;
  int64_t t0 = ws_now_ns();
  int rc = -1;
  if (s->sent_listing.len > 0) {
    /* The unpacker's own listing of what it wrote. */
    rc = ws_probe_parse(s->sent_listing.data, s->sent_listing.len, s->max_entries, s->max_path,
                        &listing, &lerr);
    if (rc) {
      sm_log(SM_LOG_DEBUG, "workspace: the unpacker's listing is unusable (%s)", lerr.message);
      sm_error_clear(&lerr);
    } else if (pre) {
      ws_prelist_drop(pre);
    }
  }
  if (rc == 0) {
  } else if (pre) {
    ws_prelist_finish(pre, 1);
    t0 = pre->t_go;
    rc = pre->rc;
    lerr = pre->err;
    ws_manifest_dispose(&listing);
    listing = pre->listing;
    ws_manifest_init(&pre->listing);
  } else {
    rc = d->ops->list_sent(d, s, sent, nsent, cur->total_size, &listing, &lerr);
  }
  if (rc) sm_log(SM_LOG_DEBUG, "workspace: no listing after the copy in (%s)", lerr.message);
  else
    sm_log(SM_LOG_DEBUG, "workspace: listing after the copy in: %zu entries in %" PRId64 " ms",
           listing.n, (ws_now_ns() - t0) / 1000000);
  ws_probe_record(cur, rc == 0 ? &listing : NULL, WS_CHANGED);
  for (size_t i = 0; i < cur->n; i++) cur->v[i].state = WS_SAME;
  ws_manifest_dispose(&listing);
}

/* Sends pack (a packer each try: a missing unpacker is installed once and
 * the copy starts again). */
static int put_entries(sm_workspace_sync *s, const sm_workspace_target *t, int root_fd,
                       ws_entry **pack, size_t npack, sm_buf *listing, sm_error *err) {
  for (int attempt = 0;; attempt++) {
    ws_packer *pk = NULL;
    int rc = ws_packer_new(&pk, root_fd, pack, npack, "", t->uid, t->gid, err);
    if (rc) return rc;
    if (s->abort_after >= 0) ws_packer_abort_after(pk, abort_budget(s));
    int missing = 0;
    if (listing) sm_buf_reset(listing);
    rc = ws_box_put(t, ws_packer_read, pk, &missing, listing, err);
    if (rc) ws_packer_reason(pk, err);
    ws_packer_stats(pk, &s->bytes_in, &s->entries_in);
    ws_packer_free(pk);
    if (!missing || attempt > 0) return rc;
    sm_error_clear(err);
    rc = ws_box_install_unpacker(t, err);
    if (rc) return rc;
  }
}

/* What a copy in does: the entries to send (and what the upload carries:
 * pack, then the links made after it: later), and the paths the sandbox has
 * that the host no longer has (dels; none under another). */
struct in_plan {
  ws_entry **send, **pack, **later;
  size_t nsend, npack, nlater;
  char **dels;
  size_t ndel;
  ws_manifest delset;
  int same_records; /* every record is as the saved manifest says */
};

static void in_plan_dispose(in_plan *p) {
  free(p->pack);
  free(p->later);
  free(p->send);
  free(p->dels);
  ws_manifest_dispose(&p->delset);
}

/* Compares the host's scan cur with the base: what to send, what to delete. */
static int in_plan_compare(sm_workspace_sync *s, int root_fd, ws_manifest *cur, int valid,
                           int64_t stamp, in_plan *p, sm_error *err) {
  int rc = 0;
  p->send = calloc(cur->n + 1, sizeof *p->send);
  p->dels = calloc(s->base.n + 1, sizeof *p->dels);
  ws_dircache dc;
  ws_dircache_init(&dc, root_fd);
  if (p->send == NULL || p->dels == NULL) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  /* The saved manifest already says all there is (nothing to send, nothing
   * gone, every record as it was): it is not written again. */
  p->same_records = valid && cur->n == s->base.n;
  for (size_t i = 0; rc == 0 && i < cur->n; i++) {
    ws_entry *e = &cur->v[i];
    const ws_entry *b = ws_manifest_get(&s->base, e->path);
    if (same_as_base(root_fd, &dc, e, b)) {
      e->has_hash = b->has_hash;
      memcpy(e->hash, b->hash, 32);
      e->box_mtime = b->box_mtime;
      e->box_ctime = b->box_ctime;
      e->racy = b->racy;
      /* Checked by content just now: the host side is settled. */
      if (b->racy & WS_RACY_HOST || b->host_mtime_ns != e->host_mtime_ns)
        ws_entry_mark_racy(e, stamp, 1, 0);
      if (p->same_records) p->same_records = same_record(e, b);
    } else {
      p->send[p->nsend++] = e;
    }
  }
  ws_dircache_dispose(&dc);
  for (size_t i = 0; rc == 0 && i < s->base.n; i++) {
    const ws_entry *b = &s->base.v[i];
    const ws_entry *c = ws_manifest_get(cur, b->path);
    if (c && c->type == b->type) continue;
    if (ws_excluded(&s->excludes, b->path)) continue;
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
  ws_manifest_init(&p->delset);
  int rc = in_plan_compare(s, root_fd, cur, valid, stamp, p, err);
  if (rc == 0)
    rc = ws_upload_plan(cur, p->send, p->nsend, !d->ops->local && d->t->untouched, &p->pack,
                        &p->npack, &p->later, &p->nlater, err);
  if (rc == 0 && p->ndel > 1) qsort(p->dels, p->ndel, sizeof *p->dels, cmp_cstr);
  size_t nkeep = 0;
  for (size_t i = 0; rc == 0 && i < p->ndel; i++) {
    if (ancestor_listed(&p->delset, p->dels[i])) continue;
    ws_entry dir;
    memset(&dir, 0, sizeof dir);
    dir.path = p->dels[i];
    dir.type = 'd';
    if (ws_manifest_add(&p->delset, &dir, NULL) != 0)
      rc = sm_error_set(err, SM_ENOMEM, "out of memory");
    p->dels[nkeep++] = p->dels[i];
  }
  p->ndel = nkeep;
  return rc;
}

/* Mode none: deletes dels in the scratch directory. */
static int scratch_delete(int scratch_fd, char **dels, size_t ndel, sm_error *err) {
  int rc = 0;
  ws_dircache sdc;
  ws_dircache_init(&sdc, scratch_fd);
  for (size_t i = 0; rc == 0 && i < ndel; i++) {
    const char *name;
    int dfd = ws_dircache_parent(&sdc, dels[i], &name, 0);
    if (dfd < 0) continue;
    int r = ws_remove_tree(dfd, name);
    if (r) rc = sm_error_set_errno(err, SM_EIO, -r, "deleting '%s' in the scratch directory",
                                   dels[i]);
  }
  ws_dircache_dispose(&sdc);
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

/* Mode none: packs what the plan sends into the scratch directory. */
static int put_scratch(sm_workspace_sync *s, const sm_workspace_target *t, int root_fd,
                       int scratch_fd, const in_plan *p, sm_error *err) {
  ws_packer *pk = NULL;
  int rc = ws_packer_new(&pk, root_fd, p->pack, p->npack, "", t->uid, t->gid, err);
  if (rc) return rc;
  if (s->abort_after >= 0) ws_packer_abort_after(pk, abort_budget(s));
  rc = copy_in_local(s, t, scratch_fd, pk, err);
  if (rc) ws_packer_reason(pk, err);
  ws_packer_stats(pk, &s->bytes_in, &s->entries_in);
  ws_packer_free(pk);
  return rc;
}

/* Sends what the plan says: through the upload under way (up: a fresh
 * sandbox, where nothing was cleared or deleted), else a new one, or into
 * the scratch directory; then the links made after it. */
static int send_in(sm_workspace_sync *s, const side *d, int root_fd, const in_plan *p,
                   ws_early_put *up, int64_t stamp, sm_error *err) {
  int rc = 0;
  if (up) {
    ws_packer_supply(up->pk, p->pack, p->npack);
    ws_early_join(up);
    rc = up->rc;
    if (rc) *err = up->err;
    ws_packer_stats(up->pk, &s->bytes_in, &s->entries_in);
    ws_packer_free(up->pk);
    up->pk = NULL;
  } else {
    rc = d->ops->put(d, s, root_fd, p, err);
  }
  if (rc == 0 && p->nlater > 0) rc = ws_box_links(d->t, p->later, p->nlater, err);
  for (size_t i = 0; i < p->nsend; i++) {
    ws_entry_mark_racy(p->send[i], stamp, 1, 1);
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
  ws_manifest_dispose(&s->base);
  s->base = *cur;
  s->have_base = 1;
  s->disk_current = same_records;
  if (ws_manifest_set_target(&s->base, target_container(t), t->sandbox_path) != 0)
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  if (s->manifest_path && !same_records) {
    if (ws_manifest_save(&s->base, &s->held, s->manifest_path, err) != 0)
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
    ws_manifest_dispose(cur);
    *cur = s->prescan;
    ws_manifest_init(&s->prescan);
    s->have_prescan = 0;
    /* Earlier than now: more entries count as racy, never fewer. */
    *stamp = s->prescan_stamp;
    return 0;
  }
  ws_scan_opts so = {&s->excludes, s->max_bytes, s->max_entries, s->max_path, 0};
  return ws_scan(root_fd, s->host_dir, &so, cur, err);
}

static int prescan_walk(sm_workspace_sync *s, sm_error *err) {
  s->have_prescan = 0;
  int64_t stamp = ws_now_ns();
  cleanup_fd int root_fd = open_host(s, err);
  if (root_fd < 0) return root_fd;
  ws_scan_opts so = {&s->excludes, s->max_bytes, s->max_entries, s->max_path, 0};
  int rc = ws_scan(root_fd, s->host_dir, &so, &s->prescan, err);
  if (rc) {
    ws_manifest_clear(&s->prescan);
    return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
  }
  s->have_prescan = 1;
  s->prescan_stamp = stamp;
  return 0;
}

int sm_workspace_sync_in(sm_workspace_sync *s, const sm_workspace_target *t, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  int rc = check_target(t, err);
  if (rc) return rc;
  s->bytes_in = s->entries_in = 0;
  s->abort_spent = 0;
  int64_t stamp = ws_now_ns();
  cleanup_fd int root_fd = open_host(s, err);
  if (root_fd < 0) return root_fd;
  ws_stage_sweep(root_fd);

  /* Without a base everything is sent: the listing's exec starts now, to be
   * running before the upload. With one, what is sent is often little and
   * the listing comes after the upload as usual. Through the sandbox
   * layer's own way in (t->run) a listing starts in a few ms: no exec
   * ahead of time then. */
  int valid = base_matches(s, t);
  side d;
  side_init(&d, t);
  sm_buf_reset(&s->sent_listing);
  /* sandman's unpacker lists what it writes: only the engine's upload
   * (an untouched sandbox) needs the listing's exec. */
  ws_prelist pre;
  int have_pre = !d.ops->local && !t->run && !valid && t->untouched &&
                 ws_prelist_start(&pre, t, s->max_entries, s->max_path) == 0;
  /* A fresh sandbox: nothing to clear first, everything to send. */
  ws_early_put up;
  int early = !d.ops->local && !valid && !s->wipe_first && !s->had_manifest &&
              ws_early_start(&up, t, root_fd, abort_budget(s), have_pre ? &pre : NULL,
                             &s->sent_listing) == 0;

  ws_manifest cur;
  ws_manifest_init(&cur);
  rc = scan_host(s, root_fd, &cur, &stamp, err);
  if (rc) {
    if (early) ws_early_cancel(&up, rc);
    if (have_pre) ws_prelist_drop(&pre);
    ws_manifest_dispose(&cur);
    return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
  }
  /* No usable record of what the sandbox holds, although one existed (the
   * sandbox was recreated, maybe over an old volume), or a scratch
   * directory: clear it, or stale files would come back as the tool's. */
  int wipe = s->wipe_first || (!valid && (s->had_manifest || d.ops->local));
  if (!valid) ws_manifest_clear(&s->base);
  if (!valid || wipe) ws_manifest_clear(&s->held);

  in_plan plan;
  rc = in_plan_make(s, &d, root_fd, &cur, valid, stamp, &plan, err);
  cleanup_fd int scratch_fd = -1;
  if (rc == 0) rc = side_open(&d, &scratch_fd, err);
  if (rc == 0) rc = clear_in(s, &d, wipe, &plan, err);
  if (rc == 0 && (early || plan.nsend > 0)) {
    rc = send_in(s, &d, root_fd, &plan, early ? &up : NULL, stamp, err);
    early = 0;
    if (rc == 0 && plan.nsend > 0) {
      record_sent(s, &d, have_pre ? &pre : NULL, &cur, plan.send, plan.nsend);
      have_pre = 0;
    }
  }
  if (early) ws_early_cancel(&up, rc ? rc : SM_ECANCELLED);
  if (have_pre) ws_prelist_drop(&pre);
  /* What was sent, not the directories that came along. */
  s->entries_in = rc == 0 ? (int64_t)plan.nsend : 0;
  int unchanged = plan.same_records && plan.nsend == 0 && plan.ndel == 0 && !wipe;
  size_t ndel = plan.ndel;
  in_plan_dispose(&plan);
  if (rc) {
    /* The sandbox may hold part of the copy: the old manifest still says
     * what to send next time, so it stays. */
    ws_manifest_dispose(&cur);
    return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
  }
  return commit_in(s, t, &cur, unchanged, ndel, err);
}

/* ---- copy out ---- */

/* Streams box_path through the extractor, counting what it read against
 * the copy's abort budget. */
static int fetch_engine(sm_workspace_sync *s, const sm_workspace_target *t, ws_extract *x,
                        const char *box_path, sm_error *err) {
  int64_t pushed = 0;
  int rc = ws_ring_fetch(t, box_path, x, abort_budget(s), &pushed, err);
  s->abort_spent += pushed;
  return rc;
}

/* Mode none: the scratch directory's listing, in the probe's terms. */
static int list_local(const sm_workspace_sync *s, int sfd, const char *path, int64_t base_total,
                      ws_manifest *listing, sm_error *err) {
  ws_scan_opts so = {&s->excludes, s->max_bytes + base_total, s->max_entries, s->max_path, 1};
  int rc = ws_scan(sfd, path, &so, listing, err);
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
    if (listing->v[i].type == 's') continue; /* never in a tar: ws_refusal_sockets */
    if (root == NULL || strcmp(p, root) == 0 || (strncmp(p, root, rlen) == 0 && p[rlen] == '/'))
      items[n++] = &listing->v[i];
  }
  size_t cut = 0;
  if (root && strrchr(root, '/')) cut = (size_t)(strrchr(root, '/') - root) + 1;
  ws_packer *pk = NULL;
  int rc = ws_packer_new(&pk, sfd, items, n, root ? "" : prefix, 0, 0, err);
  if (rc == 0) {
    ws_packer_set_cut(pk, cut);
    if (s->abort_after >= 0) ws_packer_abort_after(pk, abort_budget(s));
    rc = ws_extract_run(x, ws_packer_read, pk, err);
    if (rc && ws_packer_error(pk)->code) *err = *ws_packer_error(pk);
    s->abort_spent += ws_packer_produced(pk);
  }
  ws_packer_free(pk);
  free(items);
  return rc;
}

/* Each fetch is one archive request, which costs the engine a mount and a
 * tar process (tens of ms): past a few, one full read is cheaper. A local
 * fetch is cheap. */
#define PROBE_MAX_ROOTS_ENGINE 8
#define PROBE_MAX_ROOTS_LOCAL 512

static int engine_wipe(const side *d, sm_error *err) { return ws_box_wipe(d->t, err); }

static int engine_remove(const side *d, char **paths, size_t n, sm_error *err) {
  return ws_box_delete(d->t, paths, n, err);
}

static int engine_put(const side *d, sm_workspace_sync *s, int root_fd, const in_plan *p,
                      sm_error *err) {
  return p->npack > 0 ? put_entries(s, d->t, root_fd, p->pack, p->npack, &s->sent_listing, err)
                      : 0;
}

static int engine_list(const side *d, const sm_workspace_sync *s, int64_t base_total,
                       ws_manifest *listing, sm_error *err) {
  (void)base_total;
  return ws_box_list(d->t->engine, d->t, s->max_entries, s->max_path, NULL, NULL, listing, err);
}

static int engine_list_sent(const side *d, const sm_workspace_sync *s, ws_entry **sent, size_t n,
                            int64_t base_total, ws_manifest *listing, sm_error *err) {
  (void)base_total;
  return ws_box_list_sent(d->t, s->max_entries, s->max_path, sent, n, listing, err);
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

static const side_ops side_engine = {
    .local = 0,
    .max_roots = PROBE_MAX_ROOTS_ENGINE,
    .wipe = engine_wipe,
    .remove = engine_remove,
    .put = engine_put,
    .list = engine_list,
    .list_sent = engine_list_sent,
    .fetch = engine_fetch,
};

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
  if (listing == NULL) return SM_EIO;
  return fetch_local(s, d->fd, listing, x, root, prefix, err);
}

static const side_ops side_scratch = {
    .local = 1,
    .max_roots = PROBE_MAX_ROOTS_LOCAL,
    .wipe = scratch_wipe_op,
    .remove = scratch_remove,
    .put = scratch_put,
    .list = scratch_list,
    .list_sent = scratch_list_sent,
    .fetch = scratch_fetch,
};

static void extract_setup(ws_extract *x, sm_workspace_sync *s, int root_fd, int stage_fd,
                          int valid) {
  ws_extract_init(x);
  x->stage_fd = stage_fd;
  x->root_fd = root_fd;
  x->base = valid ? &s->base : NULL;
  x->held = valid ? &s->held : NULL;
  x->excludes = &s->excludes;
  x->max_bytes = s->max_bytes;
  x->max_entries = s->max_entries;
  x->max_path = s->max_path;
  x->redact = &s->redact;
  x->verify = 1;
}

/* Lists the side (unless it is listed already) and fetches only what
 * changed. Returns 0, a refusal (then the sync fails), or another error
 * after which the caller copies everything instead. */
static int fetch_changed(sm_workspace_sync *s, const side *d, ws_extract *x,
                         ws_manifest *listing, int *listed, sm_error *err) {
  int rc = *listed ? 0 : d->ops->list(d, s, 0, listing, err);
  if (rc == 0) *listed = 1;
  if (rc == 0) x->listing = listing;
  char **roots = NULL;
  size_t nroots = 0;
  size_t max_roots = d->ops->max_roots;
  if (rc == 0) rc = ws_probe_plan(x, listing, max_roots, &roots, &nroots, err);
  if (rc == 1) rc = sm_error_set(err, SM_ETOOBIG, "more than %zu changed paths", max_roots);
  if (rc == 0)
    sm_log(SM_LOG_DEBUG, "workspace: listing of %zu entries, %zu changed path(s) to fetch",
           listing->n, nroots);
  for (size_t i = 0; rc == 0 && i < nroots; i++) {
    const char *slash = strrchr(roots[i], '/');
    x->strip = slash ? slash + 1 : roots[i];
    x->place = roots[i];
    rc = d->ops->fetch(d, s, x, listing, roots[i], "", err);
  }
  ws_probe_free_roots(roots, nroots);
  x->place = NULL;
  return rc;
}

static int sorted_copy(char **src, size_t n, char ***out, size_t *out_n) {
  if (out == NULL) return 0;
  *out = NULL;
  if (out_n) *out_n = 0;
  char **v = calloc(n + 1, sizeof *v);
  if (v == NULL) return SM_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    v[i] = strdup(src[i]);
    if (v[i] == NULL) {
      sm_workspace_free_list(v, i);
      return SM_ENOMEM;
    }
  }
  if (n > 1) qsort(v, n, sizeof *v, cmp_cstr);
  *out = v;
  if (out_n) *out_n = n;
  return 0;
}

/* Starts the extractor and its stage afresh for a full copy out, after a
 * partial one was given up. */
static int restage(sm_workspace_sync *s, int root_fd, int valid, ws_extract *x, char **stage,
                   int *stage_fd, sm_error *err) {
  ws_extract_dispose(x);
  ws_stage_remove(root_fd, *stage, *stage_fd);
  free(*stage);
  *stage = NULL;
  *stage_fd = ws_stage_create(root_fd, s->host_dir, stage, err);
  if (*stage_fd < 0) return *stage_fd;
  extract_setup(x, s, root_fd, *stage_fd, valid);
  return 0;
}

/* Reads the sandbox's side into the extractor: only what changed when the
 * base describes this sandbox and a listing says what, else everything
 * (named under prefix). A full read after a partial one gets a new stage
 * (*stage, *stage_fd; *stage_fd < 0 when that failed). */
static int read_out(sm_workspace_sync *s, const side *d, int root_fd, int valid,
                    const char *prefix, ws_extract *x, char **stage, int *stage_fd,
                    ws_manifest *listing, int *listed, sm_error *err) {
  int rc = 0;
  if (d->ops->local) {
    rc = d->ops->list(d, s, valid ? s->base.total_size : 0, listing, err);
    *listed = rc == 0;
  }
  int done = 0;
  if (rc == 0 && valid) {
    sm_error perr = SM_ERROR_INIT;
    int prc = fetch_changed(s, d, x, listing, listed, &perr);
    if (prc == 0) {
      done = 1;
      s->last_out_listed = 1;
    } else if (prc == SM_EUNSAFE || (prc == SM_ETOOBIG && x->entries + x->bytes_staged > 0)) {
      *err = perr;
      rc = prc;
    } else {
      /* The listing could not be had or used: copy everything instead. */
      sm_log(SM_LOG_DEBUG, "workspace: full copy out (%s)", perr.message);
      rc = restage(s, root_fd, valid, x, stage, stage_fd, err);
      if (rc) return rc;
    }
  }
  if (rc == 0 && !done) {
    x->strip = prefix;
    /* A listing that was had but not used (too many changes) still tells
     * which files changed behind the same size and mtime. */
    x->listing = *listed ? listing : NULL;
    rc = d->ops->fetch(d, s, x, *listed ? listing : NULL, NULL, prefix, err);
  }
  return rc;
}

/* Files the reads found changed behind the manifest's size, mtime and mode
 * (hashed as they streamed by, not staged: ws_extract.verify) are read
 * again, this time staged: each alone when they are few, else in one more
 * full read that skips every other entry. One gone meanwhile counts as
 * deleted by the tool. */
static int read_again(sm_workspace_sync *s, const side *d, ws_extract *x, ws_manifest *listing,
                      const char *prefix, sm_error *err) {
  if (x->again.n == 0) return 0;
  sm_log(SM_LOG_DEBUG, "workspace: %zu file(s) changed behind their size and mtime: read again",
         x->again.n);
  x->only = &x->again;
  int rc = 0;
  if (x->again.n <= d->ops->max_roots) {
    for (size_t i = 0; rc == 0 && i < x->again.n; i++) {
      const char *p = x->again.v[i].path;
      const char *slash = strrchr(p, '/');
      x->strip = slash ? slash + 1 : p;
      x->place = p;
      rc = d->ops->fetch(d, s, x, listing, p, "", err);
      if (rc == SM_ENOTFOUND) {
        sm_error_clear(err);
        rc = 0;
      }
    }
    x->place = NULL;
  } else {
    x->strip = prefix;
    rc = d->ops->fetch(d, s, x, listing, NULL, prefix, err);
  }
  x->only = NULL;
  return rc;
}

/* After a copy out that went well: the sandbox's side (x->box, taken) is
 * now the reference for both directions, nheld (taken) what it holds that
 * the host did not get; listing (or NULL) what is known of its times. */
static int commit_out(sm_workspace_sync *s, const sm_workspace_target *t, ws_extract *x,
                      ws_manifest *nheld, const ws_manifest *listing, int64_t stamp) {
  ws_manifest nb = x->box;
  ws_manifest_init(&x->box);
  ws_manifest_dispose(&s->base);
  s->base = nb;
  s->disk_current = 0;
  s->have_base = 1;
  for (size_t i = 0; i < s->base.n; i++) {
    ws_entry *e = &s->base.v[i];
    if (e->state != WS_SAME) ws_entry_mark_racy(e, stamp, e->state == WS_CHANGED, 1);
    e->state = WS_SAME;
  }
  ws_manifest_dispose(&s->held);
  s->held = *nheld;
  ws_probe_record(&s->base, listing, -1);
  ws_probe_record(&s->held, listing, -1);
  return ws_manifest_set_target(&s->base, target_container(t), t->sandbox_path);
}

/* The digest the manifest gives, worked out while the sandbox works out
 * its own. */
typedef struct expect_job {
  ws_expected *x;
  char hex[65];
  uint64_t count;
} expect_job;

static void *expect_main(void *ud) {
  expect_job *j = ud;
  ws_expected_digest(j->x, j->hex, &j->count);
  return NULL;
}

/* The copy out's quick check (unchanged.c): 1 when the sandbox's digest is
 * the one the manifest gives, so there is nothing to fetch, apply or
 * report; 0 when the listing must decide (no agent session, a manifest
 * the check cannot vouch for, no digest, another one). */
static int quick_unchanged(const sm_workspace_sync *s, const sm_workspace_target *t) {
  if (!t->engine || t->run == NULL) return 0;
  int64_t t0 = ws_now_ns();
  expect_job j = {0};
  if (!ws_expected_collect(&s->base, &s->held, &s->excludes, &j.x)) {
    sm_log(SM_LOG_DEBUG, "workspace: no quick check (the manifest has entries only a listing "
           "can show unchanged)");
    return 0;
  }
  pthread_t th;
  int threaded = sm_thread_start(&th, NULL, expect_main, &j) == 0;
  char got[65];
  uint64_t ngot = 0;
  sm_error derr = SM_ERROR_INIT;
  int drc = ws_box_digest(t, s->max_entries, &s->excludes, got, &ngot, &derr);
  if (threaded) pthread_join(th, NULL);
  else expect_main(&j);
  ws_expected_free(j.x);
  if (drc != 0) {
    sm_log(SM_LOG_DEBUG, "workspace: no digest from the sandbox (%s)", derr.message);
    return 0;
  }
  int same = ngot == j.count && strcmp(got, j.hex) == 0;
  sm_log(SM_LOG_DEBUG, "workspace: the sandbox's digest of %" PRIu64 " entries %s the "
         "manifest's (%" PRId64 " ms)", ngot, same ? "is" : "is not", (ws_now_ns() - t0) / 1000000);
  return same;
}

/* Saves the manifest and logs what the copy out did not apply. */
static int finish_out(sm_workspace_sync *s, sm_error *err) {
  if (s->manifest_path && ws_manifest_save(&s->base, &s->held, s->manifest_path, err) != 0)
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  for (size_t i = 0; i < s->refused.n; i++) {
    char lp[4096];
    sm_log(SM_LOG_DEBUG, "workspace: not applied to the host: '%s' (%s)",
           ws_log_path(&s->redact, s->refused.v[i].path, lp, sizeof lp),
           ws_reason_text(ws_reason_parse(s->refused.v[i].reason)));
  }
  s->disk_current = s->manifest_path != NULL;
  sm_log(SM_LOG_DEBUG, "workspace: copied out %" PRId64 " changes, %" PRId64 " bytes",
         s->entries_out, s->bytes_out);
  return 0;
}

int sm_workspace_sync_out(sm_workspace_sync *s, const sm_workspace_target *t,
                          char ***files_changed, size_t *n_files_changed, char ***conflicts,
                          size_t *n_conflicts, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  if (files_changed) *files_changed = NULL;
  if (n_files_changed) *n_files_changed = 0;
  if (conflicts) *conflicts = NULL;
  if (n_conflicts) *n_conflicts = 0;
  int rc = check_target(t, err);
  if (rc) return rc;
  s->bytes_out = s->entries_out = 0;
  s->abort_spent = 0;
  s->last_out_listed = 0;
  s->last_out_quick = 0;
  ws_refusal_list_clear(&s->refused);
  int64_t stamp = ws_now_ns();
  cleanup_fd int root_fd = open_host(s, err);
  if (root_fd < 0) return root_fd;
  int valid = base_matches(s, t);
  if (valid && quick_unchanged(s, t)) {
    /* Nothing changed: the base and held sets stand as they are. */
    s->last_out_quick = 1;
    if (s->manifest_path && !s->disk_current) return finish_out(s, err);
    return 0;
  }
  if (!valid)
    sm_log(SM_LOG_WARN, "workspace: no copy-in record for this sandbox; nothing is deleted on "
           "the host and every file counts as new");
  side d;
  side_init(&d, t);
  cleanup_fd int sfd = -1;
  if (side_open(&d, &sfd, err) != 0)
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  cleanup_free char *stage = NULL;
  int stage_fd = ws_stage_create(root_fd, s->host_dir, &stage, err);
  if (stage_fd < 0) return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  ws_extract x;
  extract_setup(&x, s, root_fd, stage_fd, valid);
  char prefix[256];
  last_component(t->sandbox_path, prefix, sizeof prefix);
  ws_manifest listing;
  ws_manifest_init(&listing);
  int listed = 0;
  rc = read_out(s, &d, root_fd, valid, prefix, &x, &stage, &stage_fd, &listing, &listed, err);
  if (rc == 0 && stage_fd >= 0) rc = read_again(s, &d, &x, listed ? &listing : NULL, prefix, err);
  if (stage_fd < 0) {
    ws_manifest_dispose(&listing);
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  }
  /* Per entry: what the host does not get is refused, the rest applies. */
  if (rc == 0) rc = ws_refusal_sockets(&x, listed ? &listing : NULL, err);
  if (rc == 0) rc = ws_refusal_decide(&x, s->protect, valid, err);
  ws_apply_result res = {0};
  if (rc == 0) rc = ws_apply(root_fd, &x, 1, valid, &res, err);
  ws_stage_remove(root_fd, stage, stage_fd);
  ws_manifest nheld;
  ws_manifest_init(&nheld);
  if (rc == 0) rc = ws_refusal_report(&x, &s->refused, err);
  if (rc == 0) rc = ws_refusal_hold(&x.box, valid ? &s->base : NULL, &nheld, err);
  if (rc) {
    ws_manifest_dispose(&nheld);
    ws_manifest_dispose(&listing);
    ws_apply_result_dispose(&res);
    ws_extract_dispose(&x);
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  }
  s->bytes_out = x.bytes_staged;
  s->entries_out = res.entries;
  rc = commit_out(s, t, &x, &nheld, listed ? &listing : NULL, stamp);
  ws_manifest_dispose(&listing);
  if (rc == 0 && (sorted_copy(res.changed, res.n_changed, files_changed, n_files_changed) != 0 ||
                  sorted_copy(res.conflicts, res.n_conflicts, conflicts, n_conflicts) != 0))
    rc = SM_ENOMEM;
  ws_apply_result_dispose(&res);
  ws_extract_dispose(&x);
  if (rc) return sm_error_set(err, rc, "out of memory");
  return finish_out(s, err);
}

/* ---- for tests and fuzzing ---- */

int ws_unpack_dir(const char *dest_dir, sm_read_fn reader, void *ud,
                  const sm_workspace_limits *limits, ws_apply_result *res,
                  ws_refusal_list *refused, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  cleanup_fd int fd = open(dest_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "%s", dest_dir);
  cleanup_free char *stage = NULL;
  int stage_fd = ws_stage_create(fd, dest_dir, &stage, err);
  if (stage_fd < 0) return stage_fd;
  ws_extract x;
  ws_extract_init(&x);
  x.stage_fd = stage_fd;
  x.root_fd = fd;
  if (limits && limits->max_bytes > 0) x.max_bytes = limits->max_bytes;
  if (limits && limits->max_entries > 0) x.max_entries = limits->max_entries;
  if (limits && limits->max_path > 0) x.max_path = limits->max_path;
  int rc = ws_extract_run(&x, reader, ud, err);
  if (rc == 0) rc = ws_refusal_decide(&x, NULL, 0, err);
  if (rc == 0) rc = ws_apply(fd, &x, 1, 0, res, err);
  if (rc == 0 && refused) rc = ws_refusal_report(&x, refused, err);
  ws_stage_remove(fd, stage, stage_fd);
  ws_extract_dispose(&x);
  return rc;
}
