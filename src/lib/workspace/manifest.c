/* The manifest: the last synced state of a workspace (path, type, size, mode,
 * host and sandbox mtimes, SHA-256), kept in memory with a hash index and on
 * disk as a small line-oriented text file replaced atomically. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/strv.h"
#include "workspace/ws.h"

/* Version 2 adds "h" lines (entries held back from the host); a version 1
 * file reads as one without them. */
#define MANIFEST_MAGIC "sandman-workspace-manifest 2"
#define MANIFEST_MAGIC_V1 "sandman-workspace-manifest 1"

void workspace_manifest_init(ws_manifest *m) { memset(m, 0, sizeof *m); }

/* Host mtimes come from a coarse clock that can lag the wall clock a little,
 * and the sandbox's are whole seconds: leave a margin on both. */
void workspace_entry_mark_racy(ws_entry *e, int64_t stamp_ns, int host, int box) {
  if (host) {
    e->racy &= (unsigned char)~WS_RACY_HOST;
    if (e->host_mtime_ns == WS_UNKNOWN_MTIME || e->host_mtime_ns >= stamp_ns - 2000000000LL)
      e->racy |= WS_RACY_HOST;
  }
  if (box) {
    e->racy &= (unsigned char)~WS_RACY_BOX;
    if (e->box_mtime == WS_UNKNOWN_MTIME || e->box_mtime >= stamp_ns / 1000000000LL - 1)
      e->racy |= WS_RACY_BOX;
  }
}

void workspace_manifest_clear(ws_manifest *m) {
  for (size_t i = 0; i < m->n; i++) {
    free(m->v[i].path);
    free(m->v[i].link);
  }
  m->n = 0;
  m->total_size = 0;
  if (m->index) memset(m->index, 0, m->index_cap * sizeof *m->index);
}

void workspace_manifest_dispose(ws_manifest *m) {
  workspace_manifest_clear(m);
  free(m->v);
  free(m->index);
  free(m->root);
  memset(m, 0, sizeof *m);
}

static uint64_t hash_path(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ull;
  }
  return h;
}

/* True when m's index was rebuilt with cap slots (false: out of memory). */
static bool index_rebuilt(ws_manifest *m, size_t cap) {
  uint32_t *idx = calloc(cap, sizeof *idx);
  if (idx == NULL) return false;
  for (size_t i = 0; i < m->n; i++) {
    size_t h = (size_t)hash_path(m->v[i].path) & (cap - 1);
    while (idx[h]) h = (h + 1) & (cap - 1);
    idx[h] = (uint32_t)(i + 1);
  }
  free(m->index);
  m->index = idx;
  m->index_cap = cap;
  return true;
}

int workspace_manifest_reindex(ws_manifest *m) {
  size_t cap = 128;
  while (m->n * 2 > cap) cap *= 2;
  if (!index_rebuilt(m, cap)) return SM_ENOMEM;
  return 0;
}

ws_entry *workspace_manifest_get(const ws_manifest *m, const char *path) {
  if (m == NULL || m->index_cap == 0) return NULL;
  size_t h = (size_t)hash_path(path) & (m->index_cap - 1);
  while (m->index[h]) {
    ws_entry *e = &m->v[m->index[h] - 1];
    if (strcmp(e->path, path) == 0) return e;
    h = (h + 1) & (m->index_cap - 1);
  }
  return NULL;
}

int workspace_manifest_add(ws_manifest *m, const ws_entry *e, ws_entry **out) {
  if (workspace_manifest_get(m, e->path)) return SM_ECONFLICT;
  if (common_grow(&m->v, &m->cap, m->n, sizeof *m->v, 64) != 0) return SM_ENOMEM;
  if ((m->n + 1) * 2 > m->index_cap) {
    size_t cap = m->index_cap ? m->index_cap * 2 : 128;
    while ((m->n + 1) * 2 > cap) cap *= 2;
    if (!index_rebuilt(m, cap)) return SM_ENOMEM;
  }
  ws_entry c = *e;
  c.path = strdup(e->path);
  c.link = e->link ? strdup(e->link) : NULL;
  if (c.path == NULL || (e->link && c.link == NULL)) {
    free(c.path);
    free(c.link);
    return SM_ENOMEM;
  }
  m->v[m->n] = c;
  size_t h = (size_t)hash_path(c.path) & (m->index_cap - 1);
  while (m->index[h]) h = (h + 1) & (m->index_cap - 1);
  m->index[h] = (uint32_t)(m->n + 1);
  if (c.type == 'f') m->total_size += c.size;
  m->n++;
  if (out) *out = &m->v[m->n - 1];
  return 0;
}

