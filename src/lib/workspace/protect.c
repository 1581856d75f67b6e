/* Protected paths: globs whose changes a copy out never applies to the host
 * (docs/workspaces.md has the rules and the built-in list with reasons).
 *
 * A glob is '/'-separated components: `**` alone is any number of
 * components (none included), otherwise `*` (a run within a component),
 * `?` (one byte), `[...]` (`!` or `^` negates, `a-z` ranges) and `\x`
 * (x itself). A leading `/` anchors it at the workspace root; without one
 * it may match from any directory down (`.envrc` protects every .envrc).
 * A matching path protects what is under it. A non-directory at a path a
 * glob reaches into (`.git` and `.git/hooks` for the hooks glob) is
 * protected too: a tool that replaces the directory `.git` by a file or a
 * link pointing elsewhere would give git another hooks folder or config.
 *
 * Names are compared folded, so no spelling of a protected name that a
 * host file system or a tool could take for it slips through: ASCII case
 * (case-insensitive file systems), code points HFS+ ignores (U+200C-U+200F,
 * U+202A-U+202E, U+206A-U+206F, U+FEFF) and trailing dots and spaces
 * (Windows file systems). Paths reach here normalised (no "." or empty
 * components), so `./.git//hooks` is `.git/hooks`.
 *
 * Matching walks a path's components once per glob as a small NFA (a bit
 * per glob component); paths taken in depth-first order (workspace_path_cmp)
 * reuse their parents' states from a stack, so a deep tree costs one step
 * per entry, not one per component. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/workspace.h>

#include "workspace/ws.h"

#define MAX_COMPONENTS 63

typedef struct glob {
  char **comp;        /* folded components */
  unsigned n;
  int anchored;
  uint64_t dstar;     /* bit i: component i is `**` */
} glob;

struct ws_protect {
  glob *g;
  size_t n;
};

/* ---- folding ---- */

/* Length of an HFS+-ignorable code point's UTF-8 form at s, else 0. */
static size_t ignorable(const unsigned char *s, size_t left) {
  if (left < 3) return 0;
  if (s[0] == 0xe2 && s[1] == 0x80 && ((s[2] >= 0x8c && s[2] <= 0x8f) || (s[2] >= 0xaa && s[2] <= 0xae)))
    return 3;
  if (s[0] == 0xe2 && s[1] == 0x81 && s[2] >= 0xaa && s[2] <= 0xaf) return 3;
  if (s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf) return 3;
  return 0;
}

size_t workspace_name_fold(const char *s, size_t n, char *out) {
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t skip = ignorable(p + i, n - i);
    if (skip) {
      i += skip;
      continue;
    }
    unsigned char c = p[i++];
    out[o++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
  }
  while (o > 0 && (out[o - 1] == '.' || out[o - 1] == ' ')) o--;
  out[o] = '\0';
  return o;
}

/* ---- one component ---- */

/* [...] at p (after the '['): 1 match, 0 no match, -1 malformed. *end: after ']'. */
static int match_class(const char *p, unsigned char c, const char **end) {
  int neg = *p == '!' || *p == '^';
  if (neg) p++;
  int hit = 0, first = 1;
  while (*p && (*p != ']' || first)) {
    first = 0;
    unsigned char lo = (unsigned char)*p;
    if (lo == '\\' && p[1]) lo = (unsigned char)*++p;
    p++;
    unsigned char hi = lo;
    if (*p == '-' && p[1] && p[1] != ']') {
      p++;
      hi = (unsigned char)*p;
      if (hi == '\\' && p[1]) hi = (unsigned char)*++p;
      p++;
    }
    if (c >= lo && c <= hi) hit = 1;
  }
  if (*p != ']') return -1;
  *end = p + 1;
  return hit != neg;
}

