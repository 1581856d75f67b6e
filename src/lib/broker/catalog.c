/* The catalog of host tools (docs/host-tools.md "Configuration"). The
 * configuration has checked every entry already; this reads the entries
 * into a table with their limits. */
#include <stdlib.h>
#include <string.h>

#include "broker/catalog.h"

#define MASK "***"
#define AUDIT_VALUE_MAX 256

static double num(json_object *o, const char *key, double dflt) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, key, &v) ? json_object_get_double(v) : dflt;
}

/* One entry's limits and kind, read once. */
static void read_tool(bk_tool *t, const char *name, json_object *def) {
  json_object *kind = NULL, *ap = NULL, *bs = NULL;
  t->name = name;
  t->def = def;
  json_object_object_get_ex(def, "input_schema", &t->schema);
  json_object_object_get_ex(def, "secret", &t->secret);
  json_object_object_get_ex(def, "kind", &kind);
  const char *k = json_object_get_string(kind);
  t->kind = k && strcmp(k, "http") == 0 ? BK_HTTP : k && strcmp(k, "mcp") == 0 ? BK_MCP : BK_ARGV;
  t->timeout_s = num(def, "timeout", 30);
  t->approval_timeout_s = num(def, "approval_timeout", 300);
  t->max_output = (size_t)num(def, "max_output", 1 << 20);
  t->concurrency = (int)num(def, "concurrency", 4);
  t->rate = (int)num(def, "rate", 60);
  t->approval = json_object_object_get_ex(def, "approval", &ap) && json_object_get_boolean(ap);
  t->by_server = json_object_object_get_ex(def, "schema_by_server", &bs) && json_object_get_boolean(bs);
}

int broker_catalog_build(bk_catalog *c, json_object *broker, sm_error *err) {
  memset(c, 0, sizeof *c);
  json_object *tools = NULL;
  if (!broker || !json_object_object_get_ex(broker, "tools", &tools)) return 0;
  size_t n = (size_t)json_object_object_length(tools);
  c->tools = calloc(n ? n : 1, sizeof *c->tools);
  if (!c->tools) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  json_object_object_foreach(tools, name, def) read_tool(&c->tools[c->n++], name, def);
  return 0;
}

void broker_catalog_dispose(bk_catalog *c) {
  free(c->tools);
  free(c->extra);
  json_object_put(c->extra_defs);
  memset(c, 0, sizeof *c);
}

int broker_catalog_extend(bk_catalog *c, json_object *entries, sm_error *err) {
  if (c->joined) return 0;
  size_t n = json_object_array_length(entries);
  for (size_t i = 0; i < n; i++) {
    const char *name = json_object_get_string(
        json_object_object_get(json_object_array_get_idx(entries, i), "name"));
    for (size_t j = 0; name && j < c->n; j++)
      if (strcmp(c->tools[j].name, name) == 0)
        return sm_error_set(err, SM_ECONFIG,
                            "host tool '%s' is both a broker.tools entry and a tool of a host MCP "
                            "server: give the server a prefix (broker.mcp_servers.S.prefix) or "
                            "narrow its tools",
                            name);
  }
  bk_tool *extra = calloc(n ? n : 1, sizeof *extra);
  if (!extra) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  for (size_t i = 0; i < n; i++) {
    json_object *def = json_object_array_get_idx(entries, i);
    read_tool(&extra[i], json_object_get_string(json_object_object_get(def, "name")), def);
  }
  c->extra_defs = json_object_get(entries);
  c->extra = extra;
  c->n_extra = n;
  c->joined = 1;
  return 0;
}

size_t broker_catalog_size(const bk_catalog *c) { return c->n + c->n_extra; }

const bk_tool *broker_catalog_at(const bk_catalog *c, size_t i) {
  return i < c->n ? &c->tools[i] : &c->extra[i - c->n];
}

const bk_tool *broker_catalog_find(const bk_catalog *c, const char *name) {
  for (size_t i = 0; name && i < broker_catalog_size(c); i++)
    if (strcmp(broker_catalog_at(c, i)->name, name) == 0) return broker_catalog_at(c, i);
  return NULL;
}

const char *broker_kind_name(bk_kind k) {
  return k == BK_HTTP ? "http" : k == BK_MCP ? "mcp" : "argv";
}

json_object *broker_tool_describe(const bk_tool *t) {
  json_object *o = json_object_new_object(), *d = NULL;
  if (!o) return NULL;
  json_object_object_get_ex(t->def, "description", &d);
  json_object_object_add(o, "name", json_object_new_string(t->name));
  json_object_object_add(o, "description", json_object_new_string(d ? json_object_get_string(d) : ""));
  json_object_object_add(o, "inputSchema", json_object_get(t->schema));
  return o;
}

int broker_tool_secret(const bk_tool *t, const char *name) {
  for (size_t i = 0; t->secret && i < json_object_array_length(t->secret); i++)
    if (strcmp(json_object_get_string(json_object_array_get_idx(t->secret, i)), name) == 0) return 1;
  return 0;
}

json_object *broker_tool_masked_args(const bk_tool *t, json_object *args) {
  json_object *o = json_object_new_object();
  if (!o || !json_object_is_type(args, json_type_object)) return o;
  json_object_object_foreach(args, key, val) {
    if (broker_tool_secret(t, key)) {
      json_object_object_add(o, key, json_object_new_string(MASK));
      continue;
    }
    const char *s = json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN);
    if (json_object_is_type(val, json_type_string)) s = json_object_get_string(val);
    size_t n = strlen(s);
    json_object_object_add(o, key, json_object_new_string_len(s, (int)(n > AUDIT_VALUE_MAX ? AUDIT_VALUE_MAX : n)));
  }
  return o;
}
