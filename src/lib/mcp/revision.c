/* The protocol revisions sandman speaks, and the per-request metadata of
 * the 2026-07-28 revision: params._meta carries the protocol version
 * (required), the client's capabilities (required) and who the client is
 * (optional). A request missing a required field is malformed (-32602);
 * one naming a version sandman does not speak gets the list of those it
 * does (-32022). Everything read here is capped: a version string, the
 * keys of _meta and of the capabilities. */
#include <stdio.h>
#include <string.h>

#include "mcp/revision.h"

static const char *const legacy[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
static const char *const modern[] = {"2026-07-28"};

static int listed(const char *const *v, size_t n, const char *s) {
  if (s == NULL) return 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i], s) == 0) return 1;
  return 0;
}

int mcp_revision_legacy(const char *v) { return listed(legacy, sizeof legacy / sizeof *legacy, v); }

int mcp_revision_modern(const char *v) { return listed(modern, sizeof modern / sizeof *modern, v); }

json_object *mcp_revision_all(void) {
  json_object *a = json_object_new_array();
  for (size_t i = 0; i < sizeof modern / sizeof *modern; i++)
    json_object_array_add(a, json_object_new_string(modern[i]));
  for (size_t i = 0; i < sizeof legacy / sizeof *legacy; i++)
    json_object_array_add(a, json_object_new_string(legacy[i]));
  return a;
}

json_object *mcp_revision_unsupported(const char *requested) {
  json_object *d = json_object_new_object();
  json_object_object_add(d, "supported", mcp_revision_all());
  json_object_object_add(d, "requested", json_object_new_string(requested ? requested : ""));
  return d;
}

static int malformed(char *why, size_t len, const char *what) {
  snprintf(why, len, "%s", what);
  return MCP_META_MALFORMED;
}

/* The client's capabilities: an object; its extensions (if any) an object
 * of objects; the tasks extension noted. */
static int read_capabilities(json_object *caps, mcp_meta *out, char *why, size_t len) {
  if (!json_object_is_type(caps, json_type_object))
    return malformed(why, len, "params._meta." MCP_META_CAPABILITIES " is required (an object)");
  if (json_object_object_length(caps) > MCP_META_KEYS_MAX)
    return malformed(why, len, "the client's capabilities have too many keys");
  json_object *ext = NULL;
  if (!json_object_object_get_ex(caps, "extensions", &ext) || ext == NULL) return MCP_META_OK;
  if (!json_object_is_type(ext, json_type_object))
    return malformed(why, len, "clientCapabilities.extensions must be an object");
  if (json_object_object_length(ext) > MCP_META_KEYS_MAX)
    return malformed(why, len, "clientCapabilities.extensions has too many keys");
  json_object_object_foreach(ext, key, val) {
    if (!json_object_is_type(val, json_type_object))
      return malformed(why, len, "each of clientCapabilities.extensions must be an object");
    if (strcmp(key, MCP_EXT_TASKS) == 0) out->tasks = 1;
  }
  return MCP_META_OK;
}

int mcp_meta_read(json_object *params, mcp_meta *out, char *why, size_t len) {
  memset(out, 0, sizeof *out);
  if (len) why[0] = '\0';
  json_object *meta = NULL, *v = NULL, *caps = NULL, *info = NULL;
  if (!json_object_is_type(params, json_type_object) ||
      !json_object_object_get_ex(params, "_meta", &meta) ||
      !json_object_is_type(meta, json_type_object) ||
      !json_object_object_get_ex(meta, MCP_META_VERSION, &v))
    return MCP_META_NONE;
  out->modern = 1;
  if (json_object_object_length(meta) > MCP_META_KEYS_MAX)
    return malformed(why, len, "params._meta has too many keys");
  if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0)
    return malformed(why, len, "params._meta." MCP_META_VERSION " must be a version string");
  if ((size_t)json_object_get_string_len(v) > MCP_VERSION_MAX)
    return malformed(why, len, "params._meta." MCP_META_VERSION " is longer than a version");
  snprintf(out->version, sizeof out->version, "%s", json_object_get_string(v));
  if (json_object_object_get_ex(meta, MCP_META_CLIENT, &info) &&
      !json_object_is_type(info, json_type_object))
    return malformed(why, len, "params._meta." MCP_META_CLIENT " must be an object");
  json_object_object_get_ex(meta, MCP_META_CAPABILITIES, &caps);
  int rc = read_capabilities(caps, out, why, len);
  if (rc != MCP_META_OK) return rc;
  if (!mcp_revision_modern(out->version)) {
    snprintf(why, len,
             mcp_revision_legacy(out->version)
                 ? "protocol version %s opens with initialize; per-request metadata is 2026-07-28's"
                 : "unsupported protocol version %s",
             out->version);
    return MCP_META_UNSUPPORTED;
  }
  return MCP_META_OK;
}
