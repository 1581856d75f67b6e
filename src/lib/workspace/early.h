/* The first copy into a fresh sandbox sends everything and clears nothing
 * first, so its upload starts before the scan, from a deferred packer (its
 * first entry is "./", which the engine skips), in a thread of its own: the
 * engine's setup for an archive (mounts, starting its unpacker) then
 * overlaps the scan. */
#ifndef SANDMAN_WORKSPACE_EARLY_H
#define SANDMAN_WORKSPACE_EARLY_H

#include <pthread.h>
#include <stdint.h>

#include <sandman/error.h>
#include <sandman/workspace.h>

#include "common/buf.h"
#include "workspace/prelist.h"
#include "workspace/ws.h"

typedef struct ws_early_put {
  pthread_t th;
  ws_packer *pk;
  const sm_workspace_target *t;
  ws_prelist *pre; /* started before the upload, or NULL */
  common_buf *listing; /* the unpacker's listing of what it wrote, or NULL */
  int rc;
  sm_error err;
  char request_id[64];
} ws_early_put;

/* 0 when the upload runs (it uses t->engine until workspace_early_join); budget:
 * the bytes it may send before it aborts (negative: no limit). pre: the
 * listing the upload waits to be attached first, or NULL. listing: where
 * the unpacker's listing goes (workspace_box_put), or NULL. */
int workspace_early_start(ws_early_put *u, const sm_workspace_target *t, int root_fd,
                          int64_t budget, ws_prelist *pre, common_buf *listing);
/* Waits for the upload; its result is u->rc and u->err (the packer's own
 * error, when it has one, says more). u->pk stays for its stats. */
void workspace_early_join(ws_early_put *u);
/* Ends an upload that is not wanted (the scan failed): the engine gets a
 * broken stream and extracts nothing. */
void workspace_early_cancel(ws_early_put *u, int code);

#endif
