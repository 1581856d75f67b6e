/* Host MCP servers (broker.mcp_servers): started over stdio by the broker,
 * their tools called for host tools of kind "mcp" (the hostmcp part of
 * issue 16; docs/host-tools.md "Host MCP servers"). */
#ifndef SANDMAN_BROKER_MCP_SERVERS_H
#define SANDMAN_BROKER_MCP_SERVERS_H

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/mcp.h>

typedef struct bk_mcp_servers bk_mcp_servers;

/* servers: the normalized broker.mcp_servers object (borrowed; lives as
 * long as the set). An empty object gives a set with nothing started. */
int bk_mcp_servers_new(bk_mcp_servers **out, json_object *servers, sm_error *err);
/* Stops the servers it started. */
void bk_mcp_servers_free(bk_mcp_servers *s);
/* Calls tool of server with args (borrowed) within timeout_s. A tool that
 * ran and failed is out->is_error with 0; a negative code when the server
 * cannot be reached (SM_EUNSUPPORTED when host MCP servers are not there). */
int bk_mcp_servers_call(bk_mcp_servers *s, const char *server, const char *tool,
                        json_object *args, double timeout_s, volatile int *cancel,
                        sm_mcp_result *out, sm_error *err);

#endif
