/* See digest_walk.h. Plain libc: the static agent. The top-level entries'
 * subtrees are walked on two threads (the walk is one lstat per entry, and
 * a sandbox's CPU share allows more than one thread at once); their sums
 * are then joined in the order of the names (src/shared/workspace/digest.h). */
#include "agent/digest_walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace/digest.h"

enum { WALK_OK = 0, WALK_ERROR = 1, WALK_NO_DIGEST = 3 };
#define WALK_THREADS 2

/* What the threads share. */
typedef struct walk {
  int root_fd;
  char **names; /* the top level, sorted */
  size_t n_names;
  unsigned char (*sums)[32];
  uint64_t *counts;
  char **excludes;
  int n_excludes;
  unsigned long long max_entries;
  pthread_mutex_t mu;
  size_t next;                /* the next top-level name to take */
  unsigned long long entries; /* over all threads */
  int rc;                     /* the first failure stops everyone */
} walk;

/* One thread's walk of one subtree at a time. */
typedef struct walker {
  walk *w;
  ws_digest d;
  char path[WS_DIGEST_PATH_MAX + 258];
} walker;

static int say(int code, const char *what, const char *path) {
  fprintf(stderr, "sandman-agent wsdigest: %s%s%s\n", what, path[0] ? ": " : "", path);
  return code;
}

static int excluded(const walk *w, const char *path, const char *name) {
  for (int i = 0; i < w->n_excludes; i++)
    if (fnmatch(w->excludes[i], path, 0) == 0 || fnmatch(w->excludes[i], name, 0) == 0) return 1;
  return 0;
}

/* Counts one more entry; 0 once past the cap. */
static int count_one(walk *w) {
  return __atomic_add_fetch(&w->entries, 1, __ATOMIC_RELAXED) <= w->max_entries;
}

static int stopped(walk *w) { return __atomic_load_n(&w->rc, __ATOMIC_RELAXED) != WALK_OK; }

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* The names in d, sorted; NULL with *rc set on failure. */
static char **read_names(walk *w, DIR *d, const char *path, size_t *n, int *rc) {
  char **v = NULL;
  size_t cap = 0;
  struct dirent *de;
  *n = 0;
  errno = 0;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (*n + __atomic_load_n(&w->entries, __ATOMIC_RELAXED) >= w->max_entries + 1) {
      free_names(v, *n);
      *n = 0;
      *rc = say(WALK_NO_DIGEST, "more entries than the limit", path);
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
    *rc = say(WALK_ERROR, errno ? strerror(errno) : "out of memory", path);
    return NULL;
  }
  if (*n > 1) qsort(v, *n, sizeof *v, cmp_name);
  *rc = WALK_OK;
  return v;
}

static int walk_dir(walker *k, int fd, size_t plen, int depth);

/* One entry of the folder dfd (its path is k->path, plen bytes). */
static int walk_entry(walker *k, int dfd, const char *name, size_t plen, int depth) {
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    /* Gone since the folder was read: the digest is of what is there. */
    if (errno == ENOENT) return WALK_OK;
    return say(WALK_ERROR, strerror(errno), k->path);
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
  if (!count_one(k->w)) return say(WALK_NO_DIGEST, "more entries than the limit", k->path);
  int64_t ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
  workspace_digest_add(&k->d, k->path, plen, type, (int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                       ctime_ns, (uint32_t)(st.st_mode & 0777));
  if (type != 'd') return WALK_OK;
  if (depth >= SM_DIGEST_DEPTH_MAX) return say(WALK_NO_DIGEST, "folders nested too deep", k->path);
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    /* Replaced by something else since it was seen: no digest this time. */
    if (errno == ENOTDIR || errno == ELOOP || errno == ENOENT)
      return say(WALK_NO_DIGEST, "changed while read", k->path);
    return say(WALK_ERROR, strerror(errno), k->path);
  }
  return walk_dir(k, fd, plen, depth + 1);
}

