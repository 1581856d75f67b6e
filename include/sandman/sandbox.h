/* sandman: sandboxes and tool calls.
 *
 * sm_runner is the long-lived context: engine address, state directory,
 * instance name. It is thread-safe: each thread gets its own engine client.
 * sm_run() takes one tool call, puts it in the sandbox its mode and keys
 * select (creating or reusing it), runs it and fills an sm_run_result. */
#ifndef SANDMAN_SANDBOX_H
#define SANDMAN_SANDBOX_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/egress.h>
#include <sandman/engine.h>
#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_NAME_MAX 256
#define SM_LIST_MAX 64

typedef enum {
  SM_MODE_NONE = 0,
  SM_MODE_PER_TOOL = 1,
  SM_MODE_PER_RUN = 2,
  SM_MODE_PER_WORKER = 3,
} sm_mode;

SM_API const char *sm_mode_name(sm_mode mode); /* "none", "per_tool", ... */
SM_API int sm_mode_parse(const char *s, sm_mode *out, sm_error *err);

/* sm_failure_kind and sm_failure_kind_name: see sandman/error.h. */

/* A fixed-size list so settings copy by assignment. */
typedef struct sm_string_list {
  size_t n;
  char items[SM_LIST_MAX][SM_NAME_MAX];
} sm_string_list;

SM_API int sm_string_list_add(sm_string_list *list, const char *s, sm_error *err);

/* Everything that shapes a sandbox and its calls. Built-in values come from
 * sm_sandbox_settings_defaults(); the configuration and flags override. */
typedef struct sm_sandbox_settings {
  sm_mode mode;
  char image[SM_NAME_MAX];  /* default "sandman/minimal:latest" */
  char network[64];         /* "none" (default), "bridge" or "allowlist" */
  char runtime[64];         /* "" = engine default, or "runsc" */
  char user[64];            /* "" = the image's user if not root, else 1000:1000 */
  double cpu;               /* CPUs; 0 = no limit */
  int64_t memory;           /* bytes; swap is capped at the same value */
  int64_t pids;
  int64_t disk;             /* size of the /workspace volume, bytes */
  int64_t tmpfs;            /* size of /tmp, bytes */
  int64_t nofile;           /* RLIMIT_NOFILE soft = hard */
  int read_only_root;
  int no_new_privileges;
  int drop_all_caps;
  int init;                 /* an init process as pid 1 */
  double timeout_s;         /* per call */
  int64_t stdout_cap;       /* bytes kept of stdout */
  int64_t stderr_cap;
  double idle_timeout_s;    /* 0: never reaped for idleness by a worker */
  sm_string_list excludes;  /* workspace globs not copied */
  /* Workspace globs whose changes never reach the host (the built-in list
   * by default; empty: none). Not part of the container's hash. */
  sm_string_list protect;
  sm_string_list env_passthrough; /* globs of host variables passed through */
  /* network allowlist: the level whose egress lists govern the sandbox
   * ("defaults", "agents.<name>"); part of the config hash, so that agents
   * with lists of their own never share a sandbox. "" otherwise. */
  char egress_owner[160];
} sm_sandbox_settings;

SM_API void sm_sandbox_settings_defaults(sm_sandbox_settings *out);
/* Hex SHA-256 of the settings that shape the container (not the per-call
 * ones such as timeout): the io.sandman.config-hash label. */
SM_API void sm_sandbox_settings_hash(const sm_sandbox_settings *s, char out[65]);

typedef enum {
  SM_SYNC_DEFAULT = 0, /* inout with a workspace, none without */
  SM_SYNC_NONE,
  SM_SYNC_IN,
  SM_SYNC_INOUT,
} sm_sync_mode;

SM_API int sm_sync_mode_parse(const char *s, sm_sync_mode *out, sm_error *err);

/* The io.sandman.owner label this process writes on its per_tool
 * sandboxes, "<hostname>:<pid>" (sm_ops_owner_check reads it back): the
 * runner finds its own sandboxes by it. */
#define SM_OWNER_LABEL_MAX 300
SM_API void sm_sandbox_owner_label(char *out, size_t len);