static int match_comp(const char *pat, const char *s) {
  const char *star_p = NULL, *star_s = NULL;
  while (*s) {
    if (*pat == '*') {
      star_p = ++pat;
      star_s = s;
      continue;
    }
    int ok = 0;
    const char *next = pat + 1;
    if (*pat == '?') {
      ok = 1;
    } else if (*pat == '[') {
      ok = match_class(pat + 1, (unsigned char)*s, &next) == 1;
    } else if (*pat == '\\' && pat[1]) {
      ok = pat[1] == *s;
      next = pat + 2;
    } else if (*pat) {
      ok = *pat == *s;
    }
    if (ok) {
      pat = next;
      s++;
    } else if (star_p) {
      pat = star_p;
      s = ++star_s;
    } else {
      return 0;
    }
  }
  while (*pat == '*') pat++;
  return *pat == '\0';
}

static int check_comp(const char *c) {
  for (const char *p = c; *p; p++) {
    if (*p == '\\' && p[1]) {
      p++;
    } else if (*p == '[') {
      const char *end;
      if (match_class(p + 1, 'a', &end) < 0) return -1;
      p = end - 1;
    }
  }
  return 0;
}

/* ---- globs ---- */

static void glob_dispose(glob *g) {
  for (unsigned i = 0; i < g->n; i++) free(g->comp[i]);
  free(g->comp);
}

static int glob_parse(const char *text, glob *g, sm_error *err) {
  memset(g, 0, sizeof *g);
  const char *p = text;
  g->anchored = *p == '/';
  size_t len = strlen(text);
  g->comp = calloc(len / 2 + 2, sizeof *g->comp);
  if (g->comp == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  while (*p) {
    while (*p == '/') p++;
    if (*p == '\0') break;
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (g->n >= MAX_COMPONENTS) {
      glob_dispose(g);
      return sm_error_set(err, SM_EINVAL, "protect glob '%s': more than %d components", text,
                          MAX_COMPONENTS);
    }
    int dstar = n == 2 && p[0] == '*' && p[1] == '*';
    /* `**` twice in a row is one `**`. */
    if (dstar && g->n > 0 && (g->dstar >> (g->n - 1) & 1)) {
      p += n;
      continue;
    }
    char *c = malloc(n + 1);
    if (c == NULL) {
      glob_dispose(g);
      return sm_error_set(err, SM_ENOMEM, "out of memory");
    }
    workspace_name_fold(p, n, c);
    if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.') || check_comp(c) != 0) {
      free(c);
      glob_dispose(g);
      return sm_error_set(err, SM_EINVAL,
                          "protect glob '%s': '%.*s' is not a usable name pattern ('.', '..' and "
                          "an unclosed '[' are not)",
                          text, (int)n, p);
    }
    if (dstar) g->dstar |= (uint64_t)1 << g->n;
    g->comp[g->n++] = c;
    p += n;
  }
  if (g->n == 0) {
    glob_dispose(g);
    return sm_error_set(err, SM_EINVAL, "protect glob '%s' names no path", text);
  }
  return 0;
}

int workspace_protect_glob_check(const char *text, sm_error *err) {
  glob g;
  int rc = glob_parse(text, &g, err);
  if (rc == 0) glob_dispose(&g);
  return rc;
}

int workspace_protect_new(ws_protect **out, const sm_string_list *globs, sm_error *err) {
  *out = NULL;
  ws_protect *p = calloc(1, sizeof *p);
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t n = globs ? globs->n : 0;
  p->g = calloc(n + 1, sizeof *p->g);
  if (p->g == NULL) {
    free(p);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    int rc = glob_parse(globs->items[i], &p->g[p->n], err);
    if (rc) {
      workspace_protect_free(p);
      return rc;
    }
    p->n++;
  }
  *out = p;
  return 0;
}

void workspace_protect_free(ws_protect *p) {
  if (p == NULL) return;
  for (size_t i = 0; i < p->n; i++) glob_dispose(&p->g[i]);
  free(p->g);
  free(p);
}

