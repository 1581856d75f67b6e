/* A snapshot's tar of /workspace read from its volume on the host
 * (snap_direct.h).
 *
 * The tree is a sandbox's, read by a process that is usually root: every
 * step goes through a descriptor relative to the folder opened and checked
 * first, one name at a time (fstatat, then openat with O_NOFOLLOW), never a
 * path string through the tree, so no symlink is ever followed; what is
 * opened is checked with fstat to be what fstatat said (same inode, same
 * type, same size), and a fifo, socket or device is never opened. The
 * sandbox is frozen meanwhile, so anything that moves is an error, not a
 * race to handle. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "common/cleanup.h"
#include "sandbox/lifecycle.h"
#include "sandbox/snap_direct.h"
#include "sandbox/ws_save.h"

/* As many entries as a manifest takes (snap_manifest.c). */
#define DIRECT_ENTRIES_MAX 1000000
/* The tar is written out (file and tee) a buffer at a time. */
#define DIRECT_OUT_BUF ((size_t)1 << 20)
#define DIRECT_READ_BUF ((size_t)256 << 10)
/* What the walk keeps of names at most: the first names of hard-linked
 * inodes, and one folder's listing. Past either, the engine reads the tree
 * (its own limits apply there). */
#define DIRECT_NAME_BYTES_MAX ((size_t)64 << 20)

static int is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* ---- the decision ---- */

/* "name=rootless" or "name=userns" among the engine's security options
 * ("name=seccomp,profile=default", ...). */
static int shifted_owners(json_object *info, char *why, size_t why_len) {
  json_object *opts = NULL;
  if (!json_object_object_get_ex(info, "SecurityOptions", &opts) ||
      !json_object_is_type(opts, json_type_array))
    return 0;
  for (size_t i = 0; i < json_object_array_length(opts); i++) {
    const char *o = json_object_get_string(json_object_array_get_idx(opts, i));
    for (const char *p = o; p && *p;) {
      const char *end = strchr(p, ',');
      size_t n = end ? (size_t)(end - p) : strlen(p);
      if ((n == 13 && memcmp(p, "name=rootless", 13) == 0) ||
          (n == 11 && memcmp(p, "name=userns", 11) == 0)) {
        snprintf(why, why_len, "the engine runs with %.*s: its files' owners are shifted", (int)n,
                 p);
        return 1;
      }
      p = end ? end + 1 : NULL;
    }
  }
  return 0;
}

int sandbox_snap_direct_eligible(const char *host, json_object *info, json_object *insp,
                                 char *source, size_t source_len, char *why, size_t why_len) {
  source[0] = '\0';
  if (host == NULL || strncmp(host, "unix://", 7) != 0) {
    snprintf(why, why_len, "the engine is at %s, not a unix socket", host ? host : "(none)");
    return 0;
  }
  if (!json_object_is_type(info, json_type_object)) {
    snprintf(why, why_len, "no answer from the engine's /info");
    return 0;
  }
  if (shifted_owners(info, why, why_len)) return 0;
  json_object *mounts = NULL, *ws = NULL;
  if (json_object_object_get_ex(insp, "Mounts", &mounts) &&
      json_object_is_type(mounts, json_type_array))
    for (size_t i = 0; i < json_object_array_length(mounts) && ws == NULL; i++) {
      json_object *m = json_object_array_get_idx(mounts, i);
      if (is(sandbox_json_str(m, "Destination", NULL), "/workspace")) ws = m;
    }
  if (ws == NULL) {
    snprintf(why, why_len, "no mount at /workspace");
    return 0;
  }
  const char *type = sandbox_json_str(ws, "Type", NULL),
             *driver = sandbox_json_str(ws, "Driver", NULL);
  const char *src = sandbox_json_str(ws, "Source", NULL);
  if (!is(type, "volume")) {
    snprintf(why, why_len, "/workspace is a %s mount, not a volume", type ? type : "(typeless)");
    return 0;
  }
  if (!is(driver, "local")) {
    snprintf(why, why_len, "/workspace is a volume of driver %s, not local",
             driver ? driver : "(none)");
    return 0;
  }
  if (src == NULL || src[0] != '/' || strlen(src) >= source_len) {
    snprintf(why, why_len, "the /workspace volume has no usable Source");
    return 0;
  }
  snprintf(source, source_len, "%s", src);
  return 1;
}

