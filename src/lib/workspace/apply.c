/* Applies what the extractor staged to a directory, one rename per file, in
 * an order that never needs a missing parent: deletions deepest first, new
 * directories shallowest first, then files and links, then directory modes.
 * Every parent is opened without following symlinks. With check_host, the
 * host's own changes since the manifest win: the staged version lands
 * beside it as <name>.sandman-conflict. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/log.h>

#include "common/cleanup.h"
#include "common/strv.h"
#include "workspace/ws.h"

void workspace_apply_result_dispose(ws_apply_result *r) {
  for (size_t i = 0; i < r->n_changed; i++) free(r->changed[i]);
  for (size_t i = 0; i < r->n_conflicts; i++) free(r->conflicts[i]);
  free(r->changed);
  free(r->conflicts);
  memset(r, 0, sizeof *r);
}

static int cmp_entry_asc(const void *a, const void *b) {
  return strcmp((*(ws_entry *const *)a)->path, (*(ws_entry *const *)b)->path);
}
static int cmp_entry_desc(const void *a, const void *b) { return -cmp_entry_asc(a, b); }

/* What the host has at a path right now. */
typedef struct host_state {
  int exists;
  int blocked;          /* a parent is not a directory */
  int no_parent;        /* a parent is missing */
  struct stat st;
  char link[4097];
} host_state;

static void host_look(ws_dircache *dc, const char *path, host_state *hs) {
  memset(hs, 0, sizeof *hs);
  const char *name;
  int dfd = workspace_dircache_parent(dc, path, &name, 0);
  if (dfd < 0) {
    hs->blocked = dfd != -ENOENT;
    hs->no_parent = dfd == -ENOENT;
    return;
  }
  if (fstatat(dfd, name, &hs->st, AT_SYMLINK_NOFOLLOW) != 0) return;
  hs->exists = 1;
  if (S_ISLNK(hs->st.st_mode)) {
    ssize_t n = readlinkat(dfd, name, hs->link, sizeof hs->link - 1);
    hs->link[n > 0 ? n : 0] = '\0';
  }
}

static char type_of(const struct stat *st) {
  return S_ISREG(st->st_mode) ? 'f' : S_ISDIR(st->st_mode) ? 'd' : S_ISLNK(st->st_mode) ? 'l' : '?';
}

/* True when the host's file at path could be read and hashed. */
static bool host_hash_ok(ws_dircache *dc, const char *path, unsigned char out[32]) {
  const char *name;
  int dfd = workspace_dircache_parent(dc, path, &name, 0);
  if (dfd < 0) return false;
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = workspace_hash_fd_ok(fd, out, NULL);
  close(fd);
  return ok;
}

/* Has the host changed path since the manifest entry b (NULL: absent)? */
static int host_changed(ws_dircache *dc, const ws_entry *b, const host_state *hs) {
  if (hs->blocked) return 1;
  if (b == NULL) return hs->exists;
  if (!hs->exists || type_of(&hs->st) != b->type) return 1;
  switch (b->type) {
  case 'l':
    return strcmp(hs->link, b->link) != 0;
  case 'd':
    return (uint32_t)(hs->st.st_mode & 0777) != b->mode;
  default:
    break;
  }
  if (hs->st.st_size != b->size || (uint32_t)(hs->st.st_mode & 0777) != b->mode) return 1;
  int64_t m = (int64_t)hs->st.st_mtim.tv_sec * 1000000000 + hs->st.st_mtim.tv_nsec;
  if (b->host_mtime_ns != WS_UNKNOWN_MTIME && m == b->host_mtime_ns && !(b->racy & WS_RACY_HOST))
    return 0;
  unsigned char h[32];
  if (!b->has_hash || !host_hash_ok(dc, b->path, h)) return 1;
  return memcmp(h, b->hash, 32) != 0;
}

