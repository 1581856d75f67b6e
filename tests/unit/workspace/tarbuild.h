/* Test helpers: build tar archives in memory with libarchive (hostile ones
 * included), read them back through an sm_read_fn, and snapshot a directory
 * tree to prove nothing changed. */
#ifndef SANDMAN_TESTS_TARBUILD_H
#define SANDMAN_TESTS_TARBUILD_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "common/buf.h"
#include "support/files.h"
#include "support/memio.h"
#include "support/xalloc.h"

typedef struct tb {
  struct archive *a;
  common_buf out;
} tb;

static inline la_ssize_t tb_write_cb(struct archive *a, void *ud, const void *buf, size_t len) {
  (void)a;
  tb *t = ud;
  return common_buf_append(&t->out, buf, len) == 0 ? (la_ssize_t)len : -1;
}

static inline void tb_open_blocked(tb *t, int block) {
  common_buf_init(&t->out, (size_t)1 << 30);
  t->a = archive_write_new();
  archive_write_set_bytes_per_block(t->a, block);
  archive_write_set_format_pax_restricted(t->a);
  archive_write_add_filter_none(t->a);
  archive_write_set_options(t->a, "hdrcharset=BINARY");
  archive_write_set_bytes_in_last_block(t->a, 1);
  archive_write_open2(t->a, t, NULL, tb_write_cb, NULL, NULL);
}

static inline void tb_open(tb *t) { tb_open_blocked(t, 10240); }

/* type: AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR, AE_IFIFO...; link: symlink
 * target; hard: hard link target; data written for regular files. size < 0
 * means the length of data; otherwise the header claims size. */
static inline void tb_add(tb *t, const char *name, unsigned type, unsigned perm, const char *link,
                          const char *hard, const char *data, long long size) {
  struct archive_entry *e = archive_entry_new();
  archive_entry_copy_pathname(e, name);
  if (hard) {
    archive_entry_copy_hardlink(e, hard);
  } else {
    archive_entry_set_filetype(e, type);
  }
  archive_entry_set_perm(e, perm);
  archive_entry_set_mtime(e, 1700000000, 0);
  archive_entry_set_uid(e, 1000);
  archive_entry_set_gid(e, 1000);
  if (link) archive_entry_copy_symlink(e, link);
  size_t dlen = data ? strlen(data) : 0;
  if (type == AE_IFREG && !hard) archive_entry_set_size(e, size >= 0 ? size : (long long)dlen);
  if (type == AE_IFCHR) archive_entry_set_rdev(e, makedev(1, 3));
  archive_write_header(t->a, e);
  if (dlen && type == AE_IFREG && !hard) archive_write_data(t->a, data, dlen);
  archive_entry_free(e);
}

static inline void tb_file(tb *t, const char *name, const char *data) {
  tb_add(t, name, AE_IFREG, 0644, NULL, NULL, data, -1);
}
static inline void tb_dir(tb *t, const char *name) {
  tb_add(t, name, AE_IFDIR, 0755, NULL, NULL, NULL, 0);
}
static inline void tb_symlink(tb *t, const char *name, const char *target) {
  tb_add(t, name, AE_IFLNK, 0777, target, NULL, NULL, 0);
}

static inline void tb_close(tb *t) {
  archive_write_close(t->a);
  archive_write_free(t->a);
  t->a = NULL;
}

/* A lazy stream of n empty entries (files or directories) named e0000001... */
typedef struct genstream {
  struct archive *a;
  struct archive_entry *e;
  common_buf buf;
  size_t pos;
  long long n, made;
  int dirs, closed;
} genstream;

static inline la_ssize_t gen_write_cb(struct archive *a, void *ud, const void *buf, size_t len) {
  (void)a;
  genstream *g = ud;
  return common_buf_append(&g->buf, buf, len) == 0 ? (la_ssize_t)len : -1;
}

static inline void gen_open(genstream *g, long long n, int dirs) {
  memset(g, 0, sizeof *g);
  g->n = n;
  g->dirs = dirs;
  common_buf_init(&g->buf, (size_t)64 << 20);
  g->a = archive_write_new();
  g->e = archive_entry_new();
  archive_write_set_format_ustar(g->a);
  archive_write_add_filter_none(g->a);
  archive_write_set_bytes_in_last_block(g->a, 1);
  archive_write_open2(g->a, g, NULL, gen_write_cb, NULL, NULL);
}

static inline ssize_t gen_read(void *ud, char *buf, size_t len) {
  genstream *g = ud;
  while (g->pos >= g->buf.len && !g->closed) {
    common_buf_reset(&g->buf);
    g->pos = 0;
    if (g->made >= g->n) {
      archive_write_close(g->a);
      g->closed = 1;
      break;
    }
    for (int k = 0; k < 64 && g->made < g->n; k++, g->made++) {
      char name[32];
      snprintf(name, sizeof name, "e%07lld", g->made);
      archive_entry_clear(g->e);
      archive_entry_copy_pathname(g->e, name);
      archive_entry_set_filetype(g->e, g->dirs ? AE_IFDIR : AE_IFREG);
      archive_entry_set_perm(g->e, g->dirs ? 0755 : 0644);
      archive_entry_set_size(g->e, 0);
      archive_write_header(g->a, g->e);
    }
  }
  size_t n = g->buf.len - g->pos;
  if (n > len) n = len;
  memcpy(buf, g->buf.data + g->pos, n);
  g->pos += n;
  return (ssize_t)n;
}

static inline void gen_free(genstream *g) {
  archive_write_free(g->a);
  archive_entry_free(g->e);
  common_buf_dispose(&g->buf);
}

/* Lists a tree (names, types, sizes, modes, link targets) into a string. */
static inline void snap_rec(common_buf *b, const char *dir, const char *rel) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  char *names[4096];
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL && n < 4096) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    names[n++] = xstrdup(de->d_name);
  }
  closedir(d);
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (strcmp(names[i], names[j]) > 0) {
        char *t = names[i];
        names[i] = names[j];
        names[j] = t;
      }
  for (size_t i = 0; i < n; i++) {
    char path[8192], r[8192];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    snprintf(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    char link[4096] = "";
    if (S_ISLNK(st.st_mode)) {
      ssize_t k = readlink(path, link, sizeof link - 1);
      link[k > 0 ? k : 0] = '\0';
    }
    common_buf_printf(b, "%s %o %lld %s\n", r, (unsigned)st.st_mode,
                      (long long)(S_ISDIR(st.st_mode) ? 0 : st.st_size), link);
    if (S_ISDIR(st.st_mode)) snap_rec(b, path, r);
    free(names[i]);
  }
}

static inline char *snapshot(const char *dir) {
  common_buf b;
  common_buf_init(&b, (size_t)64 << 20);
  common_buf_append(&b, "", 0);
  snap_rec(&b, dir, "");
  return common_buf_steal(&b, NULL);
}

#endif