int sandbox_snap_direct_same(const struct stat *st, const sm_engine_path_info *engine, char *why,
                             size_t why_len) {
  if (!S_ISDIR(st->st_mode) || !S_ISDIR(engine->mode)) {
    snprintf(why, why_len, "not a folder on both sides");
    return 0;
  }
  if ((st->st_mode & 07777) != (engine->mode & 07777)) {
    snprintf(why, why_len, "its mode %04o is not the engine's %04o",
             (unsigned)(st->st_mode & 07777), engine->mode & 07777);
    return 0;
  }
  if ((int64_t)st->st_size != engine->size) {
    snprintf(why, why_len, "its size %lld is not the engine's %lld", (long long)st->st_size,
             (long long)engine->size);
    return 0;
  }
  if (!engine->has_mtime) {
    snprintf(why, why_len, "the engine's stat has no mtime to compare");
    return 0;
  }
  if ((int64_t)st->st_mtim.tv_sec != engine->mtime_s ||
      (long)st->st_mtim.tv_nsec != engine->mtime_ns) {
    snprintf(why, why_len, "its mtime %lld.%09ld is not the engine's %lld.%09ld",
             (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec, (long long)engine->mtime_s,
             engine->mtime_ns);
    return 0;
  }
  return 1;
}

int sandbox_snap_direct_open(const char *source, const sm_engine_path_info *engine, char *why,
                             size_t why_len) {
  const char *test = getenv(SANDBOX_SNAP_DIRECT_TEST_SOURCE_ENV);
  if (test && *test) source = test;
  cleanup_fd int fd = open(source, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, why_len, "cannot open %s: %s", source, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(why, why_len, "cannot stat %s: %s", source, strerror(errno));
    return -1;
  }
  char differs[200];
  if (!sandbox_snap_direct_same(&st, engine, differs, sizeof differs)) {
    snprintf(why, why_len, "%s is not the engine's /workspace: %s", source, differs);
    return -1;
  }
  return common_steal_fd(&fd);
}

/* ---- the tar ---- */

/* libarchive's small writes (headers, padding) gathered into large ones
 * for the saving writer (ws_save.h). */
typedef struct direct_out {
  sm_write_fn writer;
  void *writer_ud;
  char *buf;
  size_t len;
  int write_errno;
} direct_out;

static int out_flush(direct_out *o) {
  if (o->len == 0) return 0;
  errno = 0;
  if (o->writer(o->writer_ud, o->buf, o->len) != 0) {
    o->write_errno = errno ? errno : EIO;
    return -1;
  }
  o->len = 0;
  return 0;
}

static la_ssize_t out_write(struct archive *a, void *ud, const void *buf, size_t len) {
  direct_out *o = ud;
  const char *p = buf;
  size_t left = len;
  while (left > 0) {
    size_t n = DIRECT_OUT_BUF - o->len < left ? DIRECT_OUT_BUF - o->len : left;
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    p += n;
    left -= n;
    if (o->len == DIRECT_OUT_BUF && out_flush(o) != 0) {
      archive_set_error(a, o->write_errno, "writing the tar");
      return -1;
    }
  }
  return (la_ssize_t)len;
}

/* Regular files with more than one link, by inode: the first name each
 * was written under (open addressing, grown at half full). */
typedef struct link_slot {
  ino_t ino;
  char *name;
} link_slot;

typedef struct direct_walk {
  struct archive *a;
  struct archive_entry *ae;
  dev_t dev;
  char path[PATH_MAX]; /* the entry's name, "./a/b" */
  size_t plen;
  char *data;
  link_slot *links;
  size_t nlinks, cap_links, link_bytes;
  int64_t entries;
  int fallback;
  sm_error *err;
} direct_walk;

static size_t link_hash(ino_t ino, size_t cap) {
  return (size_t)((uint64_t)ino * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

static const char *link_find(direct_walk *w, ino_t ino) {
  if (w->cap_links == 0) return NULL;
  for (size_t i = link_hash(ino, w->cap_links);; i = (i + 1) & (w->cap_links - 1)) {
    if (w->links[i].name == NULL) return NULL;
    if (w->links[i].ino == ino) return w->links[i].name;
  }
}

/* 0, -1 out of memory, 1 past DIRECT_NAME_BYTES_MAX. */
static int link_add(direct_walk *w, ino_t ino, const char *name) {
  size_t len = strlen(name) + 1;
  if (w->link_bytes + len > DIRECT_NAME_BYTES_MAX) return 1;
  w->link_bytes += len;
  if ((w->nlinks + 1) * 2 > w->cap_links) {
    size_t cap = w->cap_links ? w->cap_links * 2 : 64;
    link_slot *t = calloc(cap, sizeof *t);
    if (t == NULL) return -1;
    for (size_t k = 0; k < w->cap_links; k++) {
      if (w->links[k].name == NULL) continue;
      size_t i = link_hash(w->links[k].ino, cap);
      while (t[i].name) i = (i + 1) & (cap - 1);
      t[i] = w->links[k];
    }
    free(w->links);
    w->links = t;
    w->cap_links = cap;
  }
  size_t i = link_hash(ino, w->cap_links);
  while (w->links[i].name) i = (i + 1) & (w->cap_links - 1);
  if ((w->links[i].name = strdup(name)) == NULL) return -1;
  w->links[i].ino = ino;
  w->nlinks++;
  return 0;
}

static void walk_dispose(direct_walk *w) {
  for (size_t k = 0; k < w->cap_links; k++) free(w->links[k].name);
  free(w->links);
  free(w->data);
  if (w->ae) archive_entry_free(w->ae);
}

/* The header of the entry at w->path as st says, with link (a symlink's
 * target) or hard (the name a hard link points to). */
static int put_header(direct_walk *w, const struct stat *st, const char *link, const char *hard) {
  struct archive_entry *ae = w->ae;
  archive_entry_clear(ae);
  archive_entry_copy_pathname(ae, w->path);
  archive_entry_set_mode(ae, st->st_mode);
  archive_entry_set_uid(ae, (la_int64_t)st->st_uid);
  archive_entry_set_gid(ae, (la_int64_t)st->st_gid);
  /* Whole seconds, as the engine's archive keeps them. */
  archive_entry_set_mtime(ae, st->st_mtim.tv_sec, 0);
  archive_entry_set_size(ae, S_ISREG(st->st_mode) && hard == NULL ? (la_int64_t)st->st_size : 0);
  if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) archive_entry_set_rdev(ae, st->st_rdev);
  if (link) archive_entry_copy_symlink(ae, link);
  if (hard) archive_entry_copy_hardlink(ae, hard);
  int r = archive_write_header(w->a, ae);
  if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
    return sm_error_set(w->err, SM_EIO, "writing the tar's entry %s: %s", w->path,
                        archive_error_string(w->a));
  if (++w->entries > DIRECT_ENTRIES_MAX)
    return sm_error_set(w->err, SM_ETOOBIG, "its /workspace holds more than %d entries",
                        DIRECT_ENTRIES_MAX);
  return 0;
}

static int changed(direct_walk *w) {
  return sm_error_set(w->err, SM_ECONFLICT,
                      "%s in its /workspace changed while the sandbox was frozen: snapshot refused",
                      w->path);
}

/* Opens name in dir as what st says it is (a file or a folder) and checks
 * that it is that very inode. */
static int open_checked(direct_walk *w, int dir, const char *name, const struct stat *st,
                        int flags) {
  int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOATIME | flags);
  if (fd < 0 && errno == EPERM)
    fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | flags);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR || errno == ENOENT) return changed(w), -1;
    return sm_error_set_errno(w->err, SM_EIO, errno, "opening %s in its /workspace", w->path), -1;
  }
  struct stat now;
  if (fstat(fd, &now) != 0 || now.st_ino != st->st_ino || now.st_dev != st->st_dev ||
      (now.st_mode & S_IFMT) != (st->st_mode & S_IFMT) || now.st_size != st->st_size) {
    close(fd);
    return changed(w), -1;
  }
  return fd;
}

