/* Refusal per entry: a copy out applies every change it can, and skips
 * each entry that is not safe to write on the host or that touches a
 * protected path. What was skipped stays in the sandbox (a tool may need
 * its virtual environment's links) and is remembered as "held": the same
 * refusal is reported once, not on every call, until the entry changes.
 *
 * Only what signals an attack on the host's resources (the byte, entry and
 * path-length caps; a stream that is not a valid tar) or an I/O failure on
 * the host still fails a whole copy out (workspace_out.c). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/unconst.h"
#include "workspace/ws.h"

int workspace_refusal_sockets(ws_extract *x, const ws_manifest *listing, sm_error *err) {
  for (size_t i = 0; listing && i < listing->n; i++) {
    const ws_entry *l = &listing->v[i];
    if (l->type != 's' || workspace_manifest_get(&x->box, l->path) ||
        workspace_excluded(x->excludes, l->path))
      continue;
    const char *slash = strrchr(l->path, '/');
    if (slash) {
      char *parent = strndup(l->path, (size_t)(slash - l->path));
      if (parent == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
      const ws_entry *pe = workspace_manifest_get(&x->box, parent);
      free(parent);
      if (pe == NULL || pe->type != 'd') continue;
    }
    ws_entry e = *l;
    e.link = NULL;
    e.stage = -1;
    e.state = WS_REFUSED;
    e.refusal = WS_R_SOCKET;
    e.box_ctime = l->ctime;
    e.host_mtime_ns = WS_UNKNOWN_MTIME;
    if (workspace_manifest_add(&x->box, &e, NULL) != 0)
      return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  return 0;
}

/* Is e refused exactly as h was (the sandbox's version unchanged)? */
static int same_refusal(const ws_entry *e, const ws_entry *h) {
  if (h == NULL || h->type != e->type || h->refusal != e->refusal) return 0;
  switch (e->type) {
  case 'l':
    return e->link && h->link && strcmp(e->link, h->link) == 0;
  case 'f':
    return e->has_hash && h->has_hash && memcmp(e->hash, h->hash, 32) == 0 && e->mode == h->mode;
  case WS_DELETED:
    return 1;
  default:
    return e->mode == h->mode;
  }
}

typedef struct cand {
  const char *path;
  ws_entry *entry;      /* a change in x->box, or NULL */
  const ws_entry *gone; /* a deletion (a base entry not in x->box) */
  int reason;           /* why a deletion is held */
} cand;

static int cmp_cand(const void *a, const void *b) {
  return workspace_path_cmp(((const cand *)a)->path, ((const cand *)b)->path);
}

