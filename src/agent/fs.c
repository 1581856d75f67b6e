/* sandman-agent fs: the file operations of the files API, run inside the
 * sandbox (see fs.h for the protocol). Static and small like the rest of
 * the agent: libc only. Every path is walked with openat(O_NOFOLLOW) from
 * the root's descriptor, so a link planted by the sandbox is refused where
 * it stands instead of being followed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/fs.h"
#include "common/io.h"

#define OUT_BUF (64u << 10)
#define GREP_FILE_MAX ((off_t)64 << 20) /* larger files are not searched */
#define GREP_LINE_MAX (64u << 10)       /* longer lines are searched in pieces */
#define VISIT_MAX 2000000L              /* entries a glob or grep walks at most */

/* ---- output ---- */

static unsigned char out_buf[OUT_BUF];
/* File content passes through here (one operation at a time). */
static char chunk[256 << 10];
static size_t out_len;

static void out_flush(void) {
  if (out_len && common_write_all(1, out_buf, out_len) != 0) _exit(3); /* the host is gone */
  out_len = 0;
}

static void out(const void *data, size_t len) {
  if (len >= OUT_BUF) {
    out_flush();
    if (common_write_all(1, data, len) != 0) _exit(3);
    return;
  }
  if (out_len + len > OUT_BUF) out_flush();
  memcpy(out_buf + out_len, data, len);
  out_len += len;
}

