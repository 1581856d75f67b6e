/* Walks a host directory (never following symlinks) into a manifest of
 * lstat data: type, size, mode, mtime, link targets. No file is read here:
 * content hashes are filled in only for what changed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/unconst.h"
#include "workspace/ws.h"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct strvec {
  char **v;
  size_t n, cap;
} strvec;

static int strvec_push(strvec *s, char *str, sm_error *err) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 32;
    char **v = realloc(s->v, cap * sizeof *v);
    if (v == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory listing a directory");
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = str;
  return 0;
}

static void strvec_free(strvec *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

static char *join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (p == NULL) return NULL;
  if (a) {
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
  } else {
    memcpy(p, name, b + 1);
  }
  return p;
}

/* The names in directory d (dir, relative to the root), sorted, without
 * sandman's reserved top-level names. */
static int read_names(DIR *d, const char *dir, const ws_scan_opts *o, strvec *names,
                      sm_error *err) {
  struct dirent *de;
  errno = 0;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (dir[0] == '\0' && workspace_is_reserved(de->d_name)) continue;
    char *n = strdup(de->d_name);
    if (n == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory listing a directory");
    int rc = strvec_push(names, n, err);
    if (rc != 0) {
      free(n);
      return rc;
    }
    /* A directory with more names than the cap allows is an error anyway. */
    if ((int64_t)names->n > o->max_entries + 1) break;
  }
  if (names->n > 1) qsort(names->v, names->n, sizeof *names->v, cmp_str);
  return 0;
}

/* e's type (and size, or link target read into linkbuf) from st; *skip: a
 * file type that is not copied (said in a warning). */
static int entry_type(int dfd, const char *name, const struct stat *st, const char *root_path,
                      const ws_scan_opts *o, ws_entry *e, char *linkbuf, size_t linkcap,
                      int *skip, sm_error *err) {
  *skip = 0;
  if (S_ISREG(st->st_mode)) {
    e->type = 'f';
    e->size = st->st_size;
  } else if (S_ISDIR(st->st_mode)) {
    e->type = 'd';
  } else if (S_ISLNK(st->st_mode)) {
    size_t cap = (size_t)o->max_path + 1 < linkcap ? (size_t)o->max_path + 1 : linkcap;
    ssize_t n = readlinkat(dfd, name, linkbuf, cap);
    if (n < 0)
      return sm_error_set_errno(err, SM_EIO, errno, "reading the link %s/%s", root_path,
                                e->path);
    if ((size_t)n >= cap)
      return sm_error_set(err, SM_ETOOBIG, "%s/%s: link target longer than %" PRId64 " bytes",
                          root_path, e->path, o->max_path);
    linkbuf[n] = '\0';
    e->type = 'l';
    e->link = linkbuf;
    e->mode = 0777;
  } else if (o->specials && (S_ISFIFO(st->st_mode) || S_ISCHR(st->st_mode) ||
                             S_ISBLK(st->st_mode) || S_ISSOCK(st->st_mode))) {
    e->type = S_ISFIFO(st->st_mode) ? 'p' : S_ISCHR(st->st_mode) ? 'c' : S_ISBLK(st->st_mode) ? 'b' : 's';
  } else {
    sm_log(SM_LOG_WARN, "workspace: skipping %s/%s: %s cannot be copied", root_path, e->path,
           S_ISSOCK(st->st_mode) ? "a socket" : S_ISFIFO(st->st_mode) ? "a fifo" : "a device");
    *skip = 1;
  }
  return 0;
}

/* Would adding e pass the entry or size limit? */
static int check_limits(const ws_manifest *out, const ws_entry *e, const char *root_path,
                        const ws_scan_opts *o, sm_error *err) {
  if ((int64_t)out->n >= o->max_entries)
    return sm_error_set(err, SM_ETOOBIG,
                        "%s has more than %" PRId64 " entries (the workspace entry limit); "
                        "exclude some or raise the limit",
                        root_path, o->max_entries);
  if (e->type == 'f' && out->total_size + e->size > o->max_bytes) {
    char lim[32];
    sm_format_size(o->max_bytes, lim, sizeof lim);
    return sm_error_set(err, SM_ETOOBIG,
                        "%s holds more than %s of files (the workspace size limit); "
                        "exclude some or raise the limit",
                        root_path, lim);
  }
  return 0;
}

