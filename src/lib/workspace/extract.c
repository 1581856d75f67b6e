/* The extractor: reads a tar stream from the sandbox (hostile input) with
 * libarchive, refuses every entry that could write outside the workspace or
 * exhaust the disk, and stages what changed (against the manifest) as flat
 * numbered files in a staging directory. Nothing is written to the
 * workspace here: workspace_apply does that once the whole stream was accepted. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/unconst.h"
#include "workspace/ws.h"
#include "common/io.h"

#define X_CHUNK 65536

typedef struct xsrc {
  ws_extract *x;
  sm_read_fn reader;
  void *ud;
  int reader_err;
  int raw_over;
  int64_t raw_cap;
  char buf[X_CHUNK];
} xsrc;

void workspace_extract_init(ws_extract *x) {
  memset(x, 0, sizeof *x);
  x->stage_fd = -1;
  x->root_fd = -1;
  x->max_bytes = WS_DEFAULT_MAX_BYTES;
  x->max_entries = WS_DEFAULT_MAX_ENTRIES;
  x->max_path = WS_DEFAULT_MAX_PATH;
  workspace_manifest_init(&x->box);
  workspace_manifest_init(&x->stray);
  workspace_manifest_init(&x->again);
}

void workspace_extract_dispose(ws_extract *x) {
  workspace_manifest_dispose(&x->box);
  workspace_manifest_dispose(&x->stray);
  workspace_manifest_dispose(&x->again);
}

static la_ssize_t x_read_cb(struct archive *a, void *ud, const void **buf) {
  xsrc *s = ud;
  ssize_t n = s->reader(s->ud, s->buf, sizeof s->buf);
  if (n < 0) {
    s->reader_err = (int)n;
    archive_set_error(a, EIO, "the tar stream was cut off");
    return -1;
  }
  s->x->raw_bytes += n;
  if (s->x->raw_bytes > s->raw_cap) {
    s->raw_over = 1;
    archive_set_error(a, EFBIG, "stream larger than the limits allow");
    return -1;
  }
  *buf = s->buf;
  return (la_ssize_t)n;
}

static void stage_name(int32_t n, char out[16]) { snprintf(out, 16, "%" PRId32, n); }

static const char *entry_name(struct archive_entry *ae) {
  const char *p = archive_entry_pathname(ae);
  return p ? p : archive_entry_pathname_utf8(ae);
}

/* An entry whose name is no workspace path: refused, and reported under
 * the name it came with. */
static int refuse_stray(ws_extract *x, const char *name, int reason, sm_error *err) {
  ws_entry e;
  memset(&e, 0, sizeof e);
  e.path = SM_UNCONST(name && name[0] ? name : "(no name)");
  e.type = '?';
  e.stage = -1;
  e.state = WS_REFUSED;
  e.refusal = (unsigned char)reason;
  int rc = workspace_manifest_add(&x->stray, &e, NULL);
  if (rc == SM_ECONFLICT) return 0;
  return rc ? sm_error_set(err, rc, "out of memory") : 0;
}

/* Why raw is not a workspace path: a name over 255 bytes, or anything else. */
static int path_reason(const char *raw) {
  for (const char *p = raw; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n > 255) return WS_R_NAME_TOO_LONG;
    p += n;
    if (*p == '/') p++;
  }
  return WS_R_UNSAFE_PATH;
}

/* Normalises and strips the required first component. *out "" is the root.
 * SM_EUNSAFE with *reason: no workspace path (refused); SM_ETOOBIG: over
 * the path cap (the whole copy fails). */
