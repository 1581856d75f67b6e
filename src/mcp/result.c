/* What a tool call gives back: content blocks and structured content. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sandman/mcp.h>

#include "common/text.h"

void sm_mcp_result_init(sm_mcp_result *r) { memset(r, 0, sizeof *r); }

void sm_mcp_result_dispose(sm_mcp_result *r) {
  if (r == NULL) return;
  json_object_put(r->content);
  json_object_put(r->structured);
  memset(r, 0, sizeof *r);
}

int sm_mcp_result_text(sm_mcp_result *r, const char *text, size_t len) {
  if (r->content == NULL && (r->content = json_object_new_array()) == NULL) return SM_ENOMEM;
  json_object *block = json_object_new_object();
  if (block == NULL) return SM_ENOMEM;
  json_object_object_add(block, "type", json_object_new_string("text"));
  json_object_object_add(block, "text", sm_json_text(text, len));
  json_object_array_add(r->content, block);
  return 0;
}

int sm_mcp_result_error(sm_mcp_result *r, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->is_error = 1;
  return sm_mcp_result_text(r, msg, strlen(msg));
}

void sm_mcp_result_structured(sm_mcp_result *r, json_object *obj) {
  json_object_put(r->structured);
  r->structured = obj;
}
