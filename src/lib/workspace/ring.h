/* A copy out's download: the engine pushes the sandbox's tar into a bounded
 * ring (1 MiB) that an extractor thread pulls through libarchive. */
#ifndef SANDMAN_WORKSPACE_RING_H
#define SANDMAN_WORKSPACE_RING_H

#include <stdint.h>

#include <sandman/error.h>
#include <sandman/workspace.h>

#include "workspace/ws.h"

/* Streams the sandbox's tar of box_path (the whole workspace, or one path
 * under it) through the extractor x. budget: the bytes it may read before
 * it aborts (negative: no limit); *pushed: the bytes it read. */
int workspace_ring_fetch(const sm_workspace_target *t, const char *box_path, ws_extract *x,
                         int64_t budget, int64_t *pushed, sm_error *err);

#endif
