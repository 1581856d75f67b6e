/* Internal to src/sandbox: the pieces sm_run is built from. Pure parts
 * (environment, labels, specs, names, capture) are unit-tested on their
 * own; the rest talks to the engine or the host. */
#ifndef SANDMAN_SANDBOX_INTERNAL_H
#define SANDMAN_SANDBOX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/workspace.h>

#include "common/buf.h"
#include "common/strv.h"

/* ---- random and hashing ---- */
/* n random bytes as 2n lowercase hex characters (out has room for 2n+1). */
int sm_random_hex(char *out, size_t nbytes, sm_error *err);
/* Lowercase hex SHA-256 of data. */
void sm_sha256_hex(const void *data, size_t len, char out[65]);

/* ---- environment ---- */
/* Limits on what a call may put in its environment. */
#define SM_ENV_MAX_VARS 512
#define SM_ENV_MAX_BYTES (256 * 1024)

typedef struct sm_env_spec {
  const char *path;     /* PATH (NULL: not set, the container's applies) */
  const char *user;     /* USER (NULL: not set, the container's applies) */
  const char *home;     /* HOME; XDG_CONFIG/DATA/STATE_HOME live under it */
  const char *tmpdir;   /* TMPDIR; XDG_CACHE_HOME lives under it */
  const char *const *host_env;        /* the host's environ (LANG/LC_*, passthrough) */
  const sm_string_list *passthrough;  /* globs of host names */
  const char *const *explicit_env;    /* -e "K=V" or "K" (host value) */
  size_t n_explicit;
  const char *const *secret_env;      /* leased credentials, last */
  size_t n_secret;
  const char *marker;   /* "SANDMAN_CALL=<token>" or NULL */
} sm_env_spec;

/* The scrubbed environment of one call, in order: fixed variables,
 * LANG/LC_* of the host, passthrough globs (never SANDMAN_*, never one of
 * the fixed names), -e, secrets, the call marker. A later entry replaces an
 * earlier one of the same name. */
int sm_env_build(const sm_env_spec *spec, sm_strv *out, sm_error *err);

/* ---- names, labels, specs ---- */
typedef struct sm_label_info {
  const char *instance;
  const char *mode;
  const char *project;
  const char *run;
  const char *worker;
  const char *agent;
  const char *scope_key;
  const char *config_hash;
  const char *created;  /* RFC 3339 UTC */
  const char *owner;    /* per_tool: "<host>:<pid>"; NULL otherwise */
  const char *volume;   /* containers only; NULL on the volume itself */
  const char *principal;/* keyed: the call's principal, when it has one */
  const char *user;     /* "uid:gid" the calls run as (the container runs as root) */
} sm_label_info;

#define SM_LABEL_PREFIX "io.sandman."

json_object *sm_labels_build(const sm_label_info *li);

/* Appends ':' (unless first) and field, escaped, to out[0..*used). */
int sm_key_append(char *out, size_t len, size_t *used, const char *field, sm_error *err);
/* "sandman-<instance>-<mode>-<32 hex of sha256(key)>". */
int sm_keyed_name(const char *instance, sm_mode mode, const char *scope_key, char *out,
                  size_t len, sm_error *err);
/* The key of a keyed call: its scope's (sm_scope_key_build), else
 * "run:<project>:<run>" or "worker:<worker>", each after the principal's
 * field. SM_EINVAL when a name the key needs is missing. */
int sm_scope_key(const sm_run_request *req, sm_mode mode, char *out, size_t len,
                 sm_error *err);
/* Instance names become part of container names: [A-Za-z0-9_.-], 1..64. */
int sm_instance_valid(const char *instance);

/* ---- network allowlist (network.c) ---- */
int sm_sandbox_allowlist(const sm_sandbox_settings *s);
/* Before a sandbox is made: the topology, and the proxy variables added to
 * env. The runtime must have a network. Both take the reference st (the
 * runner's proxy settings, sm_runner_egress). */
int sandbox_egress_prepare(sm_egress_settings *st, sm_engine *e, const sm_run_request *req, sm_egress_net *net,
                           sm_strv *env, sm_error *err);
/* The call's policy written into the proxy for container cid (net: the
 * topology when just made, else NULL to look it up). */
int sandbox_egress_apply(sm_egress_settings *st, sm_engine *e, const sm_run_request *req, const sm_egress_net *net,
                         const char *cid, const char *name, sm_error *err);

