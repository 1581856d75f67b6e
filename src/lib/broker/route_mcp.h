/* MCP over the host-tool route (`/mcp` inside the sandbox; the hostmcp
 * part of issue 16). */
#ifndef SANDMAN_BROKER_ROUTE_MCP_H
#define SANDMAN_BROKER_ROUTE_MCP_H

#include <stddef.h>

#include <sandman/broker.h>
#include <sandman/hostroute.h>

#include "broker/http_msg.h"

/* Answers one request to /mcp (req parsed by the handler; body borrowed)
 * from who into *resp (a complete HTTP/1.1 response, malloc'd). Returns 0,
 * or a negative code when no answer can be made (out of memory). */
int broker_route_mcp(sm_broker *b, const sm_route_caller *who, const bk_http_msg *req, char **resp,
                     size_t *resp_len, sm_error *err);
/* Ends every MCP session of b (in sm_broker_free, before the catalog). */
void broker_route_mcp_dispose(sm_broker *b);

/* The MCP session table of a broker, made on the first request. */
typedef struct bk_route_mcp_state bk_route_mcp_state;

#endif
