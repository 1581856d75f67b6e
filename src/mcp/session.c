/* An MCP session: JSON-RPC 2.0 messages in, answers out, over a tool
 * provider. Transport-agnostic (stdio.c and http.c carry the bytes).
 *
 * Methods: initialize (version negotiation), ping, tools/list, tools/call;
 * notifications/initialized and notifications/cancelled. Every other
 * method is -32601 (so a client of the 2026 era, which probes with
 * server/discover, falls back to initialize). Batches (arrays) are
 * refused: the protocol dropped them in 2025-06-18. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/mcp.h>

#include "common/json_keys.h"
#include "common/text.h"
#include "mcp/mcp_internal.h"

#define JSON_DEPTH_MAX 64
#define ID_MAX 128 /* bytes of a request id's JSON form we track */

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

typedef struct inflight {
  int used;
  char id[ID_MAX];          /* the id's JSON text */
  volatile int cancel;
  volatile int *outer;      /* the transport's flag, watched too */
} inflight;

struct sm_mcp_session {
  pthread_mutex_t mu;
  sm_mcp_provider provider;
  char *name, *title, *version, *instructions;
  size_t max_message;
  json_object *tools;       /* the tools/list array, built once (NULL: provider.list) */
  char protocol[16];        /* "" before initialize */
  int initialized;          /* notifications/initialized seen */
  int closing;              /* cancel_all was called: later calls start cancelled */
  inflight calls[SM_MCP_MAX_CALLS_IN_FLIGHT];
};

int sm_mcp_protocol_supported(const char *v) {
  if (v == NULL) return 0;
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
    if (strcmp(versions[i], v) == 0) return 1;
  return 0;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int tool_name_ok(const char *n) {
  size_t len = n ? strlen(n) : 0;
  if (len == 0 || len > 64) return 0;
  for (const char *c = n; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '_' || *c == '-' || *c == '.'))
      return 0;
  return 1;
}

/* The tools/list entries, checked and built once per session. */
static int build_tools(sm_mcp_session *s, sm_error *err) {
  if (s->provider.list) return 0; /* asked per request */
  size_t n = 0;
  const sm_mcp_tool *t = s->provider.tools ? s->provider.tools(s->provider.ud, &n) : NULL;
  json_object *arr = json_object_new_array();
  if (arr == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  for (size_t i = 0; i < n; i++) {
    if (!tool_name_ok(t[i].name)) {
      json_object_put(arr);
      return sm_error_set(err, SM_EINVAL, "MCP tool name '%s' is not valid", t[i].name ? t[i].name : "");
    }
    json_object *in = t[i].input_schema ? json_tokener_parse(t[i].input_schema) : NULL;
    json_object *outs = t[i].output_schema ? json_tokener_parse(t[i].output_schema) : NULL;
    if (!json_object_is_type(in, json_type_object) ||
        (t[i].output_schema && !json_object_is_type(outs, json_type_object))) {
      json_object_put(in);
      json_object_put(outs);
      json_object_put(arr);
      return sm_error_set(err, SM_EINVAL, "MCP tool '%s': its schema is not a JSON object", t[i].name);
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(t[i].name));
    if (t[i].title) json_object_object_add(o, "title", json_object_new_string(t[i].title));
    json_object_object_add(o, "description", json_object_new_string(t[i].description ? t[i].description : ""));
    json_object_object_add(o, "inputSchema", in);
    if (outs) json_object_object_add(o, "outputSchema", outs);
    json_object *ann = json_object_new_object();
    if (t[i].title) json_object_object_add(ann, "title", json_object_new_string(t[i].title));
    json_object_object_add(ann, "readOnlyHint", json_object_new_boolean(!!(t[i].hints & SM_MCP_READ_ONLY)));
    json_object_object_add(ann, "destructiveHint", json_object_new_boolean(!!(t[i].hints & SM_MCP_DESTRUCTIVE)));
    json_object_object_add(ann, "idempotentHint", json_object_new_boolean(!!(t[i].hints & SM_MCP_IDEMPOTENT)));
    json_object_object_add(ann, "openWorldHint", json_object_new_boolean(!!(t[i].hints & SM_MCP_OPEN_WORLD)));
    json_object_object_add(o, "annotations", ann);
    json_object_array_add(arr, o);
  }
  s->tools = arr;
  return 0;
}

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
  int rc = (s->name && s->version) ? build_tools(s, err) : sm_error_set(err, SM_ENOMEM, NULL);
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
  if (s->provider.free) s->provider.free(s->provider.ud);
  json_object_put(s->tools);
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
}

