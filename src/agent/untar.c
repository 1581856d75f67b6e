/* `sandman-agent untar DIR`: the copy in of a workspace into a sandbox in
 * which processes may run. The engine's own archive upload extracts as
 * root and follows the sandbox's symbolic links (a directory a tool
 * replaced by "d -> /etc" sends "d/x" into the container's /etc, read-only
 * root or not); this runs as the sandbox's user, so whatever a tool
 * planted, even while it runs, cannot make it write where that user could
 * not write anyway. It still never follows a link itself: what is in the
 * way of an entry is replaced, as the engine's extraction does.
 *
 * Reads the tar stream sandman's packer writes (ustar, pax extended headers
 * for path, linkpath, size and mtime; regular files, directories, symbolic
 * links) from stdin, and the engine's archive of a /workspace as a fork or
 * a resume puts it back (src/lib/sandbox/ws_fill.c), which may also hold
 * hard links: one is made only to a regular file this run extracted
 * earlier, found under DIR without following any link. Owners are not set: everything belongs to the user
 * running this. Directory modes and times are set last, deepest first, so a
 * read-only directory never blocks what goes inside it. Exit 0, or 1 with
 * the reason on stderr (what was extracted before stays). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/tar_path.h"
#include "agent/untar.h"
#include "common/rmtree.h"

#define BLOCK 512
#define PAX_MAX (64u << 10)
#define PATH_MAX_BYTES 8192
#define DATA_CHUNK (256u << 10)

typedef struct entry {
  char path[PATH_MAX_BYTES];
  char link[PATH_MAX_BYTES];
  char type;
  unsigned mode;
  int64_t size;
  struct timespec mtime;
} entry;

/* Directories whose mode and times are set at the end. */
typedef struct dirs {
  char **path;
  unsigned *mode;
  struct timespec *mtime;
  size_t n, cap;
} dirs;

static const char *g_dir;

static int fail(const char *what, const char *path, int e) {
  fprintf(stderr, "untar %s: %s '%s': %s\n", g_dir, what, path, e ? strerror(e) : "bad input");
  return 1;
}

/* For next_entry: the message, then -1. */
static int bad(const char *what, const char *path, int e) {
  fail(what, path, e);
  return -1;
}

/* The stream is read through one large buffer: a tar of small files is two
 * short reads per file otherwise (a header, then the data), and every read
 * of the pipe from the engine is a wake-up on both of its ends. */
#define IN_CAP ((size_t)1 << 20)
static unsigned char in_buf[IN_CAP];
static size_t in_pos, in_len;

/* Makes at least one byte available; 1, 0 at the end, or -errno. */
static int in_fill(void) {
  if (in_pos < in_len) return 1;
  in_pos = in_len = 0;
  for (;;) {
    ssize_t n = read(0, in_buf, IN_CAP);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    in_len = (size_t)n;
    return n > 0;
  }
}

/* Up to len buffered bytes in place (*got of them, at least one): 1, 0 at
 * the end, or -errno. They are consumed. */
static int in_take(size_t len, const unsigned char **ptr, size_t *got) {
  int r = in_fill();
  if (r <= 0) return r;
  size_t n = in_len - in_pos < len ? in_len - in_pos : len;
  *ptr = in_buf + in_pos;
  *got = n;
  in_pos += n;
  return 1;
}

static int read_full(void *buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    const unsigned char *p;
    size_t n;
    int r = in_take(len - done, &p, &n);
    if (r < 0) return r;
    if (r == 0) return done == 0 ? 0 : -EPIPE;
    memcpy((char *)buf + done, p, n);
    done += n;
  }
  return 1;
}

/* A number field: octal, or base-256 (GNU) when its first bit is set; -1
 * when it does not fit in an int64_t (no size or time can be that large). */