static int put_file(direct_walk *w, int dir, const char *name, const struct stat *st) {
  cleanup_fd int fd = open_checked(w, dir, name, st, 0);
  if (fd < 0) return w->err->code;
  int rc = put_header(w, st, NULL, NULL);
  if (rc) return rc;
  int64_t left = st->st_size;
  while (left > 0) {
    size_t want = (int64_t)DIRECT_READ_BUF < left ? DIRECT_READ_BUF : (size_t)left;
    ssize_t n = read(fd, w->data, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return sm_error_set_errno(w->err, SM_EIO, errno, "reading %s in its /workspace", w->path);
    if (n == 0) return changed(w);
    if (archive_write_data(w->a, w->data, (size_t)n) != n)
      return sm_error_set(w->err, SM_EIO, "writing the tar: %s", archive_error_string(w->a));
    left -= n;
  }
  char extra;
  ssize_t n;
  while ((n = read(fd, &extra, 1)) < 0 && errno == EINTR) continue;
  if (n != 0) return changed(w);
  return 0;
}

static int put_symlink(direct_walk *w, int dir, const char *name, const struct stat *st) {
  char target[PATH_MAX];
  ssize_t n = readlinkat(dir, name, target, sizeof target);
  if (n < 0 || (size_t)n >= sizeof target || n != st->st_size) return changed(w);
  target[n] = '\0';
  return put_header(w, st, target, NULL);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

/* The names in the folder open as dir, sorted by their bytes (the order
 * the engine's archive walks in). */
static int list_names(direct_walk *w, int dir, char ***out, size_t *count) {
  *out = NULL;
  *count = 0;
  int fd = dup(dir);
  if (fd < 0)
    return sm_error_set_errno(w->err, SM_EIO, errno, "listing %s in its /workspace", w->path);
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return sm_error_set_errno(w->err, SM_EIO, errno, "listing %s in its /workspace", w->path);
  }
  char **names = NULL;
  size_t n = 0, cap = 0, bytes = 0;
  int rc = 0;
  struct dirent *de;
  errno = 0;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (w->entries + (int64_t)n >= DIRECT_ENTRIES_MAX) {
      rc = sm_error_set(w->err, SM_ETOOBIG, "its /workspace holds more than %d entries",
                        DIRECT_ENTRIES_MAX);
      break;
    }
    bytes += strlen(de->d_name) + 1 + sizeof *names;
    if (bytes > DIRECT_NAME_BYTES_MAX) {
      w->fallback = 1;
      rc = sm_error_set(w->err, SM_ETOOBIG, "the listing of %s in its /workspace passes %zu bytes",
                        w->path, DIRECT_NAME_BYTES_MAX);
      break;
    }
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 32;
      char **t = realloc(names, nc * sizeof *t);
      if (t == NULL) {
        rc = sm_error_set(w->err, SM_ENOMEM, "out of memory");
        break;
      }
      names = t;
      cap = nc;
    }
    if ((names[n] = strdup(de->d_name)) == NULL) {
      rc = sm_error_set(w->err, SM_ENOMEM, "out of memory");
      break;
    }
    n++;
    errno = 0;
  }
  if (rc == 0 && errno != 0)
    rc = sm_error_set_errno(w->err, SM_EIO, errno, "listing %s in its /workspace", w->path);
  closedir(d);
  if (rc) {
    names_free(names, n);
    return rc;
  }
  if (n > 1) qsort(names, n, sizeof *names, by_name);
  *out = names;
  *count = n;
  return 0;
}

