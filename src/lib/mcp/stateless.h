/* Internal to src/lib/mcp: the requests of the 2026-07-28 revision
 * (stateless.c), which carry their protocol version and the client's
 * capabilities in params._meta and need no initialize. */
#ifndef SANDMAN_MCP_STATELESS_H
#define SANDMAN_MCP_STATELESS_H

#include <json-c/json.h>

#include "mcp/session_state.h"

/* The answer to one such request (id set) or notification (id NULL: no
 * answer, NULL). *status: the HTTP status the streamable HTTP transport
 * answers with (400 for a malformed or unsupported request, 404 for an
 * unknown method, else 200). */
json_object *mcp_stateless(sm_mcp_session *s, void *request, json_object *id, const char *method,
                           json_object *params, volatile int *outer, int *status);

#endif
