/* The copy out: the quick check (the sandbox's digest against the
 * manifest's), else a listing and the reads of what changed (or of
 * everything), each through the checking extractor into a stage inside the
 * host workspace; then per entry refused or applied, what is held back
 * recorded, and the manifest saved. Also the tests' and fuzzers' way to
 * unpack a tar stream into a folder. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "common/cleanup.h"
#include "common/thread.h"
#include "workspace/workspace_box.h"
#include "workspace/workspace_side.h"
#include "workspace/workspace_sync.h"
#include "workspace/ws.h"

static const char *last_component(const char *path, char *buf, size_t len) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  size_t start = n;
  while (start > 0 && path[start - 1] != '/') start--;
  snprintf(buf, len, "%.*s", (int)(n - start), path + start);
  return buf;
}

static void extract_setup(ws_extract *x, sm_workspace_sync *s, int root_fd, int stage_fd,
                          int valid) {
  workspace_extract_init(x);
  x->stage_fd = stage_fd;
  x->root_fd = root_fd;
  x->base = valid ? &s->base : NULL;
  x->held = valid ? &s->held : NULL;
  x->excludes = &s->excludes;
  x->max_bytes = s->max_bytes;
  x->max_entries = s->max_entries;
  x->max_path = s->max_path;
  x->redact = &s->redact;
  x->verify = 1;
}

/* Lists the side (unless it is listed already) and fetches only what
 * changed. Returns 0, a refusal (then the sync fails), or another error
 * after which the caller copies everything instead. */
static int fetch_changed(sm_workspace_sync *s, const side *d, ws_extract *x,
                         ws_manifest *listing, int *listed, sm_error *err) {
  int rc = *listed ? 0 : d->ops->list(d, s, 0, listing, err);
  if (rc == 0) *listed = 1;
  if (rc == 0) x->listing = listing;
  char **roots = NULL;
  size_t nroots = 0;
  size_t max_roots = d->ops->max_roots;
  if (rc == 0) rc = workspace_probe_plan(x, listing, max_roots, &roots, &nroots, err);
  if (rc == 1) rc = sm_error_set(err, SM_ETOOBIG, "more than %zu changed paths", max_roots);
  if (rc == 0)
    sm_log(SM_LOG_DEBUG, "workspace: listing of %zu entries, %zu changed path(s) to fetch",
           listing->n, nroots);
  for (size_t i = 0; rc == 0 && i < nroots; i++) {
    const char *slash = strrchr(roots[i], '/');
    x->strip = slash ? slash + 1 : roots[i];
    x->place = roots[i];
    rc = d->ops->fetch(d, s, x, listing, roots[i], "", err);
  }
  workspace_probe_free_roots(roots, nroots);
  x->place = NULL;
  return rc;
}

static int sorted_copy(char **src, size_t n, char ***out, size_t *out_n, sm_error *err) {
  if (out == NULL) return 0;
  *out = NULL;
  if (out_n) *out_n = 0;
  char **v = calloc(n + 1, sizeof *v);
  if (v == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    v[i] = strdup(src[i]);
    if (v[i] == NULL) {
      sm_workspace_free_list(v, i);
      return sm_error_set(err, SM_ENOMEM, "out of memory");
    }
  }
  if (n > 1) qsort(v, n, sizeof *v, workspace_cmp_cstr);
  *out = v;
  if (out_n) *out_n = n;
  return 0;
}

/* Starts the extractor and its stage afresh for a full copy out, after a
 * partial one was given up. */
static int restage(sm_workspace_sync *s, int root_fd, int valid, ws_extract *x, char **stage,
                   int *stage_fd, sm_error *err) {
  workspace_extract_dispose(x);
  workspace_stage_remove(root_fd, *stage, *stage_fd);
  free(*stage);
  *stage = NULL;
  *stage_fd = workspace_stage_create(root_fd, s->host_dir, stage, err);
  if (*stage_fd < 0) return *stage_fd;
  extract_setup(x, s, root_fd, *stage_fd, valid);
  return 0;
}

