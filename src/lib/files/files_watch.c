/* File events of a keyed sandbox's folder (sm_files_watch, sandman/files.h):
 * one long helper call of `sandman-agent watch` (agent/watch.h), whose
 * output is parsed as it comes (watch_wire.c). */
#include <stdio.h>
#include <string.h>

#include <sandman/files.h>

#include "common/text.h"
#include "files/files_internal.h"
#include "files/watch_wire.h"
#include "files/files_wire.h"

typedef struct watching {
  const sm_files_watch_opts *o;
  const sm_run_result *call;
  watch_wire wire;
  volatile int *cancel; /* the call's: set to end it when the parse stops */
  int rc;         /* the first error of the parser or a handler */
  sm_error rc_err;
} watching;

static int on_ready(void *ud) {
  watching *w = ud;
  return w->o->on_ready ? w->o->on_ready(w->o->ud, w->call) : 0;
}

static int on_event(void *ud, const sm_watch_event *ev) {
  watching *w = ud;
  return w->o->on_event ? w->o->on_event(w->o->ud, ev) : 0;
}

static int on_output(void *ud, int stream, const char *data, size_t len) {
  watching *w = ud;
  if (stream != 1 || w->rc) return 0;
  w->rc = files_watch_wire_feed(&w->wire, data, len, &w->rc_err);
  if (w->rc && w->rc_err.code == 0)
    sm_error_set(&w->rc_err, w->rc, "stopped by the receiver (%s)", sm_error_name(w->rc));
  if (w->rc) *w->cancel = 1; /* nothing more is read: the call ends */
  return w->rc ? -1 : 0;
}

/* The call's outcome as one code: what the parser or a handler met, the
 * agent's refusal, the call's own failure, else the watch's end. */
static int outcome(watching *w, const sm_run_request *req, const sm_run_result *r, int *ended,
                   sm_error *err) {
  if (w->rc) {
    if (err) *err = w->rc_err;
    return w->rc;
  }
  if (w->wire.failed) {
    int rc = sm_error_set(err, files_wire_error_code(w->wire.errname), "%s", w->wire.message);
    if (err) err->sys_errno = files_wire_errno(w->wire.errname);
    return rc;
  }
  if (req->cancel && *req->cancel) return sm_error_set(err, SM_ECANCELLED, "the watch was cancelled");
  if (r->failure_kind == SM_FAIL_TIMEOUT) return sm_error_set(err, SM_ETIMEOUT, "the watch timed out");
  if (r->failure_kind != SM_FAIL_NONE && r->failure_kind != SM_FAIL_TOOL)
    return sm_error_set(err, r->failure_kind == SM_FAIL_ENGINE ? SM_EUNREACHABLE : SM_ESANDBOX,
                        "%s", r->error[0] ? r->error : "the watch's call failed");
  if (w->wire.ended) {
    *ended = 1;
    return 0;
  }
  return sm_error_set(err, SM_ESANDBOX, "the watch ended in the sandbox (exit %d)%s%.*s",
                      r->exit_code, r->stderr_len ? ": " : "",
                      (int)(r->stderr_len > 512 ? 512 : r->stderr_len),
                      r->stderr_data ? r->stderr_data : "");
}

static const char *kind_name(sm_watch_kind k) {
  return k == SM_WATCH_CREATED ? "created" : k == SM_WATCH_MODIFIED ? "modified"
       : k == SM_WATCH_DELETED ? "deleted" : k == SM_WATCH_MOVED ? "moved" : "overflow";
}

json_object *sm_watch_event_to_json(const sm_watch_event *ev, long long dropped) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "event", json_object_new_string(kind_name(ev->kind)));
  if (ev->kind == SM_WATCH_OVERFLOW) {
    json_object_object_add(o, "dropped", dropped < 0 ? NULL : json_object_new_int64(dropped));
    return o;
  }
  const char *p = ev->kind == SM_WATCH_MOVED && ev->to ? ev->to : ev->path;
  json_object_object_add(o, "path", common_json_text(p, strlen(p)));
  if (ev->kind == SM_WATCH_MOVED && ev->to) {
    json_object_object_add(o, "from", common_json_text(ev->path, strlen(ev->path)));
    json_object_object_add(o, "to", common_json_text(ev->to, strlen(ev->to)));
  }
  json_object_object_add(o, "dir", json_object_new_boolean(ev->is_dir));
  return o;
}

int sm_files_watch(sm_runner *runner, const sm_run_request *base, const char *path,
                   const sm_files_watch_opts *opts, int *ended, sm_run_result *call,
                   sm_error *err) {
  *ended = 0;
  if (base->cancel == NULL)
    return sm_error_set(err, SM_EINVAL, "a watch needs a cancel flag (it runs until it is ended)");
  char canon[SM_FILES_PATH_MAX + 1];
  int rc = sm_files_path(path, canon, sizeof canon, err);
  if (rc) return rc;
  sm_run_result local;
  sm_run_result *r = call ? call : &local;
  memset(r, 0, sizeof *r);
  watching w;
  memset(&w, 0, sizeof w);
  w.o = opts;
  w.call = r;
  w.cancel = base->cancel;
  files_watch_wire_init(&w.wire, on_ready, on_event, &w);
  const char *argv[] = {"watch", "/workspace", canon, opts->recursive ? "r" : "-"};
  sm_run_request req;
  files_helper_request(&req, base, argv, 4, on_output, &w);
  req.workspace = NULL; /* a watch copies nothing in or out */
  rc = sm_run(runner, &req, r, err);
  if (rc == 0 || w.rc) rc = outcome(&w, &req, r, ended, err);
  else if (*req.cancel) rc = sm_error_set(err, SM_ECANCELLED, "the watch was cancelled");
  if (rc) sm_error_wrap(err, "watch %s", canon);
  if (r == &local) sm_run_result_dispose(&local);
  return rc;
}
