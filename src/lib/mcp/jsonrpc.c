/* JSON-RPC 2.0 messages of MCP: strict parsing with caps, and the answer
 * envelopes (results and errors). Used by the session and the
 * transports. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_keys.h"
#include "common/text.h"
#include "mcp/mcp_internal.h"

#define JSON_DEPTH_MAX 64

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
  if (common_json_keys_unique(msg, len, o, &dup) != 0) {
    json_object_put(o);
    *why = dup;
    return -1;
  }
  *out = o;
  return 0;
}

int mcp_id_ok(json_object *id) {
  return json_object_is_type(id, json_type_string) || json_object_is_type(id, json_type_int);
}

static json_object *envelope(json_object *id) {
  json_object *a = json_object_new_object();
  json_object_object_add(a, "jsonrpc", json_object_new_string("2.0"));
  json_object_object_add(a, "id", id ? json_object_get(id) : NULL);
  return a;
}

static json_object *error_v(json_object *id, int code, json_object *data, const char *fmt,
                            va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  json_object *a = envelope(id);
  json_object *e = json_object_new_object();
  json_object_object_add(e, "code", json_object_new_int(code));
  json_object_object_add(e, "message", common_json_text(msg, strlen(msg)));
  if (data) json_object_object_add(e, "data", data);
  json_object_object_add(a, "error", e);
  return a;
}

json_object *mcp_error(json_object *id, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  json_object *a = error_v(id, code, NULL, fmt, ap);
  va_end(ap);
  return a;
}

json_object *mcp_error_data(json_object *id, int code, json_object *data, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  json_object *a = error_v(id, code, data, fmt, ap);
  va_end(ap);
  return a;
}

json_object *mcp_error_wrap(json_object *id, json_object *error) {
  json_object *a = envelope(id);
  json_object_object_add(a, "error", error);
  return a;
}

json_object *mcp_success(json_object *id, json_object *result) {
  json_object *a = envelope(id);
  json_object_object_add(a, "result", result);
  return a;
}

int mcp_answer_text(json_object *a, char **answer, size_t *answer_len, sm_error *err) {
  size_t len = 0;
  const char *text =
      json_object_to_json_string_length(a, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
  char *copy = text ? malloc(len + 1) : NULL;
  if (copy == NULL) return sm_error_set(err, SM_ENOMEM, "writing an MCP answer");
  memcpy(copy, text, len + 1);
  *answer = copy;
  if (answer_len) *answer_len = len;
  return 0;
}