static int member_path(ws_extract *x, const char *raw, char **out, int *reason, sm_error *err) {
  char *p = NULL;
  *reason = WS_R_UNSAFE_PATH;
  int rc = workspace_path_normalize(raw, &p, err);
  if (rc == SM_EUNSAFE) *reason = raw ? path_reason(raw) : WS_R_UNSAFE_PATH;
  if (rc) return rc;
  if (x->strip && x->strip[0]) {
    size_t n = strlen(x->strip);
    if (strncmp(p, x->strip, n) != 0 || (p[n] != '\0' && p[n] != '/')) {
      sm_error_set(err, SM_EUNSAFE, "'%s': outside the copied directory '%s'", raw, x->strip);
      free(p);
      return SM_EUNSAFE;
    }
    if (x->place) {
      size_t pl = strlen(x->place), rest = strlen(p + n);
      char *q = malloc(pl + rest + 1);
      if (q == NULL) {
        free(p);
        return sm_error_set(err, SM_ENOMEM, "out of memory");
      }
      memcpy(q, x->place, pl);
      memcpy(q + pl, p + n, rest + 1);
      free(p);
      p = q;
    } else {
      memmove(p, p + n + (p[n] == '/'), strlen(p + n + (p[n] == '/')) + 1);
    }
  }
  if ((int64_t)strlen(p) > x->max_path) {
    sm_error_set(err, SM_ETOOBIG, "'%.80s...': path longer than the limit of %" PRId64 " bytes",
                 p, x->max_path);
    free(p);
    return SM_ETOOBIG;
  }
  *out = p;
  return 0;
}

/* 0 when path's directory is in the stream as a directory, else why path
 * is refused: it comes before its directory, or under a link, a file or a
 * refused entry (which it shares the refusal of). */
static int parent_refusal(ws_extract *x, const char *path, sm_error *err) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) return 0;
  cleanup_free char *parent = strndup(path, (size_t)(slash - path));
  if (parent == NULL) return -sm_error_set(err, SM_ENOMEM, "out of memory");
  const ws_entry *pe = workspace_manifest_get(&x->box, parent);
  if (pe == NULL && x->trusted) return 0;
  if (pe == NULL || pe->type != 'd') return WS_R_UNSAFE_PATH;
  if (pe->state == WS_REFUSED) return pe->refusal;
  return 0;
}

static int over_bytes(ws_extract *x, const char *path, int64_t size, sm_error *err) {
  if (size <= x->max_bytes - x->bytes_staged) return 0;
  char lim[32];
  sm_format_size(x->max_bytes, lim, sizeof lim);
  return sm_error_set(err, SM_ETOOBIG,
                      "'%s' claims %" PRId64 " bytes: over the copy limit of %s "
                      "(%" PRId64 " bytes already copied)",
                      path, size, lim, x->bytes_staged);
}

/* Keeps a file's first bytes, for what they say (ws_entry.sniff). */
typedef struct sniffer {
  char head[7];
  size_t n;
} sniffer;

static void sniff_feed(sniffer *s, const char *data, size_t len) {
  size_t k = sizeof s->head - s->n;
  if (k > len) k = len;
  memcpy(s->head + s->n, data, k);
  s->n += k;
}

static unsigned char sniff_result(const sniffer *s) {
  return s->n == 7 && memcmp(s->head, "gitdir:", 7) == 0 ? WS_SNIFF_GITFILE : 0;
}

static int finish_staged(int fd, uint32_t mode, int64_t mtime, int64_t mtime_ns) {
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = (time_t)mtime;
  ts[0].tv_nsec = ts[1].tv_nsec = (long)mtime_ns;
  if (fchmod(fd, mode & 0777) != 0) return -errno;
  if (futimens(fd, ts) != 0) return -errno;
  return 0;
}