/* The environment policy: one rule, used by `sandman run` (-e,
 * --env-passthrough) and by the runner (a request's env, env.passthrough),
 * for every name that could reach a tool. */
typedef enum {
  SM_ENV_NAME_OK = 0,
  SM_ENV_NAME_INVALID, /* empty, longer than 255 bytes, or holding '=' or NUL */
  SM_ENV_NAME_BLOCKED, /* SANDMAN_* (the token variable included) and DOCKER_* (the
                        * engine's address, TLS and credential variables): never
                        * reach a tool, whoever names them */
  SM_ENV_NAME_HOME,    /* HOME and the XDG base directories: the home contract;
                        * only `sandman run -e` may set them */
  SM_ENV_NAME_FIXED,   /* PATH, USER, TMPDIR: sandman's (or the image's) unless a
                        * caller sets them by name; never from a passthrough glob */
} sm_env_name_class;

/* Classifies name[0..len) (name need not be NUL-terminated there). */
SM_API sm_env_name_class sm_env_name_classify(const char *name, size_t len);
/* Why a name of that class is refused, for error messages (static). */
SM_API const char *sm_env_name_refusal(sm_env_name_class c);

/* Names that come from outside (project, run id, worker id, agent, user,
 * tool): one character set for the command line, the runner's API and the
 * library alike, because they end up in keys, labels and log lines.
 * 1..SM_NAME_LEN_MAX bytes of letters, digits and _ . : @ + = -, not
 * starting with '-' or '.'. */
#define SM_NAME_LEN_MAX 128
SM_API int sm_name_valid(const char *s);
/* 0, or SM_EINVAL "<what> ... must be ..." (the value shown with anything
 * unprintable replaced, so a message cannot carry a forged line). */
SM_API int sm_name_check(const char *what, const char *s, sm_error *err);

/* A configuration scope: which calls share one per_run/per_worker sandbox
 * instead of the run or worker key. Every scope includes the project. */
typedef enum {
  SM_SCOPE_NONE = 0,   /* the run id (per_run) or the worker id (per_worker) */
  SM_SCOPE_SHARED,     /* the agent's calls in the project */
  SM_SCOPE_USER,       /* the user's calls in the project */
  SM_SCOPE_USER_AGENT, /* the user's calls with that agent in the project */
} sm_scope;

/* Keys (scope keys, and everything named after them) are injective: a key
 * is its kind, then one ':'-separated field per value, each field escaped
 * (':' '%' and every byte outside the name set as %XX), so that different
 * values never give one key and keys stay readable ("run:proj:r1").
 * A worker principal ("worker:<key>") comes first as its own field
 * ("p:worker%3AK1:run:proj:r1"); NULL or "control" adds nothing. */
#define SM_KEY_MAX 2048
/* The key of a scope; SM_EINVAL when the scope needs a name the call lacks
 * (agent, user) or for SM_SCOPE_NONE. project NULL: "default". */
SM_API int sm_scope_key_build(sm_scope scope, const char *principal, const char *project,
                              const char *agent, const char *user, char *out, size_t len,
                              sm_error *err);

