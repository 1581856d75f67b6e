/* The MCP tool run_code (code_tool.c): code in the session sandbox's
 * default code context (docs/code.md), its images as MCP image content. */
#ifndef SANDMAN_MCP_CODE_TOOL_H
#define SANDMAN_MCP_CODE_TOOL_H

#include <json-c/json.h>

#include <sandman/mcp.h>

extern const char mcp_code_tool_schema[];
extern const char mcp_code_tool_output[];
/* The check_args spec of its arguments (sandbox_tools.c). */
#define MCP_CODE_TOOL_ARGS "code:S,context:s,timeout_s:n"

/* Runs args' code in req's sandbox (req prepared for the tool "code"):
 * 0 with *out filled (a failed run is out->is_error), or SM_ECANCELLED. */
int mcp_code_tool_call(sm_runner *runner, const sm_run_request *req, json_object *args,
                       size_t max_text, sm_mcp_result *out);

#endif
