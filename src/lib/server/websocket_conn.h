/* Internal to src/lib/server: a WebSocket connection of the runner
 * (websocket_conn.c), for any route: libmicrohttpd sends the handshake's
 * 101 answer (server_ws_upgrade_response), then one thread per connection
 * reads its frames (websocket.h), answers pings and the close handshake,
 * and writes what any thread queued with server_ws_send.
 *
 * Bounds: frames and messages from the peer (server_ws_limits), the bytes
 * queued for it (a peer that does not read is closed with 1008 rather than
 * held in memory), a peer that stays silent for two ping intervals is
 * dropped, a close not answered within CLOSE_WAIT_MS ends the connection.
 * The server keeps its connections in a group and closes them all before
 * libmicrohttpd stops (which it needs). */
#ifndef SANDMAN_SERVER_WEBSOCKET_CONN_H
#define SANDMAN_SERVER_WEBSOCKET_CONN_H

#include <stddef.h>

#include <microhttpd.h>

#include <sandman/error.h>

#include "server/websocket.h"

typedef struct server_ws_conn server_ws_conn;
typedef struct server_ws_group server_ws_group;

typedef struct server_ws_limits {
  size_t max_frame;   /* one frame's payload from the peer; 0: 1 MiB */
  size_t max_message; /* a reassembled message from the peer; 0: 1 MiB */
  size_t max_queued;  /* bytes waiting to go to the peer; 0: 8 MiB */
  int ping_ms;        /* a ping when the peer was silent this long; 0: 30 s */
} server_ws_limits;

/* What a route does with a connection. Every callback runs on the
 * connection's thread. */
typedef struct server_ws_handler {
  /* The connection is up (before any message). */
  void (*on_open)(void *ud, server_ws_conn *c);
  /* A whole text or binary message. Non-zero: the connection is closed
   * with that code (1003, 1008...). */
  int (*on_message)(void *ud, server_ws_conn *c, int opcode, const unsigned char *data, size_t len);
  /* Once, when the connection is over (code: the peer's, or why it ended:
   * 1006 without a close frame). Sends fail from then on. */
  void (*on_close)(void *ud, server_ws_conn *c, int code);
  /* The connection never came up (the client left before the 101): ud is
   * dropped. Called instead of on_open and on_close. */
  void (*discard)(void *ud);
  void *ud;
} server_ws_handler;

server_ws_group *server_ws_group_new(void);
/* Closes every connection (1001, going away) and waits until their threads
 * are done (at most wait_ms; then forced: their sockets are shut down). */
void server_ws_group_close_all(server_ws_group *g, int wait_ms);
void server_ws_group_free(server_ws_group *g);
/* Connections open now. */
size_t server_ws_group_count(server_ws_group *g);

/* The 101 answer to a WebSocket handshake with the client's key (checked
 * with server_ws_accept by the caller), or NULL (out of memory). Once
 * libmicrohttpd has sent it, the connection runs in g with the handler;
 * if it is never sent, *taken stays 0 and the caller discards the handler
 * (server_ws_upgrade_dropped). The response must be queued once only. */
typedef struct server_ws_upgrade server_ws_upgrade;
server_ws_upgrade *server_ws_upgrade_new(server_ws_group *g, const server_ws_limits *lim,
                                         const server_ws_handler *h);
struct MHD_Response *server_ws_upgrade_response(server_ws_upgrade *u, const char *accept);
/* After the request is over: frees u, and the handler's ud (discard) when
 * the connection never started. */
void server_ws_upgrade_done(server_ws_upgrade *u);

/* Runs a connection on fd (its handshake done; extra: bytes the peer sent
 * after its request) in g. release(release_ud) gives the socket back once
 * the connection is over (libmicrohttpd's upgrade handle closes it); NULL:
 * the socket is closed. For tests and for the upgrade above. */
int server_ws_conn_start(server_ws_group *g, int fd, const char *extra, size_t extra_len,
                         const server_ws_limits *lim, const server_ws_handler *h,
                         void (*release)(void *), void *release_ud, sm_error *err);

/* Queues a message for the peer (from any thread). 0; SM_EBUSY when it
 * would pass max_queued (the connection is then closed with 1008: a peer
 * that does not read loses its connection, not the runner's memory);
 * SM_ECONFLICT once the connection is closing. */
int server_ws_send(server_ws_conn *c, int opcode, const void *data, size_t len);
/* Starts the close handshake (from any thread); the connection ends when
 * the peer answers or after a short wait. */
void server_ws_close(server_ws_conn *c, int code, const char *reason);
void server_ws_conn_ref(server_ws_conn *c);
void server_ws_conn_unref(server_ws_conn *c);

#endif
