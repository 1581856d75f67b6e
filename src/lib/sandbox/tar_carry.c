/* The tar streams of a /workspace copied from a replaced sandbox into its
 * successor (carry.h): the engine's download into a file, and the file
 * again as an upload, re-rooted and owned by the new sandbox's user. The
 * upload is produced as the engine asks for it (libarchive reads an entry
 * and writes it into a small buffer), so nothing is held whole. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/util.h>

#include "sandbox/carry.h"

#define BLOCK (64 * 1024)

int sandbox_tar_sink_write(void *ud, const char *buf, size_t len) {
  sandbox_tar_sink *s = ud;
  s->bytes += (int64_t)len;
  if (s->bytes > s->cap) return -1;
  while (len > 0) {
    ssize_t w = write(s->fd, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    buf += w;
    len -= (size_t)w;
  }
  return 0;
}

static la_ssize_t out_write(struct archive *a, void *ud, const void *data, size_t n) {
  (void)a;
  sandbox_tar_source *s = ud;
  if (s->len + n > s->cap) {
    size_t cap = s->cap ? s->cap : BLOCK;
    while (cap < s->len + n) cap *= 2;
    char *b = realloc(s->buf, cap);
    if (b == NULL) return -1;
    s->buf = b;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, data, n);
  s->len += n;
  return (la_ssize_t)n;
}

int sandbox_tar_source_open(sandbox_tar_source *s, int fd, const char *strip, int uid, int gid,
                            sm_error *err) {
  memset(s, 0, sizeof *s);
  s->strip = strip;
  s->uid = uid;
  s->gid = gid;
  s->in = archive_read_new();
  s->out = archive_write_new();
  if (s->in == NULL || s->out == NULL) {
    sandbox_tar_source_close(s);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  archive_read_support_format_tar(s->in);
  archive_write_set_format_pax_restricted(s->out);
  archive_write_set_bytes_in_last_block(s->out, 1);
  if (archive_read_open_fd(s->in, fd, BLOCK) != ARCHIVE_OK ||
      archive_write_open2(s->out, s, NULL, out_write, NULL, NULL) != ARCHIVE_OK) {
    int rc = sm_error_set(err, SM_EIO, "the copy of /workspace: %s",
                          archive_error_string(s->in) ? archive_error_string(s->in)
                                                      : archive_error_string(s->out));
    sandbox_tar_source_close(s);
    return rc;
  }
  return 0;
}

/* "workspace/a/b" -> "a/b"; "workspace" (the folder itself) -> NULL. */
static const char *rerooted(const char *path, const char *strip) {
  size_t n = strlen(strip);
  if (path == NULL) return NULL;
  if (strncmp(path, "./", 2) == 0) path += 2;
  if (strncmp(path, strip, n) != 0) return path;
  if (path[n] == '\0' || (path[n] == '/' && path[n + 1] == '\0')) return NULL;
  return path[n] == '/' ? path + n + 1 : path;
}

static int fail(sandbox_tar_source *s, struct archive *a) {
  s->failed = 1;
  sm_error_set(&s->err, SM_EIO, "the copy of /workspace: %s",
               archive_error_string(a) ? archive_error_string(a) : "broken archive");
  return -1;
}

/* One step: the next entry's header, or a piece of its data, or the end. */
static int step(sandbox_tar_source *s) {
  if (s->phase == 0) {
    struct archive_entry *ae = NULL;
    int r = archive_read_next_header(s->in, &ae);
    if (r == ARCHIVE_EOF) {
      s->phase = 2;
      return archive_write_close(s->out) == ARCHIVE_OK ? 0 : fail(s, s->out);
    }
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) return fail(s, s->in);
    const char *p = rerooted(archive_entry_pathname(ae), s->strip);
    if (p == NULL) return 0; /* the folder itself: the new volume's root stays */
    archive_entry_copy_pathname(ae, p);
    const char *hl = archive_entry_hardlink(ae);
    if (hl) archive_entry_copy_hardlink(ae, rerooted(hl, s->strip) ? rerooted(hl, s->strip) : ".");
    if (s->uid >= 0) {
      archive_entry_set_uid(ae, s->uid);
      archive_entry_set_gid(ae, s->gid);
    }
    archive_entry_set_uname(ae, NULL);
    archive_entry_set_gname(ae, NULL);
    if (archive_write_header(s->out, ae) != ARCHIVE_OK) return fail(s, s->out);
    s->phase = 1;
    return 0;
  }
  char block[BLOCK];
  la_ssize_t n = archive_read_data(s->in, block, sizeof block);
  if (n < 0) return fail(s, s->in);
  if (n == 0) {
    s->phase = 0;
    return 0;
  }
  return archive_write_data(s->out, block, (size_t)n) == n ? 0 : fail(s, s->out);
}

ssize_t sandbox_tar_source_read(void *ud, char *dst, size_t len) {
  sandbox_tar_source *s = ud;
  while (s->off == s->len) {
    s->off = s->len = 0;
    if (s->failed) return -1;
    if (s->phase == 2) return 0;
    if (step(s) != 0) return -1;
  }
  size_t n = s->len - s->off;
  if (n > len) n = len;
  memcpy(dst, s->buf + s->off, n);
  s->off += n;
  return (ssize_t)n;
}

void sandbox_tar_source_close(sandbox_tar_source *s) {
  if (s->in) archive_read_free(s->in);
  if (s->out) archive_write_free(s->out);
  free(s->buf);
  s->in = s->out = NULL;
  s->buf = NULL;
}