/* Copies a regular file's data from the archive into a new staged file. */
static int stage_data(ws_extract *x, struct archive *a, const char *path, ws_entry *e,
                      int64_t mtime_ns, sm_error *err) {
  char name[16];
  e->stage = x->next_stage++;
  stage_name(e->stage, name);
  int fd = openat(x->stage_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, errno, "staging '%s'", path);
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(md);
    close(fd);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  char buf[X_CHUNK];
  int64_t total = 0;
  int rc = 0;
  sniffer sn = {{0}, 0};
  for (;;) {
    la_ssize_t r = archive_read_data(a, buf, sizeof buf);
    if (r == 0) break;
    if (r < 0) {
      rc = sm_error_set(err, SM_EPROTOCOL, "reading '%s' from the tar stream: %s", path,
                        archive_error_string(a));
      break;
    }
    total += r;
    if (total > e->size) {
      rc = sm_error_set(err, SM_EUNSAFE, "'%s': more data than its header says", path);
      break;
    }
    if (common_write_all(fd, buf, (size_t)r) != 0) {
      int w = errno;
      rc = sm_error_set_errno(err, SM_EIO, w, "staging '%s'", path);
      break;
    }
    EVP_DigestUpdate(md, buf, (size_t)r);
    sniff_feed(&sn, buf, (size_t)r);
  }
  e->sniff = sniff_result(&sn);
  if (rc == 0 && total != e->size)
    rc = sm_error_set(err, SM_EPROTOCOL, "'%s': truncated in the tar stream", path);
  unsigned int hn = 0;
  EVP_DigestFinal_ex(md, e->hash, &hn);
  EVP_MD_CTX_free(md);
  e->has_hash = 1;
  if (rc == 0) {
    int f = finish_staged(fd, e->mode, e->box_mtime, mtime_ns);
    if (f) rc = sm_error_set_errno(err, SM_EIO, -f, "staging '%s'", path);
  }
  close(fd);
  x->bytes_staged += total;
  return rc;
}

/* A staged file equal in content and mode to the manifest was only touched. */
static void maybe_touched(ws_extract *x, ws_entry *e, const ws_entry *b) {
  if (b == NULL || b->type != 'f' || !b->has_hash || b->mode != e->mode) return;
  if (memcmp(b->hash, e->hash, 32) != 0) return;
  char name[16];
  stage_name(e->stage, name);
  unlinkat(x->stage_fd, name, 0);
  e->stage = -1;
  e->state = WS_TOUCHED;
  e->host_mtime_ns = b->host_mtime_ns;
  e->racy = b->racy & WS_RACY_HOST;
}

/* May size, mtime and mode alone say that path is the manifest's b? Not
 * when the listing shows a ctime other than the one recorded. */
static int ctime_kept(const ws_extract *x, const char *path, const ws_entry *b) {
  if (x->listing == NULL) return 1;
  const ws_entry *l = workspace_manifest_get(x->listing, path);
  return l && b->box_ctime != 0 && l->ctime == b->box_ctime;
}

/* e is unchanged since the base: it keeps the base's hash and host time. */
static void keep_base(ws_entry *e, const ws_entry *b) {
  e->state = WS_SAME;
  e->racy = b->racy;
  e->has_hash = b->has_hash;
  memcpy(e->hash, b->hash, 32);
  e->host_mtime_ns = b->host_mtime_ns;
}

/* Hashes a file's data from the archive into e->hash, writing nothing. */
static int hash_data(struct archive *a, const char *path, ws_entry *e, sm_error *err) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(md);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  char buf[X_CHUNK];
  int64_t total = 0;
  int rc = 0;
  for (;;) {
    la_ssize_t r = archive_read_data(a, buf, sizeof buf);
    if (r == 0) break;
    if (r < 0) {
      rc = sm_error_set(err, SM_EPROTOCOL, "reading '%s' from the tar stream: %s", path,
                        archive_error_string(a));
      break;
    }
    total += r;
    if (total > e->size) {
      rc = sm_error_set(err, SM_EUNSAFE, "'%s': more data than its header says", path);
      break;
    }
    EVP_DigestUpdate(md, buf, (size_t)r);
  }
  if (rc == 0 && total != e->size)
    rc = sm_error_set(err, SM_EPROTOCOL, "'%s': truncated in the tar stream", path);
  unsigned int hn = 0;
  EVP_DigestFinal_ex(md, e->hash, &hn);
  EVP_MD_CTX_free(md);
  e->has_hash = 1;
  return rc;
}

