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

int bk_catalog_build(bk_catalog *c, json_object *broker, sm_error *err) {
  memset(c, 0, sizeof *c);
  json_object *tools = NULL;
  if (!broker || !json_object_object_get_ex(broker, "tools", &tools)) return 0;
  size_t n = (size_t)json_object_object_length(tools);
  c->tools = calloc(n ? n : 1, sizeof *c->tools);
  if (!c->tools) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  json_object_object_foreach(tools, name, def) {
    bk_tool *t = &c->tools[c->n++];
    json_object *kind = NULL;
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
    json_object *ap = NULL;
    t->approval = json_object_object_get_ex(def, "approval", &ap) && json_object_get_boolean(ap);
  }
  return 0;
}

void bk_catalog_dispose(bk_catalog *c) {
  free(c->tools);
  memset(c, 0, sizeof *c);
}

const bk_tool *bk_catalog_find(const bk_catalog *c, const char *name) {
  for (size_t i = 0; name && i < c->n; i++)
    if (strcmp(c->tools[i].name, name) == 0) return &c->tools[i];
  return NULL;
}

const char *bk_kind_name(bk_kind k) {
  return k == BK_HTTP ? "http" : k == BK_MCP ? "mcp" : "argv";
}

json_object *bk_tool_describe(const bk_tool *t) {
  json_object *o = json_object_new_object(), *d = NULL;
  if (!o) return NULL;
  json_object_object_get_ex(t->def, "description", &d);
  json_object_object_add(o, "name", json_object_new_string(t->name));
  json_object_object_add(o, "description", json_object_new_string(d ? json_object_get_string(d) : ""));
  json_object_object_add(o, "inputSchema", json_object_get(t->schema));
  return o;
}

int bk_tool_secret(const bk_tool *t, const char *name) {
  for (size_t i = 0; t->secret && i < json_object_array_length(t->secret); i++)
    if (strcmp(json_object_get_string(json_object_array_get_idx(t->secret, i)), name) == 0) return 1;
  return 0;
}

json_object *bk_tool_masked_args(const bk_tool *t, json_object *args) {
  json_object *o = json_object_new_object();
  if (!o || !json_object_is_type(args, json_type_object)) return o;
  json_object_object_foreach(args, key, val) {
    if (bk_tool_secret(t, key)) {
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
