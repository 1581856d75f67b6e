/* The packer: a tar stream (libarchive, pax) of chosen workspace entries,
 * produced on demand from an sm_read_fn. Each pull runs the writer one step
 * (a header, or up to 64 KiB of one file) into a small buffer, so neither a
 * temporary tar file nor the whole archive ever exists. File content is
 * hashed as it is read, which fills the manifest for free. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include <sandman/log.h>

#include "common/buf.h"
#include "workspace/ws.h"

#define PACK_CHUNK 65536
/* One step writes at most a chunk plus a tar block and a pax header. */
#define PACK_BUF_MAX ((size_t)4 << 20)

struct ws_packer {
  int root_fd;
  ws_entry **items;
  size_t n, i;
  char *prefix;
  size_t cut;
  int uid, gid;
  struct archive *a;
  struct archive_entry *ae;
  sm_buf out;
  size_t out_pos;
  ws_dircache dirs;
  /* The file being copied. */
  int fd;
  ws_entry *cur;
  int64_t remaining;
  int64_t cur_read;
  EVP_MD_CTX *md;
  int changed_under_us;
  int opened, finished, failed;
  sm_error err;
  int64_t produced, abort_after;
  int64_t bytes, entries;
  char chunk[PACK_CHUNK];
};

static la_ssize_t pack_write_cb(struct archive *a, void *ud, const void *buf, size_t len) {
  ws_packer *p = ud;
  if (sm_buf_append(&p->out, buf, len) != 0) {
    archive_set_error(a, ENOMEM, "tar buffer full");
    return -1;
  }
  return (la_ssize_t)len;
}

int ws_packer_new(ws_packer **out, int root_fd, ws_entry **items, size_t n, const char *prefix,
                  int uid, int gid, sm_error *err) {
  *out = NULL;
  ws_packer *p = calloc(1, sizeof *p);
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  p->root_fd = root_fd;
  p->items = items;
  p->n = n;
  p->prefix = strdup(prefix ? prefix : "");
  p->uid = uid < 0 ? 0 : uid;
  p->gid = gid < 0 ? 0 : gid;
  p->fd = -1;
  p->abort_after = -1;
  sm_buf_init(&p->out, PACK_BUF_MAX);
  ws_dircache_init(&p->dirs, root_fd);
  p->a = archive_write_new();
  p->ae = archive_entry_new();
  if (p->prefix == NULL || p->a == NULL || p->ae == NULL) {
    ws_packer_free(p);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  /* pax: long names, large files and exact mtimes; names pass as raw bytes
   * (hdrcharset=BINARY) so the process locale never mangles them. */
  if (archive_write_set_format_pax_restricted(p->a) != ARCHIVE_OK ||
      archive_write_add_filter_none(p->a) != ARCHIVE_OK ||
      archive_write_set_options(p->a, "hdrcharset=BINARY") < ARCHIVE_WARN ||
      archive_write_set_bytes_in_last_block(p->a, 1) != ARCHIVE_OK ||
      archive_write_open2(p->a, p, NULL, pack_write_cb, NULL, NULL) != ARCHIVE_OK) {
    sm_error_set(err, SM_EIO, "starting the workspace tar stream: %s", archive_error_string(p->a));
    ws_packer_free(p);
    return err ? err->code : SM_EIO;
  }
  *out = p;
  return 0;
}

void ws_packer_abort_after(ws_packer *p, int64_t bytes) { p->abort_after = bytes; }

void ws_packer_set_cut(ws_packer *p, size_t cut) { p->cut = cut; }

int64_t ws_packer_produced(const ws_packer *p) { return p->produced; }

const sm_error *ws_packer_error(const ws_packer *p) { return &p->err; }

void ws_packer_stats(const ws_packer *p, int64_t *bytes, int64_t *entries) {
  if (bytes) *bytes = p->bytes;
  if (entries) *entries = p->entries;
}

static void close_file(ws_packer *p) {
  if (p->fd >= 0) close(p->fd);
  p->fd = -1;
  if (p->md) EVP_MD_CTX_free(p->md);
  p->md = NULL;
  p->cur = NULL;
}

void ws_packer_free(ws_packer *p) {
  if (p == NULL) return;
  close_file(p);
  if (p->a) archive_write_free(p->a);
  if (p->ae) archive_entry_free(p->ae);
  sm_buf_dispose(&p->out);
  ws_dircache_dispose(&p->dirs);
  free(p->prefix);
  free(p);
}

static int fail(ws_packer *p, int code, const char *fmt, const char *path, const char *why) {
  p->failed = 1;
  return sm_error_set(&p->err, code, fmt, path, why);
}

/* Opens the next file to send; a file that turned into something else
 * since the scan is sent as what it is now, or dropped if it is gone. */
static int open_item(ws_packer *p, ws_entry *e, struct stat *st) {
  const char *name;
  int dfd = ws_dircache_parent(&p->dirs, e->path, &name, 0);
  if (dfd < 0) return dfd;
  if (e->type == 'f') {
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
      close(fd);
      return -ENOENT;
    }
    p->fd = fd;
    return 0;
  }
  if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  return 0;
}