static int64_t octal(const char *p, size_t n) {
  if ((unsigned char)p[0] & 0x80) { /* base-256 */
    uint64_t v = (unsigned char)p[0] & 0x3f;
    for (size_t i = 1; i < n; i++) {
      if (v > (uint64_t)INT64_MAX >> 8) return -1;
      v = (v << 8) | (unsigned char)p[i];
    }
    return (int64_t)v;
  }
  int64_t v = 0;
  size_t i = 0;
  while (i < n && p[i] == ' ') i++;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) v = v * 8 + (p[i] - '0');
  return v;
}

static int header_ok(const unsigned char *h) {
  int64_t want = octal((const char *)h + 148, 8);
  int64_t sum = 0;
  for (int i = 0; i < BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum == want && memcmp(h + 257, "ustar", 5) == 0;
}

static int all_zero(const unsigned char *h) {
  for (int i = 0; i < BLOCK; i++)
    if (h[i]) return 0;
  return 1;
}

/* Drops n bytes of the stream. */
static int skip_bytes(int64_t n) {
  while (n > 0) {
    const unsigned char *p;
    size_t got;
    if (in_take(n > (int64_t)IN_CAP ? IN_CAP : (size_t)n, &p, &got) <= 0) return -1;
    n -= (int64_t)got;
  }
  return 0;
}

/* Drops an entry's data of size bytes and its padding to a block. */
static int skip_data(int64_t size) { return skip_bytes((size + BLOCK - 1) / BLOCK * BLOCK); }

/* With --list, a line for every entry written, as the workspace's listing
 * (src/lib/workspace/workspace_box.c) prints them: size|mtime|ctime|ctime with its
 * nanoseconds|hex mode|./path, read after our last change to the entry, so
 * the host needs no listing of its own after a copy in. A name with a
 * newline is left out (the host then compares that entry in full). */
static int g_list;

static void list_entry(const char *path, const struct stat *st) {
  if (!g_list || strchr(path, '\n')) return;
  printf("%lld|%lld|%lld|%lld.%09ld +0000|%x|./%s\n", (long long)st->st_size,
         (long long)st->st_mtim.tv_sec, (long long)st->st_ctim.tv_sec,
         (long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec, (unsigned)st->st_mode, path);
}

/* "LEN key=value\n" records; only the keys the packer writes matter. */
static int parse_pax(const char *p, size_t len, entry *e, int *has_path, int *has_link,
                     int *has_size, int *has_mtime) {
  size_t off = 0;
  while (off < len) {
    size_t rl = 0, i = off;
    while (i < len && p[i] >= '0' && p[i] <= '9') rl = rl * 10 + (size_t)(p[i++] - '0');
    if (i >= len || p[i] != ' ' || rl == 0 || off + rl > len || p[off + rl - 1] != '\n') return -1;
    const char *key = p + i + 1;
    const char *eq = memchr(key, '=', (size_t)(p + off + rl - key));
    if (eq == NULL) return -1;
    size_t klen = (size_t)(eq - key), vlen = (size_t)(p + off + rl - 1 - (eq + 1));
    const char *val = eq + 1;
    if (klen == 4 && memcmp(key, "path", 4) == 0) {
      if (vlen >= sizeof e->path) return -1;
      memcpy(e->path, val, vlen);
      e->path[vlen] = '\0';
      *has_path = 1;
    } else if (klen == 8 && memcmp(key, "linkpath", 8) == 0) {
      if (vlen >= sizeof e->link) return -1;
      memcpy(e->link, val, vlen);
      e->link[vlen] = '\0';
      *has_link = 1;
    } else if (klen == 4 && memcmp(key, "size", 4) == 0) {
      int64_t v = 0;
      for (size_t k = 0; k < vlen; k++) {
        if (val[k] < '0' || val[k] > '9' || v > INT64_MAX / 10 - 9) return -1;
        v = v * 10 + (val[k] - '0');
      }
      e->size = v;
      *has_size = 1;
    } else if (klen == 5 && memcmp(key, "mtime", 5) == 0) {
      int64_t sec = 0, ns = 0;
      size_t k = 0;
      int neg = k < vlen && val[k] == '-';
      if (neg) k++;
      for (; k < vlen && val[k] >= '0' && val[k] <= '9'; k++) sec = sec * 10 + (val[k] - '0');
      if (k < vlen && val[k] == '.') {
        int digits = 0;
        for (k++; k < vlen && val[k] >= '0' && val[k] <= '9'; k++)
          if (digits < 9) ns = ns * 10 + (val[k] - '0'), digits++;
        while (digits++ < 9) ns *= 10;
      }
      e->mtime.tv_sec = (time_t)(neg ? -sec : sec);
      e->mtime.tv_nsec = neg ? 0 : (long)ns;
      *has_mtime = 1;
    }
    off += rl;
  }
  return 0;
}

/* Reads the next entry's header(s). 1: an entry, 0: the end, -1: an error. */
static int next_entry(entry *e) {
  unsigned char h[BLOCK];
  int has_path = 0, has_link = 0, has_size = 0, has_mtime = 0;
  for (;;) {
    int r = read_full(h, BLOCK);
    if (r == 0) return 0;
    if (r < 0) return bad("reading", "the stream", -r);
    if (all_zero(h)) return 0;
    if (!header_ok(h)) return bad("reading", "a header", 0);
    char type = (char)h[156];
    int64_t size = octal((const char *)h + 124, 12);
    if (type == 'x' || type == 'g') {
      if (size < 0 || (uint64_t)size > PAX_MAX) return bad("reading", "a pax header", 0);
      if (type == 'g') {
        if (skip_data(size)) return bad("reading", "a pax header", 0);
        continue;
      }
      size_t padded = (size_t)(size + BLOCK - 1) / BLOCK * BLOCK;
      char *buf = malloc(padded + 1);
      if (buf == NULL) return bad("reading", "a pax header", ENOMEM);
      r = padded ? read_full(buf, padded) : 1;
      int broken = r <= 0 || parse_pax(buf, (size_t)size, e, &has_path, &has_link, &has_size,
                                    &has_mtime) != 0;
      free(buf);
      if (broken) return bad("reading", "a pax header", 0);
      continue;
    }
    if (!has_path) {
      char name[101], prefix[156];
      memcpy(name, h, 100);
      name[100] = '\0';
      memcpy(prefix, h + 345, 155);
      prefix[155] = '\0';
      if (prefix[0])
        snprintf(e->path, sizeof e->path, "%s/%s", prefix, name);
      else
        snprintf(e->path, sizeof e->path, "%s", name);
    }
    if (!has_link) {
      memcpy(e->link, h + 157, 100);
      e->link[100] = '\0';
    }
    if (!has_size) e->size = size;
    if (!has_mtime) {
      e->mtime.tv_sec = (time_t)octal((const char *)h + 136, 12);
      e->mtime.tv_nsec = 0;
    }
    e->mode = (unsigned)octal((const char *)h + 100, 8) & 0777;
    e->type = type == '\0' ? '0' : type;
    if (e->size < 0) return bad("reading", e->path, 0);
    return 1;
  }
}

/* What open_dir does when name in fd is not a directory it can open (en):
 * a file or link in the way replaced, a missing one made, a closed one
 * opened to us. 0 to try again, or -errno. */
static int make_way(int fd, const char *name, int en) {
  if (en == ENOTDIR || en == ELOOP) {
    /* A file or link where a directory belongs: replaced. */
    int r = common_rmtree_at(fd, name);
    if (r == -EACCES && fchmod(fd, 0700) == 0) r = common_rmtree_at(fd, name);
    if (r) return r;
    en = ENOENT;
  }
  if (en == ENOENT) {
    if (mkdirat(fd, name, 0700) != 0 && errno == EACCES) {
      struct stat st;
      if (fstat(fd, &st) == 0) fchmod(fd, (st.st_mode & 07777) | 0700);
      mkdirat(fd, name, 0700);
    }
    return 0;
  }
  if (en == EACCES) {
    fchmodat(fd, name, 0700, 0);
    return 0;
  }
  return -en;
}

/* Opens the directory rel under root, one component at a time, never
 * following a link; with make, making or replacing what is in the way,
 * else changing nothing. */
static int open_dir(int root, const char *rel, int make, int *out) {
  int fd = dup(root);
  if (fd < 0) return -errno;
  char name[256];
  const char *p = rel;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= sizeof name) {
      close(fd);
      return -ENAMETOOLONG;
    }
    memcpy(name, p, n);
    name[n] = '\0';
    int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (int attempt = 0; make && next < 0 && attempt < 3; attempt++) {
      int r = make_way(fd, name, errno);
      if (r) {
        close(fd);
        return r;
      }
      next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    int en = errno;
    close(fd);
    if (next < 0) return -en;
    fd = next;
    p += n;
    if (*p == '/') p++;
  }
  *out = fd;
  return 0;
}

/* Removes what is at name in dfd unless it is a directory and keep_dir. */
static int clear(int dfd, const char *name, int keep_dir) {
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : -errno;
  if (keep_dir && S_ISDIR(st.st_mode)) return 1;
  int r = common_rmtree_at(dfd, name);
  if (r == -EACCES) {
    /* The parent is ours but read-only (its final mode comes last). */
    struct stat ps;
    if (fstat(dfd, &ps) == 0 && fchmod(dfd, (ps.st_mode & 07777) | 0700) == 0)
      r = common_rmtree_at(dfd, name);
  }
  return r;
}

static int create_file(int dfd, const char *name, unsigned mode) {
  int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0 && errno == EACCES) {
    struct stat ps;
    if (fstat(dfd, &ps) == 0 && fchmod(dfd, (ps.st_mode & 07777) | 0700) == 0)
      fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  }
  return fd < 0 ? -errno : fd;
}

