/* The workspace sync object as the workspace module's own files see it
 * (the public API holds it opaque), and the helpers on it that the copy in
 * (workspace_in.c), the copy out (workspace_out.c) and the sides
 * (workspace_side_engine.c, workspace_side_scratch.c) share; workspace.c
 * defines them. */
#ifndef SANDMAN_WORKSPACE_SYNC_H
#define SANDMAN_WORKSPACE_SYNC_H

#include <stdint.h>

#include <sandman/error.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "common/buf.h"
#include "workspace/ws.h"

struct sm_workspace_sync {
  char *host_dir;
  char *manifest_path;
  sm_string_list excludes;
  int64_t max_bytes, max_entries, max_path;
  ws_manifest base;      /* state of both sides after the last sync */
  ws_manifest held;      /* the sandbox's versions of what the host did not get */
  ws_protect *protect;   /* changes never applied to the host (NULL: none) */
  ws_refusal_list refused; /* what the last copy out reports as not applied */
  ws_redact redact;      /* values log lines must not quote */
  int have_base;         /* base describes base.container / base.root */
  int wipe_first;        /* stale sandbox content may be there: clear it */
  int had_manifest;      /* a manifest was on disk (for some sandbox) */
  int disk_current;      /* the manifest file says what base says */
  int64_t bytes_in, entries_in, bytes_out, entries_out;
  int64_t abort_after;
  int64_t abort_spent;   /* bytes counted against abort_after in this copy */
  int last_out_listed;
  int last_out_quick;
  /* What sandman's unpacker wrote, as it listed it (workspace_box_put): the ctimes
   * a copy in records, with no listing exec after it. Empty: none. */
  common_buf sent_listing;
  /* The host's walk made ahead (sm_workspace_sync_new_walked), and when it
   * started: the next copy in's stamp. */
  ws_manifest prescan;
  int have_prescan;
  int64_t prescan_stamp;
};

/* The bytes this copy may still move before its test abort (-1: no abort
 * set; workspace_sync_abort_after). */
int64_t workspace_sync_abort_budget(const sm_workspace_sync *s);
/* Opens the host workspace (the caller closes it), or a negative code with
 * err filled. */
int workspace_sync_open_host(const sm_workspace_sync *s, sm_error *err);
/* Refuses a target that names no sandbox path (or, with an engine, no
 * container or a relative path). */
int workspace_sync_check_target(const sm_workspace_target *t, sm_error *err);
/* The container the manifest records for t ("" in mode none). */
const char *workspace_sync_target_container(const sm_workspace_target *t);
/* Does the manifest describe this very sandbox? */
int workspace_sync_base_matches(const sm_workspace_sync *s, const sm_workspace_target *t);
/* qsort's comparison of two C strings (char **). */
int workspace_cmp_cstr(const void *a, const void *b);

#endif