/* Reads the sandbox's side into the extractor: only what changed when the
 * base describes this sandbox and a listing says what, else everything
 * (named under prefix). A full read after a partial one gets a new stage
 * (*stage, *stage_fd; *stage_fd < 0 when that failed). */
static int read_out(sm_workspace_sync *s, const side *d, int root_fd, int valid,
                    const char *prefix, ws_extract *x, char **stage, int *stage_fd,
                    ws_manifest *listing, int *listed, sm_error *err) {
  int rc = 0;
  if (d->ops->local) {
    rc = d->ops->list(d, s, valid ? s->base.total_size : 0, listing, err);
    *listed = rc == 0;
  }
  int done = 0;
  if (rc == 0 && valid) {
    sm_error perr = SM_ERROR_INIT;
    int prc = fetch_changed(s, d, x, listing, listed, &perr);
    if (prc == 0) {
      done = 1;
      s->last_out_listed = 1;
    } else if (prc == SM_EUNSAFE || (prc == SM_ETOOBIG && x->entries + x->bytes_staged > 0)) {
      *err = perr;
      rc = prc;
    } else {
      /* The listing could not be had or used: copy everything instead. */
      sm_log(SM_LOG_DEBUG, "workspace: full copy out (%s)", perr.message);
      rc = restage(s, root_fd, valid, x, stage, stage_fd, err);
      if (rc) return rc;
    }
  }
  if (rc == 0 && !done) {
    x->strip = prefix;
    /* A listing that was had but not used (too many changes) still tells
     * which files changed behind the same size and mtime. */
    x->listing = *listed ? listing : NULL;
    rc = d->ops->fetch(d, s, x, *listed ? listing : NULL, NULL, prefix, err);
  }
  return rc;
}

/* Files the reads found changed behind the manifest's size, mtime and mode
 * (hashed as they streamed by, not staged: ws_extract.verify) are read
 * again, this time staged: each alone when they are few, else in one more
 * full read that skips every other entry. One gone meanwhile counts as
 * deleted by the tool. */
static int read_again(sm_workspace_sync *s, const side *d, ws_extract *x, ws_manifest *listing,
                      const char *prefix, sm_error *err) {
  if (x->again.n == 0) return 0;
  sm_log(SM_LOG_DEBUG, "workspace: %zu file(s) changed behind their size and mtime: read again",
         x->again.n);
  x->only = &x->again;
  int rc = 0;
  if (x->again.n <= d->ops->max_roots) {
    for (size_t i = 0; rc == 0 && i < x->again.n; i++) {
      const char *p = x->again.v[i].path;
      const char *slash = strrchr(p, '/');
      x->strip = slash ? slash + 1 : p;
      x->place = p;
      rc = d->ops->fetch(d, s, x, listing, p, "", err);
      if (rc == SM_ENOTFOUND) {
        sm_error_clear(err);
        rc = 0;
      }
    }
    x->place = NULL;
  } else {
    x->strip = prefix;
    rc = d->ops->fetch(d, s, x, listing, NULL, prefix, err);
  }
  x->only = NULL;
  return rc;
}

/* After a copy out that went well: the sandbox's side (x->box, taken) is
 * now the reference for both directions, nheld (taken) what it holds that
 * the host did not get; listing (or NULL) what is known of its times. */
static int commit_out(sm_workspace_sync *s, const sm_workspace_target *t, ws_extract *x,
                      ws_manifest *nheld, const ws_manifest *listing, int64_t stamp) {
  ws_manifest nb = x->box;
  workspace_manifest_init(&x->box);
  workspace_manifest_dispose(&s->base);
  s->base = nb;
  s->disk_current = 0;
  s->have_base = 1;
  for (size_t i = 0; i < s->base.n; i++) {
    ws_entry *e = &s->base.v[i];
    if (e->state != WS_SAME) workspace_entry_mark_racy(e, stamp, e->state == WS_CHANGED, 1);
    e->state = WS_SAME;
  }
  workspace_manifest_dispose(&s->held);
  s->held = *nheld;
  workspace_probe_record(&s->base, listing, -1);
  workspace_probe_record(&s->held, listing, -1);
  return workspace_manifest_set_target(&s->base, workspace_sync_target_container(t),
                                       t->sandbox_path);
}

