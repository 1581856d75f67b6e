/* sandman runner service: internal interfaces shared by the files of src/lib/server and
 * its unit tests. Nothing here is public API. */
#ifndef SANDMAN_SERVER_INTERNAL_H
#define SANDMAN_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/mode.h>
#include <sandman/sandbox.h>
#include <sandman/runner.h>
#include <sandman/run.h>
#include <sandman/server.h>

#include "common/buf.h"
#include "common/strv.h"
#include "server/auth.h"

#define SM_SERVER_TOOL_MAX 64     /* tool and service names */
#define SM_SERVER_ARGV_MAX 1024   /* argv entries of one call */
#define SM_SERVER_ENV_MAX 256     /* "env" entries of one call */
#define SM_SERVER_ENV_VALUE_MAX (128 * 1024)
#define SM_SERVER_PATH_MAX 4096
#define SM_SERVER_TIMEOUT_MAX 86400.0
#define SM_LEASE_SERVICES_MAX 16
#define SM_LEASE_ID_LEN 32        /* hex digits */
#define SM_LEASE_TTL_DEFAULT 60.0
#define SM_LEASE_TTL_MAX 3600.0
#define SM_LEASE_USES_MAX 10
#define SM_HANDLE_ID_LEN 32
#define SM_REDACTED "[REDACTED]"
#define SM_REDACT_MIN_LEN 6       /* shorter credential values are not scrubbed */

/* ---- request.c: parsing and validating request bodies ---- */
typedef struct server_execute_params {
  char *tool, *agent, *user, *project, *run_id, *worker_key, *lease_id, *workspace;
  char **argv; /* NULL-terminated, owned */
  size_t argc;
  char *command;
  json_object *params;  /* tool template parameters (owned reference) or NULL */
  unsigned char *stdin_data;
  size_t stdin_len;
  int has_stdin;
  char **env;           /* "K=V", owned */
  size_t n_env;
  int has_mode;
  sm_mode mode;
  double timeout_s;     /* 0: the resolved default */
  int background_on_timeout;
  int stream;           /* "stream": true: chunked NDJSON events */
  int has_sync;
  sm_sync_mode sync;
  const char *network;  /* NULL, or a static "none"/"allowlist"/"bridge" */
  char *sandbox_id;     /* a keyed sandbox named by its id or name (sandboxes_route.c) */
  int replace;          /* may replace a sandbox whose /workspace cannot be carried */
  char *from_snapshot;  /* a new keyed sandbox made from this snapshot (fork.c) */
} server_execute_params;

/* body need not be NUL-terminated. max_stdin caps the decoded stdin_b64.
 * SM_EINVAL with a message naming the field. */
int server_parse_execute(const char *body, size_t len, size_t max_stdin, server_execute_params *out,
                         sm_error *err);
void server_execute_params_dispose(server_execute_params *p);

/* The body of POST /v1/sandboxes (a sandbox made ahead, as a resource). */
#define SM_CREATE_LABELS_MAX 16
typedef struct server_create_params {
  int has_mode;
  sm_mode mode;                 /* per_run (default) or per_worker */
  char *run_id, *worker_key, *project, *agent, *template_name, *image;
  double cpu;                   /* 0: not given */
  int64_t memory, pids, disk;   /* 0: not given */
  const char *network;          /* NULL, or a static "none"/"allowlist"/"bridge" */
  double timeout_s, idle_timeout_s; /* 0: not given */
  char *labels[SM_CREATE_LABELS_MAX]; /* "key=value" */
  size_t n_labels;
} server_create_params;

int server_parse_create(const char *body, size_t len, server_create_params *out, sm_error *err);
void server_create_params_dispose(server_create_params *p);

typedef struct server_lease_params {
  char tool[SM_SERVER_TOOL_MAX + 1];
  char services[SM_LEASE_SERVICES_MAX][SM_SERVER_TOOL_MAX + 1];
  size_t n_services;
  double ttl_s;
  int max_uses;
  char worker_key[SM_SERVER_KEY_MAX + 1]; /* "" when not bound */
} server_lease_params;

int server_parse_lease(const char *body, size_t len, server_lease_params *out, sm_error *err);

/* Identifiers in requests: sm_name_valid (1..SM_NAME_LEN_MAX of
 * [A-Za-z0-9_.:@+=-], not starting with '-' or '.'), and at most max. */
int server_name_valid(const char *s, size_t max);
/* A sandbox's id or name as a request gives it: 1 to 127 letters, digits
 * and _ . - (a container id, a unique prefix of one, or a name). */