typedef struct sm_run_request {
  const char *const *argv; /* argv[0] is the command */
  size_t argc;
  const char *const *env;  /* explicit "K=V" (-e), applied last */
  size_t n_env;
  /* Extra "K=V" for this one exec only (leased credentials): never logged,
   * never in the container's own environment nor in the result. */
  const char *const *secret_env;
  size_t n_secret_env;
  sm_read_fn stdin_read;   /* NULL: no stdin */
  void *stdin_ud;
  const char *project;     /* NULL: "default" */
  const char *project_environment;
  const char *agent;
  const char *tool;
  const char *user;
  const char *run_id;      /* per_run key */
  const char *worker_id;   /* per_worker key */
  sm_scope scope;          /* a configuration scope: it keys per_run/per_worker */
  /* Who the call's keyed sandbox belongs to (the io.sandman.principal
   * label): NULL or SM_PRINCIPAL_CONTROL for an operator (the CLI, the
   * runner's control token), "worker:<key>" (sm_principal_worker) for a
   * worker. A worker's keyed sandboxes are its own: its principal is a field
   * of the scope key, so two workers naming the same run get two sandboxes,
   * and a keyed sandbox found with another principal is refused
   * (SM_EPOLICY). Operators reach every keyed sandbox. */
  const char *principal;
  const char *workspace;   /* host directory or NULL */
  sm_sync_mode sync;
  const sm_string_list *extra_excludes;
  sm_sandbox_settings settings; /* resolved */
  /* network allowlist: the egress levels (sm_config_egress_get), borrowed. */
  const sm_egress_level *egress;
  size_t n_egress;
  /* Optional streaming of output as it arrives (besides the capped copy). */
  sm_output_fn on_output;
  void *on_output_ud;
  volatile int *cancel;
  /* stdout goes to on_output only and is not kept in the result (a large
   * file read through the files API is never held in memory). */
  int stdout_forward_only;
  /* argv are the arguments of sandman's own in-sandbox helper (the agent
   * binary, e.g. {"fs", "read", ...}): it is installed in the sandbox on
   * first use and runs as the sandbox's user like any call. Keyed modes
   * (per_run, per_worker) only. The files API (sandman/files.h) uses it. */
  int helper;
  /* The host-tool route (sandman/hostroute.h): when set, a container call
   * gets the route at SM_ROUTE_SOCKET for its duration and the handler
   * answers what comes through it. NULL: no route. Borrowed, but the
   * container's route keeps using it between calls (with an inactive
   * caller) until the runner is freed: it must outlive the runner. Mode
   * none has no route; the swarm backend refuses such a call. */
  const struct sm_host_route *host_route;
  /* The call's agent may use host tools (sm_broker_agent_has_tools), this
   * call with the route or not: its keyed sandbox (per_run, per_worker,
   * scope user) is the agent's own, its key gains ":ht:<agent>", so that no
   * other agent's processes share a sandbox with calls that reach the host.
   * A call with host_route is keyed so whatever this says. */
  int agent_has_host_tools;
  /* A keyed sandbox named by its container name (the runner finds it by its
   * id and checks its owner first): the call uses it as it is, whatever
   * its settings; it is never created or replaced (gone: SM_ENOTFOUND).
   * settings.mode must be its mode. NULL: the sandbox of the call's keys. */
  const char *sandbox;
  /* A keyed sandbox whose settings the call would change is replaced with
   * its /workspace carried over (docs/modes.md); when the workspace cannot
   * be carried (larger than the new disk, unreadable), the call is refused
   * (SM_EPOLICY) unless replace is set: then the new sandbox starts empty. */
  int replace;
  /* What a sandbox made as a resource carries (sm_sandbox_create); NULL:
   * nothing. Calls leave it NULL. */
  const struct sm_sandbox_meta *meta;
  /* The call runs on a pseudo-terminal that sandman's agent opens in the
   * sandbox (sandman/terminal.h), or on pipes fed as input comes (a tty of
   * size 0): input from the tty, output through on_output (on a terminal
   * stream 1 only) and kept in the result as any call's. Keyed modes only,
   * on the docker backend; never with leased credentials (secret_env), a
   * host-tool route, stdin_read, a workspace copy or helper. Borrowed.
   * NULL: none. */
  struct sm_tty *tty;
  /* The working directory in the sandbox; NULL: /workspace. */
  const char *cwd;
  /* The keyed sandbox of the call's keys must exist already and run: it
   * is used as it is, as one named by `sandbox` is (never created, nor
   * replaced for settings that differ); missing is SM_ENOTFOUND
   * (`sandman exec`). */
  int existing;
  /* A keyed call's sandbox, when it does not exist, is made from this
   * snapshot (its name or key; sandman/keep.h) instead of the settings: a
   * fork that keeps the snapshot's settings. One that exists must have been
   * made from it (else SM_ECONFLICT). NULL: none. */
  const char *from_snapshot;
} sm_run_request;

