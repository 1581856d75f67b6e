/* The sandbox's listing after an upload, started before it in a thread of
 * its own: creating and starting an exec costs the engine tens of ms, which
 * then overlap the scan, and the engine starts no exec in a container while
 * it extracts an archive into it. The exec's script waits on stdin and
 * lists only once told that the upload has ended well, so every ctime it
 * reads is after our writes. */
#ifndef SANDMAN_WORKSPACE_PRELIST_H
#define SANDMAN_WORKSPACE_PRELIST_H

#include <pthread.h>
#include <stdint.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/workspace.h>

#include "workspace/ws.h"

typedef struct ws_prelist {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int word;       /* 0: upload running; 1: list; -1: do not */
  int handed;     /* the word went to stdin */
  int attached;   /* the exec was started (or failed): an upload may begin */
  sm_engine *engine; /* a clone of t->engine, the thread's own */
  const sm_workspace_target *t;
  int64_t max_entries, max_path;
  ws_manifest listing;
  sm_error err;
  int rc;
  int64_t t_go;   /* when it was told to list */
} ws_prelist;

/* Starts the waiting listing; 0 when it runs. */
int workspace_prelist_start(ws_prelist *p, const sm_workspace_target *t, int64_t max_entries,
                            int64_t max_path);
/* Until the listing's exec is started: the engine holds a container while
 * it extracts an archive into it, and an exec start that came second would
 * wait for the whole upload and then cost its startup after it. */
void workspace_prelist_wait_attached(ws_prelist *p);
/* Tells the listing whether to run (ok) and waits for it; its result is
 * p->rc, p->listing and p->err. */
void workspace_prelist_finish(ws_prelist *p, int ok);
/* Ends a listing that is not wanted. */
void workspace_prelist_drop(ws_prelist *p);

#endif
