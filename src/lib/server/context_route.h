/* The code contexts' routes of the runner (context_route.c,
 * docs/http-api.md#code-contexts):
 *
 *   GET    /v1/contexts                      the sandbox's contexts
 *   POST   /v1/contexts                      make one
 *   GET    /v1/contexts/{name}               describe it
 *   DELETE /v1/contexts/{name}               delete it
 *   POST   /v1/contexts/{name}/run           run code: NDJSON events
 *   POST   /v1/contexts/{name}/interrupt     interrupt its running cell
 *   POST   /v1/contexts/{name}/restart       a fresh kernel
 *
 * The sandbox is named as execute names it (sandbox_id, or run_id or
 * worker_key, mode, project, agent, user): in the JSON body of a POST, in
 * the query of a GET or DELETE. */
#ifndef SANDMAN_SERVER_CONTEXT_ROUTE_H
#define SANDMAN_SERVER_CONTEXT_ROUTE_H

#include <microhttpd.h>

#include "server/server_core.h"

typedef struct context_req context_req;

/* >= 0 for a route of url and method, -1 for none (404), -2 for a route
 * that does not take the method (its Allow header in *allow). */
int server_context_route_match(const char *url, const char *method, const char **allow);

/* The request on the I/O thread: a GET or DELETE has its query read and its
 * token checked now (the control token, or the worker token of the query's
 * worker_key); a POST's token waits for its body. NULL with *a filled when
 * refused. */
context_req *server_context_req_new(sm_server *srv, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *id, int control,
                                    const char *token, server_answer *a);
int server_context_req_body(context_req *r, const char *body, size_t len);
void server_context_req_set_stream(context_req *r, server_stream *s);
void server_context_req_free(context_req *r);
/* The call-thread job (arg: the request, freed at its end; it finishes the
 * stream with the answer). */
void server_context_job(void *arg);

#endif