/* A sandbox made as a resource (POST /v1/sandboxes, `sandman sandbox
 * create`): its labels say all of it (io.sandman.resource, .template,
 * .timeout, .label.<key>), so a runner that starts again finds it as it
 * was. Such a sandbox is never replaced by a call: calls that reach it,
 * by its id or by its keys, use it as it was made. */
#define SM_SANDBOX_LABELS_MAX 16
#define SM_SANDBOX_LABEL_KEY_MAX 63
#define SM_SANDBOX_LABEL_VALUE_MAX 255
typedef struct sm_sandbox_meta {
  const char *template_name; /* the configuration's template it was made from, or NULL */
  double timeout_s;          /* its life from creation; 0: no limit but its idle timeout */
  const char *const *labels; /* "key=value" (sm_sandbox_label_check) */
  size_t n_labels;
} sm_sandbox_meta;

/* 0 when "key=value" may be a sandbox's label: key 1..63 of [a-z0-9._-]
 * starting with a letter or digit, value up to 255 printable characters;
 * SM_EINVAL saying why otherwise. */
SM_API int sm_sandbox_label_check(const char *kv, sm_error *err);



#define SM_PRINCIPAL_CONTROL "control"
#define SM_PRINCIPAL_MAX 160 /* "worker:" and a key */
/* "worker:<key>" into out; SM_EINVAL when the key is empty or too long. */
SM_API int sm_principal_worker(const char *worker_key, char *out, size_t len, sm_error *err);
/* 1 when a call of principal `who` may use a keyed sandbox whose
 * io.sandman.principal label is `label` (NULL when it has none). */
SM_API int sm_principal_may_use(const char *who, const char *label);

/* Fills req with defaults (settings from sm_sandbox_settings_defaults). */
SM_API void sm_run_request_init(sm_run_request *req);

/* A workspace entry the tool changed that was not applied to the host. */
typedef struct sm_run_refusal {
  char *path;         /* owned; workspace-relative */
  const char *reason; /* static: "protected", "link_outside", ... (docs/workspaces.md) */
} sm_run_refusal;

typedef struct sm_run_result {
  int ok;                  /* ran and exited 0 */
  int exit_code;           /* the tool's, or 124/125/126/127/137 */
  char *stdout_data;       /* NUL-terminated, owned, at most the cap */
  size_t stdout_len;
  char *stderr_data;
  size_t stderr_len;
  int stdout_truncated;
  int stderr_truncated;
  int timed_out;
  int oom_killed;
  double duration_ms;
  sm_mode mode;            /* the mode actually used (after fallback) */
  char sandbox_id[SM_ENGINE_ID_MAX]; /* container id, or "" for none */
  int reused;
  int started;             /* the tool was started (else the sandbox could not be
                            * made or used: nothing ran) */
  int credentials_passed;  /* the request's secret_env was handed to the sandbox
                            * (the tool's exec was made with it), whether or not
                            * the tool then ran: a lease's use is spent */
  char **files_changed;    /* owned; workspace-relative paths */
  size_t n_files_changed;
  char **conflicts;        /* owned; paths kept beside the host's version */
  size_t n_conflicts;
  /* What the copy out did not apply (reported once, until it changes). */
  sm_run_refusal *refused; /* owned */
  size_t n_refused;
  /* A keyed sandbox replaced by this call ("" when not): the old one's id
   * and why ("image changed (a -> b)", "it was not running", ...). */
  char replaced_previous[SM_ENGINE_ID_MAX];
  char replaced_because[256];
  /* What became of its /workspace (static; NULL when nothing was
   * replaced): "kept" (its volume moved to the new sandbox), "copied"
   * (copied into the new one's), "dropped" (it could not be carried and
   * the call said replace), "gone" (the old sandbox had stopped: its
   * /workspace, a tmpfs, went with it). */
  const char *replaced_workspace;
  /* A keyed sandbox at rest that this call brought back (docs/state.md):
   * "frozen", "stopped" or "hibernated"; "" when it was running. */
  char resumed[16];
  sm_failure_kind failure_kind;
  char error[SM_ERROR_MESSAGE_MAX]; /* "" when none */
} sm_run_result;

