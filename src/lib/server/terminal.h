/* Internal to src/lib/server: the runner's terminals (terminal.c): each a
 * call of its own on a pseudo-terminal in a keyed sandbox (sm_run with a
 * tty, on a thread of its own), its screen kept by an emulator
 * (terminal_screen.h), its output sent to the WebSocket clients attached
 * to it. A terminal outlives its clients for a grace time, and is gone
 * that long after its program ended too. terminal_route.c serves them
 * (docs/terminals.md). */
#ifndef SANDMAN_SERVER_TERMINAL_H
#define SANDMAN_SERVER_TERMINAL_H

#include <stddef.h>

#include <json-c/json.h>

#include "server/server_call.h"
#include "server/websocket_conn.h"

#define SERVER_TERMINAL_ID_LEN 32 /* hex digits: 128 random bits */
#define SERVER_TERMINAL_GRACE_DEFAULT 600.0
#define SERVER_TERMINAL_PER_SANDBOX_DEFAULT 8
#define SERVER_TERMINAL_MAX_DEFAULT 64
#define SERVER_TERMINAL_MAX_LIMIT 1024
#define SERVER_TERMINAL_SCROLLBACK_DEFAULT ((size_t)1 << 20)
#define SERVER_TERMINAL_CLIENTS_MAX 8 /* WebSocket clients attached to one terminal */

typedef struct server_terminals server_terminals;
typedef struct server_terminal server_terminal;

typedef struct server_terminal_limits {
  double grace_s;       /* a terminal without a client, or ended, lives this long */
  unsigned per_sandbox; /* terminals running in one sandbox at once */
  unsigned max;         /* terminals of the runner (ended ones still listed included) */
  size_t scrollback;    /* bytes of text kept of lines that left a screen */
} server_terminal_limits;

/* Zeros in limits take the defaults. NULL when out of memory. */
server_terminals *server_terminals_new(sm_server *srv, const server_terminal_limits *limits);
/* Kills every terminal and waits for them (the runner stops). */
void server_terminals_stop(server_terminals *ts);
void server_terminals_free(server_terminals *ts);

/* A new terminal running k's call (taken: freed whatever happens) of
 * rows x cols in cwd (taken; NULL: /workspace) for worker_key ("" or
 * NULL: the control token's own). Waits
 * until its program has started or the call failed: 0 and *out (a
 * reference), or -1 with *a filled. */
int server_terminal_create(server_terminals *ts, server_call *k, const char *worker_key,
                           unsigned rows, unsigned cols, char *cwd, server_terminal **out,
                           server_answer *a);
/* The terminal id as the token may see it (a reference), or NULL: missing,
 * or another worker's, which is the same. */
server_terminal *server_terminal_find(server_terminals *ts, const char *id, int control,
                                      const char *token);
void server_terminal_unref(server_terminal *t);
const char *server_terminal_id(const server_terminal *t);

/* {"id", "state": "running"|"exited", "exit_code", "rows", "cols",
 * "command", "run_id", "worker_key", "mode", "project", "agent",
 * "sandbox_id", "created_at", "clients", "error"} */
json_object *server_terminal_json(server_terminal *t);
/* {"terminals": [...]}: every terminal for the control token (worker_key
 * non-NULL: that worker's only), a worker's own for its token. */
json_object *server_terminals_list(server_terminals *ts, const char *worker_key);
/* What a client types (SM_EBUSY when too much waits; SM_ECONFLICT once
 * the program ended) and a new size. Both count as the client's presence
 * for the grace time. */
int server_terminal_input(server_terminal *t, const void *data, size_t len, sm_error *err);
int server_terminal_resize(server_terminal *t, unsigned rows, unsigned cols, sm_error *err);
/* server_screen_json or the text (common_buf) of its screen. */
json_object *server_terminal_screen_json(server_terminal *t, size_t scrollback);
int server_terminal_screen_text(server_terminal *t, common_buf *out);
/* Waits until the screen has not changed for quiet_ms, or wait_ms passed
 * (the MCP tool's "wait for the echo"). */
void server_terminal_settle(server_terminal *t, int quiet_ms, int wait_ms);
/* Kills its program (waiting for it at most wait_s) and takes it out of
 * the table; the answer's JSON (its last state) in *out. */
json_object *server_terminal_kill(server_terminals *ts, server_terminal *t, double wait_s);

/* A WebSocket client attached to t (the handler of the upgrade; ud is a
 * reference to t, dropped when the connection is over). */
void server_terminal_ws_handler(server_terminal *t, server_ws_handler *out);

#endif
