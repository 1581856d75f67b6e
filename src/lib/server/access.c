/* What the routes read of the server, outside its life cycle (server.c):
 * the configuration in force and the checks of a request's token against
 * the server's control token (auth.c). Kept apart so that the routes'
 * files never call back into the server's start and stop. */
#include "server/server_core.h"

/* ---- tokens ---- */

int server_is_control(const sm_server *srv, const char *token) {
  return server_auth_is_control(srv->token, token);
}

int server_token_ok(const sm_server *srv, const char *token, const char *worker_key) {
  return server_auth_token_ok(srv->token, token, worker_key);
}

int server_body_token_ok(sm_server *srv, const char *body, size_t len, int control,
                         const char *token) {
  if (control) return 1;
  char key[SM_SERVER_KEY_MAX + 1];
  if (!server_json_has_worker_key(body, len, key)) return 0;
  return server_token_ok(srv, token, key);
}

/* ---- the configuration (swapped by a reload) ---- */

const sm_config *sm_server_config(sm_server *srv) {
  pthread_mutex_lock(&srv->mu);
  const sm_config *c = srv->opts.config;
  pthread_mutex_unlock(&srv->mu);
  return c;
}

void sm_server_set_config(sm_server *srv, const sm_config *cfg) {
  pthread_mutex_lock(&srv->mu);
  srv->opts.config = cfg;
  pthread_mutex_unlock(&srv->mu);
}
