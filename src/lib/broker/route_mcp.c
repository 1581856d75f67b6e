/* MCP over the host-tool route: `/mcp` inside the sandbox, the streamable
 * HTTP transport of src/lib/mcp (sm_mcp_http_*) over a provider whose
 * tools/list is sm_broker_list and whose tools/call is sm_broker_call for
 * the caller of each request (docs/host-tools.md "MCP inside the
 * sandbox").
 *
 * A session belongs to the sandbox that made it (its owner is the
 * container id the route knows, never anything the sandbox sends): another
 * sandbox gets 404 for its id. The identity policy and audit see is the
 * caller of each request, not of the request that made the session: a
 * session made during one call and used after it ended is refused like
 * every route ("no active call"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/version.h>

#include "broker/audit_rows.h"
#include "broker/route_mcp.h"
#include "broker/state.h"
#include "common/unconst.h"

#define MCP_SESSIONS_MAX 256          /* per broker (one runner) */
#define MCP_SESSIONS_PER_SANDBOX 8    /* one sandbox cannot take them all */
#define MCP_SESSION_IDLE_S 600.0

struct bk_route_mcp_state {
  sm_mcp_http *http;
};

static int provider_list(void *ud, void *request, json_object **tools, sm_error *err) {
  return sm_broker_list(ud, request, tools, err);
}

/* A host tool the caller may not see is an unknown tool (JSON-RPC
 * -32602); any other refusal (schema, limits, approval: "refused: ..."), a
 * timeout or a tool that could not be reached is a tool error whose text
 * says why, so that the model reads it (the broker audited it). */
static int provider_call(void *ud, void *request, const char *name, json_object *args,
                         volatile int *cancel, sm_mcp_result *out, sm_error *err) {
  sm_error why = SM_ERROR_INIT;
  int rc = sm_broker_call(ud, request, name, args, cancel, out, &why);
  if (rc == 0) return 0;
  if (rc == SM_ENOTFOUND || rc == SM_ECANCELLED || rc == SM_ENOMEM)
    return sm_error_set(err, rc, "%s", why.message);
  sm_mcp_result_dispose(out);
  sm_mcp_result_init(out);
  int refusal = rc == SM_EPOLICY || rc == SM_EINVAL || rc == SM_EBUSY;
  return sm_mcp_result_error(out, "%s%s", refusal ? "refused: " : "", why.message);
}

static int make_session(void *ud, const char *owner, sm_mcp_session **out, sm_error *err) {
  (void)owner;
  sm_mcp_provider p = {NULL, provider_call, NULL, ud, provider_list};
  sm_mcp_server_info info = {
      "sandman-host-tools", "sandman host tools", sm_version(),
      "Tools that run on the host, outside this sandbox, through sandman's broker: only those "
      "this sandbox's agent may use are listed, and every call is checked and audited.",
      SM_ROUTE_REQUEST_MAX};
  return sm_mcp_session_new(out, &info, &p, err);
}

/* The state of b, made on first use. */
static bk_route_mcp_state *state_of(sm_broker *b, sm_error *err) {
  pthread_mutex_lock(&b->mu);
  if (b->mcp_http == NULL) {
    bk_route_mcp_state *st = calloc(1, sizeof *st);
    sm_mcp_http_options o = {.factory = make_session,
                             .factory_ud = b,
                             .max_sessions = MCP_SESSIONS_MAX,
                             .max_sessions_per_owner = MCP_SESSIONS_PER_SANDBOX,
                             .idle_timeout_s = MCP_SESSION_IDLE_S,
                             .max_message = SM_ROUTE_REQUEST_MAX};
    if (st && sm_mcp_http_new(&st->http, &o, err) == 0)
      b->mcp_http = st;
    else
      free(st);
  }
  bk_route_mcp_state *st = b->mcp_http;
  pthread_mutex_unlock(&b->mu);
  return st;
}

void broker_route_mcp_dispose(sm_broker *b) {
  if (b->mcp_http == NULL) return;
  sm_mcp_http_free(b->mcp_http->http);
  free(b->mcp_http);
  b->mcp_http = NULL;
}

static const char *header(const char *v) { return v[0] ? v : NULL; }

int broker_route_mcp(sm_broker *b, const sm_route_caller *who, const bk_http_msg *req, char **resp,
                     size_t *resp_len, sm_error *err) {
  if (strcmp(req->path, "/mcp") != 0)
    return broker_http_error(404, "not_found", "no such route (MCP is at /mcp)", NULL, resp,
                             resp_len, err);
  if (!who->active) {
    /* Nothing is made or answered for a process left behind by a call. */
    bk_row row = BK_ROW_INIT;
    row.event = "host_tool.refused";
    row.reason = "no_active_call";
    row.rule = "the route answers only while sandman drives a call in the sandbox";
    row.message = "an MCP request came from a sandbox with no call in progress";
    broker_audit(b->audit, who, &row);
    return broker_http_error(403, "no_active_call", "no active call", NULL, resp, resp_len, err);
  }
  bk_route_mcp_state *st = state_of(b, err);
  if (st == NULL) return err->code ? err->code : SM_ENOMEM;
  sm_mcp_http_request r = {.method = req->method,
                           .accept = header(req->accept),
                           .content_type = header(req->content_type),
                           .session_id = header(req->session_id),
                           .protocol_version = header(req->protocol_version),
                           .origin = header(req->origin),
                           .body = req->body ? req->body : "",
                           .body_len = req->body_len,
                           .owner = who->container_id,
                           .cancel = NULL,
                           .context = SM_UNCONST(who),
                           .mcp_method = header(req->mcp_method),
                           .mcp_name = header(req->mcp_name)};
  sm_mcp_http_answer a;
  int rc = sm_mcp_http_handle(st->http, &r, &a, err);
  if (rc) return rc;
  char extra[160] = "";
  if (a.session_id[0])
    snprintf(extra, sizeof extra, "Mcp-Session-Id: %s\r\n", a.session_id);
  else if (a.allow)
    snprintf(extra, sizeof extra, "Allow: %s\r\n", a.allow);
  rc = broker_http_raw(a.status, a.content_type, extra[0] ? extra : NULL, a.body, a.body_len, resp,
                       resp_len, err);
  sm_mcp_http_answer_dispose(&a);
  return rc;
}