int workspace_manifest_set_target(ws_manifest *m, const char *container, const char *root) {
  snprintf(m->container, sizeof m->container, "%s", container ? container : "");
  char *r = strdup(root ? root : "");
  if (r == NULL) return SM_ENOMEM;
  free(m->root);
  m->root = r;
  return 0;
}

/* Names are bytes: escape what would break the space-separated line. */
static int put_escaped(common_buf *b, const char *s) {
  static const char digits[] = "0123456789abcdef";
  const unsigned char *run = (const unsigned char *)s, *p = run;
  for (;; p++) {
    int odd = *p <= 0x20 || *p == 0x7f || *p == '%';
    if (!odd) continue;
    /* The plain bytes before it in one piece. */
    int rc = p > run ? common_buf_append(b, run, (size_t)(p - run)) : 0;
    if (rc || *p == '\0') return rc;
    char esc[3] = {'%', digits[*p >> 4], digits[*p & 15]};
    if ((rc = common_buf_append(b, esc, 3)) != 0) return rc;
    run = p + 1;
  }
}

/* A signed decimal number at out; returns its length. */
static size_t put_i64(char *out, int64_t v) {
  char tmp[24];
  size_t n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do tmp[n++] = (char)('0' + u % 10);
  while ((u /= 10) != 0);
  size_t k = 0;
  if (v < 0) out[k++] = '-';
  while (n > 0) out[k++] = tmp[--n];
  return k;
}

static size_t put_oct(char *out, unsigned v) {
  char tmp[16];
  size_t n = 0, k = 0;
  do tmp[n++] = (char)('0' + (v & 7));
  while ((v >>= 3) != 0);
  while (n > 0) out[k++] = tmp[--n];
  return k;
}

/* "e TYPE RACY MODE SIZE HOSTMTIME BOXMTIME BOXCTIME HASH " for e, as
 * "%c %u %o %lld %lld %lld %lld %s " would print it (ten thousand entries
 * are written after every copy: no printf per entry); a held entry is
 * "h REASON TYPE ...". */
static size_t entry_head(char *out, const ws_entry *e, int held) {
  size_t k = 0;
  out[k++] = held ? 'h' : 'e';
  out[k++] = ' ';
  if (held) {
    const char *r = workspace_reason_name(e->refusal);
    size_t rl = strlen(r);
    memcpy(out + k, r, rl);
    k += rl;
    out[k++] = ' ';
  }
  out[k++] = e->type;
  out[k++] = ' ';
  k += put_i64(out + k, e->racy);
  out[k++] = ' ';
  k += put_oct(out + k, (unsigned)e->mode);
  const int64_t nums[4] = {e->size, e->host_mtime_ns, e->box_mtime, e->box_ctime};
  for (int i = 0; i < 4; i++) {
    out[k++] = ' ';
    k += put_i64(out + k, nums[i]);
  }
  out[k++] = ' ';
  if (e->has_hash) {
    workspace_hex(e->hash, 32, out + k);
    k += 64;
  } else {
    out[k++] = '-';
  }
  out[k++] = ' ';
  return k;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static char *unescape(const char *s) {
  size_t n = strlen(s);
  char *o = malloc(n + 1);
  if (o == NULL) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') {
      int a = i + 2 < n ? hexval((unsigned char)s[i + 1]) : -1;
      int b = a >= 0 ? hexval((unsigned char)s[i + 2]) : -1;
      if (a < 0 || b < 0 || (a == 0 && b == 0)) {
        free(o);
        return NULL;
      }
      o[k++] = (char)(a * 16 + b);
      i += 2;
    } else {
      o[k++] = s[i];
    }
  }
  o[k] = '\0';
  return o;
}

