/* An MCP session: JSON-RPC 2.0 messages in, answers out, over a tool
 * provider. Transport-agnostic (stdio.c and mcp_http.c carry the bytes).
 *
 * Dual-era, as the 2026-07-28 revision calls it, chosen per message by
 * what the client sends:
 *   - a request whose params._meta names a protocol version is of the
 *     2026-07-28 revision, served statelessly (stateless.c);
 *   - an `initialize` opens the handshake of the earlier revisions
 *     (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05), and the requests
 *     after it are served by the version it negotiated: ping, tools/list,
 *     tools/call, 2025-11-25's tasks/...; notifications/initialized and
 *     notifications/cancelled.
 * A request with neither is refused (-32602: it names no protocol
 * version). Batches (arrays) are refused: the protocol dropped them in
 * 2025-06-18. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/mcp.h>

#include "mcp/mcp_internal.h"
#include "mcp/revision.h"
#include "mcp/session.h"
#include "mcp/session_state.h"
#include "mcp/stateless.h"
#include "mcp/task_methods.h"
#include "mcp/tool_calls.h"

int sm_mcp_protocol_supported(const char *v) {
  return mcp_revision_legacy(v) || mcp_revision_modern(v);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

int sm_mcp_session_new(sm_mcp_session **out, const sm_mcp_server_info *info,
                       const sm_mcp_provider *provider, sm_error *err) {
  *out = NULL;
  if (info == NULL || provider == NULL || provider->call == NULL ||
      (provider->tools == NULL && provider->list == NULL))
    return sm_error_set(err, SM_EINVAL, "an MCP session needs server info and a provider");
  sm_mcp_session *s = calloc(1, sizeof *s);
  if (s == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  pthread_mutex_init(&s->mu, NULL);
  s->provider = *provider;
  s->name = strdup(info->name ? info->name : "sandman");
  s->title = dup_or_null(info->title);
  s->version = strdup(info->version ? info->version : "0");
  s->instructions = dup_or_null(info->instructions);
  s->max_message = info->max_message ? info->max_message : SM_MCP_DEFAULT_MAX_MESSAGE;
  s->tasks = mcp_tasks_new(0, 0);
  int rc = (s->name && s->version && s->tasks) ? mcp_tools_build(s, err)
                                                : sm_error_set(err, SM_ENOMEM, NULL);
  if (rc) {
    s->provider.free = NULL; /* the caller keeps what it passed on failure */
    sm_mcp_session_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void sm_mcp_session_free(sm_mcp_session *s) {
  if (s == NULL) return;
  mcp_tasks_free(s->tasks); /* their work uses the provider: it ends first */
  if (s->provider.free) s->provider.free(s->provider.ud);
  json_object_put(s->tools);
  json_object_put(s->tools_tasks);
  free(s->name);
  free(s->title);
  free(s->version);
  free(s->instructions);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

const char *sm_mcp_session_protocol(const sm_mcp_session *s) {
  return s->protocol[0] ? s->protocol : NULL;
}

void sm_mcp_session_cancel_all(sm_mcp_session *s) {
  pthread_mutex_lock(&s->mu);
  s->closing = 1;
  for (size_t i = 0; i < SM_MCP_MAX_CALLS_IN_FLIGHT; i++)
    if (s->calls[i].used) {
      s->calls[i].cancel = 1;
      if (s->calls[i].outer) *s->calls[i].outer = 1;
    }
  pthread_mutex_unlock(&s->mu);
  mcp_tasks_cancel_all(s->tasks);
}

int mcp_session_busy(sm_mcp_session *s) { return mcp_tasks_busy(s->tasks); }

int sm_mcp_message_is_initialize(const char *msg, size_t len) {
  json_object *o = NULL, *m = NULL;
  const char *why;
  if (mcp_parse(msg, len, SIZE_MAX, &o, &why) != 0) return 0;
  int yes = json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "method", &m) &&
            json_object_is_type(m, json_type_string) &&
            strcmp(json_object_get_string(m), "initialize") == 0 &&
            json_object_object_get_ex(o, "id", NULL);
  json_object_put(o);
  return yes;
}

/* ---- the initialize era ---- */

/* 2025-11-25's experimental tasks are offered: that version, and a
 * long-running tool. */
static int legacy_tasks(sm_mcp_session *s) {
  pthread_mutex_lock(&s->mu);
  int yes = s->long_running && strcmp(s->protocol, "2025-11-25") == 0;
  pthread_mutex_unlock(&s->mu);
  return yes;
}

