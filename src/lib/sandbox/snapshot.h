/* Internal to src/lib/sandbox: taking a snapshot (snapshot.c) of a keyed
 * sandbox; where snapshots live is snap_store.h's. */
#ifndef SANDMAN_SANDBOX_SNAPSHOT_H
#define SANDMAN_SANDBOX_SNAPSHOT_H

#include <sandman/keep.h>

#include "sandbox/context.h"
#include "sandbox/rest.h"

/* One snapshot being taken. */
typedef struct snapshot_take {
  sandbox_rest_op op;
  char id[SM_ENGINE_ID_MAX]; /* the sandbox's container */
  sm_snapshot snap;
  int committed;             /* its image was made (removed again on failure) */
  /* Commits container id (the sandbox's, or its old one for a memory
   * snapshot: snap_memory.c) as the snapshot's image, sets committed. */
  int (*commit)(struct snapshot_take *t, const char *id, sm_error *err);
  json_object *manifest;     /* hashed while /workspace was read (NULL: from the tar after) */
  double ms_commit, ms_workspace, ms_manifest; /* the steps' times, for the debug log */
  int direct;                /* /workspace was read from its volume on the host (snap_direct.h) */
} snapshot_take;

int sandbox_snapshot_take(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                          const sm_snapshot_options *o, sm_snapshot *out, sm_error *err);

#endif