SM_API void sm_run_result_dispose(sm_run_result *result);
/* The `run --json` object of the contract (caller owns it). */
SM_API json_object *sm_run_result_to_json(const sm_run_result *result);

typedef struct sm_runner sm_runner;

/* The swarm backend (docs/scale-out.md): the runner's engine is a swarm
 * manager; sandboxes are services placed by the swarm, reached on their
 * node's engine over TCP+TLS. */
typedef struct sm_swarm_options {
  /* The nodes' client certificates (ca.pem, cert.pem, key.pem): DIR/<node
   * hostname>/ or DIR/<node id>/ when it has a ca.pem, else DIR itself.
   * NULL: the manager's certificate directory for every node. */
  const char *node_certs;
  int node_port;                  /* the nodes' TLS port; 0: 2376 */
  const char *const *constraints; /* placement, e.g. "node.labels.sandman==yes" */
  size_t n_constraints;
  double reserve_cpu;             /* scheduler reservations per sandbox; 0: none */
  int64_t reserve_memory;
} sm_swarm_options;

typedef struct sm_runner_options {
  sm_engine_options engine;
  const char *state_dir;   /* NULL: $SANDMAN_STATE_DIR, else XDG/root default */
  const char *instance;    /* NULL: $SANDMAN_INSTANCE, else "default" */
  const char *backend;     /* NULL or "docker": the engine runs the sandboxes;
                              "swarm": the engine is a swarm manager */
  sm_swarm_options swarm;
  /* network allowlist: the egress proxy's settings (copied); NULL: built-in. */
  const sm_egress_proxy_options *egress;
} sm_runner_options;

#define SM_RUNNER_OPTIONS_INIT {SM_ENGINE_OPTIONS_INIT, NULL, NULL, NULL, {NULL, 0, NULL, 0, 0, 0}, NULL}

SM_API int sm_runner_new(sm_runner **out, const sm_runner_options *opts, sm_error *err);
SM_API void sm_runner_free(sm_runner *runner);
/* The calling thread's engine client (created on first use). */
SM_API int sm_runner_engine(sm_runner *runner, sm_engine **out, sm_error *err);
SM_API const char *sm_runner_state_dir(const sm_runner *runner);
SM_API const char *sm_runner_instance(const sm_runner *runner);
/* "docker" or "swarm" (sm_runner_options.backend). */
SM_API const char *sm_runner_backend(const sm_runner *runner);
/* The audit trail the runner records its sandboxes' lives in (created,
 * replaced, removed, reaped); borrowed, NULL (the default): none. */
SM_API void sm_runner_set_audit(sm_runner *runner, sm_audit *audit);
SM_API sm_audit *sm_runner_audit(const sm_runner *runner);
/* The most bytes of host-tool requests (sandman/hostroute.h) the runner's
 * routes hold at once, over all its sandboxes: a request past it is
 * answered 503 (reason "busy") before the host sees it. 0: the default,
 * 32 MiB. */
SM_API void sm_runner_set_route_memory(sm_runner *runner, size_t bytes);
/* The egress proxy settings in force (a reference: sm_egress_settings_unref). */
SM_API sm_egress_settings *sm_runner_egress(sm_runner *runner);
/* Replaces them (a configuration reload): calls that start afterwards use
 * the new ones. Copies opts. */
SM_API int sm_runner_set_egress(sm_runner *runner, const sm_egress_proxy_options *opts, sm_error *err);

/* Runs one tool call. Returns 0 when the call was made: *out says how it
 * went, the tool's failure and sandman's included (out->failure_kind,
 * out->error). Returns a negative code when the request was refused before
 * a sandbox was sought: an invalid request, an image pin the engine does
 * not confirm, no key for its scope; *out is filled then too (failure_kind, exit code 125,
 * error), so a caller can always report *out. SM_EINVAL with *out
 * untouched only when out is NULL. */
SM_API int sm_run(sm_runner *runner, const sm_run_request *req, sm_run_result *out,
                  sm_error *err);

