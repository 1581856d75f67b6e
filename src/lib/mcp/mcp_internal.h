/* Internal to src/lib/mcp: the JSON-RPC pieces (jsonrpc.c) shared by the
 * session and the transports. */
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
#define MCP_SERVER_BUSY (-32000)        /* implementation-defined: too many calls (up to 2025-11-25) */
#define MCP_REQUEST_CANCELLED (-32800)  /* as LSP: the request was cancelled */
/* 2026-07-28: -32000 to -32019 are legacy, -32020 to -32099 the
 * specification's; an implementation's own codes lie outside -32768 to
 * -32000. */
#define MCP_HEADER_MISMATCH (-32020)
#define MCP_MISSING_CAPABILITY (-32021)
#define MCP_UNSUPPORTED_VERSION (-32022)
#define MCP_BUSY (-31000)               /* sandman's own: too many calls (2026-07-28) */

/* Parses one message (strict JSON, depth-capped, nothing after the value).
 * -1 with *why set when it is not one. */
int mcp_parse(const char *msg, size_t len, size_t max, json_object **out, const char **why);
/* {"jsonrpc": "2.0", "id": id (or null), "error": {"code", "message"}}. */
json_object *mcp_error(json_object *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with "data" (taken: the caller gives up its reference). */
json_object *mcp_error_data(json_object *id, int code, json_object *data, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An error answer with the error object given (taken). */
json_object *mcp_error_wrap(json_object *id, json_object *error);
/* {"jsonrpc": "2.0", "id": id, "result": result} (result taken). */
json_object *mcp_success(json_object *id, json_object *result);
/* A valid request id: a string or an integer. */
int mcp_id_ok(json_object *id);
/* a's JSON text, malloc'd. */
int mcp_answer_text(json_object *a, char **answer, size_t *answer_len, sm_error *err);

#endif
