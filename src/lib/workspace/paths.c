/* Path checks and symlink-free directory access for the workspace module.
 * Every host-side open walks the tree one component at a time with
 * O_NOFOLLOW, so no symbolic link (planted or pre-existing) can redirect a
 * write outside the workspace. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/rmtree.h"
#include "workspace/ws.h"

int64_t workspace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int workspace_path_normalize(const char *raw, char **out, sm_error *err) {
  *out = NULL;
  if (raw == NULL) return sm_error_set(err, SM_EUNSAFE, "entry without a name");
  if (raw[0] == '/') return sm_error_set(err, SM_EUNSAFE, "'%s': absolute path", raw);
  size_t len = strlen(raw);
  char *res = malloc(len + 1);
  if (res == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t o = 0;
  const char *p = raw;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      free(res);
      return sm_error_set(err, SM_EUNSAFE, "'%s': '..' in path", raw);
    }
    if (n > 255) {
      free(res);
      return sm_error_set(err, SM_EUNSAFE, "'%.64s...': a name longer than 255 bytes", raw);
    }
    if (n > 0 && !(n == 1 && p[0] == '.')) {
      if (o > 0) res[o++] = '/';
      memcpy(res + o, p, n);
      o += n;
    }
    p += n;
    if (*p == '/') p++;
  }
  res[o] = '\0';
  *out = res;
  return 0;
}

int workspace_excluded(const sm_string_list *excludes, const char *path) {
  if (excludes == NULL || excludes->n == 0) return 0;
  size_t len = strlen(path);
  char *buf = malloc(len + 1);
  if (buf == NULL) return 0;
  memcpy(buf, path, len + 1);
  int hit = 0;
  size_t start = 0;
  for (size_t i = 0; i <= len && !hit; i++) {
    if (path[i] != '/' && path[i] != '\0') continue;
    buf[i] = '\0';
    for (size_t k = 0; k < excludes->n && !hit; k++) {
      const char *g = excludes->items[k];
      if (sm_glob_match(g, buf) || sm_glob_match(g, buf + start)) hit = 1;
    }
    buf[i] = path[i];
    start = i + 1;
  }
  free(buf);
  return hit;
}

int workspace_link_inside(const char *path, const char *target) {
  if (target == NULL || target[0] == '\0' || target[0] == '/') return 0;
  int depth = 0;
  for (const char *s = path; *s; s++)
    if (*s == '/') depth++;
  int ups = 0, descended = 0;
  const char *p = target;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      /* ".." after a name could climb out of a linked directory. */
      if (descended) return 0;
      ups++;
    } else if (n > 0 && !(n == 1 && p[0] == '.')) {
      descended = 1;
    }
    p += n;
    if (*p == '/') p++;
  }
  return ups <= depth;
}

int workspace_link_engine_accepts(const char *path, const char *target) {
  if (target == NULL || target[0] == '\0') return 0;
  if (target[0] == '/') return 1;
  long depth = 0;
  for (const char *s = path; *s; s++)
    if (*s == '/') depth++;
  const char *p = target;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      if (--depth < 0) return 0;
    } else if (n > 0 && !(n == 1 && p[0] == '.')) {
      depth++;
    }
    p += n;
    if (*p == '/') p++;
  }
  return 1;
}

/* Only the first component matters: stage directories live at the top. */
int workspace_is_reserved(const char *path) {
  return strncmp(path, WS_STAGE_PREFIX, strlen(WS_STAGE_PREFIX)) == 0;
}

int workspace_open_dir(int root_fd, const char *rel, int create) {
  int fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  const char *p = rel;
  char name[256];
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 0 || n >= sizeof name) {
      close(fd);
      return -EINVAL;
    }
    memcpy(name, p, n);
    name[n] = '\0';
    int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST) {
        int e2 = errno;
        close(fd);
        return -e2;
      }
      next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0) {
      int e2 = errno == ELOOP ? ENOTDIR : errno;
      close(fd);
      return -e2;
    }
    close(fd);
    fd = next;
    p += n;
    if (*p == '/') p++;
  }
  return fd;
}

void workspace_dircache_init(ws_dircache *c, int root_fd) {
  c->root_fd = root_fd;
  c->fd = -1;
  c->dir = NULL;
}

void workspace_dircache_dispose(ws_dircache *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->dir);
  c->fd = -1;
  c->dir = NULL;
}

int workspace_dircache_parent(ws_dircache *c, const char *path, const char **name, int create) {
  const char *slash = strrchr(path, '/');
  size_t dlen = slash ? (size_t)(slash - path) : 0;
  *name = slash ? slash + 1 : path;
  if (c->fd >= 0 && c->dir && strlen(c->dir) == dlen && memcmp(c->dir, path, dlen) == 0)
    return c->fd;
  workspace_dircache_dispose(c);
  char *dir = strndup(path, dlen);
  if (dir == NULL) return -ENOMEM;
  int fd = workspace_open_dir(c->root_fd, dir, create);
  if (fd < 0) {
    free(dir);
    return fd;
  }
  c->fd = fd;
  c->dir = dir;
  return fd;
}