/* Appends name to k->path (plen bytes); the new length, or 0 past the limit. */
static size_t path_join(walker *k, size_t plen, const char *name) {
  size_t len = strlen(name), at = plen ? plen + 1 : 0;
  if (at + len > WS_DIGEST_PATH_MAX) return 0;
  if (plen) k->path[plen] = '/';
  memcpy(k->path + at, name, len + 1);
  return at + len;
}

/* The folder fd (taken; its path is k->path, plen bytes). */
static int walk_dir(walker *k, int fd, size_t plen, int depth) {
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return say(WALK_ERROR, strerror(errno), k->path);
  }
  size_t n = 0;
  int rc = WALK_OK;
  char **names = read_names(k->w, d, k->path, &n, &rc);
  for (size_t i = 0; i < n && rc == WALK_OK && !stopped(k->w); i++) {
    size_t len = path_join(k, plen, names[i]);
    if (len == 0) {
      rc = say(WALK_NO_DIGEST, "a path longer than the listing takes", k->path);
      break;
    }
    if (!excluded(k->w, k->path, names[i])) rc = walk_entry(k, dirfd(d), names[i], len, depth);
    k->path[plen] = '\0';
  }
  free_names(names, n);
  closedir(d);
  return rc;
}

/* A thread: takes top-level names one at a time until none is left. */
static void *walk_main(void *ud) {
  walker *k = ud;
  walk *w = k->w;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    size_t i = w->next++;
    pthread_mutex_unlock(&w->mu);
    if (i >= w->n_names || stopped(w)) return NULL;
    workspace_digest_init(&k->d);
    size_t len = path_join(k, 0, w->names[i]);
    int rc = len == 0 ? say(WALK_NO_DIGEST, "a path longer than the listing takes", "")
             : excluded(w, k->path, w->names[i]) ? WALK_OK
                                                 : walk_entry(k, w->root_fd, w->names[i], len, 0);
    w->counts[i] = k->d.count;
    workspace_digest_sum(&k->d, w->sums[i]);
    k->path[0] = '\0';
    if (rc != WALK_OK) {
      int ok = WALK_OK;
      __atomic_compare_exchange_n(&w->rc, &ok, rc, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
      return NULL;
    }
  }
}

/* Walks the top level of the open folder fd (taken) on the threads. */
static int walk_root(walk *w, int fd) {
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return say(WALK_ERROR, strerror(errno), "");
  }
  w->root_fd = dirfd(d);
  int rc = WALK_OK;
  w->names = read_names(w, d, "", &w->n_names, &rc);
  w->sums = calloc(w->n_names + 1, sizeof *w->sums);
  w->counts = calloc(w->n_names + 1, sizeof *w->counts);
  walker *k = calloc(WALK_THREADS, sizeof *k);
  if (rc == WALK_OK && (w->sums == NULL || w->counts == NULL || k == NULL))
    rc = say(WALK_ERROR, "out of memory", "");
  if (rc == WALK_OK) {
    pthread_t th[WALK_THREADS];
    int started = 0;
    /* musl gives a thread 128 KiB of stack: the walk recurses per folder. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)2 << 20);
    for (int t = 0; t < WALK_THREADS; t++) k[t].w = w;
    for (int t = 1; t < WALK_THREADS; t++)
      if (pthread_create(&th[t], &attr, walk_main, &k[t]) == 0) started = t;
    pthread_attr_destroy(&attr);
    walk_main(&k[0]);
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
    rc = w->rc;
  }
  free(k);
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
  w.excludes = argv + 3;
  w.n_excludes = argc - 3;
  w.max_entries = max;
  pthread_mutex_init(&w.mu, NULL);
  int fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return say(WALK_ERROR, strerror(errno), argv[1]);
  int rc = walk_root(&w, fd);
  if (rc != WALK_OK) return rc;
  ws_digest top;
  workspace_digest_init(&top);
  for (size_t i = 0; i < w.n_names; i++)
    if (w.counts[i] > 0) workspace_digest_add_sum(&top, w.sums[i], w.counts[i]);
  char hex[65];
  unsigned long long count = top.count;
  workspace_digest_final(&top, hex);
  printf(WS_DIGEST_PREFIX "%s %llu\n", hex, count);
  return fflush(stdout) == 0 ? WALK_OK : WALK_ERROR;
}
