/* Copy out without downloading everything: a listing of the sandbox's
 * workspace (size, mtime, ctime and mode of every entry, from one exec of
 * find and stat, or a local scan in mode none) is compared with the
 * manifest; only what differs, or whose ctime is later than the last sync
 * (a ctime cannot be set back by the tool), is fetched, one subtree per
 * changed path, through the same checking extractor.
 *
 * The listing comes from the sandbox and is not trusted for safety: it only
 * chooses what to fetch. Everything fetched is checked as in a full copy;
 * whatever the listing leaves out that the manifest has is deleted only
 * through the usual conflict rules. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/strv.h"
#include "workspace/ws.h"

static int parse_i64(const char *s, size_t n, int base, int64_t *out) {
  if (n == 0 || n > 20) return -1;
  int64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    int c = (unsigned char)s[i], d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return -1;
    if (v > (INT64_MAX - d) / base) return -1;
    v = v * base + d;
  }
  *out = v;
  return 0;
}

/* "L|./path": an entry whose path passes WS_LIST_PATH_MAX, not entered
 * (type '?': refused as path_too_long by workspace_probe_plan). */
static int parse_too_long(const char *line, size_t n, int64_t max_entries, ws_manifest *listing,
                          sm_error *err) {
  if (n < 5 || n - 4 > WS_LIST_PATH_MAX + 256 || memchr(line, '\0', n))
    return sm_error_set(err, SM_EPROTOCOL, "workspace listing: an odd path");
  char *raw = strndup(line + 4, n - 4), *norm = NULL;
  sm_error nerr = SM_ERROR_INIT;
  int bad = raw == NULL || workspace_path_normalize(raw, &norm, &nerr) != 0 || norm[0] == '\0' ||
            strcmp(norm, raw) != 0;
  free(raw);
  if (bad || (int64_t)listing->n >= max_entries) {
    free(norm);
    return sm_error_set(err, SM_EPROTOCOL, "workspace listing: an odd path");
  }
  ws_entry e;
  memset(&e, 0, sizeof e);
  e.path = norm;
  e.type = '?';
  e.stage = -1;
  e.host_mtime_ns = WS_UNKNOWN_MTIME;
  int rc = workspace_manifest_add(listing, &e, NULL);
  free(norm);
  if (rc == SM_ECONFLICT) return sm_error_set(err, SM_EPROTOCOL, "workspace listing: a path twice");
  return rc ? sm_error_set(err, rc, "out of memory") : 0;
}

