/* Internal to src/lib/sandbox: a call's workspace state (its manifest loaded,
 * its protected list and redactions set), opened and the host folder
 * walked on a thread of its own while the call waits for its agent session
 * (ws_open.c). */
#ifndef SANDMAN_SANDBOX_WS_OPEN_H
#define SANDMAN_SANDBOX_WS_OPEN_H

#include <limits.h>
#include <pthread.h>

#include <sandman/run.h>
#include <sandman/workspace.h>

typedef struct sandbox_ws_open {
  const sm_run_request *req;
  char manifest[PATH_MAX]; /* "" for none (per_tool) */
  int prescan;             /* walk the host folder too */
  pthread_t th;
  int running;
  sm_workspace_sync *ws;   /* the result, once joined */
  int rc;
  sm_error err;
  char request_id[64];
} sandbox_ws_open;

/* Opens the call's workspace state in this thread (no walk): into *out. */
int sandbox_ws_open_now(const sm_run_request *req, const char *manifest, sm_workspace_sync **out,
                        sm_error *err);
/* Starts opening it, and walking the host folder (sm_workspace_sync_new_walked),
 * on a thread; 0 when it runs. Only while the call holds its sandbox. */
int sandbox_ws_open_start(sandbox_ws_open *o, const sm_run_request *req, const char *manifest);
/* Waits for it: the state into *out (the caller's), or its error. */
int sandbox_ws_open_finish(sandbox_ws_open *o, sm_workspace_sync **out, sm_error *err);
/* Waits for it and drops what it made (the call went another way). */
void sandbox_ws_open_drop(sandbox_ws_open *o);

#endif