int server_sandbox_ref_valid(const char *s);
/* POSIX environment variable names. */
int server_env_name_valid(const char *s);
/* Strict base64 (standard alphabet, padding optional). Owned output. */
int server_base64_decode(const char *in, size_t len, size_t max, unsigned char **out,
                         size_t *out_len, sm_error *err);
/* Parses a JSON object from untrusted bytes (depth and size bounded; a key
 * repeated in one object, or holding a NUL character, is SM_EINVAL). */
int server_json_object(const char *body, size_t len, json_object **out, sm_error *err);
/* True when the body has a "worker_key" that is a valid name (copied to
 * out), whatever else is wrong with the body: what a worker token is
 * checked against before the body's errors may be told. */
bool server_json_has_worker_key(const char *body, size_t len, char out[SM_SERVER_KEY_MAX + 1]);

/* ---- lease.c: credential leases (pure state; times passed in) ---- */
typedef struct server_lease_store server_lease_store;

server_lease_store *server_lease_store_new(size_t max_leases);
void server_lease_store_free(server_lease_store *store);
/* out_id: SM_LEASE_ID_LEN hex digits + NUL. SM_EBUSY when the store is full
 * of live leases. */
int server_lease_create(server_lease_store *store, const server_lease_params *p, double now,
                        char out_id[SM_LEASE_ID_LEN + 1], double *out_expires, sm_error *err);
/* Takes one use: 0 and the lease's services, or SM_EPOLICY (unknown,
 * expired, used up, other tool, other worker) without telling which. The
 * use is pending until server_lease_settle. */
int server_lease_consume(server_lease_store *store, const char *id, const char *tool,
                         const char *worker_key, double now, server_lease_params *out_services,
                         sm_error *err);
/* Settles a use server_lease_consume took: used (the credentials reached the
 * sandbox) or given back (used 0: the call never got that far; the lease
 * serves another call, unless it expired meanwhile: SM_ENOTFOUND). */
int server_lease_settle(server_lease_store *store, const char *id, int used, double now,
                        sm_error *err);
/* Leases with a use left, not expired. */
size_t server_lease_live(server_lease_store *store, double now);

/* ---- creds.c: the credentials file ---- */
typedef struct server_creds server_creds;

/* A JSON object {"service": {"ENV_NAME": "value", ...}, ...}; the file must
 * be a regular file with no group or other permission bits. */
int server_creds_load(server_creds **out, const char *path, sm_error *err);
int server_creds_parse(server_creds **out, const char *name, const char *text, size_t len,
                       sm_error *err);
void server_creds_free(server_creds *creds);
int server_creds_has_service(const server_creds *creds, const char *service);
/* 1 when name is a variable some service defines. */
int server_creds_is_name(const server_creds *creds, const char *name);
size_t server_creds_count(const server_creds *creds);

/* Owned "K=V" strings holding secrets: wiped before they are freed. */
typedef struct server_secret_env {
  char **kv;
  size_t n;
} server_secret_env;

int server_creds_env(const server_creds *creds, const server_lease_params *services,
                     server_secret_env *out, sm_error *err);
void server_secret_env_dispose(server_secret_env *env);

/* ---- call_env.c: environment policy and scrubbing of answers ---- */
/* Names sandman owns: SANDMAN_*, DOCKER_HOST and friends, credential names. */
int server_env_owned(const char *name, const server_creds *creds);
/* Host variables matching globs, minus owned names, as owned "K=V". */
int server_env_passthrough(const sm_string_list *globs, const server_creds *creds, char ***out,
                           size_t *out_n, sm_error *err);
/* Replaces every occurrence of each secret value (the part after '=' of
 * each entry, when at least SM_REDACT_MIN_LEN bytes) in *data with
 * "[REDACTED]". *data is reallocated when needed; stays NUL-terminated. */
void server_redact(char **data, size_t *len, const server_secret_env *secrets);
/* The same for output that was cut (at its cap) or may go on (a running
 * call's output so far): a value whose first bytes end the data is masked
 * too, those bytes replaced with "[REDACTED]" (mark: the output ends there
 * for good) or dropped (mark 0: more output will tell). */
void server_redact_cut(char **data, size_t *len, const server_secret_env *secrets, int mark);
/* In a fixed-size string. */
void server_redact_str(char *s, size_t size, const server_secret_env *secrets);
/* In every string value and key of a JSON tree (in place). */
void server_redact_json(json_object *o, const server_secret_env *secrets);