static void outf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void outf(const char *fmt, ...) {
  char line[SM_FS_LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
  out(line, (size_t)n);
}

static const struct {
  int code;
  const char *name;
} errnames[] = {
    {ENOENT, "ENOENT"}, {EEXIST, "EEXIST"},     {ENOTDIR, "ENOTDIR"}, {EISDIR, "EISDIR"},
    {ELOOP, "ELOOP"},   {EXDEV, "EXDEV"},       {EACCES, "EACCES"},   {EPERM, "EPERM"},
    {ENOSPC, "ENOSPC"}, {EDQUOT, "ENOSPC"},     {EFBIG, "EFBIG"},     {ENOTEMPTY, "ENOTEMPTY"},
    {EINVAL, "EINVAL"}, {EPIPE, "EPIPE"}, {ENAMETOOLONG, "ENAMETOOLONG"}, {EROFS, "EROFS"}, {EBUSY, "EBUSY"},
    {ENOMEM, "ENOMEM"}, {EMFILE, "EMFILE"},
};

static const char *errname(int e) {
  for (size_t i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
    if (errnames[i].code == e) return errnames[i].name;
  return "EIO";
}

/* Answers "err" and returns 1 (the exit code). */
static int fail(int e, const char *path, const char *why) {
  char msg[SM_FS_LINE_MAX - 32];
  if (why == NULL && e == ELOOP) why = "a symbolic link is on the way (links are never followed)";
  if (why == NULL && e == EXDEV) why = "the path leaves the workspace ('..' or absolute)";
  int n = snprintf(msg, sizeof msg, "%s: %s", path[0] ? path : ".", why ? why : strerror(e));
  /* One line: a name with a newline must not end it early. */
  for (int i = 0; i < n && i < (int)sizeof msg; i++)
    if (msg[i] == '\n' || msg[i] == '\r') msg[i] = '?';
  outf("err %s %s\n", errname(e), msg);
  out_flush();
  return 1;
}

/* ---- paths ---- */

/* Splits a relative path into its names in place. "." alone is the root
 * (no names); "." and empty names inside are skipped; ".." anywhere and a
 * leading '/' are refused (EXDEV). */
static int split(char *path, char **names, int max, int *n) {
  *n = 0;
  if (strlen(path) > SM_FS_PATH_MAX) return ENAMETOOLONG;
  if (path[0] == '/') return EXDEV;
  char *p = path;
  while (*p) {
    char *slash = strchr(p, '/');
    if (slash) *slash = '\0';
    if (strcmp(p, "..") == 0) return EXDEV;
    if (strlen(p) > SM_FS_NAME_MAX) return ENAMETOOLONG;
    if (*p && strcmp(p, ".") != 0) {
      if (*n >= max) return ENAMETOOLONG;
      names[(*n)++] = p;
    }
    if (!slash) break;
    p = slash + 1;
  }
  return 0;
}

/* A symbolic link or not-a-folder on the way: which error it is. */
static int classify(int dirfd, const char *name, int e) {
  struct stat st;
  if ((e == ELOOP || e == ENOTDIR || e == EMLINK) &&
      fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
  return e;
}

static int open_dir_at(int dirfd, const char *name) {
  return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Opens the folder holding names[0..n-1] (n >= 0) under root: *out is a
 * new descriptor. parents: missing folders are made (0755). */
static int walk(int root, char **names, int n, int parents, int *out) {
  int fd = dup(root);
  if (fd < 0) return errno;
  for (int i = 0; i < n; i++) {
    int next = open_dir_at(fd, names[i]);
    if (next < 0 && errno == ENOENT && parents) {
      if (mkdirat(fd, names[i], 0755) != 0 && errno != EEXIST) {
        int e = errno;
        close(fd);
        return e;
      }
      next = open_dir_at(fd, names[i]);
    }
    if (next < 0) {
      int e = classify(fd, names[i], errno);
      close(fd);
      return e;
    }
    close(fd);
    fd = next;
  }
  *out = fd;
  return 0;
}

/* A path resolved to (parent folder, last name). leaf is NULL for the root. */
typedef struct {
  char buf[SM_FS_PATH_MAX + 2];
  char *names[SM_FS_PATH_MAX / 2 + 1];
  int n;
  int dir;          /* the parent's descriptor */
  const char *leaf;
} resolved;

static int resolve(int root, const char *path, int parents, resolved *r) {
  if (strlen(path) > SM_FS_PATH_MAX) return ENAMETOOLONG;
  snprintf(r->buf, sizeof r->buf, "%s", path);
  int e = split(r->buf, r->names, (int)(sizeof r->names / sizeof r->names[0]), &r->n);
  if (e) return e;
  r->leaf = r->n > 0 ? r->names[r->n - 1] : NULL;
  return walk(root, r->names, r->n > 0 ? r->n - 1 : 0, parents, &r->dir);
}

/* The canonical relative form of path ("a/b"; "" for the root). */
static void canonical(const resolved *r, char *outp, size_t len) {
  size_t o = 0;
  outp[0] = '\0';
  for (int i = 0; i < r->n && o < len; i++)
    o += (size_t)snprintf(outp + o, len - o, "%s%s", i ? "/" : "", r->names[i]);
}

/* Opens the folder path names (the root for "."); fs.h. */
int agent_fs_open_dir(int root, const char *path, int *out, char *canon, size_t clen) {
  resolved r;
  int e = resolve(root, path, 0, &r);
  if (e) return e;
  canonical(&r, canon, clen);
  if (r.leaf == NULL) {
    *out = r.dir;
    return 0;
  }
  int fd = open_dir_at(r.dir, r.leaf);
  if (fd < 0) e = classify(r.dir, r.leaf, errno);
  close(r.dir);
  if (e) return e;
  *out = fd;
  return 0;
}

static int parse_num(const char *s, long long min, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min) return -1;
  *out = v;
  return 0;
}

static int parse_mode(const char *s, mode_t *out, int *given) {
  *given = 0;
  if (strcmp(s, "-") == 0) return 0;
  char *end = NULL;
  long v = strtol(s, &end, 8);
  if (end == s || *end || v < 0 || v > 07777) return -1;
  *out = (mode_t)v & 0777; /* never setuid, setgid or sticky */
  *given = 1;
  return 0;
}

static int has_flag(const char *flags, char f) { return strchr(flags, f) != NULL; }

/* ---- records ---- */

static char type_of(mode_t m) {
  if (S_ISREG(m)) return 'f';
  if (S_ISDIR(m)) return 'd';
  if (S_ISLNK(m)) return 'l';
  return 'o';
}

/* Sends the record of name (in dirfd) as rel. 0, or an errno. */
static int send_record(int dirfd, const char *name, const char *rel, const struct stat *st) {
  char link[SM_FS_PATH_MAX + 1];
  ssize_t ll = 0;
  if (S_ISLNK(st->st_mode)) {
    ll = readlinkat(dirfd, name, link, sizeof link - 1);
    if (ll < 0) ll = 0;
  }
  char t = type_of(st->st_mode);
  long long sec = (long long)st->st_mtim.tv_sec;
  long nsec = st->st_mtim.tv_nsec;
  if (sec < 0) sec = nsec = 0; /* before 1970: the wire has no sign */
  outf("%c %o %lld %lld %ld %zu %zd\n", t, (unsigned)(st->st_mode & 07777),
       t == 'f' ? (long long)st->st_size : 0LL, sec, nsec, strlen(rel), ll);
  out(rel, strlen(rel));
  if (ll > 0) out(link, (size_t)ll);
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

/* The names in a folder, sorted (stable output for people and tests). */
static int read_names(int dirfd, char ***names, size_t *n) {
  *names = NULL;
  *n = 0;
  int fd = dup(dirfd);
  if (fd < 0) return errno;
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    int e = errno;
    close(fd);
    return e;
  }
  rewinddir(d);
  size_t cap = 0;
  struct dirent *de;
  int e = 0;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 64;
      char **v = realloc(*names, cap * sizeof *v);
      if (v == NULL) {
        e = ENOMEM;
        break;
      }
      *names = v;
    }
    if (((*names)[*n] = strdup(de->d_name)) == NULL) {
      e = ENOMEM;
      break;
    }
    (*n)++;
  }
  closedir(d);
  if (*n > 1) qsort(*names, *n, sizeof **names, cmp_names);
  return e;
}

/* ---- walking a tree (never through a link) ---- */

/* Called for every entry below a folder. rel is the entry's path relative
 * to the root. Returns WALK_GO, WALK_SKIP (do not descend), WALK_STOP (a
 * cap was reached) or an errno (> 0) that ends the walk. */
enum { WALK_GO = 0, WALK_SKIP = -1, WALK_STOP = -2 };
typedef int (*visit_fn)(void *ud, int dirfd, const char *name, const char *rel,
                        const struct stat *st, int depth);

/* rel holds the folder's own relative path ("" for the root) and has room
 * for SM_FS_PATH_MAX + 1 bytes. max_depth 0: no limit. */
static int walk_tree(int dirfd, char *rel, int depth, int max_depth, long *visits,
                     visit_fn fn, void *ud) {
  if (depth > SM_FS_DEPTH_MAX) return ELOOP;
  char **names;
  size_t n;
  int rc = read_names(dirfd, &names, &n);
  size_t base = strlen(rel);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    if (visits && ++*visits > VISIT_MAX) {
      rc = WALK_STOP;
      break;
    }
    struct stat st;
    if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) continue; /* gone meanwhile */
    if (base + 1 + strlen(names[i]) > SM_FS_PATH_MAX) {
      rc = ENAMETOOLONG;
      break;
    }
    snprintf(rel + base, SM_FS_PATH_MAX + 1 - base, "%s%s", base ? "/" : "", names[i]);
    rc = fn(ud, dirfd, names[i], rel, &st, depth);
    if (rc == WALK_SKIP) rc = 0;
    else if (rc == 0 && S_ISDIR(st.st_mode) && (max_depth == 0 || depth < max_depth)) {
      int sub = open_dir_at(dirfd, names[i]);
      if (sub >= 0) {
        rc = walk_tree(sub, rel, depth + 1, max_depth, visits, fn, ud);
        close(sub);
      } else if (errno != ENOENT) {
        rc = classify(dirfd, names[i], errno);
        if (rc == ELOOP) rc = 0; /* replaced by a link meanwhile: not followed */
      }
    }
    rel[base] = '\0';
  }
  free_names(names, n);
  return rc;
}