/* The digest the manifest gives, worked out while the sandbox works out
 * its own. */
typedef struct expect_job {
  ws_expected *x;
  char hex[65];
  uint64_t count;
} expect_job;

static void *expect_main(void *ud) {
  expect_job *j = ud;
  workspace_expected_digest(j->x, j->hex, &j->count);
  return NULL;
}

/* The copy out's quick check (unchanged.c): 1 when the sandbox's digest is
 * the one the manifest gives, so there is nothing to fetch, apply or
 * report; 0 when the listing must decide (no agent session, a manifest
 * the check cannot vouch for, no digest, another one). */
static int quick_unchanged(const sm_workspace_sync *s, const sm_workspace_target *t) {
  if (!t->engine || t->run == NULL) return 0;
  int64_t t0 = workspace_now_ns();
  expect_job j = {0};
  if (!workspace_expected_collect(&s->base, &s->held, &s->excludes, &j.x)) {
    sm_log(SM_LOG_DEBUG, "workspace: no quick check (the manifest has entries only a listing "
           "can show unchanged)");
    return 0;
  }
  pthread_t th;
  int threaded = common_thread_start(&th, NULL, expect_main, &j) == 0;
  char got[65];
  uint64_t ngot = 0;
  sm_error derr = SM_ERROR_INIT;
  int drc = workspace_box_digest(t, s->max_entries, &s->excludes, got, &ngot, &derr);
  if (threaded) pthread_join(th, NULL);
  else expect_main(&j);
  workspace_expected_free(j.x);
  if (drc != 0) {
    sm_log(SM_LOG_DEBUG, "workspace: no digest from the sandbox (%s)", derr.message);
    return 0;
  }
  int same = ngot == j.count && strcmp(got, j.hex) == 0;
  sm_log(SM_LOG_DEBUG,
         "workspace: the sandbox's digest of %" PRIu64 " entries %s the "
         "manifest's (%" PRId64 " ms)",
         ngot, same ? "is" : "is not", (workspace_now_ns() - t0) / 1000000);
  return same;
}

/* Saves the manifest and logs what the copy out did not apply. */
static int finish_out(sm_workspace_sync *s, sm_error *err) {
  if (s->manifest_path && workspace_manifest_save(&s->base, &s->held, s->manifest_path, err) != 0)
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  for (size_t i = 0; i < s->refused.n; i++) {
    char lp[4096];
    sm_log(SM_LOG_DEBUG, "workspace: not applied to the host: '%s' (%s)",
           workspace_log_path(&s->redact, s->refused.v[i].path, lp, sizeof lp),
           workspace_reason_text(workspace_reason_parse(s->refused.v[i].reason)));
  }
  s->disk_current = s->manifest_path != NULL;
  sm_log(SM_LOG_DEBUG, "workspace: copied out %" PRId64 " changes, %" PRId64 " bytes",
         s->entries_out, s->bytes_out);
  return 0;
}

