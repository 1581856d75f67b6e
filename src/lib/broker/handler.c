/* The route's handler (sm_broker_route): one raw HTTP/1.1 request from a
 * sandbox in, one complete response out. docs/host-tools.md "Route
 * protocol":
 *   GET  /v1/tools              -> {"tools": [MCP tool descriptions]}
 *   GET  /v1/tools/{name}       -> one description (404: unknown or not
 *                                  visible, the same answer)
 *   POST /v1/tools/{name}/call  {"arguments": {...}}
 *        -> {"ok", "content", "structured", "is_error", "duration_ms", "call_id"}
 *   /mcp                        -> MCP over streamable HTTP (route_mcp.c)
 * Errors: {"error", "reason", "rule"} with 400, 403, 404, 405, 429, 503, 504. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/audit_rows.h"
#include "broker/broker_core.h"
#include "common/json_keys.h"
#include "broker/http_msg.h"
#include "broker/route_mcp.h"
#include "broker/state.h"

#define PREFIX "/v1/tools"

static int method_not_allowed(const char *allow, char **resp, size_t *len, sm_error *err) {
  char hdr[64];
  snprintf(hdr, sizeof hdr, "Allow: %s\r\n", allow);
  const char *body = "{\"error\":\"method not allowed\",\"reason\":\"bad_request\",\"rule\":null}";
  return broker_http_raw(405, "application/json", hdr, body, strlen(body), resp, len, err);
}

static int list(sm_broker *b, const sm_route_caller *who, char **resp, size_t *len, sm_error *err) {
  json_object *tools = NULL;
  sm_error e = SM_ERROR_INIT;
  int rc = sm_broker_list(b, who, &tools, &e);
  if (rc == SM_EPOLICY)
    return broker_http_error(403, "no_active_call", e.message, NULL, resp, len, err);
  if (rc) return sm_error_set(err, rc, "%s", e.message);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "tools", tools);
  rc = broker_http_json(200, o, resp, len, err);
  json_object_put(o);
  return rc;
}

static int describe(sm_broker *b, const sm_route_caller *who, const char *name, char **resp,
                    size_t *len, sm_error *err) {
  if (!who->active) {
    bk_row row = BK_ROW_INIT;
    row.event = "host_tool.refused";
    row.host_tool = name;
    row.reason = "no_active_call";
    row.rule = "the route answers only while sandman drives a call in the sandbox";
    row.message = "no active call";
    broker_audit(b->audit, who, &row);
    return broker_http_error(403, "no_active_call", "no active call", NULL, resp, len, err);
  }
  json_object *d = broker_describe_visible(b, who, name);
  if (!d) {
    char msg[128];
    snprintf(msg, sizeof msg, "no host tool '%.64s'", name);
    return broker_http_error(404, "not_found", msg, NULL, resp, len, err);
  }
  int rc = broker_http_json(200, d, resp, len, err);
  json_object_put(d);
  return rc;
}

static json_object *answer_of(sm_mcp_result *r, const bk_outcome *done) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "ok", json_object_new_boolean(!r->is_error));
  json_object_object_add(o, "content", r->content ? json_object_get(r->content) : json_object_new_array());
  json_object_object_add(o, "structured", json_object_get(r->structured));
  json_object_object_add(o, "is_error", json_object_new_boolean(r->is_error));
  json_object_object_add(o, "duration_ms", json_object_new_double(done->duration_ms));
  json_object_object_add(o, "call_id", json_object_new_string(done->host_call));
  return o;
}

static int call(sm_broker *b, const sm_route_caller *who, const char *name, const bk_http_msg *m,
                char **resp, size_t *len, sm_error *err) {
  json_object *body = NULL, *args = NULL;
  if (m->body_len > 0) {
    json_tokener *tok = json_tokener_new_ex(64);
    if (tok) body = json_tokener_parse_ex(tok, m->body, (int)m->body_len);
    const char *dup = NULL;
    int bad = !tok || json_tokener_get_error(tok) != json_tokener_success ||
              json_tokener_get_parse_end(tok) != m->body_len || !json_object_is_type(body, json_type_object);
    if (tok) json_tokener_free(tok);
    /* A repeated key: json-c would keep one, another reader the other. */
    if (!bad && common_json_keys_unique(m->body, m->body_len, body, &dup) != 0) {
      json_object_put(body);
      return broker_http_error(400, "bad_request", dup, NULL, resp, len, err);
    }
    if (bad || (json_object_object_get_ex(body, "arguments", &args) &&
                !json_object_is_type(args, json_type_object))) {
      json_object_put(body);
      return broker_http_error(400, "bad_request", "the body must be {\"arguments\": {...}}", NULL,
                               resp, len, err);
    }
  }
  sm_mcp_result r;
  sm_mcp_result_init(&r);
  bk_outcome done;
  bk_refusal why;
  sm_error e = SM_ERROR_INIT;
  int rc = broker_call(b, who, name, args, NULL, &r, &done, &why, &e);
  json_object_put(body);
  if (rc == 0) {
    json_object *o = answer_of(&r, &done);
    rc = broker_http_json(200, o, resp, len, err);
    json_object_put(o);
  } else if (why.status) {
    rc = broker_http_error(why.status, why.reason, e.message, why.rule, resp, len, err);
  } else {
    rc = broker_http_error(500, "internal", e.message, NULL, resp, len, err);
  }
  sm_mcp_result_dispose(&r);
  return rc;
}

static int handle(void *ud, const sm_route_caller *who, const char *req, size_t len, char **resp,
                  size_t *resp_len, sm_error *err) {
  sm_broker *b = ud;
  bk_http_msg m;
  const char *why = NULL;
  *resp = NULL;
  *resp_len = 0;
  int status = broker_http_parse(req, len, &m, &why);
  if (status) return broker_http_error(status, "bad_request", why, NULL, resp, resp_len, err);
  if (strcmp(m.path, "/mcp") == 0 || strncmp(m.path, "/mcp/", 5) == 0)
    return broker_route_mcp(b, who, &m, resp, resp_len, err);
  if (strcmp(m.path, PREFIX) == 0) {
    if (strcmp(m.method, "GET")) return method_not_allowed("GET", resp, resp_len, err);
    return list(b, who, resp, resp_len, err);
  }
  if (strncmp(m.path, PREFIX "/", sizeof PREFIX) == 0) {
    char name[128];
    const char *rest = m.path + sizeof PREFIX, *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n > 0 && n < sizeof name) {
      memcpy(name, rest, n);
      name[n] = '\0';
      if (!slash) {
        if (strcmp(m.method, "GET")) return method_not_allowed("GET", resp, resp_len, err);
        return describe(b, who, name, resp, resp_len, err);
      }
      if (strcmp(slash, "/call") == 0) {
        if (strcmp(m.method, "POST")) return method_not_allowed("POST", resp, resp_len, err);
        return call(b, who, name, &m, resp, resp_len, err);
      }
    }
  }
  return broker_http_error(404, "not_found", "no such route", NULL, resp, resp_len, err);
}

sm_host_route sm_broker_route(sm_broker *b) {
  sm_host_route r = {handle, b};
  return r;
}
