/* File events on the runner: GET /v1/files/watch (server_watch.c,
 * docs/http-api.md#file-events).
 *
 * Each watch is one long call of sandman's agent in the sandbox
 * (sm_files_watch) on a thread of its own, not one of the call threads,
 * and a second thread that writes its events to the client as NDJSON.
 * Between the two is a bounded queue: the call's thread never waits for
 * the client (nor makes the agent wait), and what does not fit is one
 * "overflow" event in its place, never dropped silently. Watches are
 * capped per sandbox, per token and on the runner. */
#ifndef SANDMAN_SERVER_WATCH_H
#define SANDMAN_SERVER_WATCH_H

#include <stddef.h>

#include "server/server_core.h"
#include "server/files_route.h"

#define SERVER_WATCHES_MAX 256 /* watches of one runner at once */

typedef struct server_watches server_watches;

typedef struct server_watch_limits {
  unsigned per_sandbox; /* 0: 8 */
  unsigned per_token;   /* 0: 16 */
  size_t queue;         /* events held per watch; 0: 4096 */
} server_watch_limits;

server_watches *server_watches_new(sm_server *srv, const server_watch_limits *lim);
/* Starts the watch of r (its stream set), which takes r: 0, or -1 with *a
 * filled (refused: the token's or the runner's share is taken). */
int server_watches_start(server_watches *ws, server_files_req *r, server_answer *a);
/* Ends the watches of a sandbox (its container id) before it is put to
 * rest or removed: each stream's last event says why (reason: "frozen",
 * "stopped", "hibernated", "removed"); waits at most wait_ms for their
 * calls to let go of the sandbox. */
void server_watches_end(server_watches *ws, const char *sandbox_id, const char *reason,
                        double wait_ms);
/* Ends every watch (the runner stops) and waits for them. */
void server_watches_stop(server_watches *ws);
void server_watches_free(server_watches *ws);

#endif