/* Does the host already hold exactly what was staged for e? */
static int host_equals(ws_dircache *dc, const ws_entry *e, const host_state *hs) {
  if (!hs->exists || hs->blocked || type_of(&hs->st) != e->type) return 0;
  if (e->type == 'd') return 1;
  if (e->type == 'l') return strcmp(hs->link, e->link) == 0;
  if (hs->st.st_size != e->size || (uint32_t)(hs->st.st_mode & 0777) != e->mode) return 0;
  unsigned char h[32];
  return e->has_hash && host_hash_ok(dc, e->path, h) && memcmp(h, e->hash, 32) == 0;
}

static void set_host_mtime(ws_dircache *dc, ws_entry *e) {
  const char *name;
  int dfd = workspace_dircache_parent(dc, e->path, &name, 0);
  struct stat st;
  if (dfd >= 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    e->host_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  else
    e->host_mtime_ns = WS_UNKNOWN_MTIME;
}

typedef struct plan {
  int root_fd;
  ws_extract *x;
  int check;
  ws_apply_result *res;
  ws_dircache dc;
  ws_aside aside;       /* the tool's folders kept beside the host's version */
} plan;

/* A path of the tool's for a warning line, with the call's secret values
 * masked (a buffer of the enclosing statement's). */
#define LOG_PATH(p, path) workspace_log_path((p)->x->redact, (path), (char[4096]){""}, 4096)

static int note_changed(plan *p, const char *path) {
  p->res->entries++;
  return common_strings_push(&p->res->changed, &p->res->n_changed, &p->res->cap_changed, path);
}

/* Removes what is in the way of a new entry of another type. */
static int clear_way(plan *p, int dfd, const char *name, const host_state *hs, const ws_entry *b) {
  if (!hs->exists) return 0;
  if (p->check) {
    /* Only the version the manifest knows may go; the host's own stays. */
    if (host_changed(&p->dc, b, hs)) return -EEXIST;
    if (S_ISDIR(hs->st.st_mode)) return unlinkat(dfd, name, AT_REMOVEDIR) == 0 ? 0 : -errno;
    return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
  }
  int r = workspace_remove_tree(dfd, name);
  return r;
}

static int conflict_aside(plan *p, int dfd, const char *name, ws_entry *e, sm_error *err) {
  char sname[16];
  snprintf(sname, sizeof sname, "%d", (int)e->stage);
  size_t n = strlen(name) + sizeof WS_CONFLICT_SUFFIX;
  size_t pn = strlen(e->path) + sizeof WS_CONFLICT_SUFFIX;
  cleanup_free char *aside = malloc(n);
  cleanup_free char *apath = malloc(pn);
  if (aside == NULL || apath == NULL)
    return sm_error_set(err, SM_ENOMEM, "out of memory setting '%s' aside", e->path);
  snprintf(aside, n, "%s%s", name, WS_CONFLICT_SUFFIX);
  snprintf(apath, pn, "%s%s", e->path, WS_CONFLICT_SUFFIX);
  e->host_mtime_ns = WS_UNKNOWN_MTIME;
  struct stat st;
  if (n > 256 ||
      (fstatat(dfd, aside, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) ||
      renameat(p->x->stage_fd, sname, dfd, aside) != 0) {
    sm_log(SM_LOG_WARN, "workspace: '%s' changed on both sides; kept the host's version, the "
           "sandbox's could not be saved beside it", LOG_PATH(p, e->path));
    return 0;
  }
  sm_log(SM_LOG_WARN, "workspace: '%s' changed on both sides; kept the host's version, the "
         "sandbox's is in '%s'", LOG_PATH(p, e->path), LOG_PATH(p, apath));
  int rc =
      common_strings_push(&p->res->conflicts, &p->res->n_conflicts, &p->res->cap_conflicts, apath);
  if (!rc) rc = note_changed(p, apath);
  return rc ? sm_error_set(err, rc, "out of memory") : 0;
}

static int do_deletions(plan *p, sm_error *err) {
  const ws_manifest *base = p->x->base;
  if (base == NULL) return 0;
  ws_entry **dels = calloc(base->n + 1, sizeof *dels);
  if (dels == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t nd = 0;
  const sm_string_list *ex = p->x->excludes;
  for (size_t i = 0; i < base->n; i++) {
    ws_entry *b = &base->v[i];
    if (workspace_manifest_get(&p->x->box, b->path) == NULL && !workspace_excluded(ex, b->path))
      dels[nd++] = b;
  }
  qsort(dels, nd, sizeof *dels, cmp_entry_desc);
  int rc = 0;
  for (size_t i = 0; i < nd && rc == 0; i++) {
    ws_entry *b = dels[i];
    host_state hs;
    host_look(&p->dc, b->path, &hs);
    if (!hs.exists) continue;
    if (p->check && host_changed(&p->dc, b, &hs)) {
      sm_log(SM_LOG_WARN, "workspace: '%s' was deleted in the sandbox but changed on the host; "
             "kept the host's version", LOG_PATH(p, b->path));
      continue;
    }
    const char *name;
    int dfd = workspace_dircache_parent(&p->dc, b->path, &name, 0);
    if (dfd < 0) continue;
    int r;
    if (S_ISDIR(hs.st.st_mode))
      r = p->check ? (unlinkat(dfd, name, AT_REMOVEDIR) == 0 ? 0 : -errno)
                   : workspace_remove_tree(dfd, name);
    else
      r = unlinkat(dfd, name, 0) == 0 ? 0 : -errno;
    if (r == -ENOTEMPTY || r == -EEXIST) {
      sm_log(SM_LOG_WARN, "workspace: '%s' was deleted in the sandbox but still holds files on "
             "the host (new ones, or protected ones); kept", LOG_PATH(p, b->path));
      continue;
    }
    if (r && r != -ENOENT)
      rc = sm_error_set_errno(err, SM_EIO, -r, "deleting '%s'", b->path);
    else if (r == 0)
      rc = note_changed(p, b->path) ? sm_error_set(err, SM_ENOMEM, "out of memory") : 0;
  }
  free(dels);
  workspace_dircache_dispose(&p->dc);
  return rc;
}

/* The base's entry for e (NULL when new) and the host's state of its
 * path: 1 when a folder above it is no longer a directory on the host (or,
 * with the host's changes checked, is gone): e goes aside (put_aside). */
static int look_up(plan *p, const ws_entry *e, const ws_entry **b, host_state *hs) {
  *b = p->x->base ? workspace_manifest_get(p->x->base, e->path) : NULL;
  host_look(&p->dc, e->path, hs);
  return hs->blocked || (p->check && hs->no_parent);
}

/* Is e under a folder already put aside? */
static int under_aside(const plan *p, const ws_entry *e) {
  char *owned = NULL;
  const char *hp = workspace_aside_map(&p->aside, e->path, &owned);
  free(owned);
  return hp != e->path;
}

/* The folder of e's that the host has no more as a folder (at: that
 * folder, e itself; NULL: the shallowest one above e) is kept beside the
 * host's version as <folder>.sandman-conflict, and listed as a conflict.
 * 0, or -ENOMEM. */
static int make_aside(plan *p, const ws_entry *e, const char *at) {
  size_t bl = at ? strlen(at) : workspace_aside_blocker(p->root_fd, e->path);
  if (bl == 0) {
    sm_log(SM_LOG_WARN, "workspace: '%s': its folder changed on the host during the copy; "
           "dropped", LOG_PATH(p, e->path));
    return 0;
  }
  char *dir = strndup(e->path, bl), *aside = NULL;
  if (dir == NULL) return -ENOMEM;
  int r = workspace_aside_make(&p->aside, p->root_fd, dir, &aside);
  if (r == 0) {
    sm_log(SM_LOG_WARN, "workspace: '%s' changed on both sides (the host has no folder there "
           "now); kept the host's version, the sandbox's is in '%s'", LOG_PATH(p, dir),
           LOG_PATH(p, aside));
    r = common_strings_push(&p->res->conflicts, &p->res->n_conflicts, &p->res->cap_conflicts,
                            aside);
    if (r == 0) r = note_changed(p, aside);
    r = r ? -ENOMEM : 0;
  } else if (r != -ENOMEM) {
    sm_log(SM_LOG_WARN, "workspace: '%s' changed on both sides; kept the host's version, the "
           "sandbox's could not be saved beside it", LOG_PATH(p, dir));
    r = 0;
  }
  free(dir);
  return r;
}

/* Writes e where its folder was put aside (made first if need be). */
static int put_aside(plan *p, ws_entry *e, const char *at, sm_error *err) {
  e->host_mtime_ns = WS_UNKNOWN_MTIME;
  if (!p->check) {
    sm_log(SM_LOG_WARN, "workspace: '%s': its parent is not a directory; dropped",
           LOG_PATH(p, e->path));
    return 0;
  }
  int made = !under_aside(p, e);
  if (made && make_aside(p, e, at) != 0) return sm_error_set(err, SM_ENOMEM, "out of memory");
  char *owned = NULL;
  const char *hp = workspace_aside_map(&p->aside, e->path, &owned);
  if (hp == NULL || (made && at)) { /* dropped, or the aside folder itself */
    free(owned);
    return 0;
  }
  const char *name;
  int dfd = workspace_dircache_parent(&p->dc, hp, &name, 1);
  int r = dfd < 0 ? dfd : 0;
  char sname[16];
  snprintf(sname, sizeof sname, "%d", (int)e->stage);
  if (r == 0 && e->type == 'd' && mkdirat(dfd, name, 0700) != 0 && errno != EEXIST) r = -errno;
  if (r == 0 && e->type != 'd' && renameat(p->x->stage_fd, sname, dfd, name) != 0) r = -errno;
  if (r == 0) r = note_changed(p, hp) ? -ENOMEM : 0;
  else sm_log(SM_LOG_WARN, "workspace: '%s' could not be written in its conflict copy: %s",
              LOG_PATH(p, hp), strerror(-r));
  free(owned);
  return r == -ENOMEM ? sm_error_set(err, SM_ENOMEM, "out of memory") : 0;
}

/* The host directory e goes into: 0 with *dfd (and the last name), 0 with
 * *dfd < 0 when a check finds none, or an error. */
static int parent_of(plan *p, const ws_entry *e, int *dfd, const char **name, sm_error *err) {
  *dfd = workspace_dircache_parent(&p->dc, e->path, name, !p->check);
  if (*dfd < 0 && !p->check)
    return sm_error_set_errno(err, SM_EIO, -*dfd, "writing '%s'", e->path);
  return 0;
}

static int put_dir(plan *p, ws_entry *e, sm_error *err) {
  const ws_entry *b;
  host_state hs;
  if (under_aside(p, e) || look_up(p, e, &b, &hs)) return put_aside(p, e, NULL, err);
  if (hs.exists && S_ISDIR(hs.st.st_mode)) {
    if (b == NULL || b->type != 'd' || (uint32_t)(hs.st.st_mode & 0777) != e->mode) return 0;
    return 0; /* mode set in the last pass */
  }
  const char *name;
  int dfd, rc0 = parent_of(p, e, &dfd, &name, err);
  if (rc0 || dfd < 0) return rc0;
  int r = clear_way(p, dfd, name, &hs, b);
  if (r == -EEXIST) return put_aside(p, e, e->path, err);
  if (r == 0 && mkdirat(dfd, name, 0700) != 0 && errno != EEXIST) r = -errno;
  if (r) return sm_error_set_errno(err, SM_EIO, -r, "creating '%s'", e->path);
  return note_changed(p, e->path) ? sm_error_set(err, SM_ENOMEM, "out of memory") : 0;
}

static int put_file(plan *p, ws_entry *e, sm_error *err) {
  const ws_entry *b;
  host_state hs;
  if (under_aside(p, e) || look_up(p, e, &b, &hs)) return put_aside(p, e, NULL, err);
  const char *name;
  int dfd, rc0 = parent_of(p, e, &dfd, &name, err);
  if (rc0 || dfd < 0) return rc0;
  if (p->check && host_changed(&p->dc, b, &hs)) {
    if (host_equals(&p->dc, e, &hs)) {
      set_host_mtime(&p->dc, e);
      return 0;
    }
    return conflict_aside(p, dfd, name, e, err);
  }
  if (hs.exists && S_ISDIR(hs.st.st_mode)) {
    int r = clear_way(p, dfd, name, &hs, b);
    if (r) {
      return conflict_aside(p, dfd, name, e, err);
    }
  }
  char sname[16];
  snprintf(sname, sizeof sname, "%d", (int)e->stage);
  if (renameat(p->x->stage_fd, sname, dfd, name) != 0) {
    int en = errno;
    if (en == EISDIR || en == ENOTEMPTY || en == EEXIST) {
      return conflict_aside(p, dfd, name, e, err);
    }
    return sm_error_set_errno(err, SM_EIO, en, "writing '%s'", e->path);
  }
  set_host_mtime(&p->dc, e);
  return note_changed(p, e->path) ? sm_error_set(err, SM_ENOMEM, "out of memory") : 0;
}

/* The tool's mode for a folder in a conflict copy (one it made). */
static void set_aside_mode(plan *p, const char *hp, uint32_t mode) {
  if (hp == NULL) return;
  const char *name;
  int dfd = workspace_dircache_parent(&p->dc, hp, &name, 0);
  struct stat st;
  if (dfd >= 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
    fchmodat(dfd, name, mode, 0);
}

int workspace_apply(int root_fd, ws_extract *x, int check_host, int deletions, ws_apply_result *res,
                    sm_error *err) {
  plan p = {root_fd, x, check_host, res, {0}, {0}};
  workspace_dircache_init(&p.dc, root_fd);
  int rc = deletions ? do_deletions(&p, err) : 0;
  ws_entry **v = calloc(x->box.n + 1, sizeof *v);
  if (v == NULL) rc = rc ? rc : sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t n = 0;
  for (size_t i = 0; rc == 0 && i < x->box.n; i++)
    if (x->box.v[i].state == WS_CHANGED) v[n++] = &x->box.v[i];
  if (rc == 0) qsort(v, n, sizeof *v, cmp_entry_asc);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (v[i]->type == 'd') rc = put_dir(&p, v[i], err);
  workspace_dircache_dispose(&p.dc);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (v[i]->type != 'd') rc = put_file(&p, v[i], err);
  workspace_dircache_dispose(&p.dc);
  /* Directory modes last, deepest first, so a read-only directory never
   * blocks writing what goes inside it. */
  for (size_t i = n; rc == 0 && i > 0; i--) {
    ws_entry *e = v[i - 1];
    if (e->type != 'd') continue;
    char *owned = NULL;
    const char *hp = workspace_aside_map(&p.aside, e->path, &owned);
    if (hp != e->path) {
      set_aside_mode(&p, hp, e->mode);
      free(owned);
      continue;
    }
    const char *name;
    int dfd = workspace_dircache_parent(&p.dc, e->path, &name, 0);
    struct stat st;
    if (dfd < 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      continue;
    const ws_entry *b = x->base ? workspace_manifest_get(x->base, e->path) : NULL;
    uint32_t want = e->mode;
    struct stat pst;
    /* On the host, a new folder in a .git gets no permission its parent
     * lacks (refusal.c refuses a wider mode for one that was there). */
    if (check_host && (b == NULL || b->type != 'd') && workspace_git_in_dotgit(e->path) &&
        fstat(dfd, &pst) == 0)
      want &= (uint32_t)pst.st_mode & 0777;
    if ((uint32_t)(st.st_mode & 0777) != want) {
      if (fchmodat(dfd, name, want, 0) == 0 && b && b->type == 'd') note_changed(&p, e->path);
    }
    set_host_mtime(&p.dc, e);
  }
  workspace_dircache_dispose(&p.dc);
  workspace_aside_dispose(&p.aside);
  free(v);
  return rc;
}
