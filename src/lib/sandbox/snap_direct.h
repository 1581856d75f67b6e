/* Internal to src/lib/sandbox: a snapshot's tar of /workspace made by
 * sandman from the sandbox's volume on the host (snap_direct.c), instead
 * of the engine's archive, when that is safe: the engine on this machine
 * (a unix socket), not rootless or user-namespaced, /workspace a local
 * volume whose folder sandman can open, and that folder the very one the
 * engine sees (its mode, size and mtime to the nanosecond as the engine's stat of
 * the container's /workspace). The tar is the one the engine's archive of
 * "/workspace/." would be: entries "./..." in the same order, numeric
 * owners, full modes, hard links as links to the first name, symlinks as
 * symlinks (never followed), fifos and devices as headers, sockets left out.
 * docs/state.md says when it is used and what was measured. */
#ifndef SANDMAN_SANDBOX_SNAP_DIRECT_H
#define SANDMAN_SANDBOX_SNAP_DIRECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>

/* For tests only: a folder opened in place of the volume's Source, so a
 * test can make the identity check fail and see the engine path taken. */
#define SANDBOX_SNAP_DIRECT_TEST_SOURCE_ENV "SANDMAN_TEST_SNAPSHOT_DIRECT_SOURCE"

/* Whether the engine at host (sm_engine_host), whose GET /info is info,
 * lets the container inspected as insp have its /workspace read on the
 * host: 1 with the volume's folder in source, else 0 with why (both
 * buffers the caller's). Looks at nothing but its arguments. */
int sandbox_snap_direct_eligible(const char *host, json_object *info, json_object *insp,
                                 char *source, size_t source_len, char *why, size_t why_len);

/* Is the folder stat'ed as st the engine's folder stat'ed as engine (mode,
 * size and mtime to the nanosecond)? 1, else 0 with why. */
int sandbox_snap_direct_same(const struct stat *st, const sm_engine_path_info *engine, char *why,
                             size_t why_len);

/* Opens source as a folder (never through a final symlink) and checks it
 * against the engine's stat: the descriptor, the caller's, or -1 with why.
 * The test-only SANDBOX_SNAP_DIRECT_TEST_SOURCE_ENV replaces source. */
int sandbox_snap_direct_open(const char *source, const sm_engine_path_info *engine, char *why,
                             size_t why_len);

/* Writes the tar of the folder open as root at path (a temporary file
 * beside it, fsync, rename), every byte also to tee (a pipe's write end,
 * or -1; not closed here; dropped when it fails, as sandbox_ws_save_tee
 * does). *bytes gets its size. A tree the engine's archive should read
 * instead (deeper than SANDBOX_SNAP_DIRECT_DEPTH_MAX, a path longer than
 * PATH_MAX, another filesystem inside it, more than 64 MiB of names in one
 * folder or of hard-linked files' first names) sets *fallback and fails with
 * nothing left at path; anything else that fails (an entry changed while
 * the sandbox is frozen, a read error) fails the snapshot. */
#define SANDBOX_SNAP_DIRECT_DEPTH_MAX 128
int sandbox_snap_direct_save(int root, const char *path, int tee, int64_t *bytes, int *fallback,
                             sm_error *err);

#endif
