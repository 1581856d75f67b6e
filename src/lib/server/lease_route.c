/* The lease route (POST /v1/leases): credentials of named services for
 * one tool's next calls, granted to the control token or to a worker for
 * what the configuration lets it lease. */
#include <stdio.h>

#include <openssl/crypto.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "server/server_core.h"

void server_lease_route(sm_server *srv, const char *body, size_t len, int control,
                        const char *token, server_answer *a) {
  server_lease_params p;
  sm_error err = SM_ERROR_INIT;
  if (!server_body_token_ok(srv, body, len, control, token)) {
    server_refuse_token(srv, "leases", a);
    return;
  }
  if (server_parse_lease(body, len, &p, &err) != 0) {
    server_answer_error(a, 400, "policy", "%s", err.message);
    return;
  }
  /* A worker's token makes leases for its own worker only. */
  if (!control && !server_token_ok(srv, token, p.worker_key)) {
    server_refuse_token(srv, "leases", a);
    return;
  }
  if (srv->creds == NULL) {
    server_answer_error(a, 400, "policy",
                        "this runner has no credentials (start it with --credentials-file FILE)");
    return;
  }
  /* A worker leases only what the configuration grants its key, and learns
   * nothing about the other services: the same answer whether they exist. */
  for (size_t i = 0; !control && i < p.n_services; i++) {
    if (!sm_config_worker_may_lease(sm_server_config(srv), p.worker_key, p.services[i])) {
      server_metrics_lease(srv->metrics, "refused");
      server_audit_lease(srv, "lease.refused", NULL, p.tool, p.worker_key,
                         "a service the configuration does not grant this worker");
      server_answer_error(a, 403, "policy",
                          "service '%s' is not one worker '%s' may lease (the configuration's "
                          "workers.<key>.services)",
                          p.services[i], p.worker_key);
      return;
    }
  }
  for (size_t i = 0; i < p.n_services; i++) {
    if (!server_creds_has_service(srv->creds, p.services[i])) {
      server_answer_error(a, 400, "policy", "unknown service '%s'", p.services[i]);
      return;
    }
  }
  char id[SM_LEASE_ID_LEN + 1];
  double expires = 0;
  if (server_lease_create(srv->leases, &p, sm_now(), id, &expires, &err) != 0) {
    server_answer_error(a, 503, "sandbox", "%s", err.message);
    return;
  }
  char when[40];
  sm_format_time(expires, when, sizeof when);
  server_metrics_lease(srv->metrics, "created");
  server_audit_lease(srv, "lease.created", id, p.tool, p.worker_key, NULL);
  sm_log(SM_LOG_INFO, "lease %.6s... created for tool %s: %zu service(s), %d use(s), %.0f s", id,
         p.tool, p.n_services, p.max_uses, p.ttl_s);
  a->status = 200;
  a->body = json_object_new_object();
  json_object_object_add(a->body, "lease_id", json_object_new_string(id));
  json_object_object_add(a->body, "expires_at", json_object_new_string(when));
  json_object_object_add(a->body, "max_uses", json_object_new_int(p.max_uses));
  OPENSSL_cleanse(id, sizeof id);
}
