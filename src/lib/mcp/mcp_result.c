/* What a tool call gives back: content blocks and structured content. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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
  json_object_object_add(block, "text", common_json_text(text, len));
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

int sm_mcp_result_image(sm_mcp_result *r, const char *mime, const char *b64, size_t len) {
  for (size_t i = 0; i < len; i++) {
    char c = b64[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
          c == '/' || c == '=' || c == '\n' || c == '\r'))
      return SM_EINVAL;
  }
  if (r->content == NULL && (r->content = json_object_new_array()) == NULL) return SM_ENOMEM;
  json_object *block = json_object_new_object();
  if (block == NULL) return SM_ENOMEM;
  json_object_object_add(block, "type", json_object_new_string("image"));
  /* Without line breaks: some clients take only plain base64. */
  char *plain = malloc(len + 1);
  if (plain == NULL) {
    json_object_put(block);
    return SM_ENOMEM;
  }
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if (b64[i] != '\n' && b64[i] != '\r') plain[n++] = b64[i];
  json_object_object_add(block, "data", json_object_new_string_len(plain, (int)n));
  free(plain);
  json_object_object_add(block, "mimeType", json_object_new_string(mime));
  json_object_array_add(r->content, block);
  return 0;
}

void sm_mcp_result_structured(sm_mcp_result *r, json_object *obj) {
  json_object_put(r->structured);
  r->structured = obj;
}
