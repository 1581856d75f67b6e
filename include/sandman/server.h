/* sandman: the runner service behind `sandman worker start`.
 *
 * An authenticated HTTP API (libmicrohttpd) on a unix socket or TCP that
 * runs tool calls with sm_run. Requests are read by a small pool of I/O
 * threads; calls that block (execute, engine queries) are handed to a
 * bounded pool of call threads while their connection is suspended, so
 * /healthz keeps answering while every call thread is busy.
 *
 * Tokens: every route but GET /healthz needs `Authorization: Bearer TOKEN`,
 * the control token or a per-worker token derived from it (see
 * sm_token_derive); a worker token serves its own worker key only. */
#ifndef SANDMAN_SERVER_H
#define SANDMAN_SERVER_H

#include <sandman/export.h>

#include <stddef.h>

#include <sandman/audit.h>
#include <sandman/config.h>
#include <sandman/error.h>
#include <sandman/mode.h>
#include <sandman/runner.h>
#include <sandman/run.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The variable that may hold the control token when no --token-file is
 * given. The runner removes it from its own environment once read. */
#define SM_TOKEN_ENV "SANDMAN_TOKEN"
#define SM_TOKEN_MIN_LEN 16
#define SM_TOKEN_MAX_LEN 4096
/* Domain separation prefix of per-worker tokens; a NUL byte follows it. */
#define SM_WORKER_TOKEN_PREFIX "sandman-worker-token-v1"

/* hex(HMAC-SHA256(key = control_token, msg = "sandman-worker-token-v1" NUL
 * worker_key)) into out (64 hex digits and a NUL). */
SM_API int sm_token_derive(const char *control_token, const char *worker_key, char out[65],
                           sm_error *err);
/* Reads the control token from token_file (trailing newlines stripped) or,
 * when token_file is NULL, from $SANDMAN_TOKEN. The token must be 16 to 4096
 * visible ASCII characters. Writes it NUL-terminated to out. */
SM_API int sm_token_load(const char *token_file, char *out, size_t out_len, sm_error *err);
/* Constant-time equality of two NUL-terminated tokens (1 equal, 0 not). */
SM_API int sm_token_equal(const char *a, const char *b);

/* One tool call as the server hands it to the sandbox layer. Tests replace
 * it; NULL means sm_run on the server's runner. */
typedef int (*sm_server_run_fn)(void *userdata, const sm_run_request *req,
                                sm_run_result *out, sm_error *err);

typedef struct sm_server sm_server;

typedef struct sm_server_options {
  const char *listen;          /* "unix:PATH" or "tcp://HOST:PORT"; NULL: default socket */
  const char *token;           /* control token (copied); required */
  unsigned threads;            /* call threads; 0: 16 */
  unsigned io_threads;         /* libmicrohttpd pool; 0: 2 */
  unsigned max_connections;    /* 0: 256 */
  unsigned max_queue;          /* calls waiting for a thread before 503; 0: 1024 */
  size_t max_body;             /* request body cap; 0: 4 MiB */
  size_t max_file_body;        /* a file or tar body of the files routes; 0: 1 GiB */
  const char *credentials_file;/* NULL: no leases can carry credentials */
  const char *workspaces_root; /* NULL: requests may not name a workspace */
  const char *pool;            /* --pool name (labels and logs only) */
  const char *project;         /* default project of calls */
  const char *project_environment;
  double background_max_s;     /* longest life of a backgrounded call; 0: 3600 */
  double mcp_session_idle_s;   /* an MCP session idle this long ends; 0: 600 */
  double reap_interval_s;      /* how often idle sandboxes and sessions are reaped; 0: 60 */
  unsigned max_handles;        /* 0: 1024 */
  /* /mcp sessions one token may hold at once (the control token, or one
   * worker key), so that one cannot take the table (64) from the others;
   * 0: 8. */
  unsigned mcp_sessions_per_token;
  /* Terminals (docs/terminals.md): how long one lives without a client
   * (and is kept after its program ended), 0: 600 s; how many run in one
   * sandbox at once, 0: 8; how many the runner keeps, 0: 64 (at most
   * 1024); bytes of scrolled-off text kept per terminal, 0: 1 MiB. */
  double terminal_grace_s;
  unsigned terminals_per_sandbox;
  unsigned max_terminals;
  size_t terminal_scrollback;
  /* File events (GET /v1/files/watch): watches at once in one sandbox,
   * 0: 8; of one token (the control token, or one worker key), 0: 16;
   * events held for a slow client per watch before an "overflow", 0: 4096. */
  unsigned watches_per_sandbox;
  unsigned watches_per_token;
  size_t watch_queue;
  /* Borrowed, must outlive the server. config may be NULL (built-ins). */
  sm_runner *runner;
  const sm_config *config;
  /* The worker's own settings as flags (--sandbox-mode ...): the top of the
   * precedence for every call unless the request's "mode" overrides mode. */
  const sm_config_flags *flags;
  /* The worker's mode after the health check and fallback, for /healthz and
   * the policy on per-request modes; degraded: the mode was stepped down. */
  sm_mode mode;
  int degraded;
  sm_server_run_fn run;        /* NULL: sm_run */
  void *run_userdata;
  /* The audit trail (borrowed, must outlive the server; NULL: none): every
   * decision of the runner, and GET /v1/audit for the control token. */
  sm_audit *audit;
  /* The host-tool broker (sandman/broker.h; borrowed, must outlive the
   * runner, whose sandboxes' routes keep using it; NULL: no host tools):
   * calls whose agent and tool it offers host tools get the route, and
   * GET/POST /v1/approvals answer its pending approvals. The server lends
   * it the credentials file while it runs. */
  struct sm_broker *broker;
  /* Code contexts (docs/code.md): runs waiting or running in one sandbox
   * at once (more: 429), 0: 16; contexts of one sandbox, 0: 8; output of
   * one run, bytes, 0: 16 MiB (a run may ask for less). */
  unsigned code_queue;
  unsigned code_max_contexts;
  size_t code_max_output;
} sm_server_options;

/* Validates options, loads the credentials file (mode 0600 or stricter),
 * binds the socket and starts serving. The listening address (with the
 * real port for tcp://HOST:0) is sm_server_address(). */
SM_API int sm_server_start(sm_server **out, const sm_server_options *opts, sm_error *err);
SM_API const char *sm_server_address(const sm_server *srv); /* borrowed */
/* The configuration in force (borrowed). A reload (SIGHUP to `sandman
 * worker start`) replaces it: calls that come afterwards resolve with the
 * new one; calls in flight keep the one they started with, so the caller
 * keeps every configuration it gave until sm_server_free. */
SM_API const sm_config *sm_server_config(sm_server *srv);
SM_API void sm_server_set_config(sm_server *srv, const sm_config *cfg);
/* Replaces the broker (a reload; the caller keeps the old one alive as long
 * as the runner: routes of running sandboxes still hold it). */
SM_API void sm_server_set_broker(sm_server *srv, struct sm_broker *broker);

/* Clean stop: no new connections or calls, calls in flight run to their end
 * (their own timeouts bound this), backgrounded calls are killed, per_tool
 * sandboxes left by this instance are removed, the socket file unlinked. */
SM_API void sm_server_stop(sm_server *srv);
SM_API void sm_server_free(sm_server *srv);

/* The default unix socket path: $XDG_RUNTIME_DIR/sandman/sandman.sock, or
 * /run/sandman/sandman.sock for root, or /tmp/sandman-UID/sandman.sock. */
SM_API int sm_server_default_socket(char *buf, size_t len, sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
