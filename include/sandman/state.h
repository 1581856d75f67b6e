/* sandman: crash-safe local state beside the engine's labels.
 *
 * Busy: a call in flight holds a shared flock(2) on
 * <state>/busy/<sandbox-name>.lock for its whole duration. The kernel drops
 * the lock when the process dies, so a crash never leaves a sandbox marked
 * busy. Reap takes the exclusive lock (non-blocking) before removing: if it
 * cannot, the sandbox is busy; while reap holds it, no call can start there.
 *
 * Last used: <state>/last-used/<sandbox-name> holds an epoch time, replaced
 * atomically (write to a temporary file, fsync, rename).
 *
 * Several sandman processes share the directory safely. Labels on the
 * engine's objects stay the truth about which sandboxes exist. */
#ifndef SANDMAN_STATE_H
#define SANDMAN_STATE_H

#include <sandman/export.h>

#include <stddef.h>

#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sm_state_lock sm_state_lock;

/* state_dir: NULL means the default (sm_state_default_dir). Directories are
 * created (0700) on demand. */
/* Blocks until shared (busy) ownership is had, e.g. while a reap of the same
 * sandbox finishes. */
SM_API int sm_state_busy_acquire(const char *state_dir, const char *sandbox_name,
                                 sm_state_lock **out, sm_error *err);
/* Shared, without waiting: SM_EBUSY at once while someone holds the
 * sandbox alone (a reap, a pause putting it to rest). */
SM_API int sm_state_busy_try(const char *state_dir, const char *sandbox_name, sm_state_lock **out,
                             sm_error *err);
/* Exclusive, for reaping/removing: SM_EBUSY at once if a call is in flight. */
SM_API int sm_state_exclusive_try(const char *state_dir, const char *sandbox_name,
                                  sm_state_lock **out, sm_error *err);
/* Blocking exclusive lock on an arbitrary key (e.g. "create-<scope key>"):
 * serialises creation of one sandbox across processes. */
SM_API int sm_state_key_lock(const char *state_dir, const char *key, sm_state_lock **out,
                             sm_error *err);
/* Non-blocking exclusive lock on a key: SM_EBUSY at once if another holds
 * it (e.g. "reap-<sandbox>": two reapers never work on one sandbox). */
SM_API int sm_state_key_try(const char *state_dir, const char *key, sm_state_lock **out,
                            sm_error *err);
SM_API void sm_state_unlock(sm_state_lock *lock);
/* Releases the lock and removes its file, when what it describes is gone
 * (a removed sandbox): only if this process can hold it exclusively (a
 * shared hold is converted, without waiting); else the file stays for the
 * last holder or sm_state_forget. Lockers that waited on the removed file
 * lock a new one: see state.c. */
SM_API void sm_state_unlock_remove(sm_state_lock *lock);
/* 1 if a call holds the sandbox, 0 if not. */
SM_API int sm_state_is_busy(const char *state_dir, const char *sandbox_name);

SM_API int sm_state_touch(const char *state_dir, const char *sandbox_name, double when,
                          sm_error *err);
/* Epoch seconds, or -1 when never recorded. */
SM_API double sm_state_last_used(const char *state_dir, const char *sandbox_name);
/* Drops the files kept for a removed sandbox: its last-used time, its
 * workspace manifest and the lock files no process holds (missing files
 * are fine). */
SM_API void sm_state_forget(const char *state_dir, const char *sandbox_name);
/* The sandbox names that have a last-used time recorded, so that files of
 * sandboxes gone from the engine can be dropped. The caller frees the list
 * with sm_state_names_free. A missing directory is an empty list. */
SM_API int sm_state_known(const char *state_dir, char ***out_names, size_t *out_n, sm_error *err);
SM_API void sm_state_names_free(char **names, size_t n);

/* $SANDMAN_STATE_DIR, else /var/lib/sandman for root, else
 * $XDG_STATE_HOME/sandman or ~/.local/state/sandman. Static storage
 * is not used: the result is written to buf. */
SM_API int sm_state_default_dir(char *buf, size_t len, sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