/* ---- messages ---- */

int mcp_parse(const char *msg, size_t len, size_t max, json_object **out, const char **why) {
  *out = NULL;
  if (len > max) {
    *why = "the message is larger than the limit";
    return -1;
  }
  json_tokener *tok = json_tokener_new_ex(JSON_DEPTH_MAX);
  if (tok == NULL) {
    *why = "out of memory";
    return -1;
  }
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  json_object *o = json_tokener_parse_ex(tok, msg, (int)len);
  enum json_tokener_error e = json_tokener_get_error(tok);
  /* Nothing but white space may follow the value. */
  size_t used = (size_t)json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  while (o && used < len && (msg[used] == ' ' || msg[used] == '\t' || msg[used] == '\r' || msg[used] == '\n'))
    used++;
  if (o == NULL || e != json_tokener_success || used != len) {
    json_object_put(o);
    *why = "the message is not valid JSON";
    return -1;
  }
  /* A repeated key: json-c would keep one, another reader the other. */
  const char *dup = NULL;
  if (sm_json_keys_unique(msg, len, o, &dup) != 0) {
    json_object_put(o);
    *why = dup;
    return -1;
  }
  *out = o;
  return 0;
}

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

/* A valid request id: a string or an integer. */
static int id_ok(json_object *id) {
  return json_object_is_type(id, json_type_string) || json_object_is_type(id, json_type_int);
}

static json_object *envelope(json_object *id) {
  json_object *a = json_object_new_object();
  json_object_object_add(a, "jsonrpc", json_object_new_string("2.0"));
  json_object_object_add(a, "id", id ? json_object_get(id) : NULL);
  return a;
}

json_object *mcp_error(json_object *id, int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_object *a = envelope(id);
  json_object *e = json_object_new_object();
  json_object_object_add(e, "code", json_object_new_int(code));
  json_object_object_add(e, "message", sm_json_text(msg, strlen(msg)));
  json_object_object_add(a, "error", e);
  return a;
}

static json_object *success(json_object *id, json_object *result) {
  json_object *a = envelope(id);
  json_object_object_add(a, "result", result);
  return a;
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
  /* The client's version when we speak it, else our newest (the client
   * then decides whether it can go on). */
  snprintf(s->protocol, sizeof s->protocol, "%s",
           sm_mcp_protocol_supported(asked) ? asked : SM_MCP_PROTOCOL_LATEST);
  char proto[16];
  snprintf(proto, sizeof proto, "%s", s->protocol);
  pthread_mutex_unlock(&s->mu);
  json_object *r = json_object_new_object();
  json_object_object_add(r, "protocolVersion", json_object_new_string(proto));
  json_object *caps = json_object_new_object();
  json_object *tools = json_object_new_object();
  json_object_object_add(tools, "listChanged", json_object_new_boolean(0));
  json_object_object_add(caps, "tools", tools);
  json_object_object_add(r, "capabilities", caps);
  json_object *si = json_object_new_object();
  json_object_object_add(si, "name", json_object_new_string(s->name));
  if (s->title) json_object_object_add(si, "title", json_object_new_string(s->title));
  json_object_object_add(si, "version", json_object_new_string(s->version));
  json_object_object_add(r, "serverInfo", si);
  if (s->instructions) json_object_object_add(r, "instructions", json_object_new_string(s->instructions));
  return success(id, r);
}

/* Registers a call in flight; NULL when the table is full. */
static inflight *track(sm_mcp_session *s, json_object *id, volatile int *outer) {
  const char *text = json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN);
  pthread_mutex_lock(&s->mu);
  inflight *slot = NULL;
  for (size_t i = 0; i < SM_MCP_MAX_CALLS_IN_FLIGHT && slot == NULL; i++)
    if (!s->calls[i].used) slot = &s->calls[i];
  if (slot) {
    slot->used = 1;
    slot->cancel = s->closing;
    slot->outer = outer;
    if (outer && s->closing) *outer = 1;
    snprintf(slot->id, sizeof slot->id, "%s", text ? text : "");
  }
  pthread_mutex_unlock(&s->mu);
  return slot;
}

static void untrack(sm_mcp_session *s, inflight *slot) {
  pthread_mutex_lock(&s->mu);
  slot->used = 0;
  slot->outer = NULL;
  pthread_mutex_unlock(&s->mu);
}

