/* The runner's side of host tools (docs/host-tools.md): which calls get the
 * host-tool route (the broker decides), the credentials file lent to the
 * broker for `credentials:` of host tools, and the operator's approvals
 * (GET /v1/approvals, POST /v1/approvals/{id}: the control token only). */
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include <sandman/broker.h>

#include "common/cleanup.h"
#include "server/server_core.h"

/* The variables of one service of the credentials file, one by one. */
static int lend_credentials(void *ud, const char *service, sm_broker_add_env_fn add, void *add_ud,
                            sm_error *err) {
  sm_server *srv = ud;
  if (!srv->creds || !server_creds_has_service(srv->creds, service))
    return sm_error_set(err, SM_ENOTFOUND, "the credentials file has no service '%s'", service);
  server_lease_params p;
  memset(&p, 0, sizeof p);
  if (snprintf(p.services[0], sizeof p.services[0], "%s", service) >= (int)sizeof p.services[0])
    return sm_error_set(err, SM_EINVAL, "service name too long");
  p.n_services = 1;
  server_secret_env env = {NULL, 0};
  int rc = server_creds_env(srv->creds, &p, &env, err);
  for (size_t i = 0; rc == 0 && i < env.n; i++) {
    char *eq = strchr(env.kv[i], '=');
    if (!eq) continue;
    *eq = '\0';
    if (add(add_ud, env.kv[i], eq + 1) != 0) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
    *eq = '=';
  }
  server_secret_env_dispose(&env);
  return rc;
}

void server_broker_attach(sm_server *srv, struct sm_broker *b) {
  pthread_mutex_lock(&srv->mu);
  srv->broker = b;
  pthread_mutex_unlock(&srv->mu);
  if (b) sm_broker_set_credentials(b, srv->creds ? lend_credentials : NULL, srv);
}

void server_broker_detach(sm_server *srv) {
  pthread_mutex_lock(&srv->mu);
  sm_broker *b = srv->broker;
  srv->broker = NULL;
  pthread_mutex_unlock(&srv->mu);
  if (b) sm_broker_set_credentials(b, NULL, NULL);
}

void sm_server_set_broker(sm_server *srv, struct sm_broker *broker) {
  pthread_mutex_lock(&srv->mu);
  sm_broker *old = srv->broker;
  pthread_mutex_unlock(&srv->mu);
  if (old && old != broker) sm_broker_set_credentials(old, NULL, NULL);
  server_broker_attach(srv, broker);
}

int server_host_route(sm_server *srv, const char *agent, const char *tool, sm_host_route *route,
                      int *agent_has_tools) {
  pthread_mutex_lock(&srv->mu);
  sm_broker *b = srv->broker;
  pthread_mutex_unlock(&srv->mu);
  /* Its keyed sandboxes are its own, with the route or not. */
  *agent_has_tools = sm_broker_agent_has_tools(b, agent);
  if (!b || !sm_broker_offers(b, agent, tool)) return 0;
  *route = sm_broker_route(b);
  return 1;
}

static void approve(sm_broker *b, const char *id, const char *body, size_t len, server_answer *a) {
  cleanup_json json_object *o = NULL;
  json_object *v = NULL;
  sm_error err = SM_ERROR_INIT;
  if (server_json_object(body, len, &o, &err) != 0 ||
      !json_object_object_get_ex(o, "approve", &v) || !json_object_is_type(v, json_type_boolean)) {
    server_answer_error(a, 400, "policy",
                        "the body must be {\"approve\": true} or {\"approve\": false}");
    return;
  }
  int yes = json_object_get_boolean(v);
  if (!b || sm_broker_approve(b, id, yes, "control", &err) != 0) {
    server_answer_error(a, 404, "policy", "no pending approval '%.64s'", id);
    return;
  }
  json_object *r = json_object_new_object();
  json_object_object_add(r, "id", json_object_new_string(id));
  json_object_object_add(r, "approved", json_object_new_boolean(yes));
  a->status = 200;
  a->body = r;
}

void server_approvals_route(sm_server *srv, const char *method, const char *id, int control,
                            const char *body, size_t len, server_answer *a) {
  if (!control) {
    /* Any other token, a worker's included (a worker must not approve its
     * own calls), gets the generic 401: the answer does not tell a made-up
     * token from a worker's. */
    server_refuse_token(srv, "approvals", a);
    return;
  }
  pthread_mutex_lock(&srv->mu);
  sm_broker *b = srv->broker;
  pthread_mutex_unlock(&srv->mu);
  if (id) {
    approve(b, id, body, len, a);
    return;
  }
  (void)method;
  json_object *pending = NULL;
  sm_error err = SM_ERROR_INIT;
  if (!b) pending = json_object_new_array();
  else if (sm_broker_approvals(b, &pending, &err) != 0) {
    server_answer_error(a, 503, "sandbox", "%s", err.message);
    return;
  }
  json_object *r = json_object_new_object();
  json_object_object_add(r, "approvals", pending);
  a->status = 200;
  a->body = r;
}
