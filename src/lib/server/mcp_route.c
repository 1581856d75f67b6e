/* /mcp on the runner: MCP over the streamable HTTP transport, with the
 * tools of `sandman mcp` (sm_mcp_sandbox_provider).
 *
 * A session belongs to the token that made it (its owner: "control" or
 * "worker:<key>"; the MCP module answers 404 to any other), and one owner
 * holds at most --mcp-sessions-per-token of the table's 64. A control
 * session runs its tools in a per_run sandbox of its own, removed when the
 * session ends; a worker session in that worker's per_worker sandbox (the
 * one its execute calls use). Every tool call passes the configuration's
 * tool policy (execute is the tool "shell", the others their MCP names)
 * and runs with the runner's settings; no runner variable is passed
 * through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/mcp.h>
#include <sandman/ops.h>
#include <sandman/version.h>

#include "server/server_call.h"
#include "server/mcp_route.h"
#include "server/preview_route.h"
#include "server/stream.h"

#define MCP_HEADER_MAX 256
#define MCP_SESSIONS_MAX 64      /* the runner's /mcp sessions at once */
#define MCP_SESSIONS_PER_TOKEN 8 /* one token's, unless --mcp-sessions-per-token says */

struct server_mcp_req {
  sm_server *srv;
  char id[17];
  char method[8];
  char *accept, *content_type, *session_id, *protocol_version, *origin, *mcp_method, *mcp_name;
  char owner[SM_PRINCIPAL_MAX];
  char *body;
  size_t body_len;
  server_stream *stream;
};

/* One session's sandbox. */
typedef struct mcp_ctx {
  sm_server *srv;
  char worker_key[SM_SERVER_KEY_MAX + 1]; /* "" for a control session */
  char run_id[48];                        /* its own run (control sessions) */
  char principal[SM_PRINCIPAL_MAX];
} mcp_ctx;

static int prepare(void *ud, const char *tool, sm_run_request *req, sm_error *err) {
  mcp_ctx *m = ud;
  sm_server *srv = m->srv;
  sm_config_flags flags;
  if (srv->have_flags) flags = srv->flags;
  else memset(&flags, 0, sizeof flags);
  flags.mode = m->worker_key[0] ? "per_worker" : "per_run";
  sm_resolved res;
  if (sm_config_resolve(sm_server_config(srv), NULL, tool, NULL, &flags, &res, err) != 0)
    return err->code;
  if (!res.allowed)
    return sm_error_set(err, SM_EPOLICY, "tool '%s' is refused by the configuration (%s)", tool,
                        res.rule[0] ? res.rule : "its tool policy");
  /* The runner's tools run in its sandboxes whatever the configuration's
   * selective sandboxing says, in the session's keyed mode. */
  req->settings = res.settings;
  req->settings.mode = m->worker_key[0] ? SM_MODE_PER_WORKER : SM_MODE_PER_RUN;
  req->settings.env_passthrough.n = 0;
  req->settings.idle_timeout_s = server_idle_timeout(&res);
  req->project = srv->project;
  req->project_environment = srv->project_environment;
  req->tool = tool;
  req->run_id = m->run_id[0] ? m->run_id : NULL;
  req->worker_id = m->worker_key[0] ? m->worker_key : NULL;
  req->principal = m->principal;
  req->scope = SM_SCOPE_NONE;
  return 0;
}

static void prepare_free(void *ud) {
  mcp_ctx *m = ud;
  if (m->run_id[0] && m->srv->opts.runner) {
    sm_ops_scope scope;
    sm_error err = SM_ERROR_INIT;
    sm_ops_rm_options o = SM_OPS_RM_OPTIONS_INIT;
    o.run_id = m->run_id;
    o.force = 1;
    sm_ops_report rep;
    if (sm_ops_scope_from_runner(&scope, m->srv->opts.runner, &err) != 0 ||
        sm_ops_rm(&scope, &o, &rep, &err) != 0)
      sm_log(SM_LOG_WARN, "MCP session over: its sandbox (run %s) is left for a reap: %s",
             m->run_id, err.message);
    else
      sm_ops_report_dispose(&rep);
  }
  free(m);
}

/* The session's sandbox was snapshot: its previews end (as the route's). */
static void snapshotted(void *ud, const char *container_id) {
  mcp_ctx *m = ud;
  server_preview_revoke(m->srv, container_id);
}

