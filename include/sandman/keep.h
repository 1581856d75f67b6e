/* sandman: sandboxes that keep their state (docs/state.md).
 *
 * A keyed sandbox (per_run, per_worker, a configuration's scope, one made
 * by id) can rest in one of three tiers and come back:
 *   freeze     the engine's pause (the cgroup freezer): memory kept, no CPU;
 *   stop       its processes end; /workspace is saved in the state
 *              directory and put back when it starts again;
 *   hibernate  its processes' memory is written by the engine's
 *              checkpoint and restored with them running (gVisor here; runc
 *              needs a working CRIU).
 * A call into a resting sandbox resumes it by itself. The state of each
 * sandbox is the engine's (paused, exited, created) read with a small
 * record in the state directory (<state>/rest/<name>.json), written before
 * and after every change so that a crash in the middle is finished or
 * undone by the next process that looks.
 *
 * Ownership: what *_to_json returns is the caller's. */
#ifndef SANDMAN_KEEP_H
#define SANDMAN_KEEP_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/principal.h>
#include <sandman/sandbox.h>
#include <sandman/runner.h>
#include <sandman/run.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SM_TIER_FREEZE = 0,
  SM_TIER_STOP = 1,
  SM_TIER_HIBERNATE = 2,
} sm_tier;

/* "freeze", "stop", "hibernate". */
SM_API const char *sm_tier_name(sm_tier tier);
/* The state a tier leaves a sandbox in: "frozen", "stopped", "hibernated". */
SM_API const char *sm_tier_state(sm_tier tier);
SM_API int sm_tier_parse(const char *s, sm_tier *out, sm_error *err);

#define SM_REST_STATE_MAX 16

typedef struct sm_rest_options {
  sm_tier tier;          /* pause only */
  int no_wait;           /* a call in flight: SM_EBUSY at once instead of waiting */
  double wait_s;         /* how long calls in flight are waited for (0: 60 s) */
  const char *why;       /* for the audit trail ("requested", "idle for 10m") */
} sm_rest_options;

#define SM_REST_OPTIONS_INIT {SM_TIER_FREEZE, 0, 0, NULL}

/* What a pause or resume did. */
typedef struct sm_rest_report {
  char name[SM_NAME_MAX];
  char id[SM_ENGINE_ID_MAX];        /* its container now */
  char previous[SM_REST_STATE_MAX]; /* running, frozen, stopped, hibernated */
  char state[SM_REST_STATE_MAX];
  double since;                     /* when it entered state (epoch) */
  int changed;                      /* 0: it was in that state already */
  double duration_ms;
  int64_t workspace_bytes;          /* stop, hibernate: the /workspace saved */
} sm_rest_report;

/* Puts the keyed sandbox named name (its container name) to rest in
 * o->tier, waiting for calls in flight (o->no_wait: SM_EBUSY). From
 * frozen it may go on to stop or hibernate, from stopped nowhere else;
 * hibernated is refused where the engine cannot checkpoint it (SM_EUNSUPPORTED
 * saying what is missing), and the sandbox is left as it was. */
SM_API int sm_sandbox_pause(sm_runner *runner, const char *name, const sm_rest_options *o,
                            sm_rest_report *out, sm_error *err);
/* Brings it back to running (a no-op for a running one). */
SM_API int sm_sandbox_resume(sm_runner *runner, const char *name, const sm_rest_options *o,
                             sm_rest_report *out, sm_error *err);
/* {"id","name","previous","state","since","changed","duration_ms","workspace_bytes"}. */
SM_API json_object *sm_rest_report_to_json(const sm_rest_report *r);

/* A sandbox's state as `sandbox list` shows it: from the engine's state
 * ("running", "paused", "exited", "created", ...) and its record in
 * state_dir. out (SM_REST_STATE_MAX): "running", "frozen", "stopped",
 * "hibernated", or the engine's word for anything else ("exited": stopped
 * by something other than sandman, its /workspace gone). *since (may be
 * NULL): when it entered that state, 0 when unknown. */
SM_API void sm_sandbox_rest_state(const char *state_dir, const char *name,
                                  const char *engine_state, char *out, double *since);
/* A hibernation cut short between its two renames leaves no container
 * under the sandbox's name: its old container set aside as <name>-hib,
 * its successor (holding the checkpoint) as <name>-next; the next look
 * finishes it. For a container (its name and id): 1 when it is such an
 * old container (base gets the sandbox's name: list it as the sandbox),
 * 2 when it is such a successor (the same sandbox: not listed apart), 0
 * otherwise. */
