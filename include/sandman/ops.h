/* sandman: operating sandboxes: doctor checks, listing, reaping, removal.
 *
 * The engine's labels are the truth: a sandbox is a container carrying
 * io.sandman.managed=true and this instance's io.sandman.instance. Beside
 * them, the state directory (state.h) says which sandbox has a call in
 * flight (a lock that dies with its process) and when each was last used.
 *
 * Every result has a *_to_json function returning the contract's object,
 * for the CLI's --json and for the runner's /v1/sandboxes routes.
 *
 * Threads: an sm_ops_scope borrows one sm_engine, which is not thread-safe;
 * build one scope per thread (sm_ops_scope_from_runner does).
 *
 * Ownership: json_object * and char * returned are the caller's
 * (json_object_put / free); *_dispose frees the contents of a struct the
 * caller owns. */
#ifndef SANDMAN_OPS_H
#define SANDMAN_OPS_H

#include <sandman/export.h>

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/audit.h>
#include <sandman/config.h>
#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/keep.h>
#include <sandman/mode.h>
#include <sandman/principal.h>
#include <sandman/sandbox.h>
#include <sandman/runner.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Labels set by the sandbox module on every container and its volume. */
#define SM_OPS_LABEL_MANAGED "io.sandman.managed"
#define SM_OPS_LABEL_INSTANCE "io.sandman.instance"
#define SM_OPS_LABEL_MODE "io.sandman.mode"
#define SM_OPS_LABEL_PROJECT "io.sandman.project"
#define SM_OPS_LABEL_RUN "io.sandman.run"
#define SM_OPS_LABEL_WORKER "io.sandman.worker"
#define SM_OPS_LABEL_AGENT "io.sandman.agent"
#define SM_OPS_LABEL_SCOPE_KEY "io.sandman.scope-key"
#define SM_OPS_LABEL_CONFIG_HASH "io.sandman.config-hash"
#define SM_OPS_LABEL_CREATED "io.sandman.created"
#define SM_OPS_LABEL_OWNER "io.sandman.owner"   /* <hostname>:<pid>, per_tool */
/* <hostname>:<pid> of the process making a fork; counts only while the
 * container still has its "-forking-" name (SM_OPS_FORKING_MARK). */
#define SM_OPS_LABEL_MAKING "io.sandman.making"
#define SM_OPS_FORKING_MARK "-forking-"
#define SM_OPS_LABEL_VOLUME "io.sandman.volume" /* the /workspace volume */
#define SM_OPS_LABEL_POOL "io.sandman.pool"     /* warm-pool containers */
#define SM_OPS_LABEL_PRINCIPAL "io.sandman.principal" /* keyed: control or worker:<key> */
/* What a sandbox says about itself (docs/modes.md, Labels and names). */
#define SM_OPS_LABEL_RESOURCE "io.sandman.resource"   /* "true": made as a resource */
#define SM_OPS_LABEL_TEMPLATE "io.sandman.template"
#define SM_OPS_LABEL_TIMEOUT "io.sandman.timeout"     /* its life, seconds from creation */
#define SM_OPS_LABEL_IDLE_TIMEOUT "io.sandman.idle-timeout" /* seconds unused before a reap */
#define SM_OPS_LABEL_USER_PREFIX "io.sandman.label."  /* the owner's labels */

/* Where the operations work. */
typedef struct sm_ops_scope {
  sm_engine *engine;     /* borrowed, negotiated or not; one thread */
  const char *state_dir; /* NULL: sm_state_default_dir() */
  const char *instance;  /* NULL: $SANDMAN_INSTANCE, else "default" */
  const char *backend;   /* NULL or "docker"; "swarm": engine is a swarm manager and
                            the sandboxes are its services (docs/scale-out.md) */
} sm_ops_scope;

#define SM_OPS_SCOPE_INIT {NULL, NULL, NULL, NULL}

/* The calling thread's engine, the state directory and the instance of a
 * runner (all borrowed from it). */
SM_API int sm_ops_scope_from_runner(sm_ops_scope *out, sm_runner *runner, sm_error *err);
/* The instance a scope stands for (never NULL; borrowed). */
SM_API const char *sm_ops_scope_instance(const sm_ops_scope *scope);