typedef struct sm_container_spec {
  const sm_sandbox_settings *settings;
  const char *user;     /* resolved user for the container ("1000:1000") */
  int uid, gid;         /* owner of the /workspace volume */
  const char *volume;   /* volume name */
  json_object *labels;  /* borrowed; copied into the spec */
  const char *const *env; /* container's base environment */
  size_t n_env;
  int gvisor;           /* the runtime is gVisor: --pids is enforced inside it */
  const char *network;  /* NULL: settings->network; else join this network (allowlist) */
} sm_container_spec;

/* Under gVisor the host's pids cgroup counts gVisor's own threads too (its
 * kernel, its file proxy, and on the ptrace platform about nine host tasks
 * per process of the tool: measured, docs/modes.md), so --pids 64 left no
 * room and every call failed. The tool's limit is then RLIMIT_NPROC, which
 * gVisor's kernel enforces for the sandbox's user, and the host's cgroup
 * gets room for gVisor besides: base + per task * pids. */
#define SM_GVISOR_PIDS_BASE 64
#define SM_GVISOR_PIDS_PER_TASK 12
int64_t sm_host_pids_limit(int64_t pids, int gvisor);

/* The ContainerConfig (HostConfig inside) of a hardened sandbox. Caller
 * owns the result. */
json_object *sm_container_config_build(const sm_container_spec *spec);

/* The container user: settings->user, else the image's user unless it is
 * root or empty, else "1000:1000". uid/gid are numeric when the user is
 * ("1000", "1000:1000"); -1 when it is a name. */
void sm_container_user(const sm_sandbox_settings *s, const char *image_user, char *out,
                       size_t len, int *uid, int *gid);

/* The shell wrappers every container exec and every mode-none call go
 * through (see exec.c and host.c for why). */
extern const char sm_exec_wrapper_script[];
extern const char sm_exec_kill_script[];
extern const char sm_exec_oom_script[];
extern const char sm_exec_thaw_script[];
extern const char sm_host_wrapper_script[];


/* ---- capture ---- */
typedef struct sm_capture {
  sm_buf out;
  sm_buf err;
  int out_truncated;
  int err_truncated;
  sm_output_fn forward; /* gets the bytes that were kept, as they arrive */
  void *forward_ud;
  int forward_failed;   /* the forwarder asked to stop: stop forwarding only */
  int forward_only;     /* stdout is forwarded whole and not kept */
} sm_capture;

void sm_capture_init(sm_capture *c, int64_t out_cap, int64_t err_cap, sm_output_fn forward,
                     void *forward_ud);
/* An sm_output_fn: keeps what fits under the cap, flags the rest as
 * truncated and keeps accepting (the tool runs on undisturbed). */
int sm_capture_output(void *userdata, int stream, const char *data, size_t len);
/* Moves the captured output into the result (NUL-terminated copies). */
int sm_capture_to_result(sm_capture *c, sm_run_result *r);
void sm_capture_dispose(sm_capture *c);

/* ---- the call's preamble (preamble.c) ---- */
#define SM_CALL_RUNTIME_TEXT_MAX 4096
enum { SM_CALL_WATCH_WAITING = 0, SM_CALL_WATCH_STARTED, SM_CALL_WATCH_RUNTIME };

/* Sits between a call's output and its capture: strips and parses the
 * wrapper's preamble; output before it is the runtime's (kept apart). */
typedef struct sm_call_watch {
  const char *token;
  sm_capture *cap;
  int state;            /* SM_CALL_WATCH_* */
  char line[192];
  size_t len;
  char pid[16];         /* the call's process (in the sandbox's pid namespace) */
  char start[24];       /* its start time, clock ticks since boot */
  long long oom_before; /* the oom_kill count before the call, -1 unknown */
  sm_buf runtime;       /* what came on stdout instead of a preamble */
  sm_buf early_err;     /* stderr before the preamble (the tool's if it comes) */
  int early_err_dropped;
} sm_call_watch;

void sm_call_watch_init(sm_call_watch *w, const char *token, sm_capture *cap);
void sm_call_watch_dispose(sm_call_watch *w);
/* An sm_output_fn (ud: the watch). */
int sm_call_watch_output(void *ud, int stream, const char *data, size_t len);
/* The runtime's text on one printable line into out; 0 when there is none. */
int sm_call_watch_runtime_text(const sm_call_watch *w, char *out, size_t len);