static json_object *capabilities(sm_mcp_session *s) {
  json_object *caps = json_object_new_object(), *tools = json_object_new_object();
  json_object_object_add(tools, "listChanged", json_object_new_boolean(0));
  json_object_object_add(caps, "tools", tools);
  if (legacy_tasks(s)) {
    json_object *t = json_object_new_object(), *req = json_object_new_object(),
                *tt = json_object_new_object();
    json_object_object_add(t, "list", json_object_new_object());
    json_object_object_add(t, "cancel", json_object_new_object());
    json_object_object_add(tt, "call", json_object_new_object());
    json_object_object_add(req, "tools", tt);
    json_object_object_add(t, "requests", req);
    json_object_object_add(caps, "tasks", t);
  }
  return caps;
}

static json_object *do_initialize(sm_mcp_session *s, json_object *id, json_object *params) {
  json_object *pv = NULL;
  if (!json_object_is_type(params, json_type_object) ||
      !json_object_object_get_ex(params, "protocolVersion", &pv) ||
      !json_object_is_type(pv, json_type_string))
    return mcp_error(id, MCP_INVALID_PARAMS, "initialize needs params.protocolVersion");
  const char *asked = json_object_get_string(pv);
  pthread_mutex_lock(&s->mu);
  if (s->protocol[0]) {
    pthread_mutex_unlock(&s->mu);
    return mcp_error(id, MCP_INVALID_REQUEST, "the session is already initialized");
  }
  /* The client's version when we speak it, else our newest of this era
   * (the client then decides whether it can go on). */
  snprintf(s->protocol, sizeof s->protocol, "%s",
           mcp_revision_legacy(asked) ? asked : SM_MCP_PROTOCOL_LATEST);
  char proto[16];
  snprintf(proto, sizeof proto, "%s", s->protocol);
  pthread_mutex_unlock(&s->mu);
  json_object *r = json_object_new_object();
  json_object_object_add(r, "protocolVersion", json_object_new_string(proto));
  json_object_object_add(r, "capabilities", capabilities(s));
  json_object *si = json_object_new_object();
  json_object_object_add(si, "name", json_object_new_string(s->name));
  if (s->title) json_object_object_add(si, "title", json_object_new_string(s->title));
  json_object_object_add(si, "version", json_object_new_string(s->version));
  json_object_object_add(r, "serverInfo", si);
  if (s->instructions) json_object_object_add(r, "instructions", json_object_new_string(s->instructions));
  return mcp_success(id, r);
}

/* 2025-11-25's params.task: {"ttl": ms}. -1 when it is malformed. */
static int task_param(json_object *params, mcp_call_mode *mode) {
  json_object *task = NULL, *ttl = NULL;
  if (!json_object_object_get_ex(params, "task", &task) || task == NULL) return 0;
  if (!json_object_is_type(task, json_type_object)) return -1;
  mode->task = 1;
  if (json_object_object_get_ex(task, "ttl", &ttl) && ttl != NULL) {
    if (!json_object_is_type(ttl, json_type_int) || json_object_get_int64(ttl) < 0) return -1;
    mode->ttl_ms = json_object_get_int64(ttl);
  }
  return 0;
}

/* A request after initialize. */
static json_object *legacy(sm_mcp_session *s, void *request, json_object *id, const char *m,
                           json_object *params, volatile int *outer) {
  int tasks = legacy_tasks(s);
  if (strcmp(m, "tools/list") == 0) return mcp_tools_list(s, request, id, params, tasks);
  if (strcmp(m, "tools/call") == 0) {
    mcp_call_mode mode = {0, 0, 0};
    if (tasks && params && task_param(params, &mode) != 0)
      return mcp_error(id, MCP_INVALID_PARAMS, "params.task must be {\"ttl\": milliseconds}");
    return mcp_tools_call(s, request, id, params, outer, &mode);
  }
  if (tasks && mcp_task_method_known(m, 0)) return mcp_task_method(s, m, id, params, 0, outer);
  return mcp_error(id, MCP_METHOD_NOT_FOUND, "method not found: %s", m);
}

