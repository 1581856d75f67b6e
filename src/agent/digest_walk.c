/* See digest_walk.h. Plain libc: the static agent. */
#include "agent/digest_walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace/digest.h"

enum { WALK_OK = 0, WALK_ERROR = 1, WALK_NO_DIGEST = 3 };

typedef struct walk {
  ws_digest d;
  char **excludes;
  int n_excludes;
  unsigned long long max_entries;
  char path[WS_DIGEST_PATH_MAX + 258];
} walk;

static int say(int code, const char *what, const char *path) {
  fprintf(stderr, "sandman-agent wsdigest: %s%s%s\n", what, path[0] ? ": " : "", path);
  return code;
}

static int excluded(const walk *w, const char *path, const char *name) {
  for (int i = 0; i < w->n_excludes; i++)
    if (fnmatch(w->excludes[i], path, 0) == 0 || fnmatch(w->excludes[i], name, 0) == 0) return 1;
  return 0;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* The names in d, sorted; NULL with *rc set on failure. */
static char **read_names(const walk *w, DIR *d, size_t *n, int *rc) {
  char **v = NULL;
  size_t cap = 0;
  struct dirent *de;
  *n = 0;
  errno = 0;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (*n + w->d.count >= w->max_entries + 1) {
      free_names(v, *n);
      *n = 0;
      *rc = say(WALK_NO_DIGEST, "more entries than the limit", w->path);
      return NULL;
    }
    if (*n == cap) {
      cap = cap ? cap * 2 : 64;
      char **nv = realloc(v, cap * sizeof *v);
      if (nv == NULL) break;
      v = nv;
    }
    if ((v[*n] = strdup(de->d_name)) == NULL) break;
    (*n)++;
    errno = 0;
  }
  if (de != NULL || errno != 0) {
    free_names(v, *n);
    *n = 0;
    *rc = say(WALK_ERROR, errno ? strerror(errno) : "out of memory", w->path);
    return NULL;
  }
  if (*n > 1) qsort(v, *n, sizeof *v, cmp_name);
  *rc = WALK_OK;
  return v;
}

static int walk_dir(walk *w, int fd, size_t plen, int depth);

/* One entry of the folder dfd (its path is w->path, plen bytes). */
static int walk_entry(walk *w, int dfd, const char *name, size_t plen, int depth) {
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    /* Gone since the folder was read: the digest is of what is there. */
    if (errno == ENOENT) return WALK_OK;
    return say(WALK_ERROR, strerror(errno), w->path);
  }
  char type;
  switch (st.st_mode & S_IFMT) {
  case S_IFREG: type = 'f'; break;
  case S_IFDIR: type = 'd'; break;
  case S_IFLNK: type = 'l'; break;
  case S_IFIFO: type = 'p'; break;
  case S_IFCHR: type = 'c'; break;
  case S_IFBLK: type = 'b'; break;
  case S_IFSOCK: type = 's'; break;
  default: return WALK_OK; /* the listing leaves such entries out too */
  }
  if (w->d.count >= w->max_entries)
    return say(WALK_NO_DIGEST, "more entries than the limit", w->path);
  int64_t ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
  ws_digest_add(&w->d, w->path, plen, type, (int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                ctime_ns, (uint32_t)(st.st_mode & 0777));
  if (type != 'd') return WALK_OK;
  if (depth >= SM_DIGEST_DEPTH_MAX) return say(WALK_NO_DIGEST, "folders nested too deep", w->path);
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    /* Replaced by something else since it was seen: no digest this time. */
    if (errno == ENOTDIR || errno == ELOOP || errno == ENOENT)
      return say(WALK_NO_DIGEST, "changed while read", w->path);
    return say(WALK_ERROR, strerror(errno), w->path);
  }
  return walk_dir(w, fd, plen, depth + 1);
}

/* The folder fd (taken; its path is w->path, plen bytes, "" the root). */
static int walk_dir(walk *w, int fd, size_t plen, int depth) {
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return say(WALK_ERROR, strerror(errno), w->path);
  }
  size_t n = 0;
  int rc = WALK_OK;
  char **names = read_names(w, d, &n, &rc);
  for (size_t i = 0; i < n && rc == WALK_OK; i++) {
    size_t len = strlen(names[i]);
    size_t at = plen ? plen + 1 : 0;
    if (at + len > WS_DIGEST_PATH_MAX) {
      w->path[plen] = '\0';
      rc = say(WALK_NO_DIGEST, "a path longer than the listing takes", w->path);
      break;
    }
    if (plen) w->path[plen] = '/';
    memcpy(w->path + at, names[i], len + 1);
    if (!excluded(w, w->path, names[i])) rc = walk_entry(w, dirfd(d), names[i], at + len, depth);
    w->path[plen] = '\0';
  }
  free_names(names, n);
  closedir(d);
  return rc;
}

int sm_agent_wsdigest_main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: sandman-agent wsdigest DIR MAX_ENTRIES [EXCLUDE...]\n");
    return 2;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long max = strtoull(argv[2], &end, 10);
  if (errno || end == argv[2] || *end != '\0' || max == 0) {
    fprintf(stderr, "sandman-agent wsdigest: MAX_ENTRIES must be a positive number\n");
    return 2;
  }
  static walk w;
  ws_digest_init(&w.d);
  w.excludes = argv + 3;
  w.n_excludes = argc - 3;
  w.max_entries = max;
  w.path[0] = '\0';
  int fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return say(WALK_ERROR, strerror(errno), argv[1]);
  int rc = walk_dir(&w, fd, 0, 0);
  if (rc != WALK_OK) return rc;
  char hex[65];
  unsigned long long count = w.d.count;
  ws_digest_final(&w.d, hex);
  printf(WS_DIGEST_PREFIX "%s %llu\n", hex, count);
  return fflush(stdout) == 0 ? WALK_OK : WALK_ERROR;
}