/* ---- listing ---- */

typedef struct sm_ops_sandbox {
  char id[SM_ENGINE_ID_MAX];
  char name[SM_NAME_MAX];
  char mode[32];
  char project[SM_NAME_MAX];
  char run_id[SM_NAME_MAX];
  char worker_id[SM_NAME_MAX];
  char agent[SM_NAME_MAX];
  char image[SM_NAME_MAX];
  char state[32];         /* the engine's State: running, exited, created, dead... */
  char status_text[128];  /* the engine's Status: "Up 5 minutes" */
  char volume[SM_NAME_MAX];
  char owner[SM_NAME_MAX]; /* io.sandman.owner, or "" */
  /* A fork being made (its name still has "-forking-"): its maker's
   * io.sandman.making label; "" for every finished sandbox. */
  char making[SM_NAME_MAX];
  int pool;
  double created_at;       /* epoch: io.sandman.created, else the engine's */
  double last_used_at;     /* epoch: recorded, else created_at */
  int last_used_recorded;
  int busy;                /* a call holds the sandbox now */
  char node[SM_NAME_MAX];  /* swarm: the node running it; "" on one engine */
  char principal[SM_PRINCIPAL_MAX]; /* io.sandman.principal, or "" */
  int resource;            /* made as a resource (POST /v1/sandboxes, sandbox create) */
  char template_name[64];  /* the template it was made from, or "" */
  char network[16];        /* "" when not recorded (made by an older sandman) */
  char runtime[64];        /* "" : the engine's default */
  double cpu;              /* the resources it was made with; -1 when not recorded */
  int64_t memory, pids, disk;
  double timeout_s;        /* its life from creation; 0: none */
  double idle_timeout_s;   /* its own idle timeout; 0: the configuration's */
  char labels[1536];       /* the owner's labels as a JSON object's text ("{}") */
  /* Its state (sandman/keep.h): running, frozen, stopped, hibernated, or
   * the engine's word for anything else; when it entered it (0: unknown). */
  char rest[16];
  double rest_since;
} sm_ops_sandbox;

typedef struct sm_ops_sandbox_list {
  size_t n;
  sm_ops_sandbox *items;
} sm_ops_sandbox_list;

SM_API void sm_ops_sandbox_list_dispose(sm_ops_sandbox_list *list);

/* Fills out from one entry of the engine's /containers/json answer (labels,
 * names, state). busy and last_used_at are left to the caller (last_used_at
 * = created_at). SM_EPROTOCOL for an entry without an id. */
SM_API int sm_ops_sandbox_from_engine(json_object *summary, sm_ops_sandbox *out, sm_error *err);

/* This instance's sandboxes, newest first; all = 0: only running ones (as
 * `docker ps`). */
SM_API int sm_ops_list(const sm_ops_scope *scope, int all, sm_ops_sandbox_list *out, sm_error *err);

/* This instance's sandboxes that carry every label filter ("key=value" or
 * "key", ANDed; NULL/0: all), as sm_ops_list. */
SM_API int sm_ops_list_filtered(const sm_ops_scope *scope, int all, const char *const *labels,
                                size_t n_labels, sm_ops_sandbox_list *out, sm_error *err);
/* One sandbox of this instance by its name, full id or unique id prefix:
 * SM_ENOTFOUND when none (or not one of this instance). */
SM_API int sm_ops_get(const sm_ops_scope *scope, const char *ref, sm_ops_sandbox *out,
                      sm_error *err);

/* {"id","name","mode","project","run_id","worker_id","agent","image",
 *  "status","state","state_since","created_at","last_used_at","busy","pool","node","resource",
 *  "template","network","resources":{"cpu","memory","pids","disk"},
 *  "timeout_s","idle_timeout_s","expires_at","labels"}; absent labels are
 * null, times RFC 3339, status the engine's State. */
SM_API json_object *sm_ops_sandbox_to_json(const sm_ops_sandbox *sb);
/* The `sandbox list --json` array. */
SM_API json_object *sm_ops_list_to_json(const sm_ops_sandbox_list *list);
/* The `docker ps`-style table (heading line included), ages relative to
 * now. Caller frees. NULL only when out of memory. */