/* A staged file named config: does git read a command in it? */
static int staged_config_runs(const ws_extract *x, const ws_entry *e) {
  if (e->stage < 0 || x->stage_fd < 0) return 1;
  char name[16];
  snprintf(name, sizeof name, "%d", (int)e->stage);
  int fd = openat(x->stage_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 1;
  int runs = workspace_gitconf_runs_fd(fd);
  close(fd);
  return runs;
}

/* Would the directory e, which exists on the host, get a permission bit
 * there that it has neither on the host now nor in the manifest? */
static int mode_widens(const ws_extract *x, const ws_entry *e) {
  const ws_entry *b = x->base ? workspace_manifest_get(x->base, e->path) : NULL;
  uint32_t ref = b && b->type == 'd' ? b->mode : 0777;
  struct stat st;
  int fd = x->root_fd >= 0 ? workspace_open_dir(x->root_fd, e->path, 0) : -1;
  if (fd >= 0 && fstat(fd, &st) == 0) ref &= (uint32_t)st.st_mode & 0777;
  else if (b == NULL || b->type != 'd') ref = e->mode; /* new: workspace_apply narrows it */
  if (fd >= 0) close(fd);
  return (e->mode & ~ref) != 0;
}

/* The git rules, whatever the list of globs says: nothing in or of a
 * repository other than a .git (by what it holds, the host's side
 * included); no file that starts with "gitdir:"; no config file that names
 * a command, nor a link in its place; no wider permissions for a folder in
 * or of a .git. */
static int git_refuses(const ws_extract *x, ws_gitdirs *g, const cand *c) {
  if (workspace_gitdirs_covers(g, c->path)) return 1;
  const ws_entry *e = c->entry;
  if (e == NULL) return 0;
  if (e->type == 'f' && (e->sniff & WS_SNIFF_GITFILE)) return 1;
  if ((e->type == 'f' || e->type == 'l') && (workspace_git_name_is(e->path, "config") ||
                                             workspace_git_name_is(e->path, "config.worktree")))
    return e->type == 'l' || staged_config_runs(x, e);
  if (e->type == 'd' && workspace_git_in_dotgit(e->path)) return mode_widens(x, e);
  return 0;
}

/* Past what the engine reads back, absence is no deletion: unless a
 * listing reached its folder (it would have shown the path as too long). */
static int beyond_reach(const ws_extract *x, const char *path) {
  size_t len = strlen(path);
  if (len <= WS_LIST_PATH_MAX) return 0;
  const char *slash = strrchr(path, '/');
  return x->listing == NULL || (slash && (size_t)(slash - path) > WS_LIST_PATH_MAX);
}

int workspace_refusal_decide(ws_extract *x, const ws_protect *protect, int deletions,
                             sm_error *err) {
  size_t nbase = deletions && x->base ? x->base->n : 0;
  cand *c = calloc(x->box.n + nbase + 1, sizeof *c);
  if (c == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < x->box.n; i++)
    if (x->box.v[i].state == WS_CHANGED) c[n++] = (cand){x->box.v[i].path, &x->box.v[i], NULL, 0};
  for (size_t i = 0; i < nbase; i++) {
    const ws_entry *b = &x->base->v[i];
    if (workspace_manifest_get(&x->box, b->path) == NULL &&
        !workspace_excluded(x->excludes, b->path))
      c[n++] = (cand){b->path, NULL, b, 0};
  }
  ws_gitdirs g;
  int rc = n > 0 ? workspace_gitdirs_init(&g, &x->box, x->root_fd, err) : 0;
  if (rc) {
    free(c);
    workspace_gitdirs_dispose(&g);
    return rc;
  }
  if (n > 0) {
    qsort(c, n, sizeof *c, cmp_cand);
    ws_protect_walk w;
    workspace_protect_walk_init(&w, protect);
    /* Deletions become held entries of their own once the walk is over
     * (adding to the box would move the entries c points into). */
    size_t ngone = 0;
    for (size_t i = 0; i < n; i++) {
      int is_dir = c[i].entry ? c[i].entry->type == 'd' : c[i].gone->type == 'd';
      /* The walk sees every path, in order, to keep its states. */
      int listed = workspace_protect_walk_path(&w, c[i].path, is_dir);
      int unread = c[i].gone && beyond_reach(x, c[i].path);
      if (!listed && !unread && !git_refuses(x, &g, &c[i])) continue;
      if (c[i].entry) {
        c[i].entry->state = WS_REFUSED;
        c[i].entry->refusal = WS_R_PROTECTED;
      } else {
        c[i].reason = listed || !unread ? WS_R_PROTECTED : WS_R_PATH_TOO_LONG;
        c[ngone++] = c[i];
      }
    }
    workspace_protect_walk_dispose(&w);
    workspace_gitdirs_dispose(&g);
    for (size_t i = 0; i < ngone && rc == 0; i++) {
      ws_entry t;
      memset(&t, 0, sizeof t);
      t.path = (char *)c[i].gone->path;
      t.type = WS_DELETED;
      t.stage = -1;
      t.state = WS_REFUSED;
      t.refusal = (unsigned char)c[i].reason;
      t.host_mtime_ns = WS_UNKNOWN_MTIME;
      if (workspace_manifest_add(&x->box, &t, NULL) != 0)
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
    }
  }
  free(c);
  /* Reported once: what was refused before, unchanged, is quiet. */
  for (size_t i = 0; rc == 0 && i < x->box.n; i++) {
    ws_entry *e = &x->box.v[i];
    if (e->state == WS_REFUSED && !e->quiet)
      e->quiet =
          (unsigned char)same_refusal(e, x->held ? workspace_manifest_get(x->held, e->path) : NULL);
  }
  return rc;
}

int workspace_refusal_hold(ws_manifest *box, const ws_manifest *old_base, ws_manifest *held,
                           sm_error *err) {
  workspace_manifest_clear(held);
  size_t keep = 0;
  int rc = 0;
  for (size_t i = 0; i < box->n; i++) {
    ws_entry *e = &box->v[i];
    if (e->state != WS_REFUSED) {
      box->v[keep++] = *e;
      continue;
    }
    if (rc == 0 && workspace_manifest_add(held, e, NULL) != 0) rc = SM_ENOMEM;
    if (e->type == 'f') box->total_size -= e->size;
    free(e->path);
    free(e->link);
  }
  box->n = keep;
  if (rc == 0) rc = workspace_manifest_reindex(box);
  /* The host keeps its version of a refused path: so does the record. */
  for (size_t i = 0; rc == 0 && i < held->n; i++) {
    const ws_entry *b = old_base ? workspace_manifest_get(old_base, held->v[i].path) : NULL;
    if (b == NULL) continue;
    ws_entry k = *b;
    k.state = WS_SAME;
    k.stage = -1;
    if (workspace_manifest_add(box, &k, NULL) != 0) rc = SM_ENOMEM;
  }
  return rc ? sm_error_set(err, rc, "out of memory") : 0;
}

int workspace_refusal_report(const ws_extract *x, ws_refusal_list *out, sm_error *err) {
  workspace_refusal_list_clear(out);
  const ws_manifest *sets[2] = {&x->box, &x->stray};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < sets[k]->n; i++) {
      const ws_entry *e = &sets[k]->v[i];
      if (e->state != WS_REFUSED || e->quiet) continue;
      int rc = workspace_refusal_list_add(out, e->path, e->refusal, err);
      if (rc != 0) return rc;
    }
  workspace_refusal_list_sort(out);
  return 0;
}

/* ---- the list handed to callers ---- */

void workspace_refusal_list_clear(ws_refusal_list *l) {
  for (size_t i = 0; i < l->n; i++) free(SM_UNCONST(l->v[i].path));
  l->n = 0;
}

void workspace_refusal_list_dispose(ws_refusal_list *l) {
  workspace_refusal_list_clear(l);
  free(l->v);
  memset(l, 0, sizeof *l);
}

int workspace_refusal_list_add(ws_refusal_list *l, const char *path, int reason, sm_error *err) {
  char *p = common_grow(&l->v, &l->cap, l->n, sizeof *l->v, 16) == 0 ? strdup(path) : NULL;
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory listing refused paths");
  l->v[l->n].path = p;
  l->v[l->n].reason = workspace_reason_name(reason);
  l->n++;
  return 0;
}

static int cmp_refusal(const void *a, const void *b) {
  return strcmp(((const ws_refusal *)a)->path, ((const ws_refusal *)b)->path);
}

void workspace_refusal_list_sort(ws_refusal_list *l) {
  if (l->n > 1) qsort(l->v, l->n, sizeof *l->v, cmp_refusal);
}
