/* POST /v1/sandboxes/{id}/previews?port=N[&ttl_s=T][&worker_key=K]: a
 * preview URL for one port of a keyed sandbox (preview_route.c,
 * docs/ports.md#preview-urls); /preview/{token}/{path} itself is relayed
 * by port_route.c. */
#ifndef SANDMAN_SERVER_PREVIEW_ROUTE_H
#define SANDMAN_SERVER_PREVIEW_ROUTE_H

#include "server/server_core.h"

/* The query as read on the I/O thread. */
typedef struct server_preview_ask {
  unsigned port;      /* 0: missing or bad */
  double ttl_s;       /* 0: missing or bad */
  char worker_key[SM_SERVER_KEY_MAX + 1];
  char bad[96];       /* "" or why the query is refused */
} server_preview_ask;

void server_preview_ask_read(struct MHD_Connection *conn, server_preview_ask *q);
/* The owner's preview of sandbox_id (on a call thread): 201 with the token
 * and its URL path, or the refusal. */
void server_preview_create(sm_server *srv, const char *sandbox_id, const server_preview_ask *q,
                           int control, const char *token, server_answer *a);
/* A sandbox's previews go (it was put to rest or removed by the runner). */
void server_preview_revoke(sm_server *srv, const char *container_id);
/* Its WebSockets through the ports route end (the route's and the
 * previews'): before the runner puts it to rest, snapshots, rolls back or
 * removes it, as they are calls in flight that would hold it. */
void server_port_tunnels_end_sandbox(sm_server *srv, const char *container_id);

#endif