SM_API char *sm_ops_list_table(const sm_ops_sandbox_list *list, double now);

/* ---- formatting ---- */

/* "Less than a second ago", "1 second ago", "5 minutes ago", "About an hour
 * ago", "3 days ago"... as `docker ps` prints ages (seconds < 0 counts as 0). */
SM_API void sm_ops_format_ago(double seconds, char *buf, size_t len);
/* Compact: "0s", "45s", "1m30s", "2h", "2h5m", "7d", "1d2h". */
SM_API void sm_ops_format_duration(double seconds, char *buf, size_t len);

/* ---- the reap decision (pure) ---- */

typedef enum {
  SM_OPS_OWNER_NONE = 0, /* no owner label (per_run, per_worker) */
  SM_OPS_OWNER_ALIVE,    /* the owner process on this host runs */
  SM_OPS_OWNER_GONE,     /* the owner process on this host is dead */
  SM_OPS_OWNER_UNKNOWN,  /* another host's process, or a label we cannot read */
} sm_ops_owner_state;

/* Looks at an io.sandman.owner label ("<hostname>:<pid>"): on this host, is
 * the process alive? A pid that was reused by a process started after the
 * container was created counts as gone. */
SM_API sm_ops_owner_state sm_ops_owner_check(const char *owner_label, double created_at);

typedef struct sm_ops_reap_input {
  const char *mode;      /* "per_tool", "per_run", "per_worker" */
  const char *state;     /* the engine's State */
  int busy;
  int pool;
  double created_at;
  double last_used_at;   /* < 0: never recorded (created_at counts) */
  double now;
  sm_ops_owner_state owner;
  const char *owner_label; /* for the reason's words; may be NULL */
  /* A fork being made: its maker's state (SM_OPS_OWNER_NONE: not one). */
  sm_ops_owner_state making;
  const char *making_label;
  double own_idle_s;     /* the sandbox's own idle timeout (its label); 0: none */
  double expires_at;     /* the end of its life (epoch); 0: none */
  double older_than_s;   /* < 0: no idle criterion (owner-gone and exited only) */
  int force;             /* busy and owner-alive ones too */
  int keep_pool;         /* spare warm-pool containers (idle reaping in a worker) */
  /* The runner's idle reap: a sandbox's own idle timeout replaces
   * older_than_s. Otherwise (sandbox reap) older_than_s, when given, wins
   * and the own one applies to the rest. */
  int own_first;
  /* At rest (sandman/keep.h): "frozen", "stopped" or "hibernated"; NULL or
   * "": running. A sandbox at rest is kept on purpose: never removed for
   * being stopped, nor by its idle timeouts, only by remove_after_s, its
   * life, or an operator's --older-than (own_first unset). */
  const char *rest;
  double remove_after_s; /* the lifecycle's remove_after; 0: never */
} sm_ops_reap_input;

typedef enum {
  SM_OPS_SPARE = 0,
  SM_OPS_REMOVE = 1,
} sm_ops_verdict;

/* Whether reap removes a sandbox, with the reason in words. */
SM_API sm_ops_verdict sm_ops_reap_decide(const sm_ops_reap_input *in, char *reason, size_t len);

/* ---- reap and rm ---- */

typedef struct sm_ops_reap_options {
  double older_than_s; /* < 0: only sandboxes whose owner is gone, exited or dead */
  int dry_run;         /* decide and report, change nothing */
  int force;           /* busy ones too */
  int keep_pool;       /* spare warm-pool containers */
  int own_first;       /* a sandbox's own idle timeout replaces older_than_s */
  double remove_after_s; /* the lifecycle's remove_after for sandboxes at rest; 0: never */
} sm_ops_reap_options;

#define SM_OPS_REAP_OPTIONS_INIT {-1, 0, 0, 0, 0, 0}

/* The body of POST /v1/sandboxes/reap: {"older_than_s", "dry_run", "force"}
 * (all optional; older_than_s a non-negative number). SM_EINVAL names the
 * bad field. */
SM_API int sm_ops_reap_options_from_json(json_object *body, sm_ops_reap_options *out,
                                         sm_error *err);

