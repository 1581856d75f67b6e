/* Internal to src/mcp: JSON-RPC pieces shared by the session and the
 * transports. */
#ifndef SANDMAN_MCP_INTERNAL_H
#define SANDMAN_MCP_INTERNAL_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>

/* JSON-RPC 2.0 error codes, and the MCP ones. */
#define MCP_PARSE_ERROR (-32700)
#define MCP_INVALID_REQUEST (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS (-32602)
#define MCP_INTERNAL_ERROR (-32603)
#define MCP_SERVER_BUSY (-32000)        /* implementation-defined: too many calls */
#define MCP_REQUEST_CANCELLED (-32800)  /* as LSP: the request was cancelled */

/* Parses one message (strict JSON, depth-capped, nothing after the value).
 * -1 with *why set when it is not one. */
int mcp_parse(const char *msg, size_t len, size_t max, json_object **out, const char **why);
/* {"jsonrpc": "2.0", "id": id (or null), "error": {"code", "message"}}. */
json_object *mcp_error(json_object *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* a's JSON text, malloc'd. */
int mcp_answer_text(json_object *a, char **answer, size_t *answer_len, sm_error *err);

#endif