static int make_session(void *ud, const char *owner, sm_mcp_session **out, sm_error *err) {
  sm_server *srv = ud;
  mcp_ctx *m = calloc(1, sizeof *m);
  if (m == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  m->srv = srv;
  snprintf(m->principal, sizeof m->principal, "%s", owner);
  if (strncmp(owner, "worker:", 7) == 0) {
    snprintf(m->worker_key, sizeof m->worker_key, "%s", owner + 7);
  } else {
    char hex[33];
    server_random_hex(hex, 8);
    snprintf(m->run_id, sizeof m->run_id, "mcp-%s", hex);
  }
  sm_mcp_sandbox_options so = {0};
  so.runner = srv->opts.runner;
  so.prepare = prepare;
  so.prepare_ud = m;
  so.prepare_free = prepare_free;
  so.snapshotted = snapshotted;
  so.network = srv->have_flags && srv->flags.network && strcmp(srv->flags.network, "none") != 0;
  sm_mcp_provider prov;
  int rc = sm_mcp_sandbox_provider(&prov, &so, err);
  if (rc != 0) {
    free(m);
    return rc;
  }
  sm_mcp_server_info info = {"sandman", "sandman runner", sm_version(),
                             "Tools run in a sandbox; paths are relative to /workspace.", 0};
  rc = sm_mcp_session_new(out, &info, &prov, err);
  if (rc != 0 && prov.free) prov.free(prov.ud); /* the session did not take it */
  return rc;
}

int server_mcp_route_start(sm_server *srv, sm_error *err) {
  if (srv->opts.runner == NULL) return 0;
  sm_mcp_http_options o = {0};
  o.factory = make_session;
  o.factory_ud = srv;
  o.max_message = srv->opts.max_body;
  o.max_sessions = MCP_SESSIONS_MAX;
  /* One token (the control token, or one worker key) cannot fill the table
   * and lock the others out. */
  o.max_sessions_per_owner =
      srv->opts.mcp_sessions_per_token ? srv->opts.mcp_sessions_per_token : MCP_SESSIONS_PER_TOKEN;
  o.idle_timeout_s = srv->opts.mcp_session_idle_s;
  return sm_mcp_http_new(&srv->mcp, &o, err);
}

void server_mcp_route_expire(sm_server *srv) {
  if (srv->mcp) sm_mcp_http_expire(srv->mcp);
}

void server_mcp_route_stop(sm_server *srv) {
  if (srv->mcp) sm_mcp_http_free(srv->mcp);
  srv->mcp = NULL;
}

/* ---- requests ---- */

static char *header(struct MHD_Connection *conn, const char *name) {
  const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
  return v ? strndup(v, MCP_HEADER_MAX) : NULL;
}

server_mcp_req *server_mcp_req_new(sm_server *srv, struct MHD_Connection *conn, const char *method,
                                   const char *id, int control, const char *token,
                                   server_answer *a) {
  const char *key = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "worker_key");
  char owner[SM_PRINCIPAL_MAX];
  /* The control token acts for itself, or for the worker it names; a
   * worker token for its own key only. */
  int allowed = key == NULL ? control
                            : server_name_valid(key, SM_SERVER_KEY_MAX) &&
                                  (control || (token && server_token_ok(srv, token, key)));
  if (!allowed || server_auth_principal(key, owner, sizeof owner) != 0) {
    server_refuse_token(srv, "mcp", a);
    return NULL;
  }
  if (srv->mcp == NULL) {
    server_answer_error(a, 503, "engine", "this runner has no engine");
    return NULL;
  }
  server_mcp_req *r = calloc(1, sizeof *r);
  if (r == NULL) {
    server_answer_error(a, 503, "sandbox", "out of memory");
    return NULL;
  }
  r->srv = srv;
  snprintf(r->id, sizeof r->id, "%s", id);
  snprintf(r->method, sizeof r->method, "%s", method);
  snprintf(r->owner, sizeof r->owner, "%s", owner);
  r->accept = header(conn, "Accept");
  r->content_type = header(conn, "Content-Type");
  r->session_id = header(conn, "Mcp-Session-Id");
  r->protocol_version = header(conn, "MCP-Protocol-Version");
  r->origin = header(conn, "Origin");
  r->mcp_method = header(conn, "Mcp-Method");
  r->mcp_name = header(conn, "Mcp-Name");
  return r;
}

int server_mcp_req_body(server_mcp_req *r, const char *body, size_t len) {
  r->body = malloc(len + 1);
  if (r->body == NULL) return -1;
  if (len) memcpy(r->body, body, len);
  r->body[len] = '\0';
  r->body_len = len;
  return 0;
}

void server_mcp_req_set_stream(server_mcp_req *r, server_stream *s) {
  server_stream_ref(s);
  r->stream = s;
}

void server_mcp_req_free(server_mcp_req *r) {
  if (r == NULL) return;
  char *owned[] = {r->accept,     r->content_type, r->session_id, r->protocol_version,
                   r->origin,     r->mcp_method,   r->mcp_name,    r->body};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
  server_stream_unref(r->stream);
  free(r);
}

void server_mcp_job(void *arg) {
  server_mcp_req *r = arg;
  server_stream *s = r->stream;
  sm_log_set_request_id(r->id);
  sm_mcp_http_request hr = {r->method,
                            r->accept,
                            r->content_type,
                            r->session_id,
                            r->protocol_version,
                            r->origin,
                            r->body ? r->body : "",
                            r->body_len,
                            r->owner,
                            server_stream_cancel_flag(s),
                            NULL,
                            r->mcp_method,
                            r->mcp_name};
  /* A tool call may run long: a client that hangs up cancels it. */
  server_stream_watch(s);
  sm_mcp_http_answer ans;
  memset(&ans, 0, sizeof ans);
  sm_error err = SM_ERROR_INIT;
  if (sm_mcp_http_handle(r->srv->mcp, &hr, &ans, &err) != 0) {
    server_answer a = {0, NULL};
    server_answer_error(&a, 503, "sandbox", "%s", err.message[0] ? err.message : "out of memory");
    server_stream_finish(s, 0, &a);
  } else {
    int rc =
        server_stream_begin(s, ans.status, ans.content_type ? ans.content_type : "text/plain",
                            (int64_t)ans.body_len, ans.session_id[0] ? "Mcp-Session-Id" : NULL,
                            ans.session_id, ans.allow ? "Allow" : NULL, ans.allow ? ans.allow : "");
    if (rc == 0 && ans.body_len) rc = server_stream_write(s, ans.body, ans.body_len);
    server_stream_finish(s, rc != 0, NULL);
  }
  sm_mcp_http_answer_dispose(&ans);
  server_mcp_req_free(r);
}
