/* sandman: the Model Context Protocol (MCP), server side.
 *
 * One implementation for every MCP endpoint sandman has (`sandman mcp`
 * over stdio, `/mcp` on the runner, the host-tool route inside a sandbox):
 *
 *   - a tool provider: lists tools (JSON Schema of their arguments, MCP
 *     annotations) and calls one;
 *   - a session: JSON-RPC 2.0 handling, transport-agnostic: one message in,
 *     its answer out (sm_mcp_session_handle). It speaks two eras of the
 *     protocol, chosen per message by what the client sends: the
 *     2026-07-28 revision (no handshake: each request names its protocol
 *     version and the client's capabilities in params._meta;
 *     `server/discover`, `tools/list`, `tools/call`, the tasks extension's
 *     `tasks/get`, `tasks/update`, `tasks/cancel`), and the revisions
 *     opened by `initialize` (2025-11-25, 2025-06-18, 2025-03-26,
 *     2024-11-05: `ping`, `tools/list`, `tools/call`, 2025-11-25's
 *     `tasks/...`); it honours `notifications/cancelled` for a call in
 *     flight. A tool flagged SM_MCP_LONG_RUNNING runs as a task when the
 *     client supports tasks: the request is answered at once with a task
 *     id, polled later;
 *   - transports: stdio (newline-delimited messages, sm_mcp_serve_stdio) and
 *     what the streamable HTTP transport needs as functions a route calls
 *     (sm_mcp_http_*: POST answered with JSON or an SSE stream; for the
 *     initialize era session ids in Mcp-Session-Id, the
 *     MCP-Protocol-Version header, DELETE ends a session; for 2026-07-28
 *     no session, the MCP-Protocol-Version, Mcp-Method and Mcp-Name headers
 *     checked against the body; Origin checks).
 *
 * Everything is bounded: a message's size and JSON depth, calls in flight
 * per session, sessions per table, a session's idle life.
 *
 * Threads: a session may be handed messages from several threads at once
 * (calls run concurrently); the provider's call must be thread-safe for
 * that. */
#ifndef SANDMAN_MCP_H
#define SANDMAN_MCP_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/export.h>
#include <sandman/runner.h>
#include <sandman/run.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The newest revision opened by `initialize`, and the newest stateless one. */
#define SM_MCP_PROTOCOL_LATEST "2025-11-25"
#define SM_MCP_PROTOCOL_STATELESS "2026-07-28"
#define SM_MCP_DEFAULT_MAX_MESSAGE ((size_t)4 << 20)
#define SM_MCP_MAX_CALLS_IN_FLIGHT 16

/* Tool annotations (hints for the client; MCP `annotations`). */
enum {
  SM_MCP_READ_ONLY = 1u << 0,   /* readOnlyHint: changes nothing */
  SM_MCP_DESTRUCTIVE = 1u << 1, /* destructiveHint: may overwrite or delete */
  SM_MCP_IDEMPOTENT = 1u << 2,  /* idempotentHint: repeating it changes nothing more */
  SM_MCP_OPEN_WORLD = 1u << 3,  /* openWorldHint: reaches outside (the network) */
  /* Not an MCP hint: the tool may run long, so a client that supports
   * tasks gets a task for it (its call then runs on a thread of its own
   * and gets request NULL: such a tool must not depend on who asks). */
  SM_MCP_LONG_RUNNING = 1u << 4,
};

typedef struct sm_mcp_tool {
  const char *name;          /* [A-Za-z0-9_.-], 1 to 64 */
  const char *title;         /* for people; may be NULL */
  const char *description;
  const char *input_schema;  /* JSON Schema (text) of the arguments object */
  const char *output_schema; /* of structuredContent; may be NULL */
  unsigned hints;            /* SM_MCP_* */
} sm_mcp_tool;

/* What a tool call gives back. */
typedef struct sm_mcp_result {
  json_object *content;      /* array of content blocks (owned) */
  json_object *structured;   /* structuredContent object, or NULL (owned) */
  int is_error;              /* the tool failed (the model sees why) */
} sm_mcp_result;