/* Creates name with its final mode (umask is 0; the fd is writable whatever
 * the mode says) and writes its data straight from the input buffer. What
 * is in the way (a file, a link, a directory a tool left) is removed first,
 * looked at only when the exclusive create finds something there. */
static int write_file(int dfd, const char *name, const entry *e) {
  int fd = create_file(dfd, name, e->mode & 0777);
  if (fd == -EEXIST) {
    int r = clear(dfd, name, 0);
    fd = r < 0 ? r : create_file(dfd, name, e->mode & 0777);
  }
  if (fd < 0) return fd;
  int64_t left = e->size;
  int64_t pad = (e->size + BLOCK - 1) / BLOCK * BLOCK - e->size;
  int rc = 0;
  while (left > 0) {
    const unsigned char *p;
    size_t got;
    int r = in_take(left > (int64_t)IN_CAP ? IN_CAP : (size_t)left, &p, &got);
    if (r <= 0) {
      rc = r < 0 ? r : -EPIPE;
      break;
    }
    for (size_t done = 0; done < got;) {
      ssize_t w = write(fd, p + done, got - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        rc = w < 0 ? -errno : -EIO;
        break;
      }
      done += (size_t)w;
    }
    if (rc) break;
    left -= (int64_t)got;
  }
  if (rc == 0 && skip_bytes(pad)) rc = -EPIPE;
  struct timespec ts[2] = {e->mtime, e->mtime};
  if (rc == 0 && futimens(fd, ts) != 0) rc = -errno;
  struct stat st;
  if (rc == 0 && g_list && fstat(fd, &st) == 0) list_entry(e->path, &st);
  if (close(fd) != 0 && rc == 0) rc = -errno;
  return rc;
}

