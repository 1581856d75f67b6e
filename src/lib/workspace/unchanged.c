/* Is the sandbox's workspace what the manifest says it was after the last
 * copy? The copy out's quick check (docs/workspaces.md, "Nothing changed"):
 * the host builds, from its manifest, the listing the sandbox would show if
 * nothing had changed since (the base, with the sandbox's own versions of
 * what was held back from the host) and its digest (digest.h);
 * `sandman-agent wsdigest` computes the digest of what the sandbox holds.
 * The same digest: the listing would have shown every entry as the copy
 * out's plan takes for unchanged (workspace_probe_plan: same type, size, mtime,
 * mode and the very ctime recorded, or a held entry unchanged), so there is
 * nothing to fetch, apply or report.
 *
 * The answer comes from the sandbox and is not trusted for safety, as the
 * listing is not: a forged "nothing changed" only keeps the tool's changes
 * in the sandbox (nothing is applied to the host, and the manifest keeps
 * the ctimes recorded before, so the next real listing fetches them and
 * checks them as always). Only the host's side decides which manifests
 * allow the check at all: every entry must be one the plan can take for
 * unchanged on a listing alone (a recorded ctime, not racy). */
#include <stdlib.h>
#include <string.h>

#include "workspace/digest.h"
#include "workspace/ws.h"

_Static_assert(WS_DIGEST_PATH_MAX == WS_LIST_PATH_MAX, "the digest walks what the listing does");

/* An entry of the expected listing: the fields a listing shows. */
typedef struct expect {
  const char *path;
  char type;
  int64_t size, mtime, ctime;
  uint32_t mode;
} expect;

static int cmp_expect(const void *a, const void *b) {
  return workspace_path_cmp(((const expect *)a)->path, ((const expect *)b)->path);
}

/* What the listing shows of e (a base or held entry) when it is unchanged;
 * 0 when a listing alone cannot show it unchanged. */
static int as_listed(const ws_entry *e, int held, expect *out) {
  if (strlen(e->path) > WS_LIST_PATH_MAX) return 0;
  *out = (expect){e->path, e->type, 0, 0, 0, e->mode};
  switch (e->type) {
  case 'f':
    /* workspace_probe_plan compares files by the ctime recorded, never a racy one. */
    if (e->box_ctime == 0 || e->box_mtime == WS_UNKNOWN_MTIME) return 0;
    if (!held && (e->racy & WS_RACY_BOX)) return 0;
    out->size = e->size;
    out->mtime = e->box_mtime;
    out->ctime = e->box_ctime;
    return 1;
  case 'l':
    if (e->link == NULL || e->box_ctime == 0) return 0;
    out->size = (int64_t)strlen(e->link);
    out->ctime = e->box_ctime;
    return 1;
  case 'd':
    return 1;
  case 'p':
  case 'c':
  case 'b':
  case 's':
    return held; /* refused when seen: only ever held */
  default:
    return 0;
  }
}

/* Would workspace_probe_plan take the listed entry l for the base entry b
 * unchanged? (Then a held entry of that path would leave the held set.) */
static int plan_same(const ws_entry *b, const expect *l) {
  if (b->type != l->type) return 0;
  switch (l->type) {
  case 'f':
    return b->size == l->size && b->box_mtime == l->mtime && b->mode == l->mode &&
           b->box_ctime != 0 && b->box_ctime == l->ctime && !(b->racy & WS_RACY_BOX);
  case 'l':
    return b->link && (int64_t)strlen(b->link) == l->size && b->box_ctime != 0 &&
           b->box_ctime == l->ctime;
  case 'd':
    return 1;
  default:
    return 0;
  }
}

struct ws_expected {
  expect *v;
  size_t n;
};

void workspace_expected_free(ws_expected *x) {
  if (x == NULL) return;
  free(x->v);
  free(x);
}