/* ---- glob patterns: '/'-separated, fnmatch per name, "**" any names ---- */

#define GLOB_SEGS 128

typedef struct {
  char buf[SM_FS_PATH_MAX + 2];
  char *seg[GLOB_SEGS];
  int n;
  int deep; /* has "**" */
} pattern;

static int pattern_compile(const char *text, pattern *p) {
  if (strlen(text) > SM_FS_PATH_MAX || text[0] == '/') return EINVAL;
  snprintf(p->buf, sizeof p->buf, "%s", text);
  p->n = 0;
  p->deep = 0;
  char *s = p->buf;
  for (;;) {
    char *slash = strchr(s, '/');
    if (slash) *slash = '\0';
    if (*s && strcmp(s, ".") != 0) {
      if (p->n >= GLOB_SEGS) return EINVAL;
      if (strcmp(s, "**") == 0) p->deep = 1;
      p->seg[p->n++] = s;
    }
    if (!slash) break;
    s = slash + 1;
  }
  return p->n > 0 ? 0 : EINVAL;
}

/* Whether the names of a path match the pattern: a table over (pattern
 * segment, name) so that many "**" cost no more than a few. */
static int pattern_match(const pattern *p, char **names, int n) {
  unsigned char row[GLOB_SEGS + 1][SM_FS_DEPTH_MAX + 2];
  if (n > SM_FS_DEPTH_MAX) return 0;
  /* row[i][j]: pattern from i matches names from j. */
  for (int i = p->n; i >= 0; i--) {
    for (int j = n; j >= 0; j--) {
      int m;
      if (i == p->n) m = j == n;
      else if (strcmp(p->seg[i], "**") == 0) m = row[i + 1][j] || (j < n && row[i][j + 1]);
      else m = j < n && fnmatch(p->seg[i], names[j], 0) == 0 && row[i + 1][j + 1];
      row[i][j] = (unsigned char)m;
    }
  }
  return row[0][0];
}

/* Matches rel (relative to the walk's start, '/'-separated). */
static int pattern_match_path(const pattern *p, const char *rel) {
  char buf[SM_FS_PATH_MAX + 2];
  char *names[SM_FS_DEPTH_MAX + 1];
  int n = 0;
  snprintf(buf, sizeof buf, "%s", rel);
  for (char *s = buf;;) {
    char *slash = strchr(s, '/');
    if (slash) *slash = '\0';
    if (n > SM_FS_DEPTH_MAX) return 0;
    names[n++] = s;
    if (!slash) break;
    s = slash + 1;
  }
  return pattern_match(p, names, n);
}

/* ---- operations ---- */

static int op_read(int root, char **argv) {
  long long offset, length;
  if (parse_num(argv[1], 0, &offset) || parse_num(argv[2], -1, &length))
    return fail(EINVAL, argv[0], "bad offset or length");
  resolved r;
  int e = resolve(root, argv[0], 0, &r);
  if (e) return fail(e, argv[0], NULL);
  if (r.leaf == NULL) return fail(EISDIR, argv[0], NULL);
  int fd = openat(r.dir, r.leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) e = classify(r.dir, r.leaf, errno);
  close(r.dir);
  if (e) return fail(e, argv[0], NULL);
  struct stat st;
  if (fstat(fd, &st) != 0) e = errno;
  else if (S_ISDIR(st.st_mode)) e = EISDIR;
  else if (!S_ISREG(st.st_mode)) e = EINVAL;
  if (e) {
    close(fd);
    return fail(e, argv[0], e == EINVAL ? "not a regular file" : NULL);
  }
  fcntl(fd, F_SETFL, 0);
  long long size = (long long)st.st_size;
  long long count = offset >= size ? 0 : size - offset;
  if (length >= 0 && length < count) count = length;
  outf("ok %lld %lld\n", size, count);
  out_flush();
  long long done = 0;
  while (done < count) {
    size_t want = (size_t)(count - done < (long long)sizeof chunk ? count - done : (long long)sizeof chunk);
    ssize_t n = pread(fd, chunk, want, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      /* The file shrank or failed: the host sees fewer bytes than promised. */
      close(fd);
      fprintf(stderr, "%s: changed while being read\n", argv[0]);
      return 1;
    }
    if (common_write_all(1, chunk, (size_t)n) != 0) _exit(3);
    done += n;
  }
  close(fd);
  return 0;
}

