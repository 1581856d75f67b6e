/* sandman: an MCP client over stdio, for the host MCP servers the broker
 * relays into sandboxes (`broker.mcp_servers`, docs/host-tools.md).
 *
 * It starts the server's command with no shell, in its own process group,
 * with a scrubbed environment (only what the options give) and no other
 * file descriptors; speaks newline-delimited JSON-RPC 2.0 to it:
 * `initialize` + `notifications/initialized`, `tools/list` (following
 * `nextCursor`, bounded), `tools/call` with a timeout, and
 * `notifications/cancelled` when a call is given up. Every message from
 * the server has a hard size cap; a server that breaks the protocol is
 * stopped. A server that died is started again once, when next used; a
 * second death is final.
 *
 * Threads: calls may be made from several threads at once; the answers
 * are matched to them by id. */
#ifndef SANDMAN_MCP_CLIENT_H
#define SANDMAN_MCP_CLIENT_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/export.h>
#include <sandman/mcp.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_MCP_CLIENT_MAX_TOOLS 1024
#define SM_MCP_CLIENT_MAX_PAGES 64

typedef struct sm_mcp_client_options {
  const char *name;             /* for messages ("MCP server 'fs'") */
  const char *const *argv;      /* the command, NULL-terminated; argv[0] without a
                                   slash is looked up in the PATH given in env (else
                                   the default PATH) */
  const char *const *env;       /* "NAME=value" entries, NULL-terminated: the whole
                                   environment the server gets, plus a default PATH
                                   when none is given; may be NULL */
  const char *cwd;              /* NULL: "/" */
  double timeout_s;             /* start-up and tools/list; 0: 30 */
  size_t max_message;           /* each message from the server; 0: SM_MCP_DEFAULT_MAX_MESSAGE */
  int stderr_fd;                /* where the server's stderr goes; -1 (or 0): /dev/null */
} sm_mcp_client_options;

typedef struct sm_mcp_client sm_mcp_client;

/* Starts the server and initializes the session. SM_ENOTFOUND when the
 * command is not found, SM_EPROTOCOL when it does not speak MCP,
 * SM_ETIMEOUT when it does not answer in time. */
SM_API int sm_mcp_client_start(sm_mcp_client **out, const sm_mcp_client_options *opts,
                               sm_error *err);
/* Closes the server's input, then ends its process group (TERM, KILL)
 * and waits for it. */
SM_API void sm_mcp_client_free(sm_mcp_client *c);

/* The server's tools (every page), as the array of tool descriptions it
 * sent (caller owns it). At most SM_MCP_CLIENT_MAX_TOOLS tools over at most
 * SM_MCP_CLIENT_MAX_PAGES pages, else SM_ETOOBIG. */
SM_API int sm_mcp_client_tools(sm_mcp_client *c, json_object **tools, sm_error *err);

/* Calls tool with args (an object, borrowed; NULL: {}). The tool's answer
 * (also an error it reports) is out with 0 returned; a JSON-RPC error is
 * SM_EPROTOCOL (unknown tool, bad arguments: err has the server's message),
 * SM_ETIMEOUT after timeout_s (0: 60) and SM_ECANCELLED when *cancel (may
 * be NULL) becomes non-zero: both send notifications/cancelled. */
SM_API int sm_mcp_client_call(sm_mcp_client *c, const char *tool, json_object *args,
                              double timeout_s, volatile int *cancel, sm_mcp_result *out,
                              sm_error *err);

/* The server's pid (0 when not running); for tests and diagnostics. */
SM_API int sm_mcp_client_pid(sm_mcp_client *c);

#ifdef __cplusplus
}
#endif
#endif
