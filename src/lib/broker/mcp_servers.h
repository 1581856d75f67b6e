/* Host MCP servers (broker.mcp_servers): started over stdio by the broker
 * on first use, their tools re-exported into the catalog and called for
 * host tools of kind "mcp" (docs/host-tools.md "Host MCP servers"). */
#ifndef SANDMAN_BROKER_MCP_SERVERS_H
#define SANDMAN_BROKER_MCP_SERVERS_H

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/mcp.h>

typedef struct bk_mcp_servers bk_mcp_servers;

/* servers: the normalized broker.mcp_servers object (borrowed; lives as
 * long as the set). An empty object gives a set with nothing started. */
int broker_mcp_servers_new(bk_mcp_servers **out, json_object *servers, sm_error *err);
/* Stops the servers it started. */
void broker_mcp_servers_free(bk_mcp_servers *s);
/* Calls tool of server with args (borrowed) within timeout_s. A tool that
 * ran and failed, an error the server answers, or a server that died in
 * the call is out->is_error with 0; a negative code when the server cannot
 * be started, SM_ETIMEOUT, SM_ECANCELLED (both tell the server). */
int broker_mcp_servers_call(bk_mcp_servers *s, const char *server, const char *tool,
                            json_object *args, double timeout_s, volatile int *cancel,
                            sm_mcp_result *out, sm_error *err);
/* The tools the servers re-export, each server started once: an array
 * (a reference, shared: do not change it) of catalog entries {"name"
 * (prefix + the server's name), "description", "input_schema", "kind":
 * "mcp", "mcp": {"server", "tool"}, "timeout", "schema_by_server": true},
 * filtered by each server's `tools` globs; cached after the first success.
 * A name two servers give is SM_ECONFIG. */
int broker_mcp_servers_tools(bk_mcp_servers *s, json_object **tools, sm_error *err);
/* Holds r to max bytes (its content's and structuredContent's JSON): over
 * it, the text of its blocks cut at max and "[output truncated at N
 * bytes]"; other blocks and structuredContent are dropped. */
void broker_mcp_result_cap(sm_mcp_result *r, size_t max);

#endif