/* Reads one line (up to '\n') from fd 0, byte by byte: the content after
 * it belongs to the file and must stay in the pipe. */
static int read_line(char *buf, size_t len) {
  size_t n = 0;
  for (;;) {
    char c;
    ssize_t r = read(0, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return n == 0 ? 0 : -1;
    if (c == '\n') break;
    if (n + 1 >= len) return -1;
    buf[n++] = c;
  }
  buf[n] = '\0';
  return 1;
}

static int read_exact(char *buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t r = read(0, buf + done, len - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    done += (size_t)r;
  }
  return 0;
}

/* Copies count bytes of fd 0 into fd. */
static int copy_in(int fd, long long count, long long *written) {
  *written = 0;
  while (*written < count) {
    size_t want = sizeof chunk;
    if (count - *written < (long long)want) want = (size_t)(count - *written);
    ssize_t n = read(0, chunk, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EPIPE; /* the stream ended inside a file */
    if (common_write_all(fd, chunk, (size_t)n) != 0) return errno ? errno : EIO;
    *written += n;
  }
  return 0;
}

/* The content of `write` arrives in chunks, "HEXLEN\n" and that many
 * bytes, ended by "0\n": a stream cut short (the host gave up) is told
 * apart from a complete one, and the half-written file is never renamed
 * into place. */
static int copy_chunks(int fd, long long *written) {
  char line[32];
  *written = 0;
  for (;;) {
    if (read_line(line, sizeof line) != 1) return EPIPE;
    char *end = NULL;
    errno = 0;
    long long len = strtoll(line, &end, 16);
    if (errno || end == line || *end || len < 0 || len > (1LL << 30)) return EINVAL;
    if (len == 0) return 0;
    while (len > 0) {
      size_t want = len < (long long)sizeof chunk ? (size_t)len : sizeof chunk;
      ssize_t n = read(0, chunk, want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0) return EPIPE;
      if (common_write_all(fd, chunk, (size_t)n) != 0) return errno ? errno : EIO;
      *written += n;
      len -= n;
    }
  }
}

/* Writes a file (parent folder dir, name) from fd 0: a temporary file,
 * then renamed over name, which is never followed if it is a link. */
static int put_file(int dir, const char *name, mode_t mode, int keep_mode, int exclusive,
                    long long count, long long *written) {
  struct stat st;
  int exists = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists && S_ISDIR(st.st_mode)) return EISDIR;
  if (exists && exclusive) return EEXIST;
  if (keep_mode) mode = exists && S_ISREG(st.st_mode) ? (st.st_mode & 0777) : 0644;
  static unsigned counter;
  char tmp[64];
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 100; tries++) {
    snprintf(tmp, sizeof tmp, ".sandman-write-%ld-%u", (long)getpid(), counter++);
    fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return errno;
  }
  if (fd < 0) return EEXIST;
  int e = count < 0 ? copy_chunks(fd, written) : copy_in(fd, count, written);
  if (e == 0 && fchmod(fd, mode) != 0) e = errno;
  if (close(fd) != 0 && e == 0) e = errno;
  if (e == 0 && exclusive && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) e = EEXIST;
  if (e == 0 && renameat(dir, tmp, dir, name) != 0) e = errno;
  if (e) unlinkat(dir, tmp, 0);
  return e;
}

static int op_write(int root, char **argv) {
  mode_t mode = 0644;
  int given;
  if (parse_mode(argv[1], &mode, &given)) return fail(EINVAL, argv[0], "bad mode");
  resolved r;
  int e = resolve(root, argv[0], has_flag(argv[2], 'p'), &r);
  if (e) return fail(e, argv[0], NULL);
  if (r.leaf == NULL) return fail(EISDIR, argv[0], NULL);
  long long written = 0;
  e = put_file(r.dir, r.leaf, mode, !given, has_flag(argv[2], 'x'), -1, &written);
  close(r.dir);
  if (e) return fail(e, argv[0], NULL);
  outf("ok %lld\n", written);
  return 0;
}

static int make_dir(int dir, const char *name, mode_t mode, int exist_ok) {
  if (mkdirat(dir, name, mode) == 0) {
    /* mkdir applies the umask; the mode asked for is the mode wanted. */
    int fd = open_dir_at(dir, name);
    if (fd >= 0) {
      fchmod(fd, mode);
      close(fd);
    }
    return 0;
  }
  int e = errno;
  struct stat st;
  if (e == EEXIST && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return ELOOP;
    if (!S_ISDIR(st.st_mode)) return ENOTDIR;
    return exist_ok ? 0 : EEXIST;
  }
  return e;
}