static int put_entries(common_buf *b, const ws_manifest *m, int held) {
  int rc = 0;
  for (size_t i = 0; m && i < m->n && !rc; i++) {
    const ws_entry *e = &m->v[i];
    char head[256];
    rc = common_buf_append(b, head, entry_head(head, e, held));
    if (!rc) rc = put_escaped(b, e->path);
    if (!rc && e->link) {
      rc = common_buf_append(b, " ", 1);
      if (!rc) rc = e->link[0] ? put_escaped(b, e->link) : common_buf_append(b, "%00", 3);
    }
    if (!rc) rc = common_buf_append(b, "\n", 1);
  }
  return rc;
}

int workspace_manifest_save(const ws_manifest *m, const ws_manifest *held, const char *path,
                            sm_error *err) {
  common_buf b;
  common_buf_init(&b, (size_t)1 << 31);
  int rc = common_buf_printf(&b, "%s\ncontainer %s\nroot ", MANIFEST_MAGIC,
                             m->container[0] ? m->container : "-");
  if (!rc) rc = put_escaped(&b, m->root && m->root[0] ? m->root : "-");
  if (!rc) rc = common_buf_append(&b, "\n", 1);
  if (!rc) rc = put_entries(&b, m, 0);
  if (!rc) rc = put_entries(&b, held, 1);
  if (rc) {
    common_buf_dispose(&b);
    return sm_error_set(err, rc, "building the workspace manifest: %s", sm_error_default_message(rc));
  }
  /* Parent directory first (0700: it describes the user's files). */
  cleanup_free char *dir = strdup(path);
  if (dir == NULL) {
    common_buf_dispose(&b);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
      if (*p != '/') continue;
      *p = '\0';
      mkdir(dir, 0700);
      *p = '/';
    }
    mkdir(dir, 0700);
  } else if (slash) {
    dir[1] = '\0';
  } else {
    dir[0] = '.';
    dir[1] = '\0';
  }
  size_t tlen = strlen(path) + 16;
  cleanup_free char *tmp = malloc(tlen);
  if (tmp == NULL) {
    common_buf_dispose(&b);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  snprintf(tmp, tlen, "%s.tmpXXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    int e = errno;
    common_buf_dispose(&b);
    return sm_error_set_errno(err, SM_EIO, e, "writing the workspace manifest %s", path);
  }
  size_t off = 0;
  int werr = 0;
  while (off < b.len) {
    ssize_t w = write(fd, b.data + off, b.len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      werr = errno ? errno : EIO;
      break;
    }
    off += (size_t)w;
  }
  common_buf_dispose(&b);
  if (!werr && fsync(fd) != 0) werr = errno;
  if (close(fd) != 0 && !werr) werr = errno;
  if (!werr && rename(tmp, path) != 0) werr = errno;
  if (werr) {
    unlink(tmp);
    return sm_error_set_errno(err, SM_EIO, werr, "writing the workspace manifest %s", path);
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return 0;
}

static int parse_line(ws_manifest *m, ws_manifest *held, char *line, sm_error *err,
                      const char *path, size_t lineno) {
  int reason = WS_R_NONE;
  if (line[0] == 'h' && line[1] == ' ') {
    /* "h REASON " then an entry line's fields. */
    char *sp = strchr(line + 2, ' ');
    if (sp == NULL) return sm_error_set(err, SM_EIO, "%s:%zu: damaged manifest line", path, lineno);
    *sp = '\0';
    reason = workspace_reason_parse(line + 2);
    if (reason == WS_R_NONE || held == NULL)
      return sm_error_set(err, SM_EIO, "%s:%zu: damaged manifest line", path, lineno);
    *sp = ' ';
    line = sp - 1;
    line[0] = 'e';
    m = held;
  }
  char *f[11];
  int nf = 0;
  char *p = line;
  while (*p && nf < 11) {
    f[nf++] = p;
    char *sp = strchr(p, ' ');
    if (sp == NULL) break;
    *sp = '\0';
    p = sp + 1;
  }
  if (nf < 10 || strcmp(f[0], "e") != 0 || strlen(f[1]) != 1)
    return sm_error_set(err, SM_EIO, "%s:%zu: damaged manifest line", path, lineno);
  ws_entry e;
  memset(&e, 0, sizeof e);
  e.type = f[1][0];
  char *end;
  e.racy = (unsigned char)(strtoul(f[2], &end, 10) & 3);
  e.mode = (uint32_t)strtoul(f[3], &end, 8) & 0777;
  e.size = strtoll(f[4], &end, 10);
  e.host_mtime_ns = strtoll(f[5], &end, 10);
  e.box_mtime = strtoll(f[6], &end, 10);
  e.box_ctime = strtoll(f[7], &end, 10);
  e.stage = -1;
  char **fh = &f[8];
  if (strcmp(*fh, "-") != 0) {
    if (strlen(*fh) != 64)
      return sm_error_set(err, SM_EIO, "%s:%zu: damaged hash", path, lineno);
    for (int i = 0; i < 32; i++) {
      int a = hexval((unsigned char)(*fh)[2 * i]), b = hexval((unsigned char)(*fh)[2 * i + 1]);
      if (a < 0 || b < 0) return sm_error_set(err, SM_EIO, "%s:%zu: damaged hash", path, lineno);
      e.hash[i] = (unsigned char)(a * 16 + b);
    }
    e.has_hash = 1;
  }
  e.refusal = (unsigned char)reason;
  int known = e.type == 'f' || e.type == 'd' || e.type == 'l' ||
              (reason && strchr("pcbs?" "x", e.type) != NULL);
  if (!known || e.size < 0)
    return sm_error_set(err, SM_EIO, "%s:%zu: damaged manifest entry", path, lineno);
  cleanup_free char *name = unescape(f[9]);
  cleanup_free char *link = NULL;
  if (nf > 10) {
    if (strcmp(f[10], "%00") == 0)
      link = strdup("");
    else
      link = unescape(f[10]);
    if (link == NULL) return sm_error_set(err, SM_EIO, "%s:%zu: damaged link", path, lineno);
  }
  if (name == NULL || name[0] == '\0' || (e.type == 'l') != (link != NULL))
    return sm_error_set(err, SM_EIO, "%s:%zu: damaged manifest entry", path, lineno);
  e.path = name;
  e.link = link;
  int rc = workspace_manifest_add(m, &e, NULL);
  if (rc == SM_ECONFLICT)
    return sm_error_set(err, SM_EIO, "%s:%zu: path listed twice", path, lineno);
  if (rc) return sm_error_set(err, rc, "out of memory");
  return 0;
}

int workspace_manifest_load(ws_manifest *m, ws_manifest *held, const char *path,
                            int64_t max_entries, sm_error *err) {
  workspace_manifest_clear(m);
  if (held) workspace_manifest_clear(held);
  m->container[0] = '\0';
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    if (errno == ENOENT) return 0;
    return sm_error_set_errno(err, SM_EIO, errno, "reading the workspace manifest %s", path);
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  size_t lineno = 0;
  int rc = 0;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len > 64 * 1024) {
      rc = sm_error_set(err, SM_EIO, "%s:%zu: line too long", path, lineno);
      break;
    }
    if (lineno == 1) {
      if (strcmp(line, MANIFEST_MAGIC) != 0 && strcmp(line, MANIFEST_MAGIC_V1) != 0) {
        rc = sm_error_set(err, SM_EIO, "%s: not a sandman workspace manifest", path);
        break;
      }
    } else if (strncmp(line, "container ", 10) == 0) {
      snprintf(m->container, sizeof m->container, "%s",
               strcmp(line + 10, "-") == 0 ? "" : line + 10);
    } else if (strncmp(line, "root ", 5) == 0) {
      char *r = unescape(line + 5);
      if (r == NULL) {
        rc = sm_error_set(err, SM_EIO, "%s:%zu: damaged root", path, lineno);
        break;
      }
      free(m->root);
      m->root = strcmp(r, "-") == 0 ? (free(r), strdup("")) : r;
    } else {
      if ((int64_t)(m->n + (held ? held->n : 0)) >= 2 * max_entries) {
        rc = sm_error_set(err, SM_ETOOBIG, "%s: more than %" PRId64 " entries", path, max_entries);
        break;
      }
      rc = parse_line(m, held, line, err, path, lineno);
      if (rc) break;
    }
  }
  free(line);
  fclose(f);
  if (rc == 0 && lineno == 0) rc = sm_error_set(err, SM_EIO, "%s: empty manifest", path);
  if (rc) {
    workspace_manifest_clear(m);
    if (held) workspace_manifest_clear(held);
  }
  return rc;
}