size_t workspace_protect_count(const ws_protect *p) { return p ? p->n : 0; }

/* States with `**` components also stand at the next one (it may match
 * nothing). */
static uint64_t closure(const glob *g, uint64_t s) {
  for (unsigned i = 0; i < g->n; i++)
    if ((s >> i & 1) && (g->dstar >> i & 1)) s |= (uint64_t)1 << (i + 1);
  return s;
}

/* One component through one glob. *entered: the states reached by
 * matching a name (not by a `**` staying put), for the "reaches into" rule. */
static uint64_t step(const glob *g, uint64_t s, const char *comp, uint64_t *entered) {
  uint64_t next = 0, lit = 0;
  for (unsigned i = 0; i < g->n; i++) {
    if (!(s >> i & 1)) continue;
    if (g->dstar >> i & 1) {
      next |= (uint64_t)1 << i;
    } else if (match_comp(g->comp[i], comp)) {
      next |= (uint64_t)1 << (i + 1);
      lit |= (uint64_t)1 << (i + 1);
    }
  }
  *entered = closure(g, lit);
  return closure(g, next);
}

/* ---- walking paths ---- */

void workspace_protect_walk_init(ws_protect_walk *w, const ws_protect *p) {
  memset(w, 0, sizeof *w);
  w->p = p;
}

void workspace_protect_walk_dispose(ws_protect_walk *w) {
  for (size_t i = 0; i < w->cap; i++) free(w->states[i]);
  free(w->states);
  free(w->covered);
  free(w->path);
  memset(w, 0, sizeof *w);
}

/* Makes room for depth+1 levels. */
/* True when the walk has room for depth (false: out of memory). */
static bool walk_reserved(ws_protect_walk *w, size_t depth) {
  if (depth < w->cap) return true;
  size_t cap = w->cap ? w->cap : 16;
  while (cap <= depth) cap *= 2;
  uint64_t **st = realloc(w->states, cap * sizeof *st);
  if (st == NULL) return false;
  w->states = st;
  unsigned char *cv = realloc(w->covered, cap);
  if (cv == NULL) return false;
  w->covered = cv;
  for (size_t i = w->cap; i < cap; i++) {
    w->states[i] = calloc(w->p->n + 1, sizeof *w->states[i]);
    if (w->states[i] == NULL) {
      w->cap = i;
      return false;
    }
  }
  w->cap = cap;
  return true;
}

int workspace_protect_walk_path(ws_protect_walk *w, const char *path, int is_dir) {
  const ws_protect *p = w->p;
  if (p == NULL || p->n == 0) return 0;
  size_t len = strlen(path);
  size_t ncomp = 1;
  for (size_t i = 0; i < len; i++) ncomp += path[i] == '/';
  /* Levels shared with the last path (whole components), never its last one. */
  size_t keep = 0;
  if (w->path) {
    size_t i = 0;
    while (keep + 1 < ncomp && keep < w->depth) {
      size_t j = i;
      while (path[j] && path[j] != '/' && path[j] == w->path[j]) j++;
      if (path[j] != '/' || w->path[j] != '/') break;
      keep++;
      i = j + 1;
    }
  }
  /* Out of memory: protected (fail closed). */
  if (!walk_reserved(w, ncomp)) return 1;
  if (keep == 0) {
    for (size_t k = 0; k < p->n; k++) w->states[0][k] = closure(&p->g[k], 1);
    w->covered[0] = 0;
  }
  const char *c = path;
  for (size_t i = 0; i < keep; i++) c = strchr(c, '/') + 1;
  char *buf = malloc(len + 1);
  if (buf == NULL) return 1;
  int reaches = 0;
  for (size_t depth = keep; depth < ncomp; depth++) {
    const char *e = strchr(c, '/');
    size_t n = e ? (size_t)(e - c) : strlen(c);
    workspace_name_fold(c, n, buf);
    const uint64_t *from = w->states[depth];
    uint64_t *to = w->states[depth + 1];
    unsigned char cov = w->covered[depth];
    for (size_t k = 0; k < p->n; k++) {
      const glob *g = &p->g[k];
      /* An unanchored glob may start at every level. */
      uint64_t entered = 0;
      to[k] = step(g, from[k] | (g->anchored ? 0 : closure(g, 1)), buf, &entered);
      if (to[k] >> g->n & 1) cov = 1;
      /* Part of the glob matched, ending at this name: it reaches below. */
      if (e == NULL && (entered & ~((uint64_t)1 << g->n))) reaches = 1;
    }
    w->covered[depth + 1] = cov;
    c = e ? e + 1 : c + n;
  }
  free(buf);
  char *copy = realloc(w->path, len + 1);
  if (copy) {
    memcpy(copy, path, len + 1);
    w->path = copy;
    w->depth = ncomp;
  } else {
    free(w->path);
    w->path = NULL;
    w->depth = 0;
  }
  return w->covered[ncomp] || (!is_dir && reaches);
}