static int op_mkdir(int root, char **argv) {
  mode_t mode = 0755;
  int given;
  if (parse_mode(argv[1], &mode, &given)) return fail(EINVAL, argv[0], "bad mode");
  int parents = has_flag(argv[2], 'p');
  resolved r;
  int e = resolve(root, argv[0], parents, &r);
  if (e) return fail(e, argv[0], NULL);
  if (r.leaf == NULL) {
    close(r.dir);
    return parents ? (outf("ok\n"), 0) : fail(EEXIST, argv[0], NULL);
  }
  e = make_dir(r.dir, r.leaf, mode, parents);
  close(r.dir);
  if (e) return fail(e, argv[0], NULL);
  outf("ok\n");
  return 0;
}

/* Removes everything in folder fd, depth first, links as links. */
static int empty_dir(int fd, int depth, long long *count) {
  if (depth > SM_FS_DEPTH_MAX) return ELOOP;
  char **names;
  size_t n;
  int e = read_names(fd, &names, &n);
  for (size_t i = 0; e == 0 && i < n; i++) {
    struct stat st;
    if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      int sub = open_dir_at(fd, names[i]);
      if (sub < 0) {
        e = classify(fd, names[i], errno);
        break;
      }
      e = empty_dir(sub, depth + 1, count);
      close(sub);
      if (e == 0 && unlinkat(fd, names[i], AT_REMOVEDIR) != 0) e = errno;
    } else if (unlinkat(fd, names[i], 0) != 0) {
      e = errno;
    }
    if (e == 0) (*count)++;
  }
  free_names(names, n);
  return e;
}

