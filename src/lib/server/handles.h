/* The runner's background handles (handles.c): a call that outlived its
 * timeout keeps running in its own thread, its output gathered here, and
 * is found again by id (GET/DELETE /v1/handles/ID). The table is
 * srv->handles, under srv->mu; each handle has its own lock and a count of
 * references (the table, the call's thread, a route reading it). */
#ifndef SANDMAN_SERVER_HANDLES_H
#define SANDMAN_SERVER_HANDLES_H

#include "server/server_core.h"

#define SM_HANDLE_OUTPUT_MAX (1024 * 1024)

struct server_handle {
  char id[SM_HANDLE_ID_LEN + 1];
  char worker_key[SM_SERVER_KEY_MAX + 1];
  char tool[SM_SERVER_TOOL_MAX + 1];
  char nonce[SM_HOOK_NONCE_LEN * 2 + 1];
  char sandbox_id[SM_ENGINE_ID_MAX]; /* the sandbox the call named ("" : its result says) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  int killed;
  volatile int cancel;
  common_buf out, err;
  int out_trunc, err_trunc;
  json_object *result; /* the finished call's answer body */
  int result_status;
  double t0;
  int refs;
  server_secret_env secrets; /* copies, to scrub streamed output */
};

/* A handle with two references (the table's and the call thread's), its
 * output capped at the call's caps (at most SM_HANDLE_OUTPUT_MAX), and
 * copies of the call's secrets to scrub what it shows. NULL: no memory. */
server_handle *server_handle_new(const char *worker_key, const char *tool, const char *nonce,
                                 size_t cap_out, size_t cap_err, const server_secret_env *secrets);
void server_handle_unref(server_handle *h);
/* The call's sm_output_fn (ud: the handle). */
int server_handle_output(void *ud, int stream, const char *data, size_t len);
/* Its state and output so far, scrubbed (owned). */
json_object *server_handle_json(server_handle *h, int removed);

/* Puts h in the table (evicting the finished handle that started first
 * when it is full): SM_EBUSY when every handle still runs. */
int server_handles_insert(sm_server *srv, server_handle *h);
/* Takes h out of the table: h with the table's reference, or NULL. */
server_handle *server_handles_take(sm_server *srv, server_handle *h);
/* The handle of id with a new reference, or NULL. */
server_handle *server_handles_find(sm_server *srv, const char *id);
size_t server_handles_running(sm_server *srv, size_t *total);
/* Kills every background call and waits for them (shutdown). */
void server_handles_kill_all(sm_server *srv);
void server_handles_free(sm_server *srv);

#endif