int workspace_remove_tree(int dir_fd, const char *name) { return common_rmtree_at(dir_fd, name); }

/* A stage directory is flock'ed by the copy using it, for as long as its
 * descriptor is open: a process that dies drops the lock, so the next
 * sweep knows a stage left by a crash at once, whatever pid namespace or
 * machine it came from. A sweeper locks before it removes anything; a new
 * stage that a sweeper got first is given up for another name. */
static int stage_lock(int fd) {
  int rc;
  do {
    rc = flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : -errno;
}

/* Does name under root_fd still lead to the directory open as fd? */
static int stage_still_there(int root_fd, const char *name, int fd) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && fstatat(root_fd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int workspace_stage_create(int root_fd, const char *root_path, char **out_path, sm_error *err) {
  *out_path = NULL;
  char name[64];
  for (int attempt = 0; attempt < 100; attempt++) {
    /* A name no one can guess; mkdirat refuses one that is there. */
    char rnd[9];
    sm_error rerr = SM_ERROR_INIT;
    if (sm_random_hex(rnd, 4, &rerr) != 0)
      snprintf(rnd, sizeof rnd, "%08x",
               (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL) ^ (unsigned)attempt);
    snprintf(name, sizeof name, "%s%s", WS_STAGE_PREFIX, rnd);
    if (mkdirat(root_fd, name, 0700) != 0) {
      if (errno == EEXIST) continue;
      return sm_error_set_errno(err, SM_EIO, errno, "cannot make a staging directory in %s",
                                root_path);
    }
    int fd = openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) continue; /* a sweeper took it */
    if (fd < 0) {
      int e = errno;
      unlinkat(root_fd, name, AT_REMOVEDIR);
      return sm_error_set_errno(err, SM_EIO, e, "cannot open the staging directory in %s",
                                root_path);
    }
    /* Without locks (some network file systems) the stage is swept by age. */
    int lr = stage_lock(fd);
    if (lr == -EWOULDBLOCK || !stage_still_there(root_fd, name, fd)) {
      close(fd);
      continue;
    }
    *out_path = strdup(name);
    if (*out_path == NULL) {
      close(fd);
      unlinkat(root_fd, name, AT_REMOVEDIR);
      return sm_error_set(err, SM_ENOMEM, "out of memory");
    }
    return fd;
  }
  return sm_error_set(err, SM_EIO, "cannot make a staging directory in %s", root_path);
}

/* A directory stream of fd's directory (fd stays open), or NULL. */
static DIR *open_dir_at(int fd) {
  int dup_fd = dup(fd);
  if (dup_fd < 0) return NULL;
  DIR *d = fdopendir(dup_fd);
  if (d == NULL) close(dup_fd);
  return d;
}

/* Stage directories are flat (files and symlinks only), so emptying is one pass. */
static void stage_empty(int fd) {
  DIR *d = open_dir_at(fd);
  if (d == NULL) return;
  rewinddir(d);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (unlinkat(fd, de->d_name, 0) != 0 && errno == EISDIR) workspace_remove_tree(fd, de->d_name);
  }
  closedir(d);
}

void workspace_stage_remove(int root_fd, const char *stage_path, int stage_fd) {
  if (stage_fd >= 0) {
    stage_empty(stage_fd);
    close(stage_fd);
  }
  if (stage_path) unlinkat(root_fd, stage_path, AT_REMOVEDIR);
}

void workspace_stage_sweep(int root_fd) {
  DIR *d = open_dir_at(root_fd);
  if (d == NULL) return;
  struct dirent *de;
  time_t now = time(NULL);
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, WS_STAGE_PREFIX, strlen(WS_STAGE_PREFIX)) != 0) continue;
    struct stat st;
    if (fstatat(root_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      continue;
    int sfd = openat(root_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0) continue;
    int lr = stage_lock(sfd);
    /* Held: a copy in progress. No locks here: an hour without a change. */
    if (lr == -EWOULDBLOCK || (lr != 0 && now - st.st_mtime < 3600)) {
      close(sfd);
      continue;
    }
    /* Removed while locked, so no new copy takes it meanwhile. */
    stage_empty(sfd);
    unlinkat(root_fd, de->d_name, AT_REMOVEDIR);
    close(sfd);
  }
  closedir(d);
}

void workspace_hex(const unsigned char *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * n] = '\0';
}

bool workspace_hash_fd_ok(int fd, unsigned char out[32], int64_t *out_len) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(md);
    return false;
  }
  char buf[65536];
  int64_t total = 0;
  for (;;) {
    ssize_t r = common_read_retry(fd, buf, sizeof buf);
    if (r < 0) {
      EVP_MD_CTX_free(md);
      return false;
    }
    if (r == 0) break;
    EVP_DigestUpdate(md, buf, (size_t)r);
    total += r;
  }
  unsigned int n = 0;
  EVP_DigestFinal_ex(md, out, &n);
  EVP_MD_CTX_free(md);
  if (out_len) *out_len = total;
  return true;
}