static int op_delete(int root, char **argv) {
  resolved r;
  int e = resolve(root, argv[0], 0, &r);
  if (e) return fail(e, argv[0], NULL);
  if (r.leaf == NULL) {
    close(r.dir);
    return fail(EINVAL, argv[0], "the workspace itself cannot be deleted");
  }
  long long count = 0;
  struct stat st;
  if (fstatat(r.dir, r.leaf, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    e = errno;
  } else if (S_ISDIR(st.st_mode)) {
    if (has_flag(argv[1], 'r')) {
      int fd = open_dir_at(r.dir, r.leaf);
      if (fd < 0) e = classify(r.dir, r.leaf, errno);
      else {
        e = empty_dir(fd, 0, &count);
        close(fd);
      }
    }
    if (e == 0 && unlinkat(r.dir, r.leaf, AT_REMOVEDIR) != 0) e = errno;
  } else if (unlinkat(r.dir, r.leaf, 0) != 0) {
    e = errno;
  }
  close(r.dir);
  if (e) return fail(e, argv[0], NULL);
  outf("ok %lld\n", count + 1);
  return 0;
}

/* list, glob and get share one walk state. */
typedef struct {
  long long max, count;
  int truncated;
  const pattern *pat;
  size_t start_len; /* glob: bytes of the start folder's prefix in rel */
  long long max_bytes, bytes; /* get */
} listing;

static int visit_list(void *ud, int dirfd, const char *name, const char *rel,
                      const struct stat *st, int depth) {
  (void)depth;
  listing *l = ud;
  if (l->count >= l->max) {
    l->truncated = 1;
    return WALK_STOP;
  }
  send_record(dirfd, name, rel, st);
  l->count++;
  return WALK_GO;
}

/* Sets up rel and the start folder of a walk from path. */
static int start_walk(int root, const char *path, int *fd, char *rel, const char *label) {
  int e = agent_fs_open_dir(root, path, fd, rel, SM_FS_PATH_MAX + 1);
  if (e) return fail(e, label, NULL);
  return 0;
}

/* What a stat, list, grep or get starts from: the path resolved (r.dir is
 * its parent, or the root for "."), its canonical form, its lstat, and when
 * it is a folder a descriptor of it (fd, else -1). target_close ends it. */
typedef struct target {
  resolved r;
  const char *name;              /* the last name, "." for the root */
  char rel[SM_FS_PATH_MAX + 1];  /* "" for the root */
  struct stat st;
  int fd;
} target;

static int open_target(int root, const char *path, target *t) {
  t->fd = -1;
  int e = resolve(root, path, 0, &t->r);
  if (e) return e;
  canonical(&t->r, t->rel, sizeof t->rel);
  t->name = t->r.leaf ? t->r.leaf : ".";
  if (fstatat(t->r.dir, t->name, &t->st, AT_SYMLINK_NOFOLLOW) != 0) e = errno;
  else if (S_ISDIR(t->st.st_mode) && (t->fd = open_dir_at(t->r.dir, t->name)) < 0)
    e = classify(t->r.dir, t->name, errno);
  if (e) close(t->r.dir);
  return e;
}

static void target_close(target *t) {
  if (t->fd >= 0) close(t->fd);
  close(t->r.dir);
}

static int op_stat(int root, char **argv) {
  target t;
  int e = open_target(root, argv[0], &t);
  if (e) return fail(e, argv[0], NULL);
  outf("ok\n");
  send_record(t.r.dir, t.name, t.rel[0] ? t.rel : ".", &t.st);
  outf("end 1 0\n");
  target_close(&t);
  return 0;
}

static int op_list(int root, char **argv) {
  long long depth, max;
  if (parse_num(argv[1], 0, &depth) || parse_num(argv[2], 1, &max) || depth > SM_FS_DEPTH_MAX)
    return fail(EINVAL, argv[0], "bad depth or maximum");
  target t;
  int e = open_target(root, argv[0], &t);
  if (e) return fail(e, argv[0], NULL);
  listing l = {.max = max};
  outf("ok\n");
  if (t.fd < 0) {
    /* A file (or link) lists as itself. */
    send_record(t.r.dir, t.name, t.rel, &t.st);
    l.count = 1;
  } else {
    e = walk_tree(t.fd, t.rel, 1, (int)depth, NULL, visit_list, &l);
  }
  target_close(&t);
  if (e > 0) return fail(e, argv[0], NULL);
  outf("end %lld %d\n", l.count, l.truncated);
  return 0;
}

static int visit_glob(void *ud, int dirfd, const char *name, const char *rel,
                      const struct stat *st, int depth) {
  listing *l = ud;
  const char *sub = rel + l->start_len;
  if (*sub == '/') sub++;
  if (pattern_match_path(l->pat, sub)) {
    if (l->count >= l->max) {
      l->truncated = 1;
      return WALK_STOP;
    }
    send_record(dirfd, name, rel, st);
    l->count++;
  }
  /* Without "**" nothing deeper than the pattern can match. */
  if (!l->pat->deep && depth >= l->pat->n) return WALK_SKIP;
  return WALK_GO;
}

static int op_glob(int root, char **argv) {
  long long max;
  pattern pat;
  if (parse_num(argv[2], 1, &max)) return fail(EINVAL, argv[0], "bad maximum");
  if (pattern_compile(argv[1], &pat)) return fail(EINVAL, argv[1], "bad pattern");
  char rel[SM_FS_PATH_MAX + 1];
  int fd = -1;
  if (start_walk(root, argv[0], &fd, rel, argv[0])) return 1;
  listing l = {.max = max, .pat = &pat, .start_len = strlen(rel)};
  long visits = 0;
  outf("ok\n");
  int e = walk_tree(fd, rel, 1, 0, &visits, visit_glob, &l);
  close(fd);
  if (e == WALK_STOP && visits > VISIT_MAX) l.truncated = 1;
  if (e > 0) return fail(e, argv[0], NULL);
  outf("end %lld %d\n", l.count, l.truncated);
  return 0;
}

typedef struct {
  regex_t re;
  int fixed, icase;
  const char *needle;
  const pattern *include;
  size_t start_len;
  long long max, count;
  int truncated;
  char *line;
} grepping;

static int line_matches(grepping *g, const char *line) {
  if (!g->fixed) return regexec(&g->re, line, 0, NULL, 0) == 0;
  return (g->icase ? strcasestr(line, g->needle) : strstr(line, g->needle)) != NULL;
}

static void send_match(grepping *g, const char *rel, long long lineno, const char *text,
                       size_t len) {
  if (len > SM_FS_TEXT_MAX) len = SM_FS_TEXT_MAX;
  outf("m %lld %zu %zu\n", lineno, strlen(rel), len);
  out(rel, strlen(rel));
  out(text, len);
  g->count++;
}

/* One line (or a piece of an over-long one) of a file: searched, and sent
 * when it matches. WALK_STOP once the match cap is reached. */
static int grep_line(grepping *g, const char *rel, long long lineno, size_t len) {
  g->line[len] = '\0';
  if (memchr(g->line, '\0', len) != NULL || !line_matches(g, g->line)) return 0;
  if (g->count >= g->max) {
    g->truncated = 1;
    return WALK_STOP;
  }
  send_match(g, rel, lineno, g->line, len);
  return 0;
}

/* Searches one file (binary ones, with a NUL in their first block, and
 * very large ones are left out). */
static int grep_file(grepping *g, int dirfd, const char *name, const char *rel) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return 0;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > GREP_FILE_MAX) {
    close(fd);
    return 0;
  }
  fcntl(fd, F_SETFL, 0);
  static char buf[64 << 10];
  size_t have = 0;
  long long lineno = 1;
  int first = 1, rc = 0;
  while (rc == 0) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (first && memchr(buf, '\0', (size_t)n)) {
      have = 0;
      break;
    }
    first = 0;
    for (ssize_t i = 0; i < n && rc == 0; i++) {
      if (buf[i] == '\n') {
        rc = grep_line(g, rel, lineno++, have);
        have = 0;
        continue;
      }
      if (have == GREP_LINE_MAX) {
        rc = grep_line(g, rel, lineno, have);
        have = 0;
      }
      g->line[have++] = buf[i];
    }
  }
  if (rc == 0 && have > 0) rc = grep_line(g, rel, lineno, have);
  close(fd);
  return rc;
}

