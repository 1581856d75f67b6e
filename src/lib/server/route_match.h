/* Which route a request's URL and method name (docs/http-api.md), and
 * what the URL carries for it (an id, a port, a file operation...): the
 * routing table of the listener (server_http.c), apart from how a route is
 * served. */
#ifndef SANDMAN_SERVER_ROUTE_MATCH_H
#define SANDMAN_SERVER_ROUTE_MATCH_H

#include "server/preview.h"
#include "server/server_internal.h"

typedef enum {
  R_NOT_FOUND = 0,
  R_BAD_METHOD,
  R_HEALTHZ,
  R_EXECUTE,
  R_LEASES,
  R_HANDLE,
  R_SANDBOXES,
  R_REAP,
  R_METRICS,
  R_FILES,
  R_MCP,
  R_AUDIT,
  R_APPROVALS,
  R_SANDBOX,
  R_CONTEXTS,
  R_TERMINALS,
  R_PORT,
  R_PREVIEWS,
  R_PREVIEW,
} server_route_id;

/* What the URL of a request carries; filled by server_route_match_url. */
typedef struct server_route_match {
  server_route_id route;
  const char *allow;             /* the Allow header of a 405 (NULL: none) */
  char handle_id[SM_HANDLE_ID_LEN + 1]; /* /v1/handles/{id}, /v1/approvals/{id} */
  char sandbox_id[SM_NAME_MAX];  /* /v1/sandboxes/{id}, /v1/snapshots/{name} */
  int sandbox_op;                /* its server_sandboxes_op */
  char files_name[16];           /* /v1/files/{name} */
  int files_op;                  /* its server_files_op, -1 for none */
  unsigned port;                 /* /v1/sandboxes/{id}/ports/{port} */
  const char *port_path;         /* and the path after it (in the url) */
  char preview_token[SERVER_PREVIEW_TOKEN_LEN + 1]; /* /preview/{token}: "" a bad one */
} server_route_match;

/* The route of url and method (R_NOT_FOUND, R_BAD_METHOD with m->allow
 * set, or a route), with what the URL carries in m. m->port_path points
 * into url. */
server_route_id server_route_match_url(server_route_match *m, const char *url,
                                       const char *method);
/* The route's name in metrics and logs ("execute", "unknown"...). */
const char *server_route_name(server_route_id r);

#endif