static int put_dir_contents(direct_walk *w, int dir, int depth);

/* One entry of the folder open as dir; w->path is its name. */
static int put_entry(direct_walk *w, int dir, const char *name, int depth) {
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return changed(w);
  if (st.st_dev != w->dev) {
    w->fallback = 1;
    return sm_error_set(w->err, SM_EINVAL, "%s in its /workspace is on another filesystem",
                        w->path);
  }
  /* Anything but a folder (or a socket, left out) with more links is a
   * hard link to the first name it was written under, as the engine's
   * archive makes it. */
  if (st.st_nlink > 1 && !S_ISDIR(st.st_mode) && !S_ISSOCK(st.st_mode)) {
    const char *first = link_find(w, st.st_ino);
    if (first) return put_header(w, &st, NULL, first);
    int added = link_add(w, st.st_ino, w->path);
    if (added < 0) return sm_error_set(w->err, SM_ENOMEM, "out of memory");
    if (added > 0) {
      w->fallback = 1;
      return sm_error_set(w->err, SM_ETOOBIG, "the names of its hard-linked files pass %zu bytes",
                          DIRECT_NAME_BYTES_MAX);
    }
  }
  switch (st.st_mode & S_IFMT) {
  case S_IFREG:
    return put_file(w, dir, name, &st);
  case S_IFLNK:
    return put_symlink(w, dir, name, &st);
  case S_IFIFO:
  case S_IFCHR:
  case S_IFBLK:
    return put_header(w, &st, NULL, NULL); /* never opened */
  case S_IFSOCK:
    return 0; /* as the engine's archive: a socket is left out */
  case S_IFDIR:
    break;
  default:
    return changed(w);
  }
  if (depth >= SANDBOX_SNAP_DIRECT_DEPTH_MAX) {
    w->fallback = 1;
    return sm_error_set(w->err, SM_ETOOBIG, "its /workspace is more than %d folders deep",
                        SANDBOX_SNAP_DIRECT_DEPTH_MAX);
  }
  cleanup_fd int fd = open_checked(w, dir, name, &st, O_DIRECTORY);
  if (fd < 0) return w->err->code;
  size_t at = w->plen;
  w->path[at] = '/';
  w->path[at + 1] = '\0';
  int rc = put_header(w, &st, NULL, NULL);
  w->path[at] = '\0';
  if (rc == 0) rc = put_dir_contents(w, fd, depth + 1);
  return rc;
}

