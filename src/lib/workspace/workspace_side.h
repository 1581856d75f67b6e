/* The side a copy goes to and comes from: the sandbox through its engine
 * (workspace_side_engine.c) or, in mode none, a scratch folder on the host
 * (workspace_side_scratch.c). The copy's steps (workspace_in.c,
 * workspace_out.c) are the same; each side's ops do them its way;
 * workspace_side.c picks and opens one. */
#ifndef SANDMAN_WORKSPACE_SIDE_H
#define SANDMAN_WORKSPACE_SIDE_H

#include <stddef.h>
#include <stdint.h>

#include <sandman/error.h>
#include <sandman/workspace.h>

#include "workspace/ws.h"

typedef struct in_plan in_plan;
typedef struct side side;
typedef struct side_ops {
  /* A scratch folder: nothing runs in it between copies, so a copy in
   * clears it when no base describes it, and it is listed before any read
   * (its reads pack from the listing); nothing is started ahead. */
  int local;
  size_t max_roots; /* single-path reads worth making before one full read */
  int (*wipe)(const side *d, sm_error *err);
  int (*remove)(const side *d, char **paths, size_t n, sm_error *err);
  int (*put)(const side *d, sm_workspace_sync *s, int root_fd, const in_plan *p, sm_error *err);
  /* The listing; base_total: the bytes the base holds (a scan's cap). */
  int (*list)(const side *d, const sm_workspace_sync *s, int64_t base_total, ws_manifest *listing,
              sm_error *err);
  /* The listing of the n entries just sent (or all). */
  int (*list_sent)(const side *d, const sm_workspace_sync *s, ws_entry **sent, size_t n,
                   int64_t base_total, ws_manifest *listing, sm_error *err);
  /* Reads root (NULL: everything, named under prefix) into the extractor;
   * listing: the side's listing, or NULL when it has none. */
  int (*fetch)(const side *d, sm_workspace_sync *s, ws_extract *x, ws_manifest *listing,
               const char *root, const char *prefix, sm_error *err);
} side_ops;

struct side {
  const side_ops *ops;
  const sm_workspace_target *t;
  int fd; /* the scratch folder (borrowed), else -1 */
};

/* What a copy in does: the entries to send (and what the upload carries:
 * pack, then the links made after it: later), and the paths the sandbox has
 * that the host no longer has (dels; none under another). */
struct in_plan {
  ws_entry **send, **pack, **later;
  size_t nsend, npack, nlater;
  char **dels;
  size_t ndel;
  ws_manifest delset;
  int same_records; /* every record is as the saved manifest says */
};

extern const side_ops ws_side_engine, ws_side_scratch;

/* The side of target t: its engine's, or a scratch folder's. */
void workspace_side_init(side *d, const sm_workspace_target *t);
/* Opens a scratch folder (made on demand) into *fd, which the caller
 * closes; the engine's side has nothing to open. */
int workspace_side_open(side *d, int *fd, sm_error *err);
/* Opens the scratch folder path (made on demand, 0700) and returns its
 * descriptor, or a negative code with err filled. */
int workspace_scratch_open(const char *path, sm_error *err);

#endif