/* Notifications of the initialize era: never answered. */
static void notification(sm_mcp_session *s, const char *m, json_object *params) {
  if (strcmp(m, "notifications/initialized") == 0) {
    pthread_mutex_lock(&s->mu);
    if (s->protocol[0]) s->initialized = 1;
    pthread_mutex_unlock(&s->mu);
  } else if (strcmp(m, "notifications/cancelled") == 0 && params) {
    json_object *rid = NULL;
    if (json_object_object_get_ex(params, "requestId", &rid)) mcp_calls_cancel_id(s, rid);
  }
}

/* ---- dispatch ---- */

static int has_version(json_object *params) {
  json_object *meta = NULL;
  return params && json_object_object_get_ex(params, "_meta", &meta) &&
         json_object_is_type(meta, json_type_object) &&
         json_object_object_get_ex(meta, MCP_META_VERSION, NULL);
}

/* The answer to one parsed message, or NULL for none. */
static json_object *dispatch(sm_mcp_session *s, void *request, json_object *msg,
                             volatile int *outer, int *status) {
  if (json_object_is_type(msg, json_type_array))
    return mcp_error(NULL, MCP_INVALID_REQUEST, "batches are not supported");
  json_object *v = NULL, *method = NULL, *id = NULL, *params = NULL;
  int has_id = json_object_is_type(msg, json_type_object) && json_object_object_get_ex(msg, "id", &id);
  if (!json_object_is_type(msg, json_type_object) || !json_object_object_get_ex(msg, "jsonrpc", &v) ||
      !json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), "2.0") != 0)
    return mcp_error(has_id && mcp_id_ok(id) ? id : NULL, MCP_INVALID_REQUEST, "not a JSON-RPC 2.0 message");
  if (!json_object_object_get_ex(msg, "method", &method)) {
    /* A response: we send no requests, so there is nothing to match. */
    return NULL;
  }
  if (!json_object_is_type(method, json_type_string))
    return mcp_error(has_id && mcp_id_ok(id) ? id : NULL, MCP_INVALID_REQUEST, "method must be a string");
  if (has_id && !mcp_id_ok(id)) return mcp_error(NULL, MCP_INVALID_REQUEST, "id must be a string or an integer");
  json_object_object_get_ex(msg, "params", &params);
  if (params && !json_object_is_type(params, json_type_object))
    return has_id ? mcp_error(id, MCP_INVALID_PARAMS, "params must be an object") : NULL;
  const char *m = json_object_get_string(method);
  if (strcmp(m, "initialize") != 0 && has_version(params))
    return mcp_stateless(s, request, has_id ? id : NULL, m, params, outer, status);
  if (!has_id) {
    notification(s, m, params);
    return NULL;
  }
  if (strcmp(m, "initialize") == 0) return do_initialize(s, id, params);
  if (strcmp(m, "ping") == 0) return mcp_success(id, json_object_new_object());
  pthread_mutex_lock(&s->mu);
  int ready = s->protocol[0] != '\0';
  pthread_mutex_unlock(&s->mu);
  if (!ready) {
    *status = 400;
    return mcp_error(id, MCP_INVALID_PARAMS,
                     "no protocol version: send params._meta[\"" MCP_META_VERSION "\"] "
                     "(2026-07-28), or initialize first");
  }
  return legacy(s, request, id, m, params, outer);
}

int sm_mcp_session_handle(sm_mcp_session *s, const char *msg, size_t len, volatile int *cancel,
                          char **answer, size_t *answer_len, sm_error *err) {
  return sm_mcp_session_handle_for(s, NULL, msg, len, cancel, answer, answer_len, err);
}

int sm_mcp_session_handle_for(sm_mcp_session *s, void *request, const char *msg, size_t len,
                              volatile int *cancel, char **answer, size_t *answer_len,
                              sm_error *err) {
  int status = 0;
  return mcp_session_answer(s, request, msg, len, cancel, answer, answer_len, &status, err);
}

int mcp_session_answer(sm_mcp_session *s, void *request, const char *msg, size_t len,
                       volatile int *cancel, char **answer, size_t *answer_len, int *status,
                       sm_error *err) {
  *answer = NULL;
  *status = 0;
  if (answer_len) *answer_len = 0;
  json_object *o = NULL, *a = NULL;
  const char *why = NULL;
  if (mcp_parse(msg, len, s->max_message, &o, &why) != 0)
    a = mcp_error(NULL, MCP_PARSE_ERROR, "%s", why);
  else
    a = dispatch(s, request, o, cancel, status);
  json_object_put(o);
  if (a == NULL) return 0;
  int rc = mcp_answer_text(a, answer, answer_len, err);
  json_object_put(a);
  return rc;
}