/* ---- hook.c: .sandman/worker-env.sh ---- */
#define SM_HOOK_PATH ".sandman/worker-env.sh"
#define SM_HOOK_SCRIPT_MAX (64 * 1024)
#define SM_HOOK_NONCE_LEN 16

/* Looks for the hook under the (real) workspace directory. Returns 0 with
 * *out_content NULL when there is none, 0 with the script's text when
 * there is one, or SM_EUNSAFE/SM_ETOOBIG/SM_EIO with a message naming the
 * hook (the call then fails as a tool failure). */
int server_hook_load(const char *workspace_real, char **out_content, size_t *out_len,
                     sm_error *err);
/* The tool's argv wrapped in the bash runner that sources the hook: owned,
 * NULL-terminated. owned_names: variables reasserted after the hook. */
int server_hook_wrap(const char *const *argv, size_t argc, const char *content, const char *nonce,
                     const char *owned_names, char ***out_argv, size_t *out_argc, sm_error *err);
/* Applies the runner's markers to a result: strips the start marker, turns
 * a failure marker (or a missing start marker: bash absent) into ok false,
 * failure_kind "tool" and an error naming the hook. */
void server_hook_finish(const char *nonce, sm_run_result *r);
/* Strips the start marker from the front of a stderr copy (handles). */
void server_hook_strip(const char *nonce, char *data, size_t *len);
const char *server_hook_runner_script(void);

/* Why the gate closed a connection before libmicrohttpd had it. */
typedef enum {
  SM_GATE_DROP_HEAD_TIMEOUT = 0, /* the request head was not there in time */
  SM_GATE_DROP_HEAD_TOO_LARGE,
  SM_GATE_DROP_EVICTED,    /* the oldest waiting one made room */
  SM_GATE_DROP_OVERLOADED, /* no connection left for its class: 503 */
  SM_GATE_DROP_CLOSED,     /* the client went away first */
  SM_GATE_DROP_N,
} server_gate_drop;

typedef struct server_gate_stats {
  long pending;                  /* accepted, request head not complete */
  long open;                     /* libmicrohttpd's connections */
  unsigned long dropped[SM_GATE_DROP_N];
} server_gate_stats;

/* What a request head says about the connection it came on (gate.c). */
typedef enum {
  SM_GATE_HEALTH = 0, /* GET or HEAD /healthz */
  SM_GATE_CONTROL,    /* Authorization: Bearer <the control token> */
  SM_GATE_OTHER,      /* anything else: worker tokens, no token */
  SM_GATE_CLASSES,
} server_gate_class;

/* Length of the request head at the start of buf (through its empty
 * line), or 0 when it is not complete. */
size_t server_gate_head_length(const char *buf, size_t n);
/* The class of a complete head (len bytes, not NUL-terminated). */
server_gate_class server_gate_head_class(const char *head, size_t len, const char *control_token);

/* ---- metrics.c ---- */
typedef struct server_metrics server_metrics;

typedef struct server_metrics_gauges {
  int sandboxes_known;   /* live sandbox counts below are valid */
  long sandboxes[4];     /* by sm_mode (index 0 = none: always 0) */
  /* Keyed and per_tool sandboxes by state: running, frozen, stopped,
   * hibernated (SERVER_SANDBOX_STATES). */
  long sandboxes_by_state[4];
  long calls_in_flight;
  long queue_depth;
  long leases_live;
  long handles_running;
  long handles_total;
  int engine_up;
  int draining;
  int pool_known;        /* pool below is valid (a runner is attached) */
  sm_pool_stats pool;    /* the warm pool (sm_runner_pool_stats) */
  sm_agent_stats agent;  /* in-sandbox agents (sm_runner_agent_stats), with pool_known */
  int http_known;        /* http below is valid (the gate runs) */
  server_gate_stats http; /* connections (server_gate_stats) */
} server_metrics_gauges;

/* The states of sandboxes_by_state, in order (gauges.c). */
extern const char *const server_sandbox_states[4];

server_metrics *server_metrics_new(void);
void server_metrics_free(server_metrics *m);
/* outcome: "ok" or a failure kind name. tool/mode are label values. */
void server_metrics_call(server_metrics *m, const char *tool, const char *mode, const char *outcome,
                         double seconds);
void server_metrics_failure(server_metrics *m, const char *kind);
void server_metrics_http(server_metrics *m, const char *route, int status);
void server_metrics_lease(server_metrics *m, const char *event); /* created, consumed, refused */
void server_metrics_background(server_metrics *m);
/* Prometheus text exposition format 0.0.4. */
int server_metrics_render(server_metrics *m, const server_metrics_gauges *g, common_buf *out);

#endif
