/* sandman: tool calls.
 *
 * sm_run() takes one tool call, puts it in the sandbox its mode and keys
 * select (creating or reusing it) with the runner's help (sandman/runner.h),
 * runs it and fills an sm_run_result. */
#ifndef SANDMAN_RUN_H
#define SANDMAN_RUN_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/egress.h>
#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/mode.h>
#include <sandman/principal.h>
#include <sandman/runner.h>
#include <sandman/sandbox.h>
#include <sandman/scope.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SM_SYNC_DEFAULT = 0, /* inout with a workspace, none without */
  SM_SYNC_NONE,
  SM_SYNC_IN,
  SM_SYNC_INOUT,
} sm_sync_mode;

SM_API int sm_sync_mode_parse(const char *s, sm_sync_mode *out, sm_error *err);

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

/* Runs one tool call. Returns 0 when the call was made: *out says how it
 * went, the tool's failure and sandman's included (out->failure_kind,
 * out->error). Returns a negative code when the request was refused before
 * a sandbox was sought: an invalid request, an image pin the engine does
 * not confirm, no key for its scope; *out is filled then too (failure_kind, exit code 125,
 * error), so a caller can always report *out. SM_EINVAL with *out
 * untouched only when out is NULL. */
SM_API int sm_run(sm_runner *runner, const sm_run_request *req, sm_run_result *out,
                  sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
