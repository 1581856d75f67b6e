/* Internal to src/lib/mcp: the HTTP headers of a 2026-07-28 request on the
 * streamable HTTP transport, checked against its body (headers.c). */
#ifndef SANDMAN_MCP_HEADERS_H
#define SANDMAN_MCP_HEADERS_H

#include <stddef.h>

#include <json-c/json.h>

#define MCP_HEADER_VALUE_MAX 1024 /* bytes of a decoded Mcp-Name we compare */

/* msg: the parsed body (a request). version, method, name: the values of
 * MCP-Protocol-Version, Mcp-Method and Mcp-Name (NULL when absent). 0 when
 * they are there and say what the body says (Mcp-Name: params.name of
 * tools/call and prompts/get, params.uri of resources/read, params.taskId
 * of tasks/get, tasks/update and tasks/cancel; it may come in the
 * "=?base64?...?=" form), -1 with why otherwise (a HeaderMismatch). */
int mcp_headers_check(json_object *msg, const char *version, const char *method, const char *name,
                      char *why, size_t why_len);

/* Decodes an Mcp-Name value into out (NUL-terminated): as it is, or the
 * bytes of its "=?base64?...?=" form. -1 when the value holds a byte a
 * header may not, or the base64 is broken, or it does not fit. */
int mcp_header_decode(const char *value, char *out, size_t out_len);

#endif