/* Makes the keyed sandbox of req (settings.mode per_run or per_worker, its
 * keys, principal, settings, meta) and starts it, running nothing in it. A
 * per_run sandbox without a run id gets one of its own ("sbx-<16 hex>").
 * SM_ECONFLICT when that sandbox exists already (id_out gets its id). id_out
 * (SM_ENGINE_ID_MAX) and name_out (SM_NAME_MAX) get the new sandbox's
 * container id and name. The docker backend only (SM_EUNSUPPORTED on a
 * swarm). */
SM_API int sm_sandbox_create(sm_runner *runner, const sm_run_request *req, char *id_out,
                             char *name_out, sm_error *err);

/* ---- speed: the in-sandbox agent (src/lib/sandbox/agent.c, docs/agent.md) ----
 * From the second call a runner makes in a keyed sandbox (and for warm-pool
 * containers), calls go over a long-lived exec of sandman-agent instead of
 * one engine exec each: a few ms instead of ~45. On by default; the
 * environment variable SANDMAN_AGENT=off (or 0/false/no) or this setter
 * turns it off, and every call then uses the engine's exec. */
SM_API void sm_runner_set_agent(sm_runner *runner, int on);
SM_API int sm_runner_agent_enabled(sm_runner *runner);
typedef struct sm_agent_stats {
  unsigned long sessions_opened; /* agent execs started */
  unsigned long calls;           /* calls that went through an agent */
  unsigned long fallbacks;       /* calls that wanted one and used the engine's exec */
} sm_agent_stats;
SM_API void sm_runner_agent_stats(sm_runner *runner, sm_agent_stats *out);

/* ---- speed: the warm pool and background work (src/lib/sandbox/pool.c) ----
 *
 * A per_tool call normally waits for the engine to create and start its
 * container (a few hundred ms). A long-running process (the runner
 * service, a program calling sm_run in a loop) can keep containers created
 * and started ahead of time: `size` ready containers per configuration
 * (the settings hash of sm_sandbox_settings_hash and the project), made on
 * the first per_tool call of a configuration or by sm_runner_pool_prepare,
 * refilled by background threads, each taken by one call and never reused.
 * They have the same spec, limits and /workspace volume as any per_tool
 * sandbox, carry io.sandman.pool=true beside the usual labels, count in
 * `sandbox list` and are reaped like others. When the configuration of a
 * caller (project, agent, tool) changes, the pool of its old configuration
 * is drained if no other caller uses it. The pool is off (size 0) until
 * set: a one-shot process would only pay for containers it never uses.
 *
 * Long-running processes also want a per_tool container removed after its
 * call in the background, off the caller's time: sm_runner_set_background_removal.
 * sm_runner_free waits for those removals (and drains the pool) so nothing
 * is left. */
#define SM_POOL_DEFAULT_SIZE 2
#define SM_POOL_MAX_SIZE 64
/* While calls come faster than containers are made (bursts), a
 * configuration keeps more ready: as many as arrived within one making
 * time lately, up to the maximum (default SM_POOL_DEFAULT_MAX, never below
 * the size). Refills run up to `parallel` at once (all configurations). */
#define SM_POOL_DEFAULT_MAX 8
#define SM_POOL_DEFAULT_PARALLEL 2
#define SM_POOL_MAX_PARALLEL 8

/* Off by default: a per_tool container is gone when sm_run returns. On: it
 * is removed by a background thread holding the call's busy lock until it is
 * gone (the runner service turns it on). */
SM_API void sm_runner_set_background_removal(sm_runner *runner, int on);
/* 0 turns the pool off and removes its ready containers (in the
 * background). SM_EINVAL above SM_POOL_MAX_SIZE. */
SM_API int sm_runner_pool_set_size(sm_runner *runner, unsigned size, sm_error *err);
SM_API unsigned sm_runner_pool_size(sm_runner *runner);
/* The pool's bounds while calls come in bursts: ready containers per
 * configuration at most (0..SM_POOL_MAX_SIZE; below the size: the size)
 * and refills at once (1..SM_POOL_MAX_PARALLEL). SM_EINVAL outside. */
