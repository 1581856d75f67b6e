/* Conflict copies of folders: where the tool wrote under a folder that the
 * host no longer has as a folder (the user replaced it by a file, edited
 * the file the tool turned into a folder, or deleted it during the call),
 * the tool's work lands in <folder>.sandman-conflict beside the host's
 * version, as a conflicting file's does (docs/workspaces.md, "Conflicts").
 * A copy out keeps the folders it put aside here and maps every later path
 * under one to its place in the aside. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strv.h"
#include "workspace/ws.h"

void workspace_aside_dispose(ws_aside *a) {
  for (size_t i = 0; i < a->n; i++) {
    free(a->from[i]);
    free(a->to[i]);
  }
  free(a->from);
  free(a->to);
  memset(a, 0, sizeof *a);
}

const char *workspace_aside_map(const ws_aside *a, const char *path, char **owned) {
  *owned = NULL;
  for (size_t i = 0; i < a->n; i++) {
    size_t fl = strlen(a->from[i]);
    if (strncmp(path, a->from[i], fl) != 0 || (path[fl] != '\0' && path[fl] != '/')) continue;
    if (a->to[i] == NULL) return NULL;
    size_t tl = strlen(a->to[i]), rest = strlen(path + fl);
    *owned = malloc(tl + rest + 1);
    if (*owned == NULL) return NULL;
    memcpy(*owned, a->to[i], tl);
    memcpy(*owned + tl, path + fl, rest + 1);
    return *owned;
  }
  return path;
}

size_t workspace_aside_blocker(int root_fd, const char *path) {
  int fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  const char *slash = strrchr(path, '/');
  size_t dlen = slash ? (size_t)(slash - path) : 0;
  size_t i = 0, found = 0;
  char name[256];
  while (i < dlen && found == 0) {
    const char *e = memchr(path + i, '/', dlen - i);
    size_t n = e ? (size_t)(e - (path + i)) : dlen - i;
    if (n == 0 || n >= sizeof name) break;
    memcpy(name, path + i, n);
    name[n] = '\0';
    int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
    if (next < 0) found = i + n;
    i += n + 1;
  }
  if (fd >= 0) close(fd);
  return found;
}

/* Frees a new entry's strings on failure. */
static int add(ws_aside *a, char *from, char *to) {
  if (common_grow(&a->from, &a->cap, a->n, sizeof *a->from, 4) != 0) goto fail;
  char **t = realloc(a->to, a->cap * sizeof *t);
  if (t == NULL) goto fail;
  a->to = t;
  a->from[a->n] = from;
  a->to[a->n] = to;
  a->n++;
  return 0;
fail:
  free(from);
  free(to);
  return -ENOMEM; /* this file's helpers answer -errno */
}

int workspace_aside_make(ws_aside *a, int root_fd, const char *dir, char **out) {
  *out = NULL;
  size_t n = strlen(dir), sl = strlen(WS_CONFLICT_SUFFIX);
  char *from = strdup(dir), *to = malloc(n + sl + 1);
  if (from == NULL || to == NULL) {
    free(from);
    free(to);
    return -ENOMEM;
  }
  memcpy(to, dir, n);
  memcpy(to + n, WS_CONFLICT_SUFFIX, sl + 1);
  const char *slash = strrchr(to, '/');
  const char *name = slash ? slash + 1 : to;
  int r = 0;
  ws_dircache dc;
  workspace_dircache_init(&dc, root_fd);
  const char *leaf;
  int dfd = strlen(name) > 255 ? -ENAMETOOLONG : workspace_dircache_parent(&dc, to, &leaf, 0);
  if (dfd < 0) {
    r = dfd;
  } else {
    /* An older conflict copy of the folder is replaced (never followed). */
    struct stat st;
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) r = workspace_remove_tree(dfd, leaf);
    if (r == 0 && mkdirat(dfd, leaf, 0700) != 0) r = -errno;
  }
  workspace_dircache_dispose(&dc);
  if (r != 0) {
    free(to);
    to = NULL;
  }
  int added = add(a, from, to);
  if (added != 0) return added;
  *out = to;
  return r;
}
