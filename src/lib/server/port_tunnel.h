/* WebSocket connections through the runner's ports route and preview URLs
 * (port_tunnel.c, docs/ports.md#websocket): once the sandbox's server has
 * answered the upgrade with its 101, the client's socket and the relay's
 * connection are joined and bytes go both ways unread.
 *
 * The table holds every such tunnel: at most SERVER_PORT_TUNNELS_PER_SANDBOX
 * to one sandbox and SERVER_PORT_TUNNELS_MAX in all (a slot is taken
 * before the relay's call starts: one more is a 429). The runner ends a
 * sandbox's tunnels when it puts the sandbox to rest, snapshots, rolls back
 * or removes it (they are calls in flight that would hold it), and a
 * preview's tunnels when the preview is revoked; a tunnel through a preview
 * also ends once its token is no longer live (expired or dropped). */
#ifndef SANDMAN_SERVER_PORT_TUNNEL_H
#define SANDMAN_SERVER_PORT_TUNNEL_H

#include <stddef.h>

#include <sandman/ports.h>

#include "server/preview.h"

#define SERVER_PORT_TUNNELS_PER_SANDBOX 8
#define SERVER_PORT_TUNNELS_MAX 64
#define SERVER_PORT_TUNNEL_IDLE_MS (300 * 1000)  /* no byte either way: closed */
#define SERVER_PORT_TUNNEL_BUF (64 * 1024)       /* held per direction */

typedef struct server_port_tunnels server_port_tunnels;
typedef struct server_port_tunnel server_port_tunnel;

server_port_tunnels *server_port_tunnels_new(size_t per_sandbox, size_t total);
void server_port_tunnels_free(server_port_tunnels *t);
/* A slot for a tunnel to container_id (through the preview token, or NULL
 * for the route's): 0 with *out, or -1 when a cap is reached or the
 * runner is stopping. */
int server_port_tunnels_reserve(server_port_tunnels *t, const char *container_id,
                                const char *preview_token, server_port_tunnel **out);
/* The slot goes (the tunnel's last act: nothing of it is used after). */
void server_port_tunnels_release(server_port_tunnels *t, server_port_tunnel *e);
/* Ends the tunnels to container_id (previews_only: those through a
 * preview): their sockets are shut down, their pumps return. The count. */
size_t server_port_tunnels_end(server_port_tunnels *t, const char *container_id, int previews_only);
/* Ends them all (route's and previews') and waits (at most wait_ms) until
 * they are released: their relays' calls, which hold the sandbox, are over. */
void server_port_tunnels_end_wait(server_port_tunnels *t, const char *container_id, int wait_ms);
/* Ends every tunnel and waits (at most wait_ms) until all are released;
 * no slot is given from then on. */
void server_port_tunnels_close_all(server_port_tunnels *t, int wait_ms);
size_t server_port_tunnels_count(server_port_tunnels *t);

typedef enum {
  SERVER_TUNNEL_CLOSED = 0, /* both sides closed */
  SERVER_TUNNEL_ENDED,      /* ended by the runner (revoked, put to rest, stopping) */
  SERVER_TUNNEL_IDLE,       /* nothing either way for SERVER_PORT_TUNNEL_IDLE_MS */
  SERVER_TUNNEL_RELAY_GONE, /* the relay's call ended (the sandbox stopped) or broke */
} server_tunnel_end;

/* Moves bytes between client_fd (the upgraded socket) and sandbox_fd (the
 * relay's connection) until the tunnel is over. to_client/to_sandbox: the
 * bytes already read for each side (at most SERVER_PORT_TUNNEL_BUF each).
 * done_fd: readable once the relay's call has ended. previews/token: a
 * preview's tunnel ends once token is no longer live (token NULL: the
 * route's). */
server_tunnel_end server_port_tunnel_pump(server_port_tunnel *e, sm_port_relay *relay, int done_fd,
                                          int client_fd, int sandbox_fd, const char *to_client,
                                          size_t n_to_client, const char *to_sandbox,
                                          size_t n_to_sandbox, server_previews *previews,
                                          const char *token);
const char *server_port_tunnel_end_name(server_tunnel_end e);

#endif