typedef enum {
  SM_OPS_ITEM_SANDBOX = 0,
  SM_OPS_ITEM_VOLUME = 1, /* an orphaned /workspace volume */
  SM_OPS_ITEM_NETWORK = 2, /* swarm: a sandbox network no sandbox uses */
} sm_ops_item_kind;

typedef struct sm_ops_item {
  sm_ops_item_kind kind;
  char id[SM_ENGINE_ID_MAX]; /* "" for volumes */
  char name[SM_NAME_MAX];
  char state[16];            /* moved: the state it went to (frozen, stopped) */
  char reason[320];
  int failed;                /* removal was attempted and failed */
} sm_ops_item;

typedef struct sm_ops_report {
  int dry_run;
  size_t n_removed, n_spared;
  sm_ops_item *removed; /* with dry_run: what would be removed */
  sm_ops_item *spared;
  size_t n_failed;      /* spared items that are errors (removal failed, no such sandbox) */
  size_t n_moved;       /* the lifecycle's moves to rest (sm_ops_lifecycle) */
  sm_ops_item *moved;
} sm_ops_report;

SM_API void sm_ops_report_dispose(sm_ops_report *report);
/* Appends from's removed, spared and moved items to into's (from is left
 * as it was: dispose it). */
SM_API int sm_ops_report_merge(sm_ops_report *into, const sm_ops_report *from, sm_error *err);

/* Removes this instance's sandboxes (container, its volume, its state files)
 * that sm_ops_reap_decide picks, orphaned volumes, and state files of
 * sandboxes no longer on the engine. Each removal holds the sandbox's
 * exclusive busy lock (a call cannot start meanwhile); a sandbox another
 * reaper is removing is skipped, one already gone is not an error. Returns
 * 0 when it could list (out->n_failed counts removals that failed). */
SM_API int sm_ops_reap(const sm_ops_scope *scope, const sm_ops_reap_options *opts,
                       sm_ops_report *out,
                       sm_error *err);

typedef struct sm_ops_rm_options {
  const char *const *refs; /* ids (or unique id prefixes) and names */
  size_t n_refs;
  const char *run_id;      /* every sandbox of this run */
  const char *worker_id;   /* every sandbox of this worker */
  int force;               /* busy ones too */
  double wait_s;           /* how long a busy one is waited for before it is refused; 0: not */
} sm_ops_rm_options;

#define SM_OPS_RM_OPTIONS_INIT {NULL, 0, NULL, NULL, 0, 0}

/* Removes the named sandboxes of this instance. A busy one without force, a
 * reference that names no sandbox of this instance, and a failed removal
 * land in out->spared and count in out->n_failed. */
SM_API int sm_ops_rm(const sm_ops_scope *scope, const sm_ops_rm_options *opts, sm_ops_report *out,
                     sm_error *err);

/* {"removed": [{"id","name","reason","kind"}], "spared": [...],
 *  "moved": [{"id","name","state","reason","kind"}], "dry_run"}. */
SM_API json_object *sm_ops_report_to_json(const sm_ops_report *report);
/* One line per item ("removed ...", "spared ...: reason"). Caller frees. */
SM_API char *sm_ops_report_text(const sm_ops_report *report);

/* One event (sandbox.reaped, sandbox.removed) per sandbox the report
 * removed, with its reason (nothing for a dry run, or when audit is NULL). */
SM_API void sm_ops_report_audit(const sm_ops_report *report, const char *event, sm_audit *audit);

/* For the runner service, called periodically: reaps this runner's
 * sandboxes unused for longer than idle_timeout_s and those whose owner is
 * gone; never busy ones, never warm-pool ones. idle_timeout_s <= 0 reaps
 * only the owner-gone, exited and dead ones. out may be NULL. */
SM_API int sm_ops_reap_idle(sm_runner *runner, double idle_timeout_s, sm_ops_report *out,
                            sm_error *err);

/* ---- the idle lifecycle (decide.c, lifecycle.c) ---- */

/* What the lifecycle does to one sandbox now. */
typedef enum {
  SM_OPS_MOVE_NONE = 0,
  SM_OPS_MOVE_FREEZE,
  SM_OPS_MOVE_STOP,
  SM_OPS_MOVE_REMOVE,
} sm_ops_move;

