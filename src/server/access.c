/* What the routes read of the server, outside its life cycle (server.c):
 * the configuration in force, the checks of a request's token, and error
 * answers. Kept apart so that the routes' files never call back into the
 * server's start and stop. */
#include <stdarg.h>
#include <stdio.h>

#include <openssl/crypto.h>

#include "server/core.h"

void sm_answer_error(sm_answer *a, int status, const char *kind, const char *fmt, ...) {
  char msg[SM_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  a->status = status;
  a->body = json_object_new_object();
  json_object_object_add(a->body, "error", json_object_new_string(msg));
  json_object_object_add(a->body, "failure_kind", json_object_new_string(kind));
}

/* ---- tokens ---- */

int sm_server_is_control(const sm_server *srv, const char *token) {
  return token != NULL && sm_token_equal(token, srv->token);
}

int sm_server_token_ok(const sm_server *srv, const char *token, const char *worker_key) {
  if (token == NULL) return 0;
  if (sm_server_is_control(srv, token)) return 1;
  if (worker_key == NULL || worker_key[0] == '\0') return 0;
  char expect[65];
  if (sm_token_derive(srv->token, worker_key, expect, NULL) != 0) return 0;
  int ok = sm_token_equal(token, expect);
  OPENSSL_cleanse(expect, sizeof expect);
  return ok;
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