/* ---- result helpers ---- */
/* Fills failure_kind, exit code 125 and the error text from err. */
void sm_result_fail(sm_run_result *r, sm_failure_kind kind, const sm_error *err);
/* The copy out after the tool ran: the changed files, conflicts and
 * refusals go into the result; -1 with sync_err set when it failed (the
 * tool's result stands: pass sync_err to sm_result_sync_failed). */
int sm_result_copy_out(sm_run_result *r, sm_workspace_sync *ws, const sm_workspace_target *t,
                       const char *where, sm_error *sync_err);
/* A copy out that failed after the tool ran: failure kind "sandbox" and
 * why, the tool's own exit code, output and duration kept. */
void sm_result_sync_failed(sm_run_result *r, const sm_error *err);
/* Which failure kind an error code is: engine codes -> "engine",
 * SM_EPOLICY -> "policy", the rest -> "sandbox". */
sm_failure_kind sm_failure_kind_for(int code);

/* ---- runner internals ---- */
typedef struct sandbox_swarm sandbox_swarm;
/* The runner's swarm backend, or NULL when it runs sandboxes on its engine. */
sandbox_swarm *sm_runner_swarm(sm_runner *runner);
/* Engine options the runner was made with (for clones and health checks). */
int sm_runner_new_engine(sm_runner *runner, sm_engine **out, sm_error *err);

/* ---- engine checks (container.c) ---- */
/* 0 if runtime is empty or registered with the engine (/info Runtimes);
 * SM_ESANDBOX naming it and how to register it otherwise. *gvisor (may be
 * NULL): the runtime's program is runsc. */
int sm_sandbox_runtime_present(sm_engine *e, const char *runtime, int *gvisor, sm_error *err);
/* 0 if the image is on the engine (out, may be NULL: its inspect object);
 * SM_ESANDBOX saying how to get it otherwise (sandman never pulls). */
int sm_sandbox_image_present(sm_engine *e, const char *image, json_object **out,
                             sm_error *err);

/* ---- the two back ends ---- */
int sm_run_host(sm_runner *runner, const sm_run_request *req, sm_run_result *out,
                sm_error *err);
int sm_run_container(sm_runner *runner, const sm_run_request *req, sm_run_result *out,
                     sm_error *err);

/* ---- container exec (exec.c) ---- */
typedef struct sm_exec_outcome {
  int exit_code;
  int timed_out;
  int oom_killed;
  int cancelled;
  double duration_ms;
} sm_exec_outcome;

/* Fills exit code, flags, ok, failure kind and message from an outcome
 * (container and host calls alike). */
void sm_result_apply_outcome(sm_run_result *out, const sm_exec_outcome *oc,
                             const sm_sandbox_settings *s);

/* ---- engine execs of sandman's own (exec.c) ---- */
/* The ExecConfig of a helper: argv, user (NULL: the container's), working
 * directory "/", output attached, stdin when attach_stdin. */
json_object *sm_exec_config(const char *const *argv, size_t argc, const char *user,
                            int attach_stdin);
/* Runs argv in container cid through an engine exec: stdin from in (NULL:
 * none), stdout kept in out (capped; NULL: dropped), the exit code in
 * *exit_code (NULL: not waited for). */
int sm_exec_helper(sm_engine *e, const char *cid, const char *const *argv, size_t argc,
                   const char *user, sm_read_fn in, void *in_ud, double timeout_s, sm_buf *out,
                   int *exit_code, sm_error *err);

/* ---- the in-sandbox agent, host side (agent.c) ---- */
typedef struct sm_agents sm_agents;               /* a runner's sessions */
typedef struct sm_agent_session sm_agent_session; /* one agent exec */

sm_agents *sm_agents_new(void);
void sm_agents_free(sm_agents *a);
void sm_agents_set_enabled(sm_agents *a, int on);
int sm_agents_enabled(sm_agents *a);
void sm_agents_stats(sm_agents *a, unsigned long *opened, unsigned long *calls,
                     unsigned long *fallbacks);
/* The runner's agents (runner.c); NULL when out of memory. */
sm_agents *sm_runner_agents(sm_runner *runner);

/* An idle session in container cid (*out), or, when open_new, a new one
 * (installing the agent first if needed). *out NULL: use the engine's exec.
 * Returns SM_ENOTFOUND/SM_ECONFLICT when the container is gone or stopped,
 * else 0 (an agent that cannot work there is remembered, not an error). */
