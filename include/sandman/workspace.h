/* sandman: workspace sync between a host directory and a sandbox.
 *
 * Copy in: the host directory is written as a tar stream (libarchive)
 * straight into the engine's archive upload. Copy out: the sandbox's tar
 * stream is read (libarchive), checked entry by entry, staged, then applied
 * file by file with rename so an interrupted sync leaves the host as it was.
 * A manifest (path, size, mtime, mode, content hash) kept per sandbox makes
 * both directions incremental.
 *
 * Mode none uses the same code with a scratch directory on the host standing
 * for the sandbox's /workspace. */
#ifndef SANDMAN_WORKSPACE_H
#define SANDMAN_WORKSPACE_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sm_workspace_limits {
  int64_t max_bytes;     /* total file bytes per direction; 0: 1 GiB */
  int64_t max_entries;   /* 0: 100000 */
  int64_t max_path;      /* bytes of one relative path; 0: 4096 */
} sm_workspace_limits;

/* Where the workspace lives on the sandbox side: a container path reached
 * through the engine, or (mode none) a directory on the host. */
typedef struct sm_workspace_target {
  sm_engine *engine;          /* NULL for a host scratch directory */
  const char *container_id;   /* with engine */
  const char *sandbox_path;   /* "/workspace" with engine; the scratch dir without */
  int uid;                    /* owner given to files copied in (1000) */
  int gid;
  /* Optional: runs a helper command (listing, deletes) in the sandbox
   * instead of an engine exec, as the sandbox's user (the sandbox layer
   * passes its agent session). stdin from in (NULL: none), output to out,
   * the exit code in *exit_code; 0, an error, or 1: not run, use an
   * engine exec instead. */
  int (*run)(void *run_ud, const char *const *argv, size_t argc, sm_read_fn in, void *in_ud,
             sm_output_fn out, void *out_ud, int *exit_code, sm_error *err);
  void *run_ud;
  /* 1 only when no process but sandman's own has run in the container and
   * none can start until the copy in returns (a per_tool sandbox made for
   * this call): the engine's archive upload (which runs as root and
   * follows links in the container) may then extract the copy in. 0, the
   * safe default: the copy in is extracted by `unpacker untar DIR` run as
   * the sandbox's user, so that no link a process of the sandbox plants,
   * even during the copy, can lead a write out of /workspace. */
  int untouched;
  /* The unpacker: sandman's agent binary in the sandbox. install (may be
   * NULL) puts it there when the copy in finds it missing. */
  const char *unpacker;
  int (*install)(void *install_ud, sm_error *err);
  void *install_ud;
  /* Optional (NULL: container_id): the sandbox whose /workspace volume
   * container_id mounts and works on (a leased call's own container). The
   * manifest names that sandbox, so the copy stays incremental and what
   * the sandbox holds (refusals) stays, as it does for its own calls. */
  const char *workspace_of;
} sm_workspace_target;

typedef struct sm_workspace_sync sm_workspace_sync;

/* An entry the tool changed that a copy out did not apply to the host (it
 * stays in the sandbox). reason: "protected", "link_outside",
 * "link_absolute", "device", "fifo", "socket", "special", "name_too_long",
 * "unsafe_path", "hard_link", "path_too_long" (docs/workspaces.md). */
typedef struct sm_workspace_refusal {
  const char *path;   /* workspace-relative, as the sandbox named it */
  const char *reason; /* static */
} sm_workspace_refusal;

/* host_dir: the user's workspace. manifest_path: where this sandbox's
 * manifest is kept (NULL: no incremental state, a full copy each time).
 * excludes: globs of paths not copied (may be NULL). */
SM_API int sm_workspace_sync_new(sm_workspace_sync **out, const char *host_dir,
                                 const char *manifest_path, const sm_string_list *excludes,
                                 const sm_workspace_limits *limits, sm_error *err);
