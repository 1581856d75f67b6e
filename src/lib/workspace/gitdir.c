/* Git directories found by what they hold, wherever they are in the
 * workspace (docs/workspaces.md, "Git directories"). git takes a directory
 * for a repository when it holds HEAD, objects and refs, or HEAD and a
 * commondir file naming where the rest is (is_git_directory in git's
 * setup.c; `objects` and `refs` of any type: git only asks access(X_OK)).
 * Discovery finds such a directory as the current one or any above it
 * (a bare repository), so one the tool makes or changes under any name
 * would bring its config and hooks to the host.
 *
 * The question is asked of the state a copy out would leave: what the
 * sandbox holds (the extractor's box, every entry) joined with what the
 * host holds now, so a tool cannot build one piece by piece over several
 * calls, nor finish one the host already half has. Names are folded as
 * for protected paths (`head`, `Objects.`: a case-insensitive host takes
 * them for HEAD and objects). A directory named `.git` is left to the
 * protected-path list (its hooks and config), whose job it is. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace/ws.h"

enum { GD_HEAD = 1, GD_OBJECTS = 2, GD_REFS = 4, GD_COMMONDIR = 8 };

static const struct {
  const char *name;
  int bit;
} markers[] = {{"head", GD_HEAD}, {"objects", GD_OBJECTS}, {"refs", GD_REFS},
               {"commondir", GD_COMMONDIR}};

/* The host's spelling, looked up as git looks it up there. */
static const char *const host_names[] = {"HEAD", "objects", "refs", "commondir"};

static int is_repository(int bits) {
  return (bits & GD_HEAD) &&
         ((bits & (GD_OBJECTS | GD_REFS)) == (GD_OBJECTS | GD_REFS) || (bits & GD_COMMONDIR));
}

/* The folded form of the first n bytes of path, component by component,
 * into out (room for n + 1). */
static void fold_path(const char *path, size_t n, char *out) {
  size_t o = 0, i = 0;
  while (i < n) {
    const char *slash = memchr(path + i, '/', n - i);
    size_t len = slash ? (size_t)(slash - (path + i)) : n - i;
    if (o > 0) out[o++] = '/';
    o += workspace_name_fold(path + i, len, out + o);
    i += len + (slash != NULL);
  }
  out[o] = '\0';
}

/* 1 if the last component of path, folded, is name. */
int workspace_git_name_is(const char *path, const char *name) {
  const char *slash = strrchr(path, '/');
  const char *last = slash ? slash + 1 : path;
  size_t n = strlen(last);
  char buf[512];
  if (n >= sizeof buf) return 0;
  workspace_name_fold(last, n, buf);
  return strcmp(buf, name) == 0;
}

int workspace_git_in_dotgit(const char *path) {
  char buf[512];
  for (const char *p = path; *p;) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n < sizeof buf) {
      workspace_name_fold(p, n, buf);
      if (strcmp(buf, ".git") == 0) return 1;
    }
    p += n + (slash != NULL);
  }
  return 0;
}

void workspace_gitdirs_dispose(ws_gitdirs *g) {
  workspace_manifest_dispose(&g->marks);
  workspace_manifest_dispose(&g->memo);
}

int workspace_gitdirs_init(ws_gitdirs *g, const ws_manifest *box, int root_fd, sm_error *err) {
  workspace_manifest_init(&g->marks);
  workspace_manifest_init(&g->memo);
  g->root_fd = root_fd;
  for (size_t i = 0; box && i < box->n; i++) {
    const char *path = box->v[i].path;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char folded[512];
    size_t n = strlen(name);
    if (n >= sizeof folded) continue;
    workspace_name_fold(name, n, folded);
    int bit = 0;
    for (size_t k = 0; k < sizeof markers / sizeof markers[0]; k++)
      if (strcmp(folded, markers[k].name) == 0) bit = markers[k].bit;
    if (bit == 0) continue;
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    char *dir = malloc(dlen + 1);
    if (dir == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory noting git directories");
    fold_path(path, dlen, dir);
    ws_entry *m = workspace_manifest_get(&g->marks, dir);
    if (m == NULL) {
      ws_entry e;
      memset(&e, 0, sizeof e);
      e.path = dir;
      e.type = 'd';
      if (workspace_manifest_add(&g->marks, &e, &m) != 0) m = NULL;
    }
    free(dir);
    if (m == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory noting git directories");
    m->size |= bit;
  }
  return 0;
}

/* What of HEAD, objects, refs and commondir the host's directory dir has. */
static int host_bits(int root_fd, const char *dir) {
  if (root_fd < 0) return 0;
  int fd = workspace_open_dir(root_fd, dir, 0);
  if (fd < 0) return 0;
  int bits = 0;
  struct stat st;
  for (size_t k = 0; k < sizeof host_names / sizeof host_names[0]; k++)
    if (fstatat(fd, host_names[k], &st, AT_SYMLINK_NOFOLLOW) == 0) bits |= markers[k].bit;
  close(fd);
  return bits;
}

/* Is the directory dir (n bytes of a path; "" the root) a repository not
 * named .git? Answers are kept: many paths share their directories. */
static int repository_at(ws_gitdirs *g, const char *path, size_t n) {
  char *dir = strndup(path, n);
  char *folded = malloc(n + 1);
  if (dir == NULL || folded == NULL) {
    free(dir);
    free(folded);
    return 1;
  }
  int answer;
  ws_entry *m = workspace_manifest_get(&g->memo, dir);
  if (m) {
    answer = (int)m->size;
  } else {
    fold_path(dir, n, folded);
    const char *slash = strrchr(folded, '/');
    int dotgit = strcmp(slash ? slash + 1 : folded, ".git") == 0;
    const ws_entry *mk = dotgit ? NULL : workspace_manifest_get(&g->marks, folded);
    answer = !dotgit && is_repository((mk ? (int)mk->size : 0) | host_bits(g->root_fd, dir));
    ws_entry e;
    memset(&e, 0, sizeof e);
    e.path = dir;
    e.type = 'd';
    e.size = answer;
    if (workspace_manifest_add(&g->memo, &e, NULL) != 0) answer = 1;
  }
  free(dir);
  free(folded);
  return answer;
}

int workspace_gitdirs_covers(ws_gitdirs *g, const char *path) {
  size_t len = strlen(path);
  for (size_t i = 0; i <= len; i++) {
    if (i != 0 && i != len && path[i] != '/') continue;
    if (repository_at(g, path, i)) return 1;
  }
  return 0;
}
