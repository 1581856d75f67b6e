/* Internal to src/lib/sandbox: snapshots that keep their processes'
 * memory (snap_memory.c, `sandbox snapshot --memory`, docs/state.md):
 * the engine's checkpoint taken as a hibernate takes it, kept in the
 * snapshot's folder, and a fork or rollback restored from it. */
#ifndef SANDMAN_SANDBOX_SNAP_MEMORY_H
#define SANDMAN_SANDBOX_SNAP_MEMORY_H

#include <sandman/keep.h>

#include "sandbox/context.h"
#include "sandbox/snapshot.h"

/* The checkpoint's folder in a snapshot's folder. */
#define SANDBOX_SNAP_CHECKPOINT "checkpoint"

/* The snapshot's layer, /workspace and checkpoint of t's sandbox (running
 * or frozen, held), all of one moment, into folder tmp: the sandbox is
 * hibernated (its layer committed and its checkpoint copied before its
 * old container goes) and restored at once, so it goes on running in a
 * successor container, as after a hibernate and a resume. SM_EUNSUPPORTED
 * where hibernate is refused (the same words), the sandbox as it was. */
int sandbox_snap_memory_take(snapshot_take *t, const char *tmp, sm_error *err);

/* Container id, created and not started (named `name`, its /workspace
 * volume empty), restored from the memory snapshot in folder dir: its
 * /workspace filled from dir's tar, its processes from dir's checkpoint. */
int sandbox_snap_memory_restore(const sandbox_ctx *ctx, sm_engine *e, const char *id,
                                const char *name, const char *dir, sm_error *err);

#endif