SM_API int sm_keep_rest_side(const char *state_dir, const char *container_name, const char *id,
                             char *base, size_t len);
/* The successor a hibernation of sandbox `name` cut short left behind
 * (its container id, recorded once made; it holds the checkpoint once
 * written and the sandbox's volume): removing the sandbox removes it too.
 * id gets "" when there is none. */
SM_API void sm_keep_rest_successor(const char *state_dir, const char *name, char *id, size_t len);

/* ---- snapshots ---- */

/* A snapshot of a keyed sandbox: its writable layer committed as the image
 * sandman-snapshot/<instance>:<key> (labelled with its owner, source and
 * time), its /workspace as a tar in the state directory
 * (<state>/snapshots/<key>/) with a manifest of every file's SHA-256.
 * Owned by the sandbox's principal ("control", or "worker:<key>"): a
 * worker sees and uses only its own. Names are 1 to 100 letters, digits,
 * '_', '.', '-' (not starting with '.' or '-'), unique per owner. */
#define SM_SNAPSHOT_NAME_MAX 101

typedef struct sm_snapshot_options {
  const char *name;  /* NULL: "snap-<UTC time>-<4 hex>" */
  int no_wait;       /* a call in flight: SM_EBUSY at once instead of waiting */
  double wait_s;     /* how long calls in flight are waited for (0: 60 s) */
  int memory;        /* also its processes' memory: the engine's checkpoint (where hibernate works) */
} sm_snapshot_options;

#define SM_SNAPSHOT_OPTIONS_INIT {NULL, 0, 0, 0}

typedef struct sm_snapshot {
  char name[SM_SNAPSHOT_NAME_MAX];
  char key[17];                     /* its folder and image tag */
  char owner[SM_PRINCIPAL_MAX];
  char source[SM_NAME_MAX];         /* the sandbox it was taken of */
  char source_id[SM_ENGINE_ID_MAX];
  char mode[16];
  char project[SM_NAME_MAX];
  char run_id[SM_NAME_MAX];
  char worker_id[SM_NAME_MAX];
  char image[SM_NAME_MAX];          /* sandman-snapshot/<instance>:<key> */
  char image_id[SM_ENGINE_ID_MAX];
  double created_at;
  int64_t workspace_bytes;          /* its /workspace tar */
  int64_t layer_bytes;              /* its writable layer */
  int64_t files;                    /* entries in the manifest */
  double duration_ms;               /* how long it took (when just made) */
  int memory;                       /* holds a checkpoint of its processes (--memory) */
  int64_t checkpoint_bytes;         /* that checkpoint's size on disk */
} sm_snapshot;

typedef struct sm_snapshot_list {
  size_t n;
  sm_snapshot *items;
} sm_snapshot_list;

/* Whether this runner's backend keeps a keyed sandbox's state for
 * operation op ("pause" (freeze), "stop", "hibernate", "resume",
 * "snapshot", "fork", "rollback", "diff"): 0, or SM_EUNSUPPORTED naming
 * the operation and the backend and saying why (the swarm refuses them
 * all). The operations below ask it first; a caller may ask before it
 * looks the sandbox up. */
SM_API int sm_keep_supported(sm_runner *runner, const char *op, sm_error *err);

/* Takes a snapshot of keyed sandbox `sandbox` (its container name): calls
 * in flight are waited for (no_wait: SM_EBUSY), none starts meanwhile, and
 * the sandbox is frozen while its layer and /workspace are read, so the
 * snapshot holds one moment. Refused (SM_EBUSY) while a call with leased
 * credentials runs beside it. A running or frozen sandbox (left as it
 * was), or a stopped one; not a hibernated one (SM_ECONFLICT: resume it).
 * SM_ECONFLICT when its owner has a snapshot of that name. */
SM_API int sm_sandbox_snapshot(sm_runner *runner, const char *sandbox, const sm_snapshot_options *o,
                               sm_snapshot *out, sm_error *err);
/* This runner's instance's snapshots, newest first; owner NULL: all. */
SM_API int sm_snapshots_list(sm_runner *runner, const char *owner, sm_snapshot_list *out,
                            sm_error *err);
SM_API void sm_snapshot_list_dispose(sm_snapshot_list *l);
/* One snapshot by name (or key), of owner (NULL: any; a name several
 * owners use is SM_ECONFLICT naming them). Another owner's is SM_ENOTFOUND,
 * exactly as a missing one. */