/* sm_workspace_sync_new, and the host folder walked (lstat only, nothing
 * read) for the next sm_workspace_sync_in, on a second thread while the
 * manifest is read: the copy in then compares this walk with the manifest
 * instead of walking again. A caller can make it while it waits for
 * something else (its agent session opening). A change on the host after
 * the walk reaches the sandbox on the next call. Only while the caller
 * holds the sandbox (no other call's copy out may apply in between). A
 * failed walk is forgotten (sm_workspace_sync_in walks again and says
 * why). */
SM_API int sm_workspace_sync_new_walked(sm_workspace_sync **out, const char *host_dir,
                                        const char *manifest_path,
                                        const sm_string_list *excludes,
                                        const sm_workspace_limits *limits, sm_error *err);
/* Host -> sandbox: only what changed since the manifest (all of it the first
 * time); files deleted on the host are deleted in the sandbox. */
SM_API int sm_workspace_sync_in(sm_workspace_sync *sync, const sm_workspace_target *target,
                                sm_error *err);
/* Sandbox -> host: what the tool changed, added or deleted, applied safely,
 * entry by entry: an entry not safe to write on the host, or a change to a
 * protected path, is refused (sm_workspace_sync_refused) and everything
 * else applies. Only a cap (bytes, entries, path length), a stream that is
 * not a valid tar, or a failure on the host fails the whole copy, and then
 * nothing is written. files_changed / conflicts: owned arrays of owned
 * strings (may be NULL). */
SM_API int sm_workspace_sync_out(sm_workspace_sync *sync, const sm_workspace_target *target,
                                 char ***files_changed, size_t *n_files_changed,
                                 char ***conflicts, size_t *n_conflicts, sm_error *err);
/* The entries the last copy out refused that were not refused the same way
 * before (a refusal is reported once, until the entry changes), sorted by
 * path. Borrowed: valid until the next copy or sm_workspace_sync_free. */
SM_API size_t sm_workspace_sync_refused(const sm_workspace_sync *sync,
                                        const sm_workspace_refusal **out);
/* What a reason means, in words ("a protected path ..."), for messages. */
SM_API const char *sm_workspace_refusal_text(const char *reason);
/* Globs whose changes (create, change, chmod, delete) never reach the
 * host; NULL or an empty list: none. A new sync starts with the built-in
 * list. SM_EINVAL names a bad glob. */
SM_API int sm_workspace_sync_set_protect(sm_workspace_sync *sync, const sm_string_list *globs,
                                         sm_error *err);
/* Values given to the call in secret ("NAME=VALUE", e.g. leased
 * credentials): the copy's log lines write them [REDACTED] where a path
 * the tool chose holds one (6 bytes or more, as the runner's scrubbing of
 * its answers). Copied; a new call replaces them. */
SM_API int sm_workspace_sync_set_redact(sm_workspace_sync *sync, const char *const *kv, size_t n,
                                        sm_error *err);
/* The built-in list (docs/workspaces.md says why each is there). */
SM_API void sm_workspace_protect_defaults(sm_string_list *out);
/* Checks one protect glob's syntax. */
SM_API int sm_workspace_protect_check(const char *glob, sm_error *err);
/* Bytes and entries sent in / applied out by the last sync (for logs). */
SM_API void sm_workspace_sync_stats(const sm_workspace_sync *sync, int64_t *bytes_in,
                                    int64_t *entries_in, int64_t *bytes_out, int64_t *entries_out);
SM_API void sm_workspace_sync_free(sm_workspace_sync *sync);
/* The manifest at path (a sync's manifest_path) of container old_container
 * now names new_container: its /workspace was carried into a new sandbox,
 * so the next copy stays incremental. A missing manifest, or one of
 * another container, is left as it is. */
SM_API int sm_workspace_manifest_retarget(const char *path, const char *old_container,
                                          const char *new_container, sm_error *err);

SM_API void sm_workspace_free_list(char **list, size_t n);

#ifdef __cplusplus
}
#endif
#endif
