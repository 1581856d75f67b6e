/* The MCP tools snapshot, fork, rollback, diff, pause and resume
 * (snapshot_tools.c): an agent branches its own work and rests its own
 * sandbox. Each acts on the session's own keyed
 * sandbox (the one its tool calls run in) and on the snapshots of the
 * session's principal only, as the runner's snapshot routes do for that
 * principal (docs/mcp.md, docs/state.md). */
#ifndef SANDMAN_MCP_SNAPSHOT_TOOLS_H
#define SANDMAN_MCP_SNAPSHOT_TOOLS_H

#include <json-c/json.h>

#include <sandman/mcp.h>

extern const char mcp_snapshot_schema[];
extern const char mcp_snapshot_out[];
extern const char mcp_fork_schema[];
extern const char mcp_fork_out[];
extern const char mcp_rollback_schema[];
extern const char mcp_rollback_out[];
extern const char mcp_diff_schema[];
extern const char mcp_diff_out[];
extern const char mcp_pause_schema[];
extern const char mcp_resume_schema[];
extern const char mcp_rest_out[];

/* The check_args specs of their arguments (sandbox_tools.c). */
#define MCP_SNAPSHOT_ARGS "name:s"
#define MCP_FORK_ARGS "snapshot:S,count:i,prefix:s"
#define MCP_ROLLBACK_ARGS "snapshot:S"
#define MCP_DIFF_ARGS "snapshot:S"
#define MCP_PAUSE_ARGS "tier:s"
#define MCP_RESUME_ARGS ""

/* Each runs on req (prepared for the tool of its name): 0 with *out
 * filled (a refusal is out->is_error), or SM_ENOMEM. */
int mcp_snapshot_call(const sm_mcp_sandbox_options *o, const sm_run_request *req, json_object *args,
                      sm_mcp_result *out);
int mcp_fork_call(sm_runner *runner, const sm_run_request *req, json_object *args,
                  sm_mcp_result *out);
int mcp_rollback_call(sm_runner *runner, const sm_run_request *req, json_object *args,
                      sm_mcp_result *out);
int mcp_diff_call(sm_runner *runner, const sm_run_request *req, json_object *args,
                  sm_mcp_result *out);
/* pause (pause = 1, args {"tier"}) or resume the session's own sandbox. */
int mcp_rest_call(sm_runner *runner, const sm_run_request *req, json_object *args, int pause,
                  sm_mcp_result *out);

#endif