int workspace_protected(const ws_protect *p, const char *path, int is_dir) {
  ws_protect_walk w;
  workspace_protect_walk_init(&w, p);
  int r = workspace_protect_walk_path(&w, path, is_dir);
  workspace_protect_walk_dispose(&w);
  return r;
}

/* What git, direnv, editors and coding agents on the host run without
 * asking (docs/workspaces.md has the same list with the reasons). */
static const char *const builtin[] = {
    ".git/hooks/**",           /* git runs them on commit, checkout, merge, push */
    ".git/config",             /* core.hooksPath, core.fsmonitor, core.sshCommand, aliases, drivers */
    ".git/config.worktree",    /* the same, per worktree */
    ".git/commondir",          /* git then reads config and hooks from another directory */
    ".git/modules/**",         /* submodules' git directories: their config and hooks */
    ".git/worktrees/**",       /* linked worktrees' git directories */
    ".git/rebase-merge/**",    /* a rebase's todo list: `exec` lines run on --continue */
    ".git/rebase-apply/**",    /* git am's and the apply backend's state */
    ".git/sequencer/**",       /* cherry-pick and revert todo lists */
    ".gitmodules",             /* submodule URLs and update commands */
    ".hg/hgrc",                /* Mercurial's hooks */
    ".envrc",                  /* direnv loads it on cd */
    ".vscode/**",              /* tasks run on folder open, settings naming programs */
    ".idea/**",                /* JetBrains run configurations and startup tasks */
    ".devcontainer/**",        /* devcontainer commands (initializeCommand runs on the host) */
    ".devcontainer.json",
    ".husky/**",               /* husky's hooks folder (core.hooksPath) */
    ".githooks/**",            /* a common core.hooksPath folder */
    ".pre-commit-config.yaml", /* the hooks pre-commit runs on commit */
    "lefthook*",               /* lefthook's hooks (lefthook.yml, lefthook-local.yml, ...) */
    ".lefthook*",
    ".claude/settings*.json",  /* hooks a coding agent runs */
    ".mcp.json",               /* MCP servers a coding agent starts */
    ".cursor/mcp.json",
    ".exrc",                   /* vim and neovim run them with 'exrc' */
    ".nvimrc",
    ".nvim.lua",
};

void sm_workspace_protect_defaults(sm_string_list *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < sizeof builtin / sizeof builtin[0] && i < SM_LIST_MAX; i++)
    snprintf(out->items[out->n++], SM_NAME_MAX, "%s", builtin[i]);
}

int workspace_path_cmp(const char *a, const char *b) {
  for (;; a++, b++) {
    unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
    if (x == y) {
      if (x == '\0') return 0;
      continue;
    }
    /* '/' sorts before every byte: a directory's contents come right after it. */
    if (x == '/') x = 1;
    if (y == '/') y = 1;
    return x < y ? -1 : 1;
  }
}
