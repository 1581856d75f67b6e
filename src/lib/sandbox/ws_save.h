/* Internal to src/lib/sandbox: a keyed sandbox's /workspace saved as a tar in
 * the state directory and put back (ws_save.c): what a stopped or
 * hibernated sandbox keeps (its /workspace is a tmpfs, gone when its
 * container stops) and what a snapshot holds. */
#ifndef SANDMAN_SANDBOX_WS_SAVE_H
#define SANDMAN_SANDBOX_WS_SAVE_H

#include <stdint.h>

#include <sandman/engine.h>
#include <sandman/error.h>

/* The tar of container id's /workspace (the engine's archive, entries
 * "workspace/...") written whole at path: a temporary file beside it,
 * fsync, rename. *bytes (may be NULL) gets its size. cap: refused past it
 * (SM_ETOOBIG; 0: no cap). */
int sandbox_ws_save(sm_engine *e, const char *id, const char *path, int64_t cap, int64_t *bytes,
                    sm_error *err);
/* The same, with the tar's entries named "./..." (the contents of
 * /workspace), and every byte of it also written to tee (a pipe's write
 * end, or -1) as it comes: a reader of tee sees the tar while it is being
 * saved. tee is not closed here. */
int sandbox_ws_save_tee(sm_engine *e, const char *id, const char *path, int64_t cap, int tee,
                        int64_t *bytes, sm_error *err);
/* What writes a tar through writer(writer_ud, ...) (a writer that fails
 * returns -1): 0 or an error. */
typedef int (*sandbox_ws_producer)(void *ud, sm_write_fn writer, void *writer_ud, sm_error *err);
/* The tar produce writes, saved whole at path as sandbox_ws_save_tee saves
 * the engine's (a temporary file beside it, fsync, rename; every byte also
 * to tee; SM_ETOOBIG past cap, 0: none); nothing left at path when it
 * fails. */
int sandbox_ws_save_produced(const char *path, int64_t cap, int tee, sandbox_ws_producer produce,
                             void *produce_ud, int64_t *bytes, sm_error *err);
/* Puts the tar at path (either kind) back into container id's /workspace
 * (created or running; the volume must be mounted: a running container or
 * one beside it), owners and modes as saved. */
int sandbox_ws_restore(sm_engine *e, const char *id, const char *path, sm_error *err);

#endif