int workspace_probe_parse(const char *out, size_t len, int64_t max_entries, int64_t max_path,
                          ws_manifest *listing, sm_error *err) {
  workspace_manifest_clear(listing);
  size_t pos = 0;
  while (pos < len) {
    const char *line = out + pos;
    const char *nl = memchr(line, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - line) : len - pos;
    pos += n + (nl ? 1 : 0);
    if (n >= 4 && memcmp(line, "L|./", 4) == 0) {
      int rc = parse_too_long(line, n, max_entries, listing, err);
      if (rc) return rc;
      continue;
    }
    /* size|mtime|ctime|ctime as text|hexmode|./path */
    const char *f[6];
    size_t fl[6];
    const char *p = line, *end = line + n;
    int k = 0;
    for (; k < 5; k++) {
      const char *bar = memchr(p, '|', (size_t)(end - p));
      if (bar == NULL) break;
      f[k] = p;
      fl[k] = (size_t)(bar - p);
      p = bar + 1;
    }
    if (k < 5 || end - p < 3 || p[0] != '.' || p[1] != '/')
      return sm_error_set(err, SM_EPROTOCOL, "workspace listing: a line does not parse");
    f[5] = p + 2;
    fl[5] = (size_t)(end - p - 2);
    int64_t size, mtime, ctime, mode;
    if (parse_i64(f[0], fl[0], 10, &size) || parse_i64(f[1], fl[1], 10, &mtime) ||
        parse_i64(f[2], fl[2], 10, &ctime) || parse_i64(f[4], fl[4], 16, &mode) ||
        ctime > INT64_MAX / 1000000000 - 1)
      return sm_error_set(err, SM_EPROTOCOL, "workspace listing: a line does not parse");
    /* "2026-11-22 02:27:11.806152772 +0000": the nanoseconds, if there. */
    int64_t frac = 0;
    const char *dot = memchr(f[3], '.', fl[3]);
    if (dot && (size_t)(f[3] + fl[3] - dot) > 9) {
      int64_t v;
      if (parse_i64(dot + 1, 9, 10, &v) == 0) frac = v;
    }
    ctime = ctime * 1000000000 + frac;
    if ((int64_t)fl[5] > max_path || memchr(f[5], '\0', fl[5]))
      return sm_error_set(err, SM_EPROTOCOL, "workspace listing: a path is too long");
    char *raw = strndup(f[5], fl[5]);
    char *norm = NULL;
    sm_error nerr = SM_ERROR_INIT;
    int bad = raw == NULL || workspace_path_normalize(raw, &norm, &nerr) != 0 || norm[0] == '\0' ||
              strcmp(norm, raw) != 0;
    free(raw);
    if (bad) {
      free(norm);
      return sm_error_set(err, SM_EPROTOCOL, "workspace listing: an odd path");
    }
    ws_entry e;
    memset(&e, 0, sizeof e);
    e.path = norm;
    e.size = size;
    e.box_mtime = mtime;
    e.ctime = ctime;
    e.mode = (uint32_t)(mode & 0777);
    e.stage = -1;
    e.host_mtime_ns = WS_UNKNOWN_MTIME;
    switch (mode & S_IFMT) {
    case S_IFREG: e.type = 'f'; break;
    case S_IFDIR: e.type = 'd'; break;
    case S_IFLNK: e.type = 'l'; break;
    case S_IFIFO: e.type = 'p'; break;
    case S_IFCHR: e.type = 'c'; break;
    case S_IFBLK: e.type = 'b'; break;
    case S_IFSOCK: e.type = 's'; break; /* never in the engine's tar: refused from here */
    default: e.type = 0; break;
    }
    int rc = 0;
    if (e.type) {
      if ((int64_t)listing->n >= max_entries) {
        free(norm);
        return sm_error_set(err, SM_ETOOBIG, "workspace listing: more than %" PRId64 " entries",
                            max_entries);
      }
      rc = workspace_manifest_add(listing, &e, NULL);
    }
    free(norm);
    if (rc == SM_ECONFLICT) return sm_error_set(err, SM_EPROTOCOL, "workspace listing: a path twice");
    if (rc) return sm_error_set(err, rc, "out of memory");
  }
  return 0;
}

static int cmp_entry(const void *a, const void *b) {
  return strcmp((*(ws_entry *const *)a)->path, (*(ws_entry *const *)b)->path);
}

void workspace_probe_record(ws_manifest *m, const ws_manifest *listing, int which) {
  for (size_t i = 0; i < m->n; i++) {
    ws_entry *e = &m->v[i];
    if (which >= 0 && e->state != which) continue;
    const ws_entry *l = listing ? workspace_manifest_get(listing, e->path) : NULL;
    int agree = l && l->type == e->type;
    if (agree && e->type == 'f') agree = l->size == e->size && l->box_mtime == e->box_mtime;
    if (agree && e->type == 'l') agree = e->link && (int64_t)strlen(e->link) == l->size;
    e->box_ctime = agree ? l->ctime : 0;
  }
}

void workspace_probe_free_roots(char **roots, size_t n) {
  for (size_t i = 0; i < n; i++) free(roots[i]);
  free(roots);
}

/* Does the listing show the very entry refused before (h)? */
static int held_unchanged(const ws_entry *h, const ws_entry *l) {
  if (h->type != l->type) return 0;
  switch (l->type) {
  case 'f':
    return h->size == l->size && h->box_mtime == l->box_mtime && h->mode == l->mode &&
           h->box_ctime != 0 && h->box_ctime == l->ctime;
  case 'l':
    return h->link && (int64_t)strlen(h->link) == l->size && h->box_ctime != 0 &&
           h->box_ctime == l->ctime;
  default:
    return h->mode == l->mode;
  }
}

