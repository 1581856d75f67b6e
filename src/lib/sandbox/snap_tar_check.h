/* Internal to src/lib/sandbox: the shape a /workspace tar written by the
 * sandbox's own agent must have to be kept (snap_tar_check.c). The agent
 * runs as the sandbox's user, beside the tool's processes: what it sends
 * is untrusted, and a fork puts it back through the engine's archive
 * upload, which extracts as root and follows a link that an earlier entry
 * made ("d" -> "/etc", then "d/x"). So only the shape the agent writes
 * for a real folder is taken: "./" first, a folder, then entries whose
 * paths are clean ("./a/b", no "." or ".." part, none twice), each inside
 * a folder entry that came before it, regular files, folders and
 * symbolic links only, all with the owner of "./". Anything else: the
 * snapshot reads /workspace through the engine instead. */
#ifndef SANDMAN_SANDBOX_SNAP_TAR_CHECK_H
#define SANDMAN_SANDBOX_SNAP_TAR_CHECK_H

#include <stdint.h>

#include <archive_entry.h>
#include <json-c/json.h>

#include <sandman/error.h>

typedef struct sandbox_snap_tar_check {
  json_object *seen; /* path -> 1 for a folder, 0 for anything else */
  int64_t uid, gid;  /* those of "./" */
  int64_t entries;
} sandbox_snap_tar_check;

/* Checks the next entry; 0, or SM_EPROTOCOL saying what is wrong. */
int sandbox_snap_tar_check_entry(sandbox_snap_tar_check *c, struct archive_entry *ae, sm_error *err);
void sandbox_snap_tar_check_free(sandbox_snap_tar_check *c);

#endif
