/* Commands run in the sandbox as the workspace's owner (through the sandbox
 * layer's own way in when the target has one, else an engine exec): the
 * deletions, links and clearing of a copy in, the sandbox's listing, and
 * the copy in's stream handed to the engine or to sandman's unpacker. */
#ifndef SANDMAN_WORKSPACE_BOX_H
#define SANDMAN_WORKSPACE_BOX_H

#include <stddef.h>
#include <stdint.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/workspace.h>

#include "common/buf.h"
#include "workspace/ws.h"

/* Runs argv in the sandbox through engine (t->engine or a clone of it); a
 * non-zero exit is an error quoting stderr (its code in *code_out, when
 * given). in (may be NULL) feeds stdin; out (may be NULL) receives stdout up
 * to its cap. */
int workspace_box_exec(sm_engine *engine, const sm_workspace_target *t, const char *const *argv,
                       size_t argc, sm_read_fn in, void *in_ud, common_buf *out, int *code_out,
                       sm_error *err);

/* Deletes paths (relative to t->sandbox_path, sorted) with batched rm -rf. */
int workspace_box_delete(const sm_workspace_target *t, char **paths, size_t n, sm_error *err);
/* Makes links (ws_entry.link at ws_entry.path), replacing what is there. */
int workspace_box_links(const sm_workspace_target *t, ws_entry **links, size_t n, sm_error *err);
/* Empties the sandbox's workspace. */
int workspace_box_wipe(const sm_workspace_target *t, sm_error *err);

/* The sandbox's listing (one exec of find and stat) through engine. With
 * in, the script first reads a line from stdin and lists only if it says
 * "go". */
int workspace_box_list(sm_engine *engine, const sm_workspace_target *t, int64_t max_entries,
                       int64_t max_path, sm_read_fn in, void *in_ud, ws_manifest *listing,
                       sm_error *err);
/* The listing of just the n entries sent (the whole listing when they are
 * many). */
int workspace_box_list_sent(const sm_workspace_target *t, int64_t max_entries, int64_t max_path,
                            ws_entry **sent, size_t n, ws_manifest *listing, sm_error *err);

/* `sandman-agent wsdigest` (t->unpacker) of the workspace, excludes
 * passed on: its digest and entry count. Only over the sandbox layer's
 * own way in (t->run, an agent session: the agent is there); an engine
 * exec per copy out would cost what the listing saves. SM_EUNSUPPORTED
 * without one; any other error when the agent gave no digest. */
int workspace_box_digest(const sm_workspace_target *t, int64_t max_entries,
                         const sm_string_list *excludes, char hex[65], uint64_t *count,
                         sm_error *err);

/* Hands a copy in's tar stream to the sandbox (upload.c says how);
 * *missing: sandman's unpacker is not installed (nothing was extracted).
 * listing (may be NULL): the unpacker's listing of what it wrote (the
 * format of workspace_box_list), left empty by the engine's upload or when it
 * would pass the buffer's cap. */
int workspace_box_put(const sm_workspace_target *t, sm_read_fn reader, void *ud, int *missing,
                      common_buf *listing, sm_error *err);
/* Installs sandman's unpacker through the target's hook. */
int workspace_box_install_unpacker(const sm_workspace_target *t, sm_error *err);

#endif