SM_API int sm_runner_pool_set_limits(sm_runner *runner, unsigned max_size, unsigned parallel,
                                     sm_error *err);
/* Fills the pool of req's configuration (req->settings.mode must be
 * per_tool) ahead of its first call. Returns at once; a no-op while the
 * pool is off. */
SM_API int sm_runner_pool_prepare(sm_runner *runner, const sm_run_request *req, sm_error *err);
/* Turns the pool off, removes every ready container and waits for them and
 * for pending per_tool removals (a runner's shutdown). */
SM_API void sm_runner_pool_drain(sm_runner *runner);
/* Waits until the background work is done: every pool full (or backing off
 * after a failed creation) and no removal pending. SM_ETIMEOUT after
 * timeout_s (< 0: no limit). For tests and benchmarks. */
SM_API int sm_runner_settle(sm_runner *runner, double timeout_s, sm_error *err);

typedef struct sm_pool_stats {
  unsigned size;              /* ready containers wanted per configuration (its base) */
  unsigned configurations;    /* pools */
  unsigned ready;             /* containers ready now, all pools */
  unsigned creating;
  unsigned removals_pending;  /* queued or running */
  unsigned agents_preparing;  /* agent sessions being opened (queued or running) */
  unsigned long taken;        /* calls that got a ready container */
  unsigned long missed;       /* calls that found their pool empty */
  unsigned long created, removed, failed;
  unsigned max_size;          /* the most kept per configuration while calls come fast */
  unsigned parallel;          /* refills at once */
  unsigned wanted;            /* ready containers wanted now, all pools (from their calls) */
} sm_pool_stats;

SM_API void sm_runner_pool_stats(sm_runner *runner, sm_pool_stats *out);


/* ---- the fallback rule (contract: "Fallback when the engine or the
 * requested runtime is unhealthy at start") ---- */
#define SM_FALLBACK_MAX_REASONS 8

typedef struct sm_fallback_decision {
  sm_mode requested;
  sm_mode mode;            /* the mode to use */
  int refused;             /* run nothing */
  int production;          /* the project environment is "production" */
  int may_step_down;       /* the mode came from defaults or the project environment */
  int checked;             /* 0 when the requested mode needs no engine (none) */
  int engine_ok;           /* engine reachable */
  int runtime_ok;          /* requested runtime registered (1 when none asked) */
  int image_ok;            /* image present */
  size_t n_reasons;        /* what is unhealthy, one line each */
  char reasons[SM_FALLBACK_MAX_REASONS][512];
} sm_fallback_decision;

/* Checks the engine (reachable), the runtime (registered, when runtime is
 * non-empty) and the image (present; NULL: the built-in default) for a
 * container mode. Healthy: out->mode = requested.
 *
 * An isolation asked for explicitly is never weakened: a missing image, a
 * runtime the engine does not have (asking for gVisor never gives the
 * host) and, when may_step_down is 0 (a --mode flag, a request's mode, an
 * agent entry's mode, sandbox_tools.always), an unreachable engine refuse:
 * out->refused = 1 and a negative code (SM_EUNREACHABLE for the engine,
 * SM_EPOLICY for a digest pin, else SM_ESANDBOX) with what to do in err.
 * An unreachable engine with may_step_down (a mode from the configuration's
 * defaults or the project environment) outside production steps down one
 * mode at a time (per_worker -> per_run -> per_tool -> none), logging a
 * WARN per step that names the cause, and returns 0; in production it
 * refuses. */
SM_API int sm_fallback_decide(sm_runner *runner, sm_mode requested, int may_step_down,
                              const char *project_environment, const char *runtime,
                              const char *image, sm_fallback_decision *out, sm_error *err);
/* {"requested", "mode", "refused", "production", "engine_ok", "runtime_ok",
 * "image_ok", "reasons": [...]} (caller owns it), for doctor and logs. */
SM_API json_object *sm_fallback_decision_to_json(const sm_fallback_decision *d);

#ifdef __cplusplus
}
#endif
#endif
