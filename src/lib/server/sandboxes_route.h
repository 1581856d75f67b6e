/* The sandboxes as resources on the runner (sandboxes_route.c). */
#ifndef SANDMAN_SERVER_SANDBOXES_ROUTE_H
#define SANDMAN_SERVER_SANDBOXES_ROUTE_H

#include <microhttpd.h>

#include "server/server_core.h"

typedef enum {
  SM_SANDBOXES_LIST = 0,  /* GET /v1/sandboxes */
  SM_SANDBOXES_CREATE,    /* POST /v1/sandboxes */
  SM_SANDBOXES_GET,       /* GET /v1/sandboxes/{id} */
  SM_SANDBOXES_DELETE,    /* DELETE /v1/sandboxes/{id} */
  SM_SANDBOXES_KEEPALIVE, /* POST /v1/sandboxes/{id}/keepalive */
  SM_SANDBOXES_PAUSE,     /* POST /v1/sandboxes/{id}/pause */
  SM_SANDBOXES_RESUME,    /* POST /v1/sandboxes/{id}/resume */
  SM_SANDBOXES_SNAPSHOT,  /* POST /v1/sandboxes/{id}/snapshot (snapshots_route.c) */
  SM_SANDBOXES_ROLLBACK,  /* POST /v1/sandboxes/{id}/rollback */
  SM_SANDBOXES_DIFF,      /* GET /v1/sandboxes/{id}/diff */
  SM_SANDBOXES_FORK,      /* POST /v1/sandboxes/fork */
  SM_SNAPSHOTS_LIST,      /* GET /v1/snapshots */
  SM_SNAPSHOTS_GET,       /* GET /v1/snapshots/{name} */
  SM_SNAPSHOTS_DELETE,    /* DELETE /v1/snapshots/{name} */
} server_sandboxes_op;

typedef struct server_sandboxes_req server_sandboxes_req;

/* Reads the query on the I/O thread (worker_key; for a list all and
 * label; for a pause tier and no_wait) and checks a worker token against the query's worker_key first
 * (a create checks it against its body later): NULL with *a filled when
 * refused. id: the route's {id} (NULL for the list and the create). */
server_sandboxes_req *server_sandboxes_req_new(sm_server *srv, struct MHD_Connection *conn,
                                               server_sandboxes_op op, const char *id, int control,
                                               const char *token, server_answer *a);
/* Does it, on a call thread; body: the create's. */
void server_sandboxes_run(server_sandboxes_req *r, const char *body, size_t len, server_answer *a);
void server_sandboxes_req_free(server_sandboxes_req *r);

#endif
