/* The request headers of the 2026-07-28 streamable HTTP transport:
 * MCP-Protocol-Version, Mcp-Method and Mcp-Name mirror the body so that
 * intermediaries can route without reading it. A server that reads the
 * body must refuse a request whose headers are missing or say something
 * else (400, HeaderMismatch -32020): a balancer routing on the header
 * and a server acting on the body must not disagree. */
#include <stdio.h>
#include <string.h>

#include "mcp/headers.h"
#include "mcp/revision.h"

/* Visible ASCII, space and tab: what a header value may hold. */
static int value_ok(const char *v) {
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if (!((*p >= 0x20 && *p <= 0x7e) || *p == '\t')) return 0;
  return 1;
}

static int b64(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Standard base64 (padding optional) of in[0..n) into out. */
static int base64_decode(const char *in, size_t n, char *out, size_t out_len) {
  while (n > 0 && in[n - 1] == '=') n--;
  size_t o = 0;
  unsigned acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64((unsigned char)in[i]);
    if (v < 0) return -1;
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (o + 1 >= out_len) return -1;
      out[o++] = (char)((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) return -1; /* one lone symbol: not base64 */
  out[o] = '\0';
  if (strlen(out) != o) return -1; /* a NUL inside: it cannot equal a JSON string we compare */
  return 0;
}

int mcp_header_decode(const char *value, char *out, size_t out_len) {
  static const char head[] = "=?base64?", tail[] = "?=";
  size_t n = strlen(value);
  if (!value_ok(value)) return -1;
  if (n >= sizeof head - 1 + sizeof tail - 1 && strncmp(value, head, sizeof head - 1) == 0 &&
      strcmp(value + n - (sizeof tail - 1), tail) == 0)
    return base64_decode(value + sizeof head - 1, n - (sizeof head - 1) - (sizeof tail - 1), out,
                         out_len);
  if (n + 1 > out_len) return -1;
  memcpy(out, value, n + 1);
  return 0;
}

/* Which params field Mcp-Name mirrors for method, or NULL. */
static const char *name_source(const char *method) {
  if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0) return "name";
  if (strcmp(method, "resources/read") == 0) return "uri";
  if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
      strcmp(method, "tasks/cancel") == 0)
    return "taskId";
  return NULL;
}

static int mismatch(char *why, size_t len, const char *what) {
  snprintf(why, len, "Header mismatch: %s", what);
  return -1;
}

int mcp_headers_check(json_object *msg, const char *version, const char *method, const char *name,
                      char *why, size_t len) {
  json_object *m = NULL, *params = NULL, *meta = NULL, *v = NULL, *field = NULL;
  json_object_object_get_ex(msg, "method", &m);
  json_object_object_get_ex(msg, "params", &params);
  const char *body_method = json_object_get_string(m);
  if (version == NULL) return mismatch(why, len, "the MCP-Protocol-Version header is required");
  if (!value_ok(version)) return mismatch(why, len, "MCP-Protocol-Version holds a byte a header may not");
  if (json_object_object_get_ex(params, "_meta", &meta) &&
      json_object_object_get_ex(meta, MCP_META_VERSION, &v) && json_object_is_type(v, json_type_string) &&
      strcmp(json_object_get_string(v), version) != 0)
    return mismatch(why, len, "MCP-Protocol-Version differs from params._meta's protocol version");
  if (method == NULL) return mismatch(why, len, "the Mcp-Method header is required");
  if (body_method == NULL || strcmp(method, body_method) != 0)
    return mismatch(why, len, "Mcp-Method differs from the body's method");
  const char *src = name_source(body_method);
  if (src == NULL) return 0;
  int body_has = json_object_object_get_ex(params, src, &field) && json_object_is_type(field, json_type_string);
  if (name == NULL) return body_has ? mismatch(why, len, "the Mcp-Name header is required") : 0;
  char decoded[MCP_HEADER_VALUE_MAX];
  if (mcp_header_decode(name, decoded, sizeof decoded) != 0)
    return mismatch(why, len, "Mcp-Name is not a valid header value");
  if (!body_has || strcmp(decoded, json_object_get_string(field)) != 0) {
    char what[128];
    snprintf(what, sizeof what, "Mcp-Name differs from params.%s", src);
    return mismatch(why, len, what);
  }
  return 0;
}
