/* Internal to src/lib/sandbox: where snapshots live (snap_store.c). Each is a
 * folder <state>/snapshots/<key>/ holding meta.json (what sm_snapshot says,
 * and the source's config for a fork), workspace.tar and manifest.json,
 * and an image sandman-snapshot/<instance>:<key>. A snapshot is made in
 * <state>/snapshots/.tmp-<key>-XXXXXX and renamed into place last: a
 * folder under its key is a whole snapshot; anything else is a leftover
 * of a crash that the reap removes. */
#ifndef SANDMAN_SANDBOX_SNAP_STORE_H
#define SANDMAN_SANDBOX_SNAP_STORE_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/keep.h>

/* 1 when name may be a snapshot's name. */
int sandbox_snap_name_valid(const char *name);
/* The key of (instance, owner, name): the first 64 bits of a SHA-256, hex. */
void sandbox_snap_key(const char *instance, const char *owner, const char *name, char key[17]);
/* sandman-snapshot/<instance, lower case>:<key> */
void sandbox_snap_image_ref(const char *instance, const char *key, char *out, size_t len);
/* <state>/snapshots (made) and <state>/snapshots/<key>. */
int sandbox_snap_root(const char *state_dir, char *out, size_t len, sm_error *err);
int sandbox_snap_dir(const char *state_dir, const char *key, char *out, size_t len, sm_error *err);
/* A new temporary folder for the snapshot of key, held (flock) through
 * *lock_fd until the caller closes it (after its rename or its removal):
 * so a sweep tells a snapshot being made from one a crash left. */
int sandbox_snap_tmp_dir(const char *state_dir, const char *key, char *out, size_t len,
                         int *lock_fd, sm_error *err);
/* Removes what snapshots cut short left in root (<state>/snapshots): a
 * temporary folder no process holds, at once; another temporary file
 * (a diff's tar) once it is an hour old. Returns how many went. */
int sandbox_snap_tmp_sweep(const char *root, double now);
/* meta.json: the snapshot, its instance and the source's config (Config
 * with HostConfig inside, for a fork). */
int sandbox_snap_meta_write(const char *dir, const char *instance, const sm_snapshot *s,
                            json_object *config, sm_error *err);
int sandbox_snap_meta_read(const char *dir, char *instance, size_t ilen, sm_snapshot *out,
                           json_object **config, sm_error *err);
/* Snapshots of instance (and owner, NULL: any), newest first. */
int sandbox_snap_list(const char *state_dir, const char *instance, const char *owner,
                      sm_snapshot_list *out, sm_error *err);
/* One by name or key; another owner's is SM_ENOTFOUND. */
int sandbox_snap_find(const char *state_dir, const char *instance, const char *ref,
                      const char *owner, sm_snapshot *out, sm_error *err);
/* Removes a folder and everything in it. */
int sandbox_snap_remove_dir(const char *dir, sm_error *err);

#endif