static void cancel_id(sm_mcp_session *s, json_object *id) {
  if (!id_ok(id)) return;
  const char *text = json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN);
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < SM_MCP_MAX_CALLS_IN_FLIGHT; i++)
    if (s->calls[i].used && strcmp(s->calls[i].id, text) == 0) {
      s->calls[i].cancel = 1;
      if (s->calls[i].outer) *s->calls[i].outer = 1;
    }
  pthread_mutex_unlock(&s->mu);
}

/* The provider sees one cancel flag: the transport's when it gave one
 * (the sender going away), which a notifications/cancelled sets too, else
 * the call's own. */
static json_object *do_call(sm_mcp_session *s, void *request, json_object *id,
                            json_object *params, volatile int *outer) {
  json_object *name = NULL, *args = NULL;
  if (!json_object_is_type(params, json_type_object) ||
      !json_object_object_get_ex(params, "name", &name) || !json_object_is_type(name, json_type_string))
    return mcp_error(id, MCP_INVALID_PARAMS, "tools/call needs params.name");
  if (json_object_object_get_ex(params, "arguments", &args) && args != NULL &&
      !json_object_is_type(args, json_type_object))
    return mcp_error(id, MCP_INVALID_PARAMS, "params.arguments must be an object");
  const char *tool = json_object_get_string(name);
  size_t n = s->tools ? json_object_array_length(s->tools) : 0;
  int known = s->tools == NULL; /* a per-request list: the provider knows */
  for (size_t i = 0; i < n && !known; i++) {
    json_object *t = json_object_array_get_idx(s->tools, i), *tn = NULL;
    known = json_object_object_get_ex(t, "name", &tn) && strcmp(json_object_get_string(tn), tool) == 0;
  }
  if (!known) return mcp_error(id, MCP_INVALID_PARAMS, "unknown tool: %s", tool);
  inflight *slot = track(s, id, outer);
  if (slot == NULL)
    return mcp_error(id, MCP_SERVER_BUSY, "too many tool calls in flight (at most %d)",
                     SM_MCP_MAX_CALLS_IN_FLIGHT);
  json_object *empty = args ? NULL : json_object_new_object();
  sm_mcp_result r;
  sm_mcp_result_init(&r);
  sm_error err = SM_ERROR_INIT;
  volatile int *flag = slot->outer ? slot->outer : &slot->cancel;
  int rc = s->provider.call(s->provider.ud, request, tool, args ? args : empty, flag, &r, &err);
  json_object_put(empty);
  untrack(s, slot);
  if (rc == SM_ENOTFOUND) {
    sm_mcp_result_dispose(&r);
    return mcp_error(id, MCP_INVALID_PARAMS, "unknown tool: %s", tool);
  }
  if (rc == SM_ECANCELLED) {
    sm_mcp_result_dispose(&r);
    return mcp_error(id, MCP_REQUEST_CANCELLED, "the call was cancelled");
  }
  if (rc) {
    sm_mcp_result_dispose(&r);
    return mcp_error(id, MCP_INTERNAL_ERROR, "%s", err.message[0] ? err.message : sm_error_default_message(rc));
  }
  json_object *res = json_object_new_object();
  json_object_object_add(res, "content", r.content ? json_object_get(r.content) : json_object_new_array());
  if (r.structured) json_object_object_add(res, "structuredContent", json_object_get(r.structured));
  json_object_object_add(res, "isError", json_object_new_boolean(r.is_error));
  sm_mcp_result_dispose(&r);
  return success(id, res);
}

/* The answer to one parsed message, or NULL for none. */
static json_object *do_list(sm_mcp_session *s, void *request, json_object *id) {
  json_object *tools = NULL;
  if (s->tools) {
    tools = json_object_get(s->tools);
  } else {
    sm_error err = SM_ERROR_INIT;
    int rc = s->provider.list(s->provider.ud, request, &tools, &err);
    if (rc == 0 && !json_object_is_type(tools, json_type_array))
      rc = sm_error_set(&err, SM_EINVAL, "the tool list is not an array");
    if (rc) {
      json_object_put(tools);
      return mcp_error(id, rc == SM_EPOLICY ? MCP_INVALID_REQUEST : MCP_INTERNAL_ERROR, "%s",
                       err.message[0] ? err.message : sm_error_default_message(rc));
    }
  }
  json_object *r = json_object_new_object();
  json_object_object_add(r, "tools", tools);
  return success(id, r);
}