int sm_workspace_sync_out(sm_workspace_sync *s, const sm_workspace_target *t,
                          char ***files_changed, size_t *n_files_changed, char ***conflicts,
                          size_t *n_conflicts, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  if (files_changed) *files_changed = NULL;
  if (n_files_changed) *n_files_changed = 0;
  if (conflicts) *conflicts = NULL;
  if (n_conflicts) *n_conflicts = 0;
  int rc = workspace_sync_check_target(t, err);
  if (rc) return rc;
  s->bytes_out = s->entries_out = 0;
  s->abort_spent = 0;
  s->last_out_listed = 0;
  s->last_out_quick = 0;
  workspace_refusal_list_clear(&s->refused);
  int64_t stamp = workspace_now_ns();
  cleanup_fd int root_fd = workspace_sync_open_host(s, err);
  if (root_fd < 0) return root_fd;
  int valid = workspace_sync_base_matches(s, t);
  if (valid && quick_unchanged(s, t)) {
    /* Nothing changed: the base and held sets stand as they are. */
    s->last_out_quick = 1;
    if (s->manifest_path && !s->disk_current) return finish_out(s, err);
    return 0;
  }
  if (!valid)
    sm_log(SM_LOG_WARN, "workspace: no copy-in record for this sandbox; nothing is deleted on "
           "the host and every file counts as new");
  side d;
  workspace_side_init(&d, t);
  cleanup_fd int sfd = -1;
  if (workspace_side_open(&d, &sfd, err) != 0)
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  cleanup_free char *stage = NULL;
  int stage_fd = workspace_stage_create(root_fd, s->host_dir, &stage, err);
  if (stage_fd < 0) return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  ws_extract x;
  extract_setup(&x, s, root_fd, stage_fd, valid);
  char prefix[256];
  last_component(t->sandbox_path, prefix, sizeof prefix);
  ws_manifest listing;
  workspace_manifest_init(&listing);
  int listed = 0;
  rc = read_out(s, &d, root_fd, valid, prefix, &x, &stage, &stage_fd, &listing, &listed, err);
  if (rc == 0 && stage_fd >= 0) rc = read_again(s, &d, &x, listed ? &listing : NULL, prefix, err);
  if (stage_fd < 0) {
    workspace_manifest_dispose(&listing);
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  }
  /* Per entry: what the host does not get is refused, the rest applies. */
  if (rc == 0) rc = workspace_refusal_sockets(&x, listed ? &listing : NULL, err);
  if (rc == 0) rc = workspace_refusal_decide(&x, s->protect, valid, err);
  ws_apply_result res = {0};
  if (rc == 0) rc = workspace_apply(root_fd, &x, 1, valid, &res, err);
  workspace_stage_remove(root_fd, stage, stage_fd);
  ws_manifest nheld;
  workspace_manifest_init(&nheld);
  if (rc == 0) rc = workspace_refusal_report(&x, &s->refused, err);
  if (rc == 0) rc = workspace_refusal_hold(&x.box, valid ? &s->base : NULL, &nheld, err);
  if (rc) {
    workspace_manifest_dispose(&nheld);
    workspace_manifest_dispose(&listing);
    workspace_apply_result_dispose(&res);
    workspace_extract_dispose(&x);
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  }
  s->bytes_out = x.bytes_staged;
  s->entries_out = res.entries;
  rc = commit_out(s, t, &x, &nheld, listed ? &listing : NULL, stamp);
  workspace_manifest_dispose(&listing);
  if (rc) rc = sm_error_set(err, rc, "out of memory");
  if (rc == 0) rc = sorted_copy(res.changed, res.n_changed, files_changed, n_files_changed, err);
  if (rc == 0) rc = sorted_copy(res.conflicts, res.n_conflicts, conflicts, n_conflicts, err);
  workspace_apply_result_dispose(&res);
  workspace_extract_dispose(&x);
  if (rc) return rc;
  return finish_out(s, err);
}

/* ---- for tests and fuzzing ---- */

int workspace_unpack_dir(const char *dest_dir, sm_read_fn reader, void *ud,
                         const sm_workspace_limits *limits, ws_apply_result *res,
                         ws_refusal_list *refused, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  cleanup_fd int fd = open(dest_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "%s", dest_dir);
  cleanup_free char *stage = NULL;
  int stage_fd = workspace_stage_create(fd, dest_dir, &stage, err);
  if (stage_fd < 0) return stage_fd;
  ws_extract x;
  workspace_extract_init(&x);
  x.stage_fd = stage_fd;
  x.root_fd = fd;
  if (limits && limits->max_bytes > 0) x.max_bytes = limits->max_bytes;
  if (limits && limits->max_entries > 0) x.max_entries = limits->max_entries;
  if (limits && limits->max_path > 0) x.max_path = limits->max_path;
  int rc = workspace_extract_run(&x, reader, ud, err);
  if (rc == 0) rc = workspace_refusal_decide(&x, NULL, 0, err);
  if (rc == 0) rc = workspace_apply(fd, &x, 1, 0, res, err);
  if (rc == 0 && refused) rc = workspace_refusal_report(&x, refused, err);
  workspace_stage_remove(fd, stage, stage_fd);
  workspace_extract_dispose(&x);
  return rc;
}
