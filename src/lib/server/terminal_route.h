/* Internal to src/lib/server: the terminals' routes, /v1/terminals...
 * (terminal_route.c; docs/terminals.md). server_http.c hands them the request
 * once its token is known: an attach (GET of a terminal with a WebSocket
 * handshake) is answered 101 from the I/O thread; everything else runs on
 * a call thread and answers through the request's stream. */
#ifndef SANDMAN_SERVER_TERMINAL_ROUTE_H
#define SANDMAN_SERVER_TERMINAL_ROUTE_H

#include <microhttpd.h>

#include "server/server_core.h"
#include "server/stream.h"
#include "server/websocket_conn.h"

typedef struct server_terminal_req server_terminal_req;

/* 1 when url is /v1/terminals or under it. */
int server_terminal_route_match(const char *url);
/* The request, its route and query read and its token checked where that
 * can be done without a body (the terminal's owner): NULL with *a filled
 * (400, 404, 405 with *allow set). */
server_terminal_req *server_terminal_req_new(sm_server *srv, struct MHD_Connection *conn,
                                             const char *url, const char *method, int control,
                                             const char *token, const char **allow,
                                             server_answer *a);
/* An attach: 1 when the request is a WebSocket handshake, then *u (run it
 * with server_ws_upgrade_response and accept) or *a (a refusal: 400, 426).
 * 0: an ordinary request. */
int server_terminal_req_upgrade(server_terminal_req *r, struct MHD_Connection *conn,
                                server_ws_upgrade **u, char accept[SERVER_WS_ACCEPT_LEN + 1],
                                server_answer *a);
/* The body (copied) and the stream the job answers through. */
int server_terminal_req_body(server_terminal_req *r, const char *body, size_t len);
void server_terminal_req_set_stream(server_terminal_req *r, server_stream *s);
void server_terminal_req_free(server_terminal_req *r);
/* The call-thread job (arg: the request, freed at its end). */
void server_terminal_job(void *arg);

#endif