static json_object *dispatch(sm_mcp_session *s, void *request, json_object *msg,
                             volatile int *outer) {
  if (json_object_is_type(msg, json_type_array))
    return mcp_error(NULL, MCP_INVALID_REQUEST, "batches are not supported");
  json_object *v = NULL, *method = NULL, *id = NULL, *params = NULL;
  int has_id = json_object_is_type(msg, json_type_object) && json_object_object_get_ex(msg, "id", &id);
  if (!json_object_is_type(msg, json_type_object) || !json_object_object_get_ex(msg, "jsonrpc", &v) ||
      !json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), "2.0") != 0)
    return mcp_error(has_id && id_ok(id) ? id : NULL, MCP_INVALID_REQUEST, "not a JSON-RPC 2.0 message");
  if (!json_object_object_get_ex(msg, "method", &method)) {
    /* A response: we send no requests, so there is nothing to match. */
    return NULL;
  }
  if (!json_object_is_type(method, json_type_string))
    return mcp_error(has_id && id_ok(id) ? id : NULL, MCP_INVALID_REQUEST, "method must be a string");
  if (has_id && !id_ok(id)) return mcp_error(NULL, MCP_INVALID_REQUEST, "id must be a string or an integer");
  json_object_object_get_ex(msg, "params", &params);
  if (params && !json_object_is_type(params, json_type_object))
    return has_id ? mcp_error(id, MCP_INVALID_PARAMS, "params must be an object") : NULL;
  const char *m = json_object_get_string(method);

  if (!has_id) { /* notifications: never answered */
    if (strcmp(m, "notifications/initialized") == 0) {
      pthread_mutex_lock(&s->mu);
      if (s->protocol[0]) s->initialized = 1;
      pthread_mutex_unlock(&s->mu);
    } else if (strcmp(m, "notifications/cancelled") == 0 && params) {
      json_object *rid = NULL;
      if (json_object_object_get_ex(params, "requestId", &rid)) cancel_id(s, rid);
    }
    return NULL;
  }
  if (strcmp(m, "initialize") == 0) return do_initialize(s, id, params);
  if (strcmp(m, "ping") == 0) return success(id, json_object_new_object());
  pthread_mutex_lock(&s->mu);
  int ready = s->protocol[0] != '\0';
  pthread_mutex_unlock(&s->mu);
  if (strcmp(m, "tools/list") == 0 || strcmp(m, "tools/call") == 0) {
    if (!ready) return mcp_error(id, MCP_INVALID_REQUEST, "send initialize first");
    if (strcmp(m, "tools/call") == 0) return do_call(s, request, id, params, outer);
    return do_list(s, request, id);
  }
  return mcp_error(id, MCP_METHOD_NOT_FOUND, "method not found: %s", m);
}

int mcp_answer_text(json_object *a, char **answer, size_t *answer_len, sm_error *err) {
  size_t len = 0;
  const char *text = json_object_to_json_string_length(a, JSON_C_TO_STRING_PLAIN, &len);
  char *copy = text ? malloc(len + 1) : NULL;
  if (copy == NULL) return sm_error_set(err, SM_ENOMEM, "writing an MCP answer");
  memcpy(copy, text, len + 1);
  *answer = copy;
  if (answer_len) *answer_len = len;
  return 0;
}

int sm_mcp_session_handle(sm_mcp_session *s, const char *msg, size_t len, volatile int *cancel,
                          char **answer, size_t *answer_len, sm_error *err) {
  return sm_mcp_session_handle_for(s, NULL, msg, len, cancel, answer, answer_len, err);
}

int sm_mcp_session_handle_for(sm_mcp_session *s, void *request, const char *msg, size_t len,
                              volatile int *cancel, char **answer, size_t *answer_len,
                              sm_error *err) {
  *answer = NULL;
  if (answer_len) *answer_len = 0;
  json_object *o = NULL, *a = NULL;
  const char *why = NULL;
  if (mcp_parse(msg, len, s->max_message, &o, &why) != 0)
    a = mcp_error(NULL, MCP_PARSE_ERROR, "%s", why);
  else
    a = dispatch(s, request, o, cancel);
  json_object_put(o);
  if (a == NULL) return 0;
  int rc = mcp_answer_text(a, answer, answer_len, err);
  json_object_put(a);
  return rc;
}