/* on_file's answer for an entry to read again (not to be kept now). */
#define X_AGAIN 1

static int on_file(ws_extract *x, struct archive *a, struct archive_entry *ae, const char *path,
                   ws_entry *e, sm_error *err) {
  if (!archive_entry_size_is_set(ae) || archive_entry_size(ae) < 0)
    return sm_error_set(err, SM_EUNSAFE, "'%s': no valid size", path);
  e->type = 'f';
  e->size = archive_entry_size(ae);
  const ws_entry *b = x->base ? workspace_manifest_get(x->base, path) : NULL;
  int header_same = b && b->type == 'f' && b->size == e->size && b->box_mtime == e->box_mtime &&
                    b->mode == e->mode;
  if (header_same && !(b->racy & WS_RACY_BOX) && ctime_kept(x, path, b)) {
    keep_base(e, b);
    return 0;
  }
  if (header_same && b->has_hash && x->verify && x->only == NULL) {
    int rc = hash_data(a, path, e, err);
    if (rc) return rc;
    if (memcmp(e->hash, b->hash, 32) == 0) {
      keep_base(e, b);
      e->state = WS_TOUCHED; /* its times are recorded anew */
      e->racy = b->racy & WS_RACY_HOST;
      return 0;
    }
    rc = workspace_manifest_add(&x->again, e, NULL);
    if (rc && rc != SM_ECONFLICT) return sm_error_set(err, rc, "out of memory");
    return X_AGAIN;
  }
  int rc = over_bytes(x, path, e->size, err);
  if (rc) return rc;
  e->state = WS_CHANGED;
  rc = stage_data(x, a, path, e, archive_entry_mtime_is_set(ae) ? archive_entry_mtime_nsec(ae) : 0,
                  err);
  if (rc) return rc;
  maybe_touched(x, e, b);
  return 0;
}

/* A path past WS_LIST_PATH_MAX: its first component past the limit is
 * refused, once, as the listing refuses it (what is under it goes with
 * it, unread). */