typedef struct sm_ops_lifecycle_input {
  const char *mode;        /* only per_run and per_worker sandboxes move */
  const char *state;       /* running, frozen, stopped, hibernated, or the engine's word */
  int busy;                /* a call (a terminal, a watch, a port connection) holds it */
  int pool;                /* a warm-pool container */
  int owned;               /* it carries an owner label: a call's own container (per_tool, lease) */
  int making;              /* a fork being made (its "-forking-" name) */
  double created_at;
  double last_used_at;     /* < 0: never recorded (created_at counts) */
  double now;
  sm_lifecycle lifecycle;  /* its agent's and worker's (sm_config_lifecycle) */
} sm_ops_lifecycle_input;

/* The one step the lifecycle takes now, with the reason in words: the
 * deepest step whose time has passed since the sandbox's last use, never
 * back towards running (a stopped one is not frozen), never for a busy
 * one. Pure. */
SM_API sm_ops_move sm_ops_lifecycle_decide(const sm_ops_lifecycle_input *in, char *reason,
                                           size_t len);

/* Applies the configuration's lifecycle to this runner's keyed sandboxes
 * (the docker backend; nothing on a swarm): freezes and stops them through
 * sm_sandbox_pause (no wait: a sandbox that a call takes meanwhile stays
 * as it is), and removes those past remove_after (under the removal
 * locks, deciding again there). Each move is an audit row of the rest
 * module (sandbox.frozen, sandbox.stopped, "lifecycle: ...") and a log
 * line; removals land in out->removed (audit them with
 * sm_ops_report_audit), moves in out->moved. Appends to out (which the
 * caller zeroes or filled with sm_ops_reap). dry_run: decides only. */
SM_API int sm_ops_lifecycle(sm_runner *runner, const sm_config *cfg, int dry_run,
                            sm_ops_report *out, sm_error *err);

/* ---- doctor ---- */

#define SM_OPS_MAX_CHECKS 24

typedef struct sm_ops_check {
  char name[48];
  int ok;
  int required;     /* a failing required check makes the host unhealthy */
  int skipped;      /* not run because an earlier check failed (ok = 0) */
  char detail[640]; /* what was found */
  char fix[384];    /* what to do, when failing ("" otherwise) */
} sm_ops_check;

typedef struct sm_ops_doctor_report {
  int healthy;
  size_t n;
  sm_ops_check checks[SM_OPS_MAX_CHECKS];
} sm_ops_doctor_report;

typedef struct sm_ops_doctor_options {
  sm_engine_options engine; /* how to reach the engine */
  const char *state_dir;    /* NULL: default */
  const char *instance;     /* NULL: $SANDMAN_INSTANCE, else "default" */
  const char *image;        /* NULL: the built-in default image */
  const char *runtime;      /* NULL or "": engine default; "runsc" makes runsc required */
  sm_mode mode;             /* the mode asked for, for the fallback decision */
  const char *project_environment; /* NULL: development */
  int mode_explicit;        /* the mode was asked for (--mode): never stepped down */
  const char *backend;      /* "swarm": also check the swarm (docs/scale-out.md) */
  sm_swarm_options swarm;   /* how the swarm backend reaches its nodes */
} sm_ops_doctor_options;

#define SM_OPS_DOCTOR_OPTIONS_INIT                                                     \
  {SM_ENGINE_OPTIONS_INIT, NULL, NULL, NULL, NULL, SM_MODE_NONE, NULL, 0, NULL, \
   {NULL, 0, NULL, 0, 0, 0}}

/* Runs every check; an unhealthy host is not an error (out->healthy = 0).
 * Returns a negative code only for unusable options. */
SM_API int sm_ops_doctor(const sm_ops_doctor_options *opts, sm_ops_doctor_report *out,
                         sm_error *err);
/* {"healthy": bool, "checks": [{"name","ok","detail","required"[,"fix"]}]};
 * a failing check's detail ends with what to do. */
SM_API json_object *sm_ops_doctor_to_json(const sm_ops_doctor_report *report);
/* Aligned lines: "ok    engine    ..." / "FAIL  ..." with the fix. Caller frees. */
SM_API char *sm_ops_doctor_text(const sm_ops_doctor_report *report);

#ifdef __cplusplus
}
#endif
#endif
