/* 2026-07-28's requests: no initialize, no session. Each request's
 * params._meta says its protocol version (which must be one sandman
 * speaks: else -32022 with the versions it does) and the client's
 * capabilities (both required: else -32602); nothing is inferred from an
 * earlier request. Methods: server/discover, tools/list, tools/call, and
 * the tasks extension's tasks/get, tasks/update and tasks/cancel for a
 * client that declares it (else -32021). Removed methods (ping,
 * logging/setLevel, initialize's companions) and unknown ones are -32601.
 * Every result says "resultType" and names the server in its _meta. */
#include <string.h>

#include "mcp/mcp_internal.h"
#include "mcp/revision.h"
#include "mcp/stateless.h"
#include "mcp/task_methods.h"
#include "mcp/tool_calls.h"

#define LIST_TTL_MS 300000 /* tools/list and server/discover may be cached this long */

static json_object *server_info(sm_mcp_session *s) {
  json_object *si = json_object_new_object();
  json_object_object_add(si, "name", json_object_new_string(s->name));
  if (s->title) json_object_object_add(si, "title", json_object_new_string(s->title));
  json_object_object_add(si, "version", json_object_new_string(s->version));
  return si;
}

/* Every result: resultType ("complete" unless it says another) and the
 * server's name in _meta. */
static json_object *decorate(sm_mcp_session *s, json_object *answer) {
  json_object *r = NULL, *meta = NULL;
  if (answer == NULL || !json_object_object_get_ex(answer, "result", &r)) return answer;
  if (!json_object_object_get_ex(r, "resultType", NULL))
    json_object_object_add(r, "resultType", json_object_new_string("complete"));
  if (!json_object_object_get_ex(r, "_meta", &meta) || !json_object_is_type(meta, json_type_object)) {
    meta = json_object_new_object();
    json_object_object_add(r, "_meta", meta);
  }
  json_object_object_add(meta, MCP_META_SERVER, server_info(s));
  return answer;
}

/* Caching hints of a list (the same for every request of this session's
 * owner; "private": the runner's lists belong to a token). */
static void cacheable(json_object *answer, int static_list) {
  json_object *r = NULL;
  if (!json_object_object_get_ex(answer, "result", &r)) return;
  json_object_object_add(r, "ttlMs", json_object_new_int(static_list ? LIST_TTL_MS : 0));
  json_object_object_add(r, "cacheScope", json_object_new_string("private"));
}

static json_object *discover(sm_mcp_session *s, json_object *id) {
  json_object *r = json_object_new_object();
  json_object_object_add(r, "supportedVersions", mcp_revision_all());
  json_object *caps = json_object_new_object(), *tools = json_object_new_object();
  json_object_object_add(tools, "listChanged", json_object_new_boolean(0));
  json_object_object_add(caps, "tools", tools);
  if (s->long_running) {
    json_object *ext = json_object_new_object();
    json_object_object_add(ext, MCP_EXT_TASKS, json_object_new_object());
    json_object_object_add(caps, "extensions", ext);
  }
  json_object_object_add(r, "capabilities", caps);
  if (s->instructions) json_object_object_add(r, "instructions", json_object_new_string(s->instructions));
  json_object *a = mcp_success(id, r);
  cacheable(a, 1);
  return a;
}

static json_object *missing_tasks(json_object *id) {
  json_object *req = json_object_new_object(), *ext = json_object_new_object();
  json_object_object_add(ext, MCP_EXT_TASKS, json_object_new_object());
  json_object_object_add(req, "extensions", ext);
  json_object *data = json_object_new_object();
  json_object_object_add(data, "requiredCapabilities", req);
  return mcp_error_data(id, MCP_MISSING_CAPABILITY, data, "Missing required client capability");
}

static json_object *route(sm_mcp_session *s, void *request, json_object *id, const char *m,
                          json_object *params, const mcp_meta *meta, volatile int *outer,
                          int *status) {
  if (strcmp(m, "server/discover") == 0) return discover(s, id);
  if (strcmp(m, "tools/list") == 0) {
    json_object *a = mcp_tools_list(s, request, id, params, 0);
    cacheable(a, s->tools != NULL);
    return a;
  }
  if (strcmp(m, "tools/call") == 0) {
    mcp_call_mode mode = {1, meta->tasks, 0};
    return mcp_tools_call(s, request, id, params, outer, &mode);
  }
  if (s->long_running && mcp_task_method_known(m, 1)) {
    if (!meta->tasks) {
      *status = 400;
      return missing_tasks(id);
    }
    return mcp_task_method(s, m, id, params, 1, outer);
  }
  *status = 404;
  return mcp_error(id, MCP_METHOD_NOT_FOUND, "method not found: %s", m);
}

json_object *mcp_stateless(sm_mcp_session *s, void *request, json_object *id, const char *method,
                           json_object *params, volatile int *outer, int *status) {
  *status = 0;
  if (id == NULL) { /* notifications: never answered */
    json_object *rid = NULL;
    if (strcmp(method, "notifications/cancelled") == 0 && params &&
        json_object_object_get_ex(params, "requestId", &rid))
      mcp_calls_cancel_id(s, rid);
    return NULL;
  }
  mcp_meta meta;
  char why[256];
  int rc = mcp_meta_read(params, &meta, why, sizeof why);
  if (rc == MCP_META_MALFORMED || rc == MCP_META_NONE) {
    *status = 400;
    return mcp_error(id, MCP_INVALID_PARAMS, "%s",
                     rc == MCP_META_NONE ? "params._meta." MCP_META_VERSION " is required" : why);
  }
  if (rc == MCP_META_UNSUPPORTED) {
    *status = 400;
    return mcp_error_data(id, MCP_UNSUPPORTED_VERSION, mcp_revision_unsupported(meta.version),
                          "%s", why);
  }
  return decorate(s, route(s, request, id, method, params, &meta, outer, status));
}