SM_API int sm_snapshot_get(sm_runner *runner, const char *name, const char *owner,
                           sm_snapshot *out, sm_error *err);
/* Its manifest: {"files": [{"path","type","size","mode","sha256"}]}. */
SM_API int sm_snapshot_manifest(sm_runner *runner, const sm_snapshot *s, json_object **out,
                                sm_error *err);
/* Removes it: its folder, then its image (kept while sandboxes forked from
 * it use it; a later removal or reap takes it). */
SM_API int sm_snapshot_remove(sm_runner *runner, const char *name, const char *owner,
                              sm_error *err);
/* {"name","key","owner","source","source_id","mode","project","run_id","worker_id","image",
 *  "image_id","created_at","age_s","memory","size":{"workspace","layer","checkpoint"},"files",
 *  "duration_ms"}. */
SM_API json_object *sm_snapshot_to_json(const sm_snapshot *s, double now);

/* Removes snapshots older than max_age_s (0: any age) and, per owner,
 * all but the newest keep (0: no count limit; both 0: nothing), and what
 * a crash left half made. names (may be NULL) gets the removed ones. */
SM_API int sm_snapshot_reap(sm_runner *runner, double max_age_s, size_t keep, int dry_run,
                            sm_snapshot_list *removed, sm_error *err);

/* ---- forks, rollbacks, differences ---- */

/* New per_run sandboxes made from a snapshot, one per run id: each is a
 * new sandbox (new container, identity, /workspace filled from the
 * snapshot's tar), owned by the snapshot's owner. owner: the caller's
 * principal, whose snapshot it must be (NULL: the operator, any). */
typedef struct sm_fork_request {
  const char *snapshot;
  const char *owner;
  const char *project;           /* NULL: the snapshot's */
  const char *const *run_ids;
  size_t n;
} sm_fork_request;

typedef struct sm_fork_item {
  char run_id[SM_NAME_MAX];
  char id[SM_ENGINE_ID_MAX];     /* "" when it failed */
  char name[SM_NAME_MAX];
  double duration_ms;
  char error[256];               /* why it failed, "" when made */
} sm_fork_item;

/* Makes them (up to 4 at once); out has req->n items. 0 when the snapshot
 * was found (each item says whether it was made), else its error. */
SM_API int sm_sandbox_fork(sm_runner *runner, const sm_fork_request *req, sm_fork_item *out,
                           sm_error *err);
/* Returns keyed sandbox `sandbox` to snapshot `snapshot` (of its own
 * owner): its processes end, its container and /workspace become the
 * snapshot's; its name and keys stay (a new container id). */
SM_API int sm_sandbox_rollback(sm_runner *runner, const char *sandbox, const char *snapshot,
                               const char *owner, sm_rest_report *out, sm_error *err);
/* What changed in the sandbox's /workspace since the snapshot:
 * {"sandbox","snapshot","added":[{"path","type","size"}],"modified":[{...,
 * "size_before"}],"deleted":[...]}. */
SM_API int sm_sandbox_diff(sm_runner *runner, const char *sandbox, const char *snapshot,
                           const char *owner, json_object **out, sm_error *err);
/* The name of the keyed sandbox a call prepared as req would run in (its
 * sandbox_id's, or the one its mode and keys name), whether or not it
 * exists yet: what the calls above take. SM_EINVAL when req's mode is not
 * per_run or per_worker. */
SM_API int sm_run_keyed_sandbox(sm_runner *runner, const sm_run_request *req, char *out,
                                size_t len, sm_error *err);

/* ---- state changes, for other parts of a program ---- */

/* One change of a sandbox's state made by this process: state is the new
 * one ("frozen", "stopped", "hibernated", "running"); id the container
 * now, previous_id the one before (a hibernated sandbox comes back in a
 * new container). A terminal's preview URLs or a code context's kernel
 * can be let go here: processes are gone after "stopped", kept after
 * "frozen" and "hibernated". */
typedef struct sm_state_event {
  const char *name;
  const char *id;
  const char *previous_id;
  const char *state;
  const char *previous;
} sm_state_event;
typedef void (*sm_state_hook)(void *ud, const sm_state_event *ev);
/* Called after each change, on the thread that made it; NULL: none. */
SM_API void sm_runner_set_state_hook(sm_runner *runner, sm_state_hook hook, void *ud);

#ifdef __cplusplus
}
#endif
#endif