/* Adds the entry name of directory dfd (path, relative to the root) to out;
 * a directory is pushed on stack too. Gone meanwhile: nothing. */
static int scan_entry(int dfd, const char *name, const char *path, const char *root_path,
                      const ws_scan_opts *o, ws_manifest *out, strvec *stack, sm_error *err) {
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return 0; /* gone while we looked */
    return sm_error_set_errno(err, SM_EIO, errno, "reading %s/%s", root_path, path);
  }
  ws_entry e;
  memset(&e, 0, sizeof e);
  e.path = SM_UNCONST(path);
  e.mode = (uint32_t)(st.st_mode & 0777);
  e.host_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  e.box_mtime = WS_UNKNOWN_MTIME;
  e.ctime = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
  e.stage = -1;
  char linkbuf[4097];
  int skip = 0;
  int rc = entry_type(dfd, name, &st, root_path, o, &e, linkbuf, sizeof linkbuf, &skip, err);
  if (rc || skip) return rc;
  rc = check_limits(out, &e, root_path, o, err);
  if (rc) return rc;
  if (workspace_manifest_add(out, &e, NULL) != 0)
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  if (e.type == 'd') {
    char *copy = strdup(path);
    if (copy == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory listing a directory");
    int pushed = strvec_push(stack, copy, err);
    if (pushed != 0) {
      free(copy);
      return pushed;
    }
  }
  return 0;
}

/* Lists one directory, adds its entries, pushes its subdirectories. */
static int scan_dir(int root_fd, const char *root_path, const char *dir, const ws_scan_opts *o,
                    ws_manifest *out, strvec *stack, sm_error *err) {
  int fd = workspace_open_dir(root_fd, dir, 0);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, -fd, "reading %s/%s", root_path, dir);
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  strvec names = {0};
  int rc = read_names(d, dir, o, &names, err);
  size_t first_sub = stack->n;
  for (size_t i = 0; i < names.n && rc == 0; i++) {
    cleanup_free char *path = join(dir, names.v[i]);
    if (path == NULL) {
      rc = sm_error_set(err, SM_ENOMEM, "out of memory");
      break;
    }
    if ((int64_t)strlen(path) > o->max_path) {
      rc = sm_error_set(err, SM_ETOOBIG,
                        "%s/%.80s...: path longer than the limit of %" PRId64 " bytes", root_path,
                        path, o->max_path);
      break;
    }
    if (workspace_excluded(o->excludes, path)) continue;
    rc = scan_entry(dirfd(d), names.v[i], path, root_path, o, out, stack, err);
  }
  closedir(d);
  strvec_free(&names);
  /* Reverse the pushed subdirectories so they are visited in sorted order. */
  for (size_t a = first_sub, b = stack->n; rc == 0 && b > a + 1; a++, b--) {
    char *t = stack->v[a];
    stack->v[a] = stack->v[b - 1];
    stack->v[b - 1] = t;
  }
  return rc;
}

int workspace_scan(int root_fd, const char *root_path, const ws_scan_opts *o, ws_manifest *out,
                   sm_error *err) {
  workspace_manifest_clear(out);
  strvec stack = {0};
  char *root = strdup("");
  if (root == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory listing a directory");
  int pushed = strvec_push(&stack, root, err);
  if (pushed != 0) {
    free(root);
    return pushed;
  }
  int rc = 0;
  while (stack.n > 0 && rc == 0) {
    char *dir = stack.v[--stack.n];
    rc = scan_dir(root_fd, root_path, dir, o, out, &stack, err);
    free(dir);
  }
  strvec_free(&stack);
  if (rc) workspace_manifest_clear(out);
  return rc;
}