static int put_dir_contents(direct_walk *w, int dir, int depth) {
  char **names = NULL;
  size_t n = 0;
  int rc = list_names(w, dir, &names, &n);
  size_t at = w->plen;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    size_t len = strlen(names[i]);
    /* room for "/name", a folder's "/" and the NUL */
    if (at + 1 + len + 2 > sizeof w->path) {
      w->fallback = 1;
      rc = sm_error_set(w->err, SM_ETOOBIG, "a path in its /workspace is longer than %d bytes",
                        PATH_MAX);
      break;
    }
    w->path[at] = '/';
    memcpy(w->path + at + 1, names[i], len + 1);
    w->plen = at + 1 + len;
    rc = put_entry(w, dir, names[i], depth);
    w->plen = at;
    w->path[at] = '\0';
  }
  names_free(names, n);
  return rc;
}

static int write_tree(int root, direct_out *o, int *fallback, sm_error *err) {
  direct_walk w = {.err = err};
  cleanup_archive struct archive *a = archive_write_new();
  w.a = a;
  w.ae = archive_entry_new();
  w.data = malloc(DIRECT_READ_BUF);
  struct stat st;
  int rc = 0;
  if (a == NULL || w.ae == NULL || w.data == NULL)
    rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  /* pax restricted: ustar headers, a pax one only where ustar falls short
   * (long or non-ASCII names and link targets, large sizes and ids). */
  else if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
           archive_write_add_filter_none(a) != ARCHIVE_OK ||
           archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK ||
           archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
           archive_write_open2(a, o, NULL, out_write, NULL, NULL) != ARCHIVE_OK)
    rc = sm_error_set(err, SM_EIO, "starting the tar: %s", archive_error_string(a));
  else if (fstat(root, &st) != 0)
    rc = sm_error_set_errno(err, SM_EIO, errno, "reading its /workspace");
  if (rc == 0) {
    w.dev = st.st_dev;
    /* The folder itself is "./", as in the engine's archive of "/workspace/.". */
    snprintf(w.path, sizeof w.path, "./");
    rc = put_header(&w, &st, NULL, NULL);
    w.path[1] = '\0';
    w.plen = 1;
  }
  if (rc == 0) rc = put_dir_contents(&w, root, 1);
  if (rc == 0 && archive_write_close(a) != ARCHIVE_OK)
    rc = sm_error_set(err, SM_EIO, "ending the tar: %s", archive_error_string(a));
  *fallback = w.fallback;
  walk_dispose(&w);
  return rc;
}

/* write_tree as a producer (ws_save.h). */
typedef struct direct_job {
  int root;
  int *fallback;
} direct_job;

static int produce_tree(void *ud, sm_write_fn writer, void *writer_ud, sm_error *err) {
  direct_job *j = ud;
  direct_out o = {.writer = writer, .writer_ud = writer_ud, .buf = malloc(DIRECT_OUT_BUF)};
  int rc = o.buf == NULL ? sm_error_set(err, SM_ENOMEM, "out of memory")
                         : write_tree(j->root, &o, j->fallback, err);
  if (rc == 0 && out_flush(&o) != 0)
    rc = sm_error_set_errno(err, SM_EIO, o.write_errno, "writing the tar");
  free(o.buf);
  return rc;
}

int sandbox_snap_direct_save(int root, const char *path, int tee, int64_t *bytes, int *fallback,
                             sm_error *err) {
  *fallback = 0;
  direct_job j = {root, fallback};
  int rc = sandbox_ws_save_produced(path, 0, tee, produce_tree, &j, bytes, err);
  return rc ? sm_error_wrap(err, "saving /workspace from its volume") : 0;
}