static int special(char type) { return type == 'p' || type == 'c' || type == 'b' || type == 's'; }

int workspace_probe_plan(ws_extract *x, const ws_manifest *listing, size_t max_roots,
                         char ***out_roots, size_t *out_n, sm_error *err) {
  *out_roots = NULL;
  *out_n = 0;
  const ws_manifest *base = x->base;
  ws_entry **v = calloc(listing->n + 1, sizeof *v);
  if (v == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  for (size_t i = 0; i < listing->n; i++) v[i] = &listing->v[i];
  qsort(v, listing->n, sizeof *v, cmp_entry);
  char **roots = NULL;
  size_t nroots = 0, cap = 0;
  int rc = 0;
  for (size_t i = 0; i < listing->n && rc == 0; i++) {
    ws_entry *l = v[i];
    if (workspace_excluded(x->excludes, l->path)) continue;
    /* Under a path that is fetched whole (or not a directory here): the
     * fetch covers it. */
    const char *slash = strrchr(l->path, '/');
    if (slash) {
      char *parent = strndup(l->path, (size_t)(slash - l->path));
      if (parent == NULL) {
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
        break;
      }
      const ws_entry *pe = workspace_manifest_get(&x->box, parent);
      free(parent);
      if (pe == NULL || pe->type != 'd') continue;
    }
    const ws_entry *b = base ? workspace_manifest_get(base, l->path) : NULL;
    int same = b && b->type == l->type;
    if (same && l->type == 'f')
      same = b->size == l->size && b->box_mtime == l->box_mtime && b->mode == l->mode &&
             b->box_ctime != 0 && l->ctime == b->box_ctime &&
             !(b->racy & WS_RACY_BOX);
    else if (same && l->type == 'l')
      same = b->link && (int64_t)strlen(b->link) == l->size && b->box_ctime != 0 &&
             l->ctime == b->box_ctime;
    else if (same && l->type != 'd')
      same = 0;
    /* Refused before and unchanged since: refused again, quietly, unread. */
    const ws_entry *h = !same && x->held ? workspace_manifest_get(x->held, l->path) : NULL;
    if (h && held_unchanged(h, l)) {
      ws_entry e = *h;
      e.stage = -1;
      e.state = WS_REFUSED;
      e.quiet = 1;
      if (workspace_manifest_add(&x->box, &e, NULL) != 0)
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
      continue;
    }
    /* A fifo, a device or a socket is refused on what the listing says:
     * nothing of it would be written anyway; so is a path too long to read. */
    if (!same && (special(l->type) || l->type == '?')) {
      ws_entry e = *l;
      e.stage = -1;
      e.state = WS_REFUSED;
      e.refusal = l->type == 's'   ? WS_R_SOCKET
                  : l->type == 'p' ? WS_R_FIFO
                  : l->type == '?' ? WS_R_PATH_TOO_LONG
                                   : WS_R_DEVICE;
      e.box_ctime = l->ctime;
      if (workspace_manifest_add(&x->box, &e, NULL) != 0)
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
      continue;
    }
    if (same) {
      ws_entry e = *b;
      e.stage = -1;
      e.state = WS_SAME;
      if (l->type == 'd' && b->mode != l->mode) {
        /* A directory's own change is its mode: nothing to fetch. */
        e.mode = l->mode;
        e.state = WS_CHANGED;
      }
      if (workspace_manifest_add(&x->box, &e, NULL) != 0)
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
      continue;
    }
    if (nroots >= max_roots) {
      rc = 1;
      break;
    }
    if (common_strings_push(&roots, &nroots, &cap, l->path) != 0)
      rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  free(v);
  if (rc) {
    workspace_probe_free_roots(roots, nroots);
    return rc;
  }
  *out_roots = roots;
  *out_n = nroots;
  return 0;
}
