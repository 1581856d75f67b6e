/* Making a preview URL (preview_route.h): the caller's token as for the
 * other sandbox routes (the control token, or a worker's own token naming
 * its key in worker_key), the sandbox found with the owner rules of
 * sandbox_owner.c (another's is a missing one's 404), running, and room in
 * the table (server/preview.h). */
#include "server/preview_route.h"

#include <stdio.h>
#include <string.h>

#include <sandman/util.h>

#include "server/port_tunnel.h"
#include "server/preview.h"
#include "server/sandbox_owner.h"

static void read_num(struct MHD_Connection *conn, const char *key, int64_t lo, int64_t hi,
                     int64_t *out, server_preview_ask *q) {
  const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
  if (v == NULL) return;
  if (sm_parse_int(v, lo, hi, out, NULL) != 0)
    snprintf(q->bad, sizeof q->bad, "bad query parameter '%s' (%lld-%lld)", key, (long long)lo,
             (long long)hi);
}

void server_preview_ask_read(struct MHD_Connection *conn, server_preview_ask *q) {
  memset(q, 0, sizeof *q);
  int64_t port = 0, ttl = SERVER_PREVIEW_TTL_DEFAULT_S;
  read_num(conn, "port", 1, 65535, &port, q);
  read_num(conn, "ttl_s", 1, SERVER_PREVIEW_TTL_MAX_S, &ttl, q);
  if (port == 0 && !q->bad[0]) snprintf(q->bad, sizeof q->bad, "missing query parameter 'port'");
  const char *wk = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "worker_key");
  if (wk && !server_name_valid(wk, SM_SERVER_KEY_MAX))
    snprintf(q->bad, sizeof q->bad, "bad query parameter 'worker_key'");
  else if (wk)
    snprintf(q->worker_key, sizeof q->worker_key, "%s", wk);
  q->port = (unsigned)port;
  q->ttl_s = (double)ttl;
}

void server_preview_create(sm_server *srv, const char *sandbox_id, const server_preview_ask *q,
                           int control, const char *token, server_answer *a) {
  const char *worker = q->worker_key[0] ? q->worker_key : NULL;
  if (!control && (worker == NULL || !server_token_ok(srv, token, worker))) {
    server_refuse_token(srv, "previews", a);
    return;
  }
  if (q->bad[0]) {
    server_answer_error(a, 400, "policy", "%s", q->bad);
    return;
  }
  sm_ops_sandbox sb;
  sm_error err = SM_ERROR_INIT;
  int rc = server_sandbox_find(srv, sandbox_id, worker, 1, &sb, &err);
  if (rc) {
    server_answer_from_error(a, &err);
    return;
  }
  if (strcmp(sb.rest, "running") != 0) {
    server_answer_error(a, 409, "policy", "sandbox %s is %s: a preview needs it running", sb.name,
                        sb.rest[0] ? sb.rest : sb.state);
    return;
  }
  server_preview p;
  double now = sm_monotonic_ms();
  if (server_previews_add(srv->previews, sb.id, worker, q->port, q->ttl_s, now, &p) != 0) {
    server_answer_error(a, 429, "policy",
                        "too many previews (%d per sandbox, %d in all): let some expire",
                        SERVER_PREVIEW_MAX_PER_SANDBOX, SERVER_PREVIEW_MAX_TOTAL);
    return;
  }
  char path[SERVER_PREVIEW_TOKEN_LEN + 16];
  snprintf(path, sizeof path, "/preview/%s/", p.token);
  a->status = 201;
  a->body = json_object_new_object();
  json_object_object_add(a->body, "token", json_object_new_string(p.token));
  json_object_object_add(a->body, "path", json_object_new_string(path));
  json_object_object_add(a->body, "sandbox_id", json_object_new_string(sb.id));
  json_object_object_add(a->body, "port", json_object_new_int((int)p.port));
  json_object_object_add(a->body, "expires_at", json_object_new_double(sm_now() + q->ttl_s));
}

void server_preview_revoke(sm_server *srv, const char *container_id) {
  if (srv->previews) server_previews_revoke(srv->previews, container_id);
  /* A WebSocket open through one of them ends with it. */
  server_port_tunnels_end(srv->port_tunnels, container_id, 1);
}

void server_port_tunnels_end_sandbox(sm_server *srv, const char *container_id) {
  server_port_tunnels_end_wait(srv->port_tunnels, container_id, 5000);
}
