/* Internal to src/lib/sandbox: sandboxes made from a snapshot (fork.c): forks,
 * a rollback in place, and the difference from a snapshot. */
#ifndef SANDMAN_SANDBOX_FORK_H
#define SANDMAN_SANDBOX_FORK_H

#include <json-c/json.h>

#include <sandman/keep.h>

#include "sandbox/context.h"

/* Who and where the sandbox made from a snapshot is. */
typedef struct fork_target {
  char name[SM_NAME_MAX];
  char volume[SM_NAME_MAX + 16];
  char mode[16];
  char project[SM_NAME_MAX];
  char run_id[SM_NAME_MAX];
  char worker_id[SM_NAME_MAX];
  char scope_key[SM_KEY_MAX];
  char principal[SM_PRINCIPAL_MAX];
  int resource;  /* keeps the settings it was made with (io.sandman.resource) */
} fork_target;

/* A new per_run sandbox of the snapshot's owner for run_id (project NULL:
 * the snapshot's), keyed as a call of the source's agent would key it. */
int sandbox_fork_target(const sandbox_ctx *ctx, const sm_snapshot *s, const char *project,
                        const char *run_id, fork_target *t, sm_error *err);
/* Makes and starts sandbox t from snapshot s, its /workspace filled
 * (id_out: SM_ENGINE_ID_MAX). The caller holds t's key lock. SM_ECONFLICT
 * when the name is taken; any other failure removes what was made. */
int sandbox_fork_make(const sandbox_ctx *ctx, sm_engine *e, const sm_snapshot *s,
                      const fork_target *t, char *id_out, sm_error *err);
/* The sandbox of a call with from_snapshot, made under the call's name
 * and keys (sb, req) from the snapshot its principal may use. */
int sandbox_fork_for_call(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          const char *name, const char *volume, const char *scope_key, char *id_out,
                          sm_error *err);
/* The key of the snapshot a call names (for a sandbox found under the
 * call's name: made from it or not). */
int sandbox_fork_snapshot_key(const sandbox_ctx *ctx, const sm_run_request *req, char key[17],
                              sm_error *err);
/* Returns sandbox name to snapshot s in place: its container and
 * /workspace replaced by the snapshot's, its name and keys kept. */
int sandbox_rollback(const sandbox_ctx *ctx, sm_engine *e, const char *name, const sm_snapshot *s,
                     sm_rest_report *out, sm_error *err);
/* {"sandbox","snapshot","added","modified","deleted"}: the sandbox's
 * /workspace now against manifest `before` (snapshot s's). */
int sandbox_diff(const sandbox_ctx *ctx, sm_engine *e, const char *name, const sm_snapshot *s,
                 json_object *before, json_object **out, sm_error *err);

#endif