static int visit_grep(void *ud, int dirfd, const char *name, const char *rel,
                      const struct stat *st, int depth) {
  (void)depth;
  grepping *g = ud;
  if (!S_ISREG(st->st_mode)) return WALK_GO;
  if (g->include) {
    const char *sub = rel + g->start_len;
    if (*sub == '/') sub++;
    if (!pattern_match_path(g->include, sub)) return WALK_GO;
  }
  return grep_file(g, dirfd, name, rel);
}

static int op_grep(int root, char **argv) {
  long long max;
  if (parse_num(argv[4], 1, &max)) return fail(EINVAL, argv[0], "bad maximum");
  grepping g = {.max = max, .fixed = has_flag(argv[2], 'F'), .icase = has_flag(argv[2], 'i'),
                .needle = argv[1]};
  if (strlen(argv[1]) == 0 || strlen(argv[1]) > SM_FS_PATH_MAX)
    return fail(EINVAL, argv[1], "the pattern must be 1 to 4096 bytes");
  if (!g.fixed) {
    int rc = regcomp(&g.re, argv[1], REG_EXTENDED | REG_NOSUB | (g.icase ? REG_ICASE : 0));
    if (rc != 0) {
      char why[256];
      regerror(rc, &g.re, why, sizeof why);
      return fail(EINVAL, argv[1], why);
    }
  }
  pattern inc;
  if (strcmp(argv[3], "-") != 0) {
    if (pattern_compile(argv[3], &inc)) return fail(EINVAL, argv[3], "bad include pattern");
    g.include = &inc;
  }
  g.line = malloc(GREP_LINE_MAX + 1);
  target t;
  int e = g.line ? open_target(root, argv[0], &t) : ENOMEM;
  if (e == 0) {
    g.start_len = strlen(t.rel);
    if (S_ISLNK(t.st.st_mode)) e = ELOOP;
    else if (t.fd < 0 && !S_ISREG(t.st.st_mode)) e = EINVAL;
    if (e == 0) {
      outf("ok\n");
      if (t.fd < 0) {
        grep_file(&g, t.r.dir, t.name, t.rel);
      } else {
        long visits = 0;
        e = walk_tree(t.fd, t.rel, 1, 0, &visits, visit_grep, &g);
        if (e == WALK_STOP) g.truncated = 1;
      }
    }
    target_close(&t);
  }
  free(g.line);
  if (!g.fixed) regfree(&g.re);
  if (e > 0) return fail(e, argv[0], NULL);
  outf("end %lld %d\n", g.count, g.truncated);
  return 0;
}

/* get: a file's record and content, exactly the size announced. */
static int send_file(listing *l, int dirfd, const char *name, const char *rel,
                     const struct stat *st) {
  if (l->bytes + st->st_size > l->max_bytes) return EFBIG;
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return errno == ENOENT ? 0 : classify(dirfd, name, errno);
  struct stat now;
  if (fstat(fd, &now) != 0 || !S_ISREG(now.st_mode)) {
    close(fd);
    return 0; /* replaced meanwhile: left out */
  }
  fcntl(fd, F_SETFL, 0);
  send_record(dirfd, name, rel, &now);
  out_flush();
  long long done = 0, size = (long long)now.st_size;
  while (done < size) {
    size_t want = (size_t)(size - done < (long long)sizeof chunk ? size - done : (long long)sizeof chunk);
    ssize_t n = pread(fd, chunk, want, done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      fprintf(stderr, "%s: changed while being read\n", rel);
      _exit(1); /* the stream cannot be framed any more */
    }
    if (common_write_all(1, chunk, (size_t)n) != 0) _exit(3);
    done += n;
  }
  close(fd);
  l->bytes += size;
  l->count++;
  return 0;
}

static int visit_get(void *ud, int dirfd, const char *name, const char *rel,
                     const struct stat *st, int depth) {
  (void)depth;
  listing *l = ud;
  if (S_ISREG(st->st_mode)) return send_file(l, dirfd, name, rel, st);
  if (S_ISDIR(st->st_mode) || S_ISLNK(st->st_mode)) {
    send_record(dirfd, name, rel, st);
    l->count++;
  }
  return WALK_GO;
}

static int op_get(int root, int argc, char **argv) {
  long long max_bytes;
  if (parse_num(argv[0], 0, &max_bytes)) return fail(EINVAL, "", "bad byte limit");
  listing l = {.max_bytes = max_bytes};
  outf("ok\n");
  for (int i = 1; i < argc; i++) {
    target t;
    int e = open_target(root, argv[i], &t);
    if (e) return fail(e, argv[i], NULL);
    if (t.r.leaf == NULL) {
      /* The workspace itself: what it holds, not a record of its own. */
    } else if (t.fd >= 0) {
      send_record(t.r.dir, t.name, t.rel, &t.st);
      l.count++;
    } else {
      e = visit_get(&l, t.r.dir, t.name, t.rel, &t.st, 0);
    }
    if (e == 0 && t.fd >= 0) e = walk_tree(t.fd, t.rel, 1, 0, NULL, visit_get, &l);
    target_close(&t);
    if (e > 0) return fail(e, argv[i], e == EFBIG ? "more than the download limit" : NULL);
  }
  outf("end %lld 0\n", l.count);
  return 0;
}