/* The regular files this run wrote (a hard link may point only at one of
 * them): an open-addressed set of their cleaned paths. */
static char **g_files;
static size_t g_nfiles, g_capfiles;

static size_t files_slot(char **tab, size_t cap, const char *path) {
  size_t h = 1469598103u;
  for (const char *c = path; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
  size_t i = h & (cap - 1);
  while (tab[i] && strcmp(tab[i], path) != 0) i = (i + 1) & (cap - 1);
  return i;
}

static int files_add(const char *path) {
  if ((g_nfiles + 1) * 2 > g_capfiles) {
    size_t cap = g_capfiles ? g_capfiles * 2 : 1024;
    char **tab = calloc(cap, sizeof *tab);
    if (tab == NULL) return -ENOMEM;
    for (size_t i = 0; i < g_capfiles; i++)
      if (g_files[i]) tab[files_slot(tab, cap, g_files[i])] = g_files[i];
    free(g_files);
    g_files = tab;
    g_capfiles = cap;
  }
  size_t i = files_slot(g_files, g_capfiles, path);
  if (g_files[i]) return 0;
  if ((g_files[i] = strdup(path)) == NULL) return -ENOMEM;
  g_nfiles++;
  return 0;
}

static void files_free(void) {
  for (size_t i = 0; i < g_capfiles; i++) free(g_files[i]);
  free(g_files);
  g_files = NULL;
  g_nfiles = g_capfiles = 0;
}

static int files_has(const char *path) {
  return g_capfiles && g_files[files_slot(g_files, g_capfiles, path)] != NULL;
}

/* A hard link at name in dfd to e->link: a regular file this run wrote,
 * under root (never above it, never through a link). -EPERM when the
 * target is not one. */
static int hard_link(int root, int dfd, const char *name, entry *e) {
  if (agent_tar_path_clean(e->link) != 0 || e->link[0] == '\0' || !files_has(e->link)) return -EPERM;
  const char *slash = strrchr(e->link, '/');
  char parent[PATH_MAX_BYTES];
  snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - e->link) : 0, e->link);
  const char *tname = slash ? slash + 1 : e->link;
  int tfd = -1;
  int r = open_dir(root, parent, 0, &tfd);
  if (r) return r == -ENOTDIR || r == -ELOOP ? -EPERM : r;
  struct stat st;
  if (fstatat(tfd, tname, &st, AT_SYMLINK_NOFOLLOW) != 0) r = -errno;
  else if (!S_ISREG(st.st_mode)) r = -EPERM;
  if (r == 0) r = clear(dfd, name, 0);
  /* flags 0: a link is never followed (there is none here anyway). */
  if (r == 0 && linkat(tfd, tname, dfd, name, 0) != 0) r = -errno;
  close(tfd);
  struct stat lst;
  if (r == 0 && g_list && fstatat(dfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0)
    list_entry(e->path, &lst);
  if (r == 0 && e->size > 0 && skip_data(e->size)) r = -EPIPE;
  return r;
}

