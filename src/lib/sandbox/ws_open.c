/* See ws_open.h. A one-shot call in a keyed sandbox waits ~40 ms for its
 * agent session (an engine exec) with nothing else to do; the host walk of
 * a 10,000-file workspace costs ~15 ms: done meanwhile, it is off the
 * call's path. It starts only once the call holds its sandbox (its busy
 * lock), so no other call's copy out applies to the host folder between
 * the walk and this call's copy in. */
#include <stdio.h>
#include <string.h>

#include <sandman/log.h>

#include "common/thread.h"
#include "sandbox/ws_open.h"

static void merge_excludes(const sm_run_request *req, sm_string_list *out) {
  *out = req->settings.excludes;
  if (req->extra_excludes)
    for (size_t i = 0; i < req->extra_excludes->n; i++)
      if (sm_string_list_add(out, req->extra_excludes->items[i], NULL) != 0) break;
}

/* walk: the host folder walked too, while the manifest is read. */
static int open_state(const sm_run_request *req, const char *manifest, int walk,
                      sm_workspace_sync **out, sm_error *err) {
  sm_string_list excludes;
  merge_excludes(req, &excludes);
  sm_workspace_sync *ws = NULL;
  const char *m = manifest && manifest[0] ? manifest : NULL;
  int rc = walk ? sm_workspace_sync_new_walked(&ws, req->workspace, m, &excludes, NULL, err)
                : sm_workspace_sync_new(&ws, req->workspace, m, &excludes, NULL, err);
  if (rc == 0) rc = sm_workspace_sync_set_protect(ws, &req->settings.protect, err);
  if (rc == 0) rc = sm_workspace_sync_set_redact(ws, req->secret_env, req->n_secret_env, err);
  if (rc) {
    sm_workspace_sync_free(ws);
    ws = NULL;
  }
  *out = ws;
  return rc;
}

int sandbox_ws_open_now(const sm_run_request *req, const char *manifest, sm_workspace_sync **out,
                        sm_error *err) {
  return open_state(req, manifest, 0, out, err);
}

static void *open_main(void *ud) {
  sandbox_ws_open *o = ud;
  if (o->request_id[0]) sm_log_set_request_id(o->request_id);
  o->rc = open_state(o->req, o->manifest, o->prescan, &o->ws, &o->err);
  return NULL;
}

int sandbox_ws_open_start(sandbox_ws_open *o, const sm_run_request *req, const char *manifest) {
  memset(o, 0, sizeof *o);
  o->req = req;
  o->prescan = 1;
  snprintf(o->manifest, sizeof o->manifest, "%s", manifest ? manifest : "");
  sm_error_clear(&o->err);
  const char *rid = sm_log_request_id();
  if (rid) snprintf(o->request_id, sizeof o->request_id, "%s", rid);
  if (common_thread_start(&o->th, NULL, open_main, o) != 0) return -1;
  o->running = 1;
  return 0;
}

int sandbox_ws_open_finish(sandbox_ws_open *o, sm_workspace_sync **out, sm_error *err) {
  *out = NULL;
  if (!o->running) return sm_error_set(err, SM_EINVAL, "no workspace state being opened");
  pthread_join(o->th, NULL);
  o->running = 0;
  if (o->rc) {
    *err = o->err;
    return o->rc;
  }
  *out = o->ws;
  o->ws = NULL;
  return 0;
}

void sandbox_ws_open_drop(sandbox_ws_open *o) {
  if (o->running) pthread_join(o->th, NULL);
  o->running = 0;
  sm_workspace_sync_free(o->ws);
  o->ws = NULL;
}
