/* Internal to src/lib/mcp: tools/list and tools/call of a session
 * (tool_calls.c), in its request or as a task. */
#ifndef SANDMAN_MCP_TOOL_CALLS_H
#define SANDMAN_MCP_TOOL_CALLS_H

#include <json-c/json.h>

#include <sandman/error.h>

#include "mcp/session_state.h"

/* Checks the provider's tools and builds the tools/list arrays. */
int mcp_tools_build(sm_mcp_session *s, sm_error *err);
/* The tools/list answer. with_tasks: each long-running tool says
 * execution.taskSupport "optional" (a 2025-11-25 session). */
json_object *mcp_tools_list(sm_mcp_session *s, void *request, json_object *id, json_object *params,
                            int with_tasks);
/* The tools/call answer: the tool's result, or a task's (the work then
 * goes on on a thread of its own). outer: the transport's cancel flag. */
json_object *mcp_tools_call(sm_mcp_session *s, void *request, json_object *id, json_object *params,
                            volatile int *outer, const mcp_call_mode *mode);
/* notifications/cancelled: the call in flight with that request id. */
void mcp_calls_cancel_id(sm_mcp_session *s, json_object *id);

#endif