static int dirs_add(dirs *d, const entry *e) {
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 64;
    char **p = realloc(d->path, cap * sizeof *p);
    if (p) d->path = p;
    unsigned *m = realloc(d->mode, cap * sizeof *m);
    if (m) d->mode = m;
    struct timespec *t = realloc(d->mtime, cap * sizeof *t);
    if (t) d->mtime = t;
    if (!p || !m || !t) return -ENOMEM;
    d->cap = cap;
  }
  d->path[d->n] = strdup(e->path);
  if (d->path[d->n] == NULL) return -ENOMEM;
  d->mode[d->n] = e->mode;
  d->mtime[d->n] = e->mtime;
  d->n++;
  return 0;
}

/* Modes and times of the directories, deepest first (reverse stream order:
 * the packer sends a directory before what is in it). */
static int finish_dirs(int root, dirs *d) {
  int rc = 0;
  for (size_t i = d->n; i > 0; i--) {
    const char *path = d->path[i - 1];
    const char *slash = strrchr(path, '/');
    char parent[PATH_MAX_BYTES];
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - path) : 0, path);
    int dfd = -1;
    int r = open_dir(root, parent, 1, &dfd);
    int fd = r == 0 ? openat(dfd, slash ? slash + 1 : path,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    : -1;
    if (dfd >= 0) close(dfd);
    struct timespec ts[2] = {d->mtime[i - 1], d->mtime[i - 1]};
    struct stat st;
    if (fd < 0 || fchmod(fd, d->mode[i - 1]) != 0 || futimens(fd, ts) != 0) {
      if (rc == 0) rc = fail("setting the mode of", path, errno);
    } else if (g_list && fstat(fd, &st) == 0) {
      list_entry(path, &st);
    }
    if (fd >= 0) close(fd);
    free(d->path[i - 1]);
  }
  free(d->path);
  free(d->mode);
  free(d->mtime);
  return rc;
}