static int refuse_too_long(ws_extract *x, const char *path, sm_error *err) {
  size_t cut = WS_LIST_PATH_MAX + 1;
  while (path[cut] && path[cut] != '/') cut++;
  cleanup_free char *first = strndup(path, cut);
  if (first == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  if (workspace_manifest_get(&x->box, first)) return 0;
  ws_entry e;
  memset(&e, 0, sizeof e);
  e.path = first;
  e.type = '?'; /* as the listing has it: the same refusal is then quiet */
  e.stage = -1;
  e.host_mtime_ns = WS_UNKNOWN_MTIME;
  e.state = WS_REFUSED;
  e.refusal = WS_R_PATH_TOO_LONG;
  int rc = workspace_manifest_add(&x->box, &e, NULL);
  return rc ? sm_error_set(err, rc, "out of memory") : 0;
}

static int refuse(ws_entry *e, int reason) {
  e->state = WS_REFUSED;
  e->refusal = (unsigned char)reason;
  return 0;
}

static int on_symlink(ws_extract *x, struct archive_entry *ae, const char *path, ws_entry *e,
                      sm_error *err) {
  const char *target = archive_entry_symlink(ae);
  if (target == NULL) target = archive_entry_symlink_utf8(ae);
  e->type = 'l';
  e->mode = 0777;
  if (target == NULL || target[0] == '\0') return refuse(e, WS_R_UNSAFE_PATH);
  if ((int64_t)strlen(target) > x->max_path)
    return sm_error_set(err, SM_ETOOBIG, "'%s': link target longer than %" PRId64 " bytes", path,
                        x->max_path);
  e->link = SM_UNCONST(target);
  const ws_entry *b = x->base ? workspace_manifest_get(x->base, path) : NULL;
  if (b && b->type == 'l' && strcmp(b->link, target) == 0) {
    /* Unchanged: the host's own link, whatever it points at. */
    e->state = WS_SAME;
    e->host_mtime_ns = b->host_mtime_ns;
    e->racy = b->racy;
    return 0;
  }
  if (!x->trusted && !workspace_link_inside(path, target))
    return refuse(e, target[0] == '/' ? WS_R_LINK_ABSOLUTE : WS_R_LINK_OUTSIDE);
  char name[16];
  e->stage = x->next_stage++;
  stage_name(e->stage, name);
  if (symlinkat(target, x->stage_fd, name) != 0)
    return sm_error_set_errno(err, SM_EIO, errno, "staging '%s'", path);
  e->state = WS_CHANGED;
  return 0;
}

/* Copies an unchanged host file into the stage (a new hard link to it). */
static int stage_from_host(ws_extract *x, const ws_entry *t, const ws_entry *tb, ws_entry *e,
                           sm_error *err) {
  if (x->root_fd < 0 || tb == NULL)
    return sm_error_set(err, SM_EUNSAFE, "'%s': hard link to '%s', which is not in the archive",
                        e->path, t->path);
  ws_dircache dc;
  workspace_dircache_init(&dc, x->root_fd);
  const char *name;
  int dfd = workspace_dircache_parent(&dc, t->path, &name, 0);
  int fd = dfd >= 0 ? openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
  workspace_dircache_dispose(&dc);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != tb->size ||
      (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != tb->host_mtime_ns) {
    if (fd >= 0) close(fd);
    return sm_error_set(err, SM_ECONFLICT,
                        "'%s': hard link to '%s', which changed on the host during the call",
                        e->path, t->path);
  }
  int rc = over_bytes(x, e->path, st.st_size, err);
  if (rc) {
    close(fd);
    return rc;
  }
  char sname[16];
  e->stage = x->next_stage++;
  stage_name(e->stage, sname);
  int out = openat(x->stage_fd, sname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    close(fd);
    return sm_error_set_errno(err, SM_EIO, errno, "staging '%s'", e->path);
  }
  char buf[X_CHUNK];
  int64_t total = 0;
  sniffer sn = {{0}, 0};
  for (;;) {
    ssize_t r = common_read_retry(fd, buf, sizeof buf);
    if (r <= 0) {
      if (r < 0) rc = sm_error_set_errno(err, SM_EIO, errno, "reading '%s'", t->path);
      break;
    }
    sniff_feed(&sn, buf, (size_t)r);
    total += r;
    if (common_write_all(out, buf, (size_t)r) != 0) {
      int w = errno;
      rc = sm_error_set_errno(err, SM_EIO, w, "staging '%s'", e->path);
      break;
    }
  }
  close(fd);
  e->sniff = sniff_result(&sn);
  if (rc == 0 && total != tb->size)
    rc = sm_error_set(err, SM_ECONFLICT, "'%s' changed on the host during the call", t->path);
  if (rc == 0) {
    int f = finish_staged(out, e->mode, e->box_mtime, 0);
    if (f) rc = sm_error_set_errno(err, SM_EIO, -f, "staging '%s'", e->path);
  }
  close(out);
  x->bytes_staged += total;
  return rc;
}

static int on_hardlink(ws_extract *x, const char *raw_target, const char *path, ws_entry *e,
                       sm_error *err) {
  cleanup_free char *tpath = NULL;
  sm_error terr = SM_ERROR_INIT;
  int why = 0;
  e->type = 'f';
  if (member_path(x, raw_target, &tpath, &why, &terr) != 0) return refuse(e, WS_R_HARD_LINK);
  const ws_entry *t = tpath[0] ? workspace_manifest_get(&x->box, tpath) : NULL;
  if (t == NULL || t->type != 'f' || t->state == WS_REFUSED) return refuse(e, WS_R_HARD_LINK);
  (void)path;
  /* Materialised as a file with the target's content and metadata. */
  e->type = 'f';
  e->size = t->size;
  e->mode = t->mode;
  e->box_mtime = t->box_mtime;
  e->has_hash = t->has_hash;
  memcpy(e->hash, t->hash, 32);
  e->sniff = t->sniff;
  const ws_entry *b = x->base ? workspace_manifest_get(x->base, path) : NULL;
  if (b && b->type == 'f' && b->size == e->size && b->box_mtime == e->box_mtime &&
      b->mode == e->mode && !(b->racy & WS_RACY_BOX) &&
      (!t->has_hash || !b->has_hash || memcmp(b->hash, t->hash, 32) == 0)) {
    keep_base(e, b);
    return 0;
  }
  e->state = WS_CHANGED;
  if (t->stage >= 0) {
    char from[16], to[16];
    stage_name(t->stage, from);
    e->stage = x->next_stage++;
    stage_name(e->stage, to);
    if (linkat(x->stage_fd, from, x->stage_fd, to, 0) != 0)
      return sm_error_set_errno(err, SM_EIO, errno, "staging '%s'", path);
  } else {
    int rc = stage_from_host(x, t, x->base ? workspace_manifest_get(x->base, tpath) : NULL, e, err);
    if (rc) return rc;
  }
  maybe_touched(x, e, b);
  return 0;
}

static int on_entry(ws_extract *x, struct archive *a, struct archive_entry *ae, sm_error *err) {
  const char *raw = entry_name(ae);
  cleanup_free char *path = NULL;
  int why = 0;
  int rc = member_path(x, raw, &path, &why, err);
  if (rc == SM_EUNSAFE) {
    sm_error_clear(err);
    return refuse_stray(x, raw, why, err);
  }
  if (rc) return rc;
  const char *hardlink = archive_entry_hardlink(ae);
  if (hardlink == NULL) hardlink = archive_entry_hardlink_utf8(ae);
  mode_t ft = archive_entry_filetype(ae);
  if (path[0] == '\0') {
    /* The copied directory itself. */
    if (ft != AE_IFDIR || hardlink)
      return sm_error_set(err, SM_EUNSAFE, "'%s': the workspace root is not a directory", raw);
    return 0;
  }
  /* Read again: only the entries asked for; they were counted the first time. */
  if (x->only && workspace_manifest_get(x->only, path) == NULL) return 0;
  if (workspace_is_reserved(path)) return refuse_stray(x, path, WS_R_UNSAFE_PATH, err);
  if (workspace_excluded(x->excludes, path)) return 0;
  /* Past what comes back (the listing may have refused it already). */
  if (!x->trusted && strlen(path) > WS_LIST_PATH_MAX) return refuse_too_long(x, path, err);
  /* tar would let a second entry silently replace the first. */
  if (workspace_manifest_get(&x->box, path)) return refuse_stray(x, path, WS_R_UNSAFE_PATH, err);

  ws_entry e;
  memset(&e, 0, sizeof e);
  e.path = path;
  e.stage = -1;
  e.host_mtime_ns = WS_UNKNOWN_MTIME;
  e.box_mtime = archive_entry_mtime_is_set(ae) ? (int64_t)archive_entry_mtime(ae) : 0;
  unsigned perm = (unsigned)archive_entry_perm(ae);
  if (perm & 06000) {
    char lp[4096];
    sm_log(SM_LOG_INFO, "workspace: '%s': setuid/setgid bits dropped",
           workspace_log_path(x->redact, path, lp, sizeof lp));
  }
  e.mode = perm & 0777;

  int parent = parent_refusal(x, path, err);
  if (parent < 0) return -parent;
  if (parent) {
    e.type = hardlink ? 'f' : ft == AE_IFDIR ? 'd' : ft == AE_IFLNK ? 'l' : ft == AE_IFREG ? 'f' : '?';
    refuse(&e, parent);
  } else if (hardlink) {
    rc = on_hardlink(x, hardlink, path, &e, err);
  } else {
    switch (ft) {
    case AE_IFREG:
      rc = on_file(x, a, ae, path, &e, err);
      if (rc == X_AGAIN) return 0;
      break;
    case AE_IFDIR: {
      const ws_entry *b = x->base ? workspace_manifest_get(x->base, path) : NULL;
      e.type = 'd';
      e.state = (b && b->type == 'd' && b->mode == e.mode) ? WS_SAME : WS_CHANGED;
      if (b && b->type == 'd') {
        e.host_mtime_ns = b->host_mtime_ns;
        e.racy = b->racy;
      }
      break;
    }
    case AE_IFLNK:
      rc = on_symlink(x, ae, path, &e, err);
      break;
    case AE_IFCHR:
    case AE_IFBLK:
      e.type = ft == AE_IFCHR ? 'c' : 'b';
      refuse(&e, WS_R_DEVICE);
      break;
    case AE_IFIFO:
      e.type = 'p';
      refuse(&e, WS_R_FIFO);
      break;
    case AE_IFSOCK:
      e.type = 's';
      refuse(&e, WS_R_SOCKET);
      break;
    default:
      e.type = '?';
      refuse(&e, WS_R_SPECIAL);
      break;
    }
  }
  if (rc) return rc;
  rc = workspace_manifest_add(&x->box, &e, NULL);
  if (rc) return sm_error_set(err, rc, "out of memory");
  return 0;
}

int workspace_extract_run(ws_extract *x, sm_read_fn reader, void *reader_ud, sm_error *err) {
  xsrc *src = calloc(1, sizeof *src);
  if (src == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  src->x = x;
  src->reader = reader;
  src->ud = reader_ud;
  int64_t base_total = x->base ? x->base->total_size : 0;
  src->raw_cap = x->max_bytes + base_total + x->max_entries * 4096 + ((int64_t)64 << 20);
  struct archive *a = archive_read_new();
  if (a == NULL) {
    free(src);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  archive_read_support_format_tar(a);
  int rc = 0;
  if (archive_read_open2(a, src, NULL, x_read_cb, NULL, NULL) != ARCHIVE_OK) {
    rc = src->reader_err ? src->reader_err : SM_EPROTOCOL;
    sm_error_set(err, rc, "reading the tar stream: %s", archive_error_string(a));
  }
  while (rc == 0) {
    struct archive_entry *ae = NULL;
    int r = archive_read_next_header(a, &ae);
    if (r == ARCHIVE_EOF) break;
    /* ARCHIVE_WARN is kept: it reports names not valid in the C locale,
     * which are still the raw bytes we want. */
    if (r < ARCHIVE_WARN) {
      if (src->raw_over) {
        char lim[32];
        sm_format_size(x->max_bytes, lim, sizeof lim);
        rc = sm_error_set(err, SM_ETOOBIG, "the tar stream is larger than the limits allow (%s of files)",
                          lim);
      } else {
        rc = src->reader_err ? src->reader_err : SM_EPROTOCOL;
        sm_error_set(err, rc, "reading the tar stream: %s", archive_error_string(a));
      }
      break;
    }
    if (x->only == NULL && ++x->entries > x->max_entries) {
      rc = sm_error_set(err, SM_ETOOBIG,
                        "the archive has more than %" PRId64 " entries (the workspace entry limit)",
                        x->max_entries);
      break;
    }
    rc = on_entry(x, a, ae, err);
    if (rc == 0) {
      /* Data of anything not staged (unchanged, hard links) is skipped. */
      if (archive_read_data_skip(a) < ARCHIVE_WARN) {
        rc = src->reader_err ? src->reader_err : SM_EPROTOCOL;
        sm_error_set(err, rc, "reading the tar stream: %s", archive_error_string(a));
      }
    }
  }
  archive_read_free(a);
  free(src);
  return rc;
}
