/* Internal to src/lib/mcp: the terminal tools of the sandbox's MCP tools
 * (terminal_tools.c; docs/mcp.md): terminal_open, terminal_send,
 * terminal_screen and terminal_close, so that a model can drive a REPL, a
 * debugger or a TUI across its turns. The terminals are the session's own
 * (at most MCP_TERMINALS_MAX), in the session's keyed sandbox, and end
 * with the session. */
#ifndef SANDMAN_MCP_TERMINAL_TOOLS_H
#define SANDMAN_MCP_TERMINAL_TOOLS_H

#include <json-c/json.h>

#include <sandman/mcp.h>
#include <sandman/runner.h>
#include <sandman/run.h>

#define MCP_TERMINALS_MAX 4

typedef struct mcp_terminals mcp_terminals;

/* Fills req for a call of tool "terminal" in the session's sandbox (the
 * provider's prepare); 0, or -1 with out filled (a tool error). */
typedef int (*mcp_terminal_prepare_fn)(void *ud, volatile int *cancel, sm_run_request *req,
                                       sm_mcp_result *out);

mcp_terminals *mcp_terminals_new(sm_runner *runner, mcp_terminal_prepare_fn prepare, void *ud);
/* Ends every terminal of the session and waits for them. */
void mcp_terminals_free(mcp_terminals *ts);

/* The tools (args already checked against their schemas' keys and types);
 * 0, or SM_ENOMEM. A refusal is a tool error in out. */
int mcp_terminal_open(mcp_terminals *ts, json_object *args, volatile int *cancel,
                      sm_mcp_result *out);
int mcp_terminal_send(mcp_terminals *ts, json_object *args, volatile int *cancel,
                      sm_mcp_result *out);
int mcp_terminal_screen(mcp_terminals *ts, json_object *args, volatile int *cancel,
                        sm_mcp_result *out);
int mcp_terminal_close(mcp_terminals *ts, json_object *args, volatile int *cancel,
                       sm_mcp_result *out);

/* The tools' input schemas. */
extern const char mcp_terminal_schema_open[], mcp_terminal_schema_send[],
    mcp_terminal_schema_screen[], mcp_terminal_schema_close[];
/* Their output schema: every tool answers with the screen. */
extern const char mcp_terminal_out_screen[];

#endif