/* "T MODE SIZE MTIME_S MTIME_NS PATHLEN LINKLEN" (no sscanf: it would
 * bring floating point into a binary meant to stay small). */
static int parse_record_line(const char *line, char *t, long long *mode, long long *size,
                             long long *plen, long long *llen) {
  if (line[0] == '\0' || line[1] != ' ') return -1;
  *t = line[0];
  const char *p = line + 2;
  long long v[6];
  for (int i = 0; i < 6; i++) {
    char *end = NULL;
    errno = 0;
    v[i] = strtoll(p, &end, i == 0 ? 8 : 10);
    if (errno || end == p || v[i] < 0 || (i < 5 && *end != ' ') || (i == 5 && *end != '\0'))
      return -1;
    p = end + (i < 5);
  }
  *mode = v[0];
  *size = v[1];
  *plen = v[4];
  *llen = v[5];
  return 0;
}

static int op_put(int root, char **argv) {
  resolved base;
  int e = resolve(root, argv[0], 1, &base);
  if (e) return fail(e, argv[0], NULL);
  int basefd = base.dir;
  if (base.leaf) {
    e = make_dir(base.dir, base.leaf, 0755, 1);
    if (e == 0 && (basefd = open_dir_at(base.dir, base.leaf)) < 0)
      e = classify(base.dir, base.leaf, errno);
    close(base.dir);
    if (e) return fail(e, argv[0], NULL);
  }
  long long files = 0, bytes = 0;
  int ended = 0;
  char line[SM_FS_LINE_MAX], path[SM_FS_PATH_MAX + 1];
  path[0] = '\0';
  for (;;) {
    int got = read_line(line, sizeof line);
    if (got == 1 && strcmp(line, "end") == 0) {
      ended = 1;
      break;
    }
    char t = 0;
    long long mode = 0, size = -1, plen = 0, llen = -1;
    if (got < 0 || parse_record_line(line, &t, &mode, &size, &plen, &llen) != 0 ||
        (t != 'f' && t != 'd') || plen == 0 || plen > SM_FS_PATH_MAX || llen != 0 ||
        read_exact(path, (size_t)plen) != 0) {
      e = EINVAL;
      snprintf(path, sizeof path, "%s", argv[0]);
      break;
    }
    path[plen] = '\0';
    if (memchr(path, '\0', (size_t)plen)) {
      e = EINVAL;
      break;
    }
    resolved r;
    e = resolve(basefd, path, 1, &r);
    if (e == 0 && r.leaf == NULL) {
      close(r.dir);
      e = t == 'd' ? 0 : EISDIR;
      if (e) break;
      continue;
    }
    if (e) break;
    if (t == 'd') {
      e = make_dir(r.dir, r.leaf, (mode_t)(mode & 0777), 1);
    } else {
      long long w = 0;
      e = put_file(r.dir, r.leaf, (mode_t)(mode & 0777), 0, 0, size, &w);
      if (e == 0) {
        files++;
        bytes += w;
      }
    }
    close(r.dir);
    if (e) break;
  }
  close(basefd);
  if (e == 0 && !ended) {
    e = EPIPE;
    snprintf(path, sizeof path, "%s", argv[0]);
  }
  if (e) return fail(e, path, e == EINVAL ? "malformed upload stream"
                              : e == EPIPE ? "the upload stream ended early" : NULL);
  outf("ok %lld %lld\n", files, bytes);
  return 0;
}

static const struct {
  const char *name;
  int args; /* after ROOT; -1: at least one */
} ops[] = {
    {"read", 3}, {"write", 3}, {"mkdir", 3}, {"delete", 2}, {"stat", 1}, {"list", 3},
    {"glob", 3}, {"grep", 5},  {"get", -1},  {"put", 1},
};

int sm_agent_fs_main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: sandman-agent fs OP ROOT ARGS... (see src/shared/agent/fs.h)\n");
    return 2;
  }
  const char *op = argv[1];
  int want = -2;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i].name, op) == 0) want = ops[i].args;
  int nargs = argc - 3;
  if (want == -2 || (want >= 0 && nargs != want) || (want == -1 && nargs < 2)) {
    fprintf(stderr, "sandman-agent fs: unknown operation or wrong arguments: %s\n", op);
    return 2;
  }
  int root = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    int e = errno;
    int rc = fail(e, argv[2], "the workspace cannot be opened");
    return rc;
  }
  umask(0);
  char **a = argv + 3;
  int rc;
  if (strcmp(op, "read") == 0) rc = op_read(root, a);
  else if (strcmp(op, "write") == 0) rc = op_write(root, a);
  else if (strcmp(op, "mkdir") == 0) rc = op_mkdir(root, a);
  else if (strcmp(op, "delete") == 0) rc = op_delete(root, a);
  else if (strcmp(op, "stat") == 0) rc = op_stat(root, a);
  else if (strcmp(op, "list") == 0) rc = op_list(root, a);
  else if (strcmp(op, "glob") == 0) rc = op_glob(root, a);
  else if (strcmp(op, "grep") == 0) rc = op_grep(root, a);
  else if (strcmp(op, "get") == 0) rc = op_get(root, nargs, a);
  else rc = op_put(root, a);
  out_flush();
  close(root);
  return rc;
}
