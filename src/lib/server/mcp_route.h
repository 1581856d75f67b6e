/* /mcp on the runner: the MCP streamable HTTP transport (sandman/mcp.h)
 * with the sandbox's tools (mcp_route.c). */
#ifndef SANDMAN_SERVER_MCP_ROUTE_H
#define SANDMAN_SERVER_MCP_ROUTE_H

#include <microhttpd.h>

#include "server/server_core.h"

typedef struct server_mcp_req server_mcp_req;

/* The session table (srv->mcp); nothing when the runner has no engine. */
int server_mcp_route_start(sm_server *srv, sm_error *err);
/* Ends the sessions idle past --mcp-session-idle (their own sandboxes go). */
void server_mcp_route_expire(sm_server *srv);
/* Ends every session (their calls cancelled, their own sandboxes removed). */
void server_mcp_route_stop(sm_server *srv);

/* The request's headers and owner on the I/O thread: the control token, or
 * the worker token of the query's worker_key (sessions of that worker, in
 * its per_worker sandbox). NULL with *a filled when refused. */
server_mcp_req *server_mcp_req_new(sm_server *srv, struct MHD_Connection *conn, const char *method,
                                   const char *id, int control, const char *token,
                                   server_answer *a);
int server_mcp_req_body(server_mcp_req *r, const char *body, size_t len);
void server_mcp_req_set_stream(server_mcp_req *r, server_stream *s);
void server_mcp_req_free(server_mcp_req *r);
/* The call-thread job (arg: the request, freed at its end). */
void server_mcp_job(void *arg);

#endif