static int write_header(ws_packer *p, ws_entry *e) {
  struct stat st;
  int r = open_item(p, e, &st);
  if (r == -ENOENT || r == -ELOOP || r == -ENOTDIR) {
    /* Vanished or changed type since the scan: the next sync picks it up. */
    sm_log(SM_LOG_DEBUG, "workspace: %s changed while copying; skipped this time", e->path);
    e->host_mtime_ns = WS_UNKNOWN_MTIME;
    e->has_hash = 0;
    return 0;
  }
  if (r < 0) return fail(p, SM_EIO, "reading %s: %s", e->path, strerror(-r));
  archive_entry_clear(p->ae);
  const char *rel = strlen(e->path) > p->cut ? e->path + p->cut : e->path;
  size_t plen = strlen(p->prefix) + strlen(rel) + 2;
  char *name = malloc(plen);
  if (name == NULL) return fail(p, SM_ENOMEM, "%s%s", "out of memory", "");
  if (p->prefix[0])
    snprintf(name, plen, "%s/%s", p->prefix, rel);
  else
    snprintf(name, plen, "%s", rel);
  archive_entry_copy_pathname(p->ae, name);
  free(name);
  archive_entry_set_uid(p->ae, p->uid);
  archive_entry_set_gid(p->ae, p->gid);
  archive_entry_set_mtime(p->ae, e->host_mtime_ns / 1000000000, e->host_mtime_ns % 1000000000);
  unsigned mode = e->mode & 0777;
  switch (e->type) {
  case 'f':
    /* The size right now, so the header and the data agree. */
    e->size = st.st_size;
    archive_entry_set_filetype(p->ae, AE_IFREG);
    archive_entry_set_size(p->ae, st.st_size);
    break;
  case 'd':
    archive_entry_set_filetype(p->ae, AE_IFDIR);
    break;
  case 'l':
    archive_entry_set_filetype(p->ae, AE_IFLNK);
    archive_entry_copy_symlink(p->ae, e->link);
    mode = 0777;
    break;
  case 'p':
    archive_entry_set_filetype(p->ae, AE_IFIFO);
    break;
  case 'c':
  case 'b':
    archive_entry_set_filetype(p->ae, e->type == 'c' ? AE_IFCHR : AE_IFBLK);
    archive_entry_set_rdev(p->ae, st.st_rdev);
    break;
  default:
    return 0;
  }
  archive_entry_set_perm(p->ae, mode);
  if (archive_write_header(p->a, p->ae) < ARCHIVE_WARN)
    return fail(p, SM_EIO, "writing the tar header of %s: %s", e->path, archive_error_string(p->a));
  p->entries++;
  if (e->type == 'f') {
    p->cur = e;
    p->remaining = st.st_size;
    p->cur_read = 0;
    p->changed_under_us = 0;
    p->md = EVP_MD_CTX_new();
    if (p->md == NULL || EVP_DigestInit_ex(p->md, EVP_sha256(), NULL) != 1)
      return fail(p, SM_ENOMEM, "%s%s", "out of memory", "");
    e->host_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    e->box_mtime = st.st_mtim.tv_sec;
  } else {
    e->box_mtime = e->host_mtime_ns / 1000000000;
  }
  return 0;
}

static int finish_file(ws_packer *p) {
  ws_entry *e = p->cur;
  unsigned int n = 0;
  EVP_DigestFinal_ex(p->md, e->hash, &n);
  e->has_hash = 1;
  struct stat st;
  /* Changed while read: what was sent is not what the host has. */
  if (p->changed_under_us || fstat(p->fd, &st) != 0 || st.st_size != e->size ||
      (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != e->host_mtime_ns) {
    e->has_hash = 0;
    e->host_mtime_ns = WS_UNKNOWN_MTIME;
  }
  close_file(p);
  if (archive_write_finish_entry(p->a) < ARCHIVE_WARN)
    return fail(p, SM_EIO, "writing the tar stream of %s: %s", e->path, archive_error_string(p->a));
  return 0;
}

/* One step of the writer. */
static int step(ws_packer *p) {
  if (p->cur) {
    size_t want = p->remaining < PACK_CHUNK ? (size_t)p->remaining : PACK_CHUNK;
    ssize_t r = 0;
    if (want > 0) {
      do r = read(p->fd, p->chunk, want);
      while (r < 0 && errno == EINTR);
      if (r < 0) return fail(p, SM_EIO, "reading %s: %s", p->cur->path, strerror(errno));
    }
    if (r == 0 && p->remaining > 0) {
      /* Shrunk while read: libarchive pads the entry with zeros. */
      p->changed_under_us = 1;
      p->remaining = 0;
    }
    if (r > 0) {
      EVP_DigestUpdate(p->md, p->chunk, (size_t)r);
      if (archive_write_data(p->a, p->chunk, (size_t)r) < 0)
        return fail(p, SM_EIO, "writing the tar stream of %s: %s", p->cur->path,
                    archive_error_string(p->a));
      p->remaining -= r;
      p->cur_read += r;
      p->bytes += r;
    }
    if (p->remaining == 0) return finish_file(p);
    return 0;
  }
  if (p->i < p->n) return write_header(p, p->items[p->i++]);
  if (archive_write_close(p->a) != ARCHIVE_OK)
    return fail(p, SM_EIO, "finishing the tar stream: %s%s", archive_error_string(p->a), "");
  p->finished = 1;
  return 0;
}

ssize_t ws_packer_read(void *ud, char *buf, size_t len) {
  ws_packer *p = ud;
  if (p->failed) return p->err.code ? p->err.code : SM_EIO;
  while (p->out_pos >= p->out.len && !p->finished) {
    sm_buf_reset(&p->out);
    p->out_pos = 0;
    if (step(p) != 0) return p->err.code ? p->err.code : SM_EIO;
  }
  size_t avail = p->out.len - p->out_pos;
  if (avail == 0) return 0;
  size_t n = avail < len ? avail : len;
  if (p->abort_after >= 0 && p->produced + (int64_t)n > p->abort_after) {
    p->failed = 1;
    return sm_error_set(&p->err, SM_ECANCELLED, "copy aborted after %" PRId64 " bytes (test hook)",
                        p->abort_after);
  }
  memcpy(buf, p->out.data + p->out_pos, n);
  p->out_pos += n;
  p->produced += (int64_t)n;
  return (ssize_t)n;
}
