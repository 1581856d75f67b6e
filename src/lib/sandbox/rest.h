/* Internal to src/lib/sandbox: a keyed sandbox's tiers of rest and its return
 * (rest.c: freeze, stop, the record, the locks; rest_hibernate.c: the
 * checkpoint and its restore). docs/state.md says what each keeps. */
#ifndef SANDMAN_SANDBOX_REST_H
#define SANDMAN_SANDBOX_REST_H

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/keep.h>

#include "sandbox/context.h"
#include <sandman/state.h>

#include "sandbox/rest_record.h"

/* The public pause and resume (keep.h), on the runner's engine e: they
 * take the sandbox's key lock and, to pause, its busy lock exclusively. */
int sandbox_rest_pause(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                       const sm_rest_options *o, sm_rest_report *out, sm_error *err);
int sandbox_rest_resume(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                        const sm_rest_options *o, sm_rest_report *out, sm_error *err);

/* For a call, under the sandbox's key lock (acquire.c): a change cut short
 * is finished or undone and a sandbox at rest runs again. was
 * (SM_REST_STATE_MAX) gets the state it came back from, "" when it was
 * running (or has no record). *insp (the caller's) gets the sandbox's
 * inspect object when it was looked at after its change, else NULL: the
 * call need not look again. Cheap when the sandbox never rested (one
 * failed open). */
int sandbox_rest_wake(const sandbox_ctx *ctx, sm_engine *e, const char *name, char *was,
                      json_object **insp, sm_error *err);
/* For a call that found the sandbox in its cache (no inspect): 1 when it
 * may not be as cached (at rest, a change under way, or its processes or
 * container changed since `generation`), 0 when it runs as it did. */
int sandbox_rest_unsettled(const char *state_dir, const char *name, unsigned generation);
/* 1 when the sandbox is frozen and nothing else changed since `generation`
 * (its processes, and the runner's agent sessions in it, go on after the
 * thaw), 0 otherwise. */
int sandbox_rest_only_frozen(const char *state_dir, const char *name, unsigned generation);
/* For a call that found the sandbox in its cache and its record says it
 * is only frozen (sandbox_rest_only_frozen): under the key lock, unpauses
 * container id without looking at it first and records the change (the
 * audit row's labels from who, borrowed: {"Id", "Config": {"Labels"}}).
 * 1 when it was thawed so, 0 when anything differs (the record changed,
 * the engine refused): the caller looks at it the long way. With later,
 * only the record is checked (1: as the cache knew it): the caller thaws
 * it with sandbox_rest_thaw_finish, holding its busy lock (no pause can
 * come between). */
int sandbox_rest_thaw_known(const sandbox_ctx *ctx, sm_engine *e, const char *name, const char *id,
                            unsigned generation, json_object *who, int later);
/* The thaw sandbox_rest_thaw_known left for later: the engine's unpause
 * of container id, the record and the audit row (*thawed 1). One that is
 * not paused any more (thawed by hand or by another call) is fine: the
 * record says so, no row (*thawed 0). 0, or the engine's error: not
 * thawed by this call. */
int sandbox_rest_thaw_finish(const sandbox_ctx *ctx, sm_engine *e, const char *name, const char *id,
                             json_object *who, int *thawed, sm_error *err);
/* 1 when the sandbox is at rest or a change of its state is under way (its
 * record says so), 0 when it runs or has no record. */
int sandbox_rest_resting(const char *state_dir, const char *name);
/* The record's generation, 0 without one. */
unsigned sandbox_rest_generation(const char *state_dir, const char *name);

/* ---- shared by rest.c and rest_hibernate.c ---- */

/* One change in progress: the sandbox's name, its inspect object (owned)
 * and its record. */
typedef struct sandbox_rest_op {
  const sandbox_ctx *ctx;
  sm_engine *e;
  const char *name;
  json_object *insp;
  sandbox_rest_record rec;
  int has_rec;
  char state[SM_REST_STATE_MAX]; /* what it is now, as list would say */
  double t0;                     /* sm_monotonic_ms at the start */
  /* Called by sandbox_rest_hibernate once the checkpoint is written into
   * the successor (op->rec.next_id) and the old container (old_id) has
   * stopped, before it goes: a memory snapshot keeps its layer and the
   * checkpoint here (snap_memory.c). NULL: none. Its failure does not
   * undo the hibernation; it is returned once the sandbox is hibernated. */
  int (*on_checkpoint)(struct sandbox_rest_op *op, const char *old_id, void *ud, sm_error *err);
  void *on_checkpoint_ud;
} sandbox_rest_op;

/* The checkpoint of a running or frozen sandbox (op->rec has pending
 * "hibernated" written): its /workspace saved, its memory written into a
 * successor container that takes its name. */
int sandbox_rest_hibernate(sandbox_rest_op *op, sm_error *err);
/* Back from hibernated: the successor restored from its checkpoint, its
 * /workspace put back first. */
int sandbox_rest_restore(sandbox_rest_op *op, sm_error *err);
/* A hibernation cut short: finished when the checkpoint was written, else
 * undone. */
int sandbox_rest_hibernate_recover(sandbox_rest_op *op, sm_error *err);
/* ---- for snapshots, forks and rollbacks (snapshot.c, fork.c) ---- */

/* The sandbox's key lock and, with alone, its busy lock exclusively (calls
 * in flight waited for up to o->wait_s, or SM_EBUSY at once with
 * o->no_wait; o may be NULL). */
int sandbox_rest_hold(const sandbox_ctx *ctx, const char *name, const sm_rest_options *o, int alone,
                      sm_state_lock **key, sm_state_lock **busy, sm_error *err);
/* op for keyed sandbox name, looked at, a change cut short finished or
 * undone (SM_ENOTFOUND: no such keyed sandbox of the instance). */
int sandbox_rest_open(const sandbox_ctx *ctx, sm_engine *e, const char *name, sandbox_rest_op *op,
                      sm_error *err);
void sandbox_rest_close(sandbox_rest_op *op);
/* Tells the audit trail, the log and the hook (event "sandbox.<...>" or
 * "snapshot.created"). */
void sandbox_rest_notify(sandbox_rest_op *op, const char *event, const char *state,
                         const char *previous, const char *previous_id, const char *why);

/* The name of sandman's checkpoints (hibernate, memory snapshots). */
#define SANDBOX_REST_CHECKPOINT "sandman"
/* <engine root>/containers/<id>/checkpoints/<sandman's checkpoint>: the
 * checkpoint a container is restored from (the engine takes no other). */
int sandbox_rest_checkpoint_folder(sm_engine *e, const char *id, char *out, size_t len,
                                   sm_error *err);
/* The keeper of a created container's /workspace volume while it is
 * filled and the container restored (named <name>-keep; insp: the
 * container's inspect). Down removes it. */
int sandbox_rest_keeper_up(sm_engine *e, json_object *insp, const char *name, char *id,
                           sm_error *err);
void sandbox_rest_keeper_down(sm_engine *e, const char *name);

/* Whether the engine can checkpoint this sandbox: 0, or SM_EUNSUPPORTED
 * saying what is missing. *gvisor: its runtime is gVisor. */
int sandbox_rest_can_checkpoint(sm_engine *e, json_object *insp, int *gvisor, sm_error *err);

#endif