SM_API void sm_mcp_result_init(sm_mcp_result *r);
SM_API void sm_mcp_result_dispose(sm_mcp_result *r);
/* Appends a text block; bytes that are not UTF-8 become U+FFFD. */
SM_API int sm_mcp_result_text(sm_mcp_result *r, const char *text, size_t len);
/* is_error and one text block saying why. */
SM_API int sm_mcp_result_error(sm_mcp_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends an image block {"type": "image", "data", "mimeType"}: b64 is the
 * image in base64 (checked to be base64, else SM_EINVAL). */
SM_API int sm_mcp_result_image(sm_mcp_result *r, const char *mime, const char *b64, size_t len);
/* Takes ownership of obj as structuredContent. */
SM_API void sm_mcp_result_structured(sm_mcp_result *r, json_object *obj);

typedef struct sm_mcp_provider {
  /* The tools, borrowed and stable while the provider lives (may be NULL
   * when list is set). */
  const sm_mcp_tool *(*tools)(void *ud, size_t *n);
  /* Calls tool name with args (an object, borrowed). A tool that ran and
   * failed, or arguments it refuses, is out->is_error with 0 returned. A
   * negative code is for what is no tool result: SM_ENOTFOUND (no such
   * tool), SM_ECANCELLED, anything else (an internal error). *cancel
   * becomes non-zero when the client cancels or goes away. request: the
   * transport's opaque pointer for the request this call serves
   * (sm_mcp_session_handle_for, sm_mcp_http_request.context), or NULL. */
  int (*call)(void *ud, void *request, const char *name, json_object *args,
              volatile int *cancel, sm_mcp_result *out, sm_error *err);
  /* When the session ends (may be NULL). */
  void (*free)(void *ud);
  void *ud;
  /* Optional, for tools that depend on who asks (the host-tool route):
   * when set, tools/list answers with the array it makes for the request
   * (MCP tool descriptions, {"name", "description", "inputSchema"...};
   * the session takes ownership), and tools/call hands any name to call,
   * which answers SM_ENOTFOUND for a tool it does not offer. A negative
   * code is a JSON-RPC error with err's message. */
  int (*list)(void *ud, void *request, json_object **tools, sm_error *err);
} sm_mcp_provider;

typedef struct sm_mcp_server_info {
  const char *name;          /* serverInfo.name, e.g. "sandman" */
  const char *title;         /* may be NULL */
  const char *version;
  const char *instructions;  /* may be NULL */
  size_t max_message;        /* 0: SM_MCP_DEFAULT_MAX_MESSAGE */
} sm_mcp_server_info;

typedef struct sm_mcp_session sm_mcp_session;

/* A session over provider (copied; its free runs when the session is
 * freed). Checks every tool's name and schemas. */
SM_API int sm_mcp_session_new(sm_mcp_session **out, const sm_mcp_server_info *info,
                       const sm_mcp_provider *provider, sm_error *err);
SM_API void sm_mcp_session_free(sm_mcp_session *s);
/* Handles one JSON-RPC message (msg[0..len), not NUL-terminated). *answer
 * gets the answer's JSON text (NUL-terminated, the caller frees it), or
 * NULL when there is none (a notification, a response). Protocol errors are
 * JSON-RPC error answers, not failures: a negative code only when no answer
 * can be made (out of memory). cancel (may be NULL): a flag the transport
 * sets when the message's sender is gone. */
SM_API int sm_mcp_session_handle(sm_mcp_session *s, const char *msg, size_t len, volatile int *cancel,
                          char **answer, size_t *answer_len, sm_error *err);
/* The same, for the request whose opaque pointer is request (handed to the
 * provider's list and call: e.g. who is asking). */
SM_API int sm_mcp_session_handle_for(sm_mcp_session *s, void *request, const char *msg, size_t len,
                                     volatile int *cancel, char **answer, size_t *answer_len,
                                     sm_error *err);
/* Sets the cancel flag of every call in flight, and of every call that
 * starts later (the transport closed: the session is ending). */
SM_API void sm_mcp_session_cancel_all(sm_mcp_session *s);
/* The version `initialize` negotiated, or NULL before (and for a session
 * that only ever served 2026-07-28 requests, which negotiate nothing). */
SM_API const char *sm_mcp_session_protocol(const sm_mcp_session *s);
/* 1 when version is one this implementation speaks (either era). */
SM_API int sm_mcp_protocol_supported(const char *version);
/* Whether a message is an `initialize` request (for the HTTP transport,
 * which makes a session for it). */
SM_API int sm_mcp_message_is_initialize(const char *msg, size_t len);

/* ---- stdio ---- */
/* Serves s over in_fd/out_fd (newline-delimited JSON-RPC) until in_fd
 * ends: tool calls run on their own threads (at most
 * SM_MCP_MAX_CALLS_IN_FLIGHT; more are answered with an error), the rest
 * on the reading thread. At the end, calls still running are cancelled and
 * waited for. A line over the message cap is answered with an error and
 * skipped. stop (may be NULL): a flag a signal handler sets; a read
 * interrupted by the signal then ends the loop as an end of input would. */
SM_API int sm_mcp_serve_stdio(sm_mcp_session *s, int in_fd, int out_fd, volatile int *stop,
                       sm_error *err);

/* ---- streamable HTTP (the route calls these) ---- */
typedef struct sm_mcp_http sm_mcp_http;

/* Makes the session of a new `initialize` for owner (the identity the
 * route authenticated, e.g. "control" or "worker:K"). */
typedef int (*sm_mcp_session_factory)(void *ud, const char *owner, sm_mcp_session **out,
                                      sm_error *err);

typedef struct sm_mcp_http_options {
  sm_mcp_session_factory factory;
  void *factory_ud;
  unsigned max_sessions;       /* 0: 64 */
  double idle_timeout_s;       /* 0: 3600; an idle session past it is ended */
  size_t max_message;          /* 0: SM_MCP_DEFAULT_MAX_MESSAGE */
  const char *const *origins;  /* Origin values allowed (a request with any
                                  other Origin is 403); NULL: none allowed */
  size_t n_origins;
  unsigned max_sessions_per_owner; /* 0: no cap but max_sessions */
} sm_mcp_http_options;

SM_API int sm_mcp_http_new(sm_mcp_http **out, const sm_mcp_http_options *opts, sm_error *err);
/* Ends every session (cancelling their calls) and frees the table. */
SM_API void sm_mcp_http_free(sm_mcp_http *h);

typedef struct sm_mcp_http_request {
  const char *method;           /* "POST", "GET", "DELETE", ... */
  const char *accept;           /* headers; NULL when absent */
  const char *content_type;
  const char *session_id;       /* Mcp-Session-Id */
  const char *protocol_version; /* MCP-Protocol-Version */
  const char *origin;
  const char *body;
  size_t body_len;
  const char *owner;            /* who is asking (authenticated by the route) */
  volatile int *cancel;         /* set when the client disconnects; may be NULL */
  void *context;                /* handed to the provider (sm_mcp_session_handle_for); may be NULL */
  const char *mcp_method;       /* Mcp-Method (2026-07-28) */
  const char *mcp_name;         /* Mcp-Name (2026-07-28) */
} sm_mcp_http_request;

typedef struct sm_mcp_http_answer {
  int status;
  const char *content_type;     /* static; NULL: no body */
  char *body;                   /* owned (sm_mcp_http_answer_dispose) */
  size_t body_len;
  char session_id[65];          /* Mcp-Session-Id to send, or "" */
  const char *allow;            /* Allow header of a 405, else NULL */
} sm_mcp_http_answer;

/* Answers one request to the MCP endpoint. Always fills out (errors are
 * HTTP statuses with a JSON-RPC error body); a negative code only when
 * out of memory. */
SM_API int sm_mcp_http_handle(sm_mcp_http *h, const sm_mcp_http_request *req, sm_mcp_http_answer *out,
                       sm_error *err);
SM_API void sm_mcp_http_answer_dispose(sm_mcp_http_answer *a);
/* Ends sessions idle longer than the timeout (also done on each request). */
SM_API void sm_mcp_http_expire(sm_mcp_http *h);
/* Sessions alive now. */
SM_API unsigned sm_mcp_http_count(sm_mcp_http *h);

/* ---- the sandbox's tools (sandman mcp, /mcp on the runner) ----
 * execute (a shell command), read_file, write_file, edit_file (exact string
 * replacement), ls, glob, grep: each with its JSON Schema and annotations,
 * running in one keyed sandbox per session through sm_run and the files
 * API (sandman/files.h). */

/* Resolves one call of tool ("shell" for execute, else the MCP tool's
 * name) into req, which comes initialised (sm_run_request_init): the
 * configuration's settings, tool policy and keys, the session's run or
 * worker id, workspace. Return SM_EPOLICY (or any code) with err's message
 * to refuse the call: the model reads the message. Strings req points to
 * must live as long as the provider. */
typedef int (*sm_mcp_prepare_fn)(void *ud, const char *tool, sm_run_request *req, sm_error *err);

typedef struct sm_mcp_sandbox_options {
  sm_runner *runner;            /* borrowed */
  sm_mcp_prepare_fn prepare;
  void *prepare_ud;
  void (*prepare_free)(void *ud); /* when the session ends (may be NULL) */
  size_t max_read_bytes;        /* read_file and edit_file; 0: 1 MiB */
  size_t max_output_bytes;      /* execute's stdout and stderr each; 0: 256 KiB */
  int network;                  /* the sandbox has a network: execute is open-world */
  /* The session's sandbox (its container id) was snapshot by the tool
   * snapshot (may be NULL; called with prepare_ud): the runner ends its
   * preview URLs there, as its snapshot route does. */
  void (*snapshotted)(void *ud, const char *container_id);
} sm_mcp_sandbox_options;

/* A provider of the sandbox's tools (out->free frees it, and calls
 * prepare_free). */
SM_API int sm_mcp_sandbox_provider(sm_mcp_provider *out, const sm_mcp_sandbox_options *opts,
                            sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
