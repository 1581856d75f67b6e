/* GET|POST|... /v1/sandboxes/{id}/ports/{port}/{path}: one HTTP request
 * relayed to a port on a keyed sandbox's own loopback through sandman's
 * agent (port_route.c, docs/ports.md#the-runners-route). */
#ifndef SANDMAN_SERVER_PORT_ROUTE_H
#define SANDMAN_SERVER_PORT_ROUTE_H

#include <stddef.h>

#include <microhttpd.h>

#include "server/server_core.h"
#include "server/stream.h"

/* The answer's body kept at most (the whole answer is read before it is
 * passed on). */
#define SERVER_PORT_ANSWER_MAX ((size_t)16 << 20)

typedef struct server_port_req server_port_req;

/* On the I/O thread: the request's head as it goes to the sandbox (the
 * method, path and query, the headers passed on). NULL: out of memory. */
server_port_req *server_port_req_new(sm_server *srv, struct MHD_Connection *conn,
                                     const char *sandbox_id, unsigned port, const char *path,
                                     const char *method, int control, const char *token);
/* The request came to /preview/{token}: the token alone names the sandbox
 * and port (server/preview.h); "" or an unknown one is answered as
 * "no such preview". */
void server_port_req_preview(server_port_req *r, const char *token);
int server_port_req_body(server_port_req *r, const char *body, size_t len);
void server_port_req_set_stream(server_port_req *r, server_stream *s);
/* The call thread's job: relays, answers through the stream, frees r. */
void server_port_job(void *arg);
void server_port_req_free(server_port_req *r);

#endif