int workspace_expected_collect(const ws_manifest *base, const ws_manifest *held,
                               const sm_string_list *excludes, ws_expected **out) {
  *out = NULL;
  size_t nheld = held ? held->n : 0;
  expect *v = calloc(base->n + nheld + 1, sizeof *v);
  ws_expected *x = calloc(1, sizeof *x);
  if (v == NULL || x == NULL) {
    free(v);
    free(x);
    return 0;
  }
  size_t n = 0;
  int ok = 1;
  for (size_t i = 0; ok && i < nheld; i++) {
    const ws_entry *h = &held->v[i];
    /* A held deletion depends on the protected list in force now. */
    ok = h->type != WS_DELETED && as_listed(h, 1, &v[n]) && !workspace_excluded(excludes, h->path);
    const ws_entry *b = ok ? workspace_manifest_get(base, h->path) : NULL;
    if (b && plan_same(b, &v[n])) ok = 0;
    n++;
  }
  for (size_t i = 0; ok && i < base->n; i++) {
    const ws_entry *b = &base->v[i];
    if (nheld && workspace_manifest_get(held, b->path)) continue; /* the sandbox has the held one */
    ok = as_listed(b, 0, &v[n++]) && !workspace_excluded(excludes, b->path);
  }
  x->v = v;
  x->n = n;
  if (!ok) {
    workspace_expected_free(x);
    return 0;
  }
  *out = x;
  return 1;
}

/* The length of path's first component. */
static size_t top_len(const char *path) {
  const char *slash = strchr(path, '/');
  return slash ? (size_t)(slash - path) : strlen(path);
}

void workspace_expected_digest(ws_expected *x, char hex[65], uint64_t *count) {
  if (x->n > 1) qsort(x->v, x->n, sizeof *x->v, cmp_expect);
  /* Sorted depth-first, a top-level entry's subtree is one run. */
  ws_digest top, sub;
  workspace_digest_init(&top);
  size_t i = 0;
  while (i < x->n) {
    const char *head = x->v[i].path;
    size_t hl = top_len(head);
    workspace_digest_init(&sub);
    do {
      const expect *e = &x->v[i];
      workspace_digest_add(&sub, e->path, strlen(e->path), e->type, e->size, e->mtime, e->ctime,
                           e->mode);
      i++;
    } while (i < x->n && top_len(x->v[i].path) == hl && memcmp(x->v[i].path, head, hl) == 0);
    unsigned char sum[32];
    uint64_t n = sub.count;
    workspace_digest_sum(&sub, sum);
    workspace_digest_add_sum(&top, sum, n);
  }
  *count = top.count;
  workspace_digest_final(&top, hex);
}

int workspace_unchanged_expect(const ws_manifest *base, const ws_manifest *held,
                               const sm_string_list *excludes, char hex[65], uint64_t *count) {
  ws_expected *x = NULL;
  if (!workspace_expected_collect(base, held, excludes, &x)) return 0;
  workspace_expected_digest(x, hex, count);
  workspace_expected_free(x);
  return 1;
}

int workspace_unchanged_parse(const char *out, size_t len, char hex[65], uint64_t *count) {
  size_t plen = strlen(WS_DIGEST_PREFIX);
  if (len < plen + 64 + 3 || len > WS_DIGEST_LINE_MAX || out[len - 1] != '\n' ||
      memcmp(out, WS_DIGEST_PREFIX, plen) != 0 || out[plen + 64] != ' ')
    return -1;
  for (size_t i = 0; i < 64; i++) {
    char c = out[plen + i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return -1;
    hex[i] = c;
  }
  hex[64] = '\0';
  uint64_t v = 0;
  size_t i = plen + 65;
  if (i >= len - 1) return -1;
  for (; i < len - 1; i++) {
    if (out[i] < '0' || out[i] > '9' || v > (UINT64_MAX - 9) / 10) return -1;
    v = v * 10 + (uint64_t)(out[i] - '0');
  }
  *count = v;
  return 0;
}
