/* Calls on the versioned API: negotiation through /_ping on first use,
 * the "/v<api>" prefix, JSON exchanges, and the system calls (ping,
 * version, info, any JSON call). */
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "engine/engine_call.h"
#include "engine/response.h"
#include "engine/transport.h"

/* GET /_ping: its Api-Version header is all negotiation needs. */
static int ping(sm_engine *e, char *api_out, size_t api_len, sm_error *err) {
  engine_request req = {0};
  req.method = "GET";
  req.path = "/_ping";
  engine_response resp;
  engine_response_init(&resp, 4096);
  int rc = engine_perform(e, &req, &resp, err);
  if (rc == 0 && resp.status != 200)
    rc = engine_error_from_response(resp.status, resp.body.data, resp.body.len, "GET /_ping",
                                    err);
  if (rc == 0 && api_out) snprintf(api_out, api_len, "%s", resp.api_version);
  engine_response_dispose(&resp);
  return rc;
}

int sm_engine_negotiate(sm_engine *engine, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  if (engine->api_version[0]) return 0;
  char header[ENGINE_API_MAX_LEN * 2];
  int rc = ping(engine, header, sizeof header, err);
  if (rc != 0) return rc;
  rc = engine_negotiate_version(header, engine->api_version, err);
  if (rc != 0) sm_error_wrap(err, "engine at %s", engine->addr.host);
  return rc;
}

int sm_engine_ping(sm_engine *engine, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  char header[ENGINE_API_MAX_LEN * 2];
  int rc = ping(engine, header, sizeof header, err);
  if (rc == 0 && engine->api_version[0] == '\0')
    rc = engine_negotiate_version(header, engine->api_version, err);
  return rc;
}

static int get_object(sm_engine *e, const char *path, json_object **out, sm_error *err) {
  *out = NULL;
  json_object *obj = NULL;
  int rc = engine_call_json(e, "GET", path, NULL, 0, NULL, &obj, err);
  if (rc != 0) return rc;
  if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
    json_object_put(obj);
    return sm_error_set(err, SM_EPROTOCOL, "GET %s: the engine's answer is not a JSON object",
                        path);
  }
  *out = obj;
  return 0;
}

int sm_engine_version(sm_engine *engine, json_object **out, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  return get_object(engine, "/version", out, err);
}

int sm_engine_info(sm_engine *engine, json_object **out, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  return get_object(engine, "/info", out, err);
}

int sm_engine_request_json(sm_engine *engine, const char *method, const char *path,
                           json_object *body, int *out_status, json_object **out,
                           sm_error *err) {
  if (out) *out = NULL;
  if (engine == NULL || method == NULL || path == NULL || path[0] != '/')
    return sm_error_set(err, SM_EINVAL, "request_json: needs a client, a method and a path "
                        "starting with '/'");
  for (const char *m = method; *m; m++)
    if (*m < 'A' || *m > 'Z') return sm_error_set(err, SM_EINVAL, "bad HTTP method '%s'", method);
  for (const char *p = path; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == 0x7f)
      return sm_error_set(err, SM_EINVAL, "request path contains a space or control byte");
  return engine_call_json(engine, method, path, body, 0, out_status, out, err);
}

int engine_versioned_path(sm_engine *e, common_buf *out, const char *rel_path, sm_error *err) {
  int rc = sm_engine_negotiate(e, err);
  if (rc != 0) return rc;
  common_buf_reset(out);
  if (common_buf_printf(out, "/v%s%s", e->api_version, rel_path) != 0)
    return sm_error_set(err, SM_EINVAL, "request path too long");
  return 0;
}

int engine_call_json(sm_engine *e, const char *method, const char *rel_path,
                     json_object *body, long timeout_ms, int *out_status,
                     json_object **out, sm_error *err) {
  if (out) *out = NULL;
  if (out_status) *out_status = 0;
  cleanup_buf common_buf path;
  common_buf_init(&path, 64 << 10);
  int rc = engine_versioned_path(e, &path, rel_path, err);
  if (rc != 0) return rc;
  const char *body_text = NULL;
  size_t body_len = 0;
  if (body != NULL) {
    body_text = json_object_to_json_string_ext(
        body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    if (body_text == NULL) {
      return sm_error_set(err, SM_ENOMEM, "%s %s: serialising the request failed", method,
                          rel_path);
    }
    body_len = strlen(body_text);
  }
  engine_request req = {0};
  req.method = method;
  req.path = path.data;
  req.body = body_text;
  req.body_len = body_len;
  req.timeout_ms = timeout_ms;
  engine_response resp;
  engine_response_init(&resp, e->max_response_bytes);
  rc = engine_perform(e, &req, &resp, err);

  char what[160];
  const char *q = strchr(rel_path, '?');
  snprintf(what, sizeof what, "%s %.*s", method,
           (int)(q ? (size_t)(q - rel_path) : strlen(rel_path)), rel_path);
  if (rc == 0) {
    if (out_status) *out_status = (int)resp.status;
    if (resp.status >= 400)
      rc = engine_error_from_response(resp.status, resp.body.data, resp.body.len, what, err);
    else if (out)
      rc = engine_parse_json_body(resp.body.data, resp.body.len, what, out, err);
  }
  engine_response_dispose(&resp);
  return rc;
}

int engine_call_stream(sm_engine *e, const engine_request *req, const char *what,
                       long *out_status, char *path_stat, sm_error *err) {
  engine_response resp;
  engine_response_init(&resp, ENGINE_MAX_ERROR_BODY);
  int rc = engine_perform(e, req, &resp, err);
  if (rc == 0 && resp.status >= 400)
    rc = engine_error_from_response(resp.status, resp.body.data, resp.body.len, what, err);
  if (out_status) *out_status = resp.status;
  if (path_stat) memcpy(path_stat, resp.path_stat, sizeof resp.path_stat);
  engine_response_dispose(&resp);
  return rc;
}

int engine_call_list(sm_engine *e, int build_rc, const char *rel_path, const char *what,
                     const char *filters, json_object **out, sm_error *err) {
  if (build_rc != 0) return sm_error_set(err, SM_EINVAL, "%s: %s too long", what, filters);
  int rc = engine_call_json(e, "GET", rel_path, NULL, 0, NULL, out, err);
  if (rc == 0) rc = engine_expect_json(out, json_type_array, what, err);
  return rc;
}

int engine_create_body(const char *what, const char *name, const char *driver,
                       json_object *labels, json_object **out, sm_error *err) {
  *out = NULL;
  if (labels != NULL && !json_object_is_type(labels, json_type_object))
    return sm_error_set(err, SM_EINVAL, "%s: labels must be a JSON object", what);
  json_object *body = json_object_new_object();
  if (body == NULL) return sm_error_set(err, SM_ENOMEM, "%s: out of memory", what);
  json_object_object_add(body, "Name", json_object_new_string(name));
  json_object_object_add(body, "Driver", json_object_new_string(driver));
  if (labels) json_object_object_add(body, "Labels", json_object_get(labels));
  *out = body;
  return 0;
}