int sm_agent_take(sm_agents *a, sm_engine *e, const char *cid, const char *user, int open_new,
                  sm_agent_session **out);
/* After a call that ended cleanly: parks the session (or closes it). */
void sm_agent_give_back(sm_agents *a, sm_agent_session *s);
void sm_agent_close(sm_agent_session *s);
/* Where the agent binary lives in a sandbox (it is also the workspace's
 * unpacker: `PATH untar DIR`). */
void sm_agent_binary_path(char *out, size_t len);
/* Puts the agent binary into the container (as root, into /.sandman)
 * unless it is there; a may be NULL. */
int sm_agent_install(sm_agents *a, sm_engine *e, const char *cid, sm_error *err);
/* Installs the agent in a new container and parks a session (the pool). */
int sm_agent_prepare(sm_agents *a, sm_engine *e, const char *cid, const char *user);
void sm_agent_note_fallback(sm_agents *a);
/* Counts a tool call made over a session (sm_runner_agent_stats). */
void sm_agent_note_call(sm_agents *a);

/* A call over a session: its outgoing frames and its stdin. */
typedef struct sm_agent_feed {
  sm_buf frame;    /* frames being written */
  size_t off;      /* how much of frame is out */
  sm_read_fn in;   /* the call's stdin; NULL: none */
  void *in_ud;
  int in_open;
  char *chunk;     /* SM_FRAME_DATA_MAX bytes, with in */
} sm_agent_feed;

int sm_agent_feed_init(sm_agent_feed *f, sm_read_fn in, void *in_ud, sm_error *err);
void sm_agent_feed_dispose(sm_agent_feed *f);
/* Puts the call frame (and, without stdin, its end) into f; output goes to
 * out as it arrives. */
int sm_agent_start(sm_agent_session *s, sm_agent_feed *f, const char *cwd,
                   const char *const *argv, size_t argc, const char *const *env, size_t envc,
                   sm_output_fn out, void *out_ud, sm_error *err);
/* Pumps until the call ends (0; sm_agent_call_state says how), the agent's
 * exec ends (1), deadline_ms passes (SM_ETIMEOUT; 0: none), *cancel is set
 * (SM_ECANCELLED) or an error (negative; the session is then broken). */
int sm_agent_drive(sm_agent_session *s, sm_agent_feed *f, double deadline_ms,
                   volatile int *cancel, sm_error *err);
/* After a call's end or kill: waits for the agent's report and writes the
 * rest of a half-written frame, so the next call starts on a frame
 * boundary; a session that cannot is marked broken. */
void sm_agent_settle(sm_agent_session *s, sm_agent_feed *f);
/* 1 (exited: *exit_code), 2 (could not start: *fail_errno, *fail_msg) or 0. */
int sm_agent_call_state(const sm_agent_session *s, int *exit_code, int *fail_errno,
                        const char **fail_msg);
/* Runs argv (cwd "/", the agent's environment) to its end: stdin from in
 * (NULL: none), output to out. 0 with *exit_code, or an error (the session
 * is then broken unless the program merely could not start). */
int sm_agent_run(sm_agent_session *s, const char *const *argv, size_t argc, sm_read_fn in,
                 void *in_ud, sm_output_fn out, void *out_ud, int timeout_ms, int *exit_code,
                 sm_error *err);
void sm_agent_mark_broken(sm_agent_session *s);
int sm_agent_broken(const sm_agent_session *s);

typedef struct sm_exec_target {
  sm_engine *engine;
  const char *container_id;
  const char *user;      /* "uid:gid" every exec of the call runs as (the
                          * container's own processes run as root) */
  int per_tool;          /* a fresh container: timeouts kill the container */
  const char *quiet;     /* a leased call in a shared sandbox: the installed
                          * sandman-agent, whose `quiet` stops every other
                          * process of the user while the call runs alone;
                          * what it leaves is killed after. NULL otherwise */
  sm_agents *agents;     /* with agent: the call goes over this session */
  sm_agent_session *agent;
} sm_exec_target;

int sm_exec_call(const sm_exec_target *t, const sm_run_request *req, const sm_strv *env,
                 sm_capture *cap, sm_exec_outcome *out, sm_error *err);

/* ---- host helpers ---- */
/* Removes a directory tree without following symlinks, making read-only
 * directories writable first. Missing is fine. */
int sm_remove_tree(const char *path, sm_error *err);
/* The host name for owner labels. */
void sm_host_name(char *out, size_t len);

#endif