/* The message for entry e that failed with r (-errno). */
static int entry_failed(const entry *e, int r) {
  if (e->type == '1' && r == -EPERM) return fail("refusing the hard link to", e->link, 0);
  return fail(e->type == '5' ? "making the directory" : "writing", e->path, -r);
}

int agent_untar(const char *dir, int list) {
  g_dir = dir;
  g_list = list;
  static char out_buf[1 << 16];
  if (list) setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
  umask(0);
  /* A larger pipe from the engine: fewer wake-ups of the writer (fails
   * harmlessly when fd 0 is no pipe or the limit is lower). */
  (void)fcntl(0, F_SETPIPE_SZ, (int)IN_CAP);
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return fail("opening", dir, errno);
  static entry e;
  static char cached[PATH_MAX_BYTES];
  int cached_fd = -1;
  dirs d = {0};
  int rc = 0;
  for (;;) {
    memset(&e, 0, sizeof e);
    int r = next_entry(&e);
    if (r < 0) {
      rc = 1;
      break;
    }
    if (r == 0) break;
    if (agent_tar_path_clean(e.path) != 0) {
      rc = fail("refusing", e.path, 0);
      break;
    }
    if (e.path[0] == '\0') { /* the directory itself: left as it is */
      if (skip_data(e.type == '0' ? e.size : 0)) rc = fail("reading", ".", 0);
      if (rc) break;
      continue;
    }
    char *slash = strrchr(e.path, '/');
    char parent[PATH_MAX_BYTES];
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - e.path) : 0, e.path);
    const char *name = slash ? slash + 1 : e.path;
    /* Files of one directory come together: its fd is kept for them. */
    if (cached_fd >= 0 && strcmp(cached, parent) != 0) {
      close(cached_fd);
      cached_fd = -1;
    }
    int dfd = cached_fd;
    r = dfd < 0 ? open_dir(root, parent, 1, &dfd) : 0;
    if (r) {
      rc = fail("opening the directory of", e.path, -r);
      break;
    }
    switch (e.type) {
    case '5':
      r = clear(dfd, name, 1);
      if (r == 0 && mkdirat(dfd, name, 0700) != 0) r = -errno;
      if (r >= 0) r = dirs_add(&d, &e);
      if (r == 0 && e.size > 0 && skip_data(e.size)) r = -EPIPE;
      break;
    case '0':
      r = write_file(dfd, name, &e);
      if (r == 0) r = files_add(e.path);
      break;
    case '1':
      r = hard_link(root, dfd, name, &e);
      break;
    case '2': {
      r = clear(dfd, name, 0);
      struct timespec ts[2] = {e.mtime, e.mtime};
      if (r == 0 && symlinkat(e.link, dfd, name) != 0) r = -errno;
      if (r == 0) utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW);
      struct stat lst;
      if (r == 0 && g_list && fstatat(dfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0)
        list_entry(e.path, &lst);
      if (r == 0 && e.size > 0 && skip_data(e.size)) r = -EPIPE;
      break;
    }
    default:
      r = -EINVAL;
      break;
    }
    if (e.type == '0' && r == 0) {
      cached_fd = dfd;
      snprintf(cached, sizeof cached, "%s", parent);
    } else {
      close(dfd);
      cached_fd = -1;
    }
    if (r < 0) {
      rc = entry_failed(&e, r);
      break;
    }
  }
  if (cached_fd >= 0) close(cached_fd);
  files_free();
  int fr = finish_dirs(root, &d);
  if (rc == 0) rc = fr;
  close(root);
  /* The rest of the stream (trailing blocks) is read so the writer ends cleanly. */
  char sink[BLOCK];
  while (read_full(sink, BLOCK) > 0) {
  }
  return rc;
}
