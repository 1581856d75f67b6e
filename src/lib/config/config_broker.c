/* The host-tool broker's section of the configuration (docs/host-tools.md).
 *
 *   broker:
 *     tools: {NAME: {description, input_schema, secret, argv | http | mcp,
 *                    allow_dash, env, credentials, cwd, timeout, max_output,
 *                    concurrency, rate, approval, approval_timeout}}
 *     groups: {G: [host tool names or globs]}
 *     mcp_servers: {S: {command, env, cwd, timeout, tools, prefix}}
 *   defaults.broker / agents.<name>.broker: {allow, deny, from_tools}
 *
 * Everything is checked here, at load, so that `config check` and every
 * start refuse a bad entry with its file, line and column: a JSON Schema
 * keyword sandman does not enforce, a placeholder inside a longer
 * argument, a tool that runs in two ways or none. What passes is kept as
 * one normalized JSON object (defaults filled in) for the broker. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/util.h>

#include "config/config_internal.h"

#define BK_MAX_TOOLS 256
#define BK_MAX_GROUPS 64
#define BK_MAX_SERVERS 32
#define BK_MAX_PROPS 64
#define BK_MAX_ENUM 256
#define BK_MAX_HEADERS 32
#define BK_TEXT_MAX 4096
/* Defaults of a tool's limits. */
#define BK_DEF_TIMEOUT 30.0
#define BK_MAX_TIMEOUT 3600.0
#define BK_DEF_OUTPUT (1 << 20)
#define BK_MAX_OUTPUT (4 << 20)
#define BK_DEF_CONCURRENCY 4
#define BK_DEF_RATE 60
#define BK_DEF_APPROVAL_TIMEOUT 300.0

static const char *const broker_keys[] = {"tools", "groups", "mcp_servers", NULL};
static const char *const tool_keys[] = {
    "description", "input_schema", "secret",      "argv", "env",
    "credentials", "cwd",          "http",        "mcp",  "timeout",
    "max_output",  "concurrency",  "rate",        "approval", "approval_timeout",
    "allow_dash",  NULL};
static const char *const http_keys[] = {"url", "method", "headers", NULL};
static const char *const mcp_keys[] = {"server", "tool", NULL};
static const char *const server_keys[] = {"command", "env", "cwd", "timeout", "tools", "prefix", NULL};
static const char *const policy_keys[] = {"allow", "deny", "from_tools", NULL};
/* The JSON Schema subset sandman enforces; any other keyword is refused. */
static const char *const schema_keys[] = {"type", "properties", "required",
                                          "additionalProperties", "description", "title", NULL};
static const char *const string_keys[] = {"type", "description", "title", "enum",
                                          "maxLength", "minLength", NULL};
static const char *const number_keys[] = {"type", "description", "title", "enum",
                                          "minimum", "maximum", NULL};
static const char *const boolean_keys[] = {"type", "description", "title", NULL};
static const char *const array_keys[] = {"type", "description", "title", "items", "maxItems", NULL};
static const char *const item_keys[] = {"type", "description", "enum", "maxLength", NULL};

static int oom(cfg_vctx *v) {
  return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
}

static int is_ident(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n >= max || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return 0;
  return 1;
}

static int scalar(cfg_vctx *v, const cfg_ynode *n, const char *path, const char **out) {
  if (n == NULL || n->type != CFG_Y_SCALAR || config_ynode_is_null(n))
    return config_verr(v, n, path, "expected a single value");
  if (n->len >= BK_TEXT_MAX)
    return config_verr(v, n, path, "longer than %d bytes", BK_TEXT_MAX - 1);
  *out = n->str;
  return 0;
}

static int add_string(cfg_vctx *v, json_object *o, const char *key, const char *s) {
  json_object *j = json_object_new_string(s);
  if (!j || json_object_object_add(o, key, j)) return json_object_put(j), oom(v);
  return 0;
}

static int add_number(cfg_vctx *v, json_object *o, const char *key, double d) {
  json_object *j = json_object_new_double(d);
  if (!j || json_object_object_add(o, key, j)) return json_object_put(j), oom(v);
  return 0;
}

static int add_int(cfg_vctx *v, json_object *o, const char *key, int64_t i) {
  json_object *j = json_object_new_int64(i);
  if (!j || json_object_object_add(o, key, j)) return json_object_put(j), oom(v);
  return 0;
}

static int add_bool(cfg_vctx *v, json_object *o, const char *key, int b) {
  json_object *j = json_object_new_boolean(b);
  if (!j || json_object_object_add(o, key, j)) return json_object_put(j), oom(v);
  return 0;
}

static int add_obj(cfg_vctx *v, json_object *o, const char *key, json_object **out) {
  json_object *j = json_object_new_object();
  if (!j || json_object_object_add(o, key, j)) return json_object_put(j), oom(v);
  *out = j;
  return 0;
}

static int add_array(cfg_vctx *v, json_object *o, const char *key, json_object **out) {
  json_object *j = json_object_new_array();
  if (!j || json_object_object_add(o, key, j)) return json_object_put(j), oom(v);
  *out = j;
  return 0;
}

static int push_string(cfg_vctx *v, json_object *arr, const char *s) {
  json_object *j = json_object_new_string(s);
  if (!j || json_object_array_add(arr, j)) return json_object_put(j), oom(v);
  return 0;
}

/* A whole number (plain scalar) within [min, max]. */
static int whole(cfg_vctx *v, const cfg_ynode *n, const char *path, int64_t min, int64_t max,
                 int64_t *out) {
  const char *s = NULL;
  int rc = scalar(v, n, path, &s);
  if (rc) return rc;
  sm_error perr = SM_ERROR_INIT;
  if (!n->plain || sm_parse_int(s, min, max, out, &perr))
    return config_verr(v, n, path, "expected a whole number from %lld to %lld, got '%s'",
                       (long long)min, (long long)max, s);
  return 0;
}

static int number(cfg_vctx *v, const cfg_ynode *n, const char *path, double *out) {
  const char *s = NULL;
  int rc = scalar(v, n, path, &s);
  if (rc) return rc;
  char *end = NULL;
  errno = 0;
  double d = strtod(s, &end);
  if (!n->plain || end == s || *end || errno || !isfinite(d))
    return config_verr(v, n, path, "expected a number, got '%s'", s);
  *out = d;
  return 0;
}

static int duration(cfg_vctx *v, const cfg_ynode *n, const char *path, double max, double *out) {
  const char *s = NULL;
  int rc = scalar(v, n, path, &s);
  if (rc) return rc;
  sm_error perr = SM_ERROR_INIT;
  if (sm_parse_duration(s, out, &perr) || *out <= 0 || *out > max)
    return config_verr(v, n, path,
                       "expected a duration above 0 and up to %.0fs (30, 90s, 5m), got '%s'", max,
                       s);
  return 0;
}

static int boolean(cfg_vctx *v, const cfg_ynode *n, const char *path, int *out) {
  const char *s = NULL;
  int rc = scalar(v, n, path, &s);
  if (rc) return rc;
  if (n->plain && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"))) return *out = 1, 0;
  if (n->plain && (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off"))) return *out = 0, 0;
  return config_verr(v, n, path, "expected true or false, got '%s'", s);
}

/* A mapping (or nothing) with unique plain keys, each from known (NULL:
 * any). The loader's own check does the same for its sections; this file
 * keeps its own so that the two files do not depend on each other. */
static int check_map(cfg_vctx *v, const cfg_ynode *map, const char *path,
                         const char *const *known) {
  if (map == NULL || config_ynode_is_null(map)) return 0;
  if (map->type != CFG_Y_MAP) return config_verr(v, map, path, "expected a mapping of keys");
  if (config_map_size(map) > 1024) return config_verr(v, map, path, "more than 1024 keys");
  for (size_t i = 0; i < config_map_size(map); i++) {
    const cfg_ynode *k = config_map_key(map, i);
    char full[600];
    if (k->type != CFG_Y_SCALAR || config_ynode_is_null(k))
      return config_verr(v, k, path, "keys must be plain names");
    snprintf(full, sizeof full, "%s.%s", path, k->str);
    for (size_t j = 0; j < i; j++)
      if (strcmp(config_map_key(map, j)->str, k->str) == 0)
        return config_verr(v, k, full, "duplicate key");
    int found = known == NULL;
    for (const char *const *kk = known; kk && *kk && !found; kk++) found = strcmp(*kk, k->str) == 0;
    if (found) continue;
    char list[512] = "";
    size_t used = 0;
    for (const char *const *kk = known; *kk && used < sizeof list - 1; kk++) {
      int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", *kk);
      if (w < 0) break;
      used += (size_t)w;
    }
    return config_verr(v, k, full, "unknown key (known keys: %s)", list);
  }
  return 0;
}

typedef int (*item_check)(const char *s);

static int valid_glob(const char *s) {
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || strchr("_.-*?[]!", *s))) return 0;
  return 1;
}
static int valid_env_name(const char *s) { return is_ident(s, 256); }
static int valid_prop(const char *s) { return is_ident(s, CFG_NAME_MAX); }
static int valid_tool(const char *s) { return config_valid_name(s); }
/* A calling tool's name or pattern, or a built-in group (from_tools). */
static int valid_tool_pattern(const char *s) {
  if (strncmp(s, "group:", 6) == 0) return config_group_members(s) != NULL;
  return strlen(s) < CFG_NAME_MAX && valid_glob(s);
}

/* A list of strings that each pass check into a new array at o[key]. */
static int string_list(cfg_vctx *v, const cfg_ynode *n, const char *path, item_check check,
                       const char *what, json_object *o, const char *key, json_object **out) {
  if (n->type != CFG_Y_SEQ) return config_verr(v, n, path, "expected a list of %s", what);
  if (n->n > SM_LIST_MAX) return config_verr(v, n, path, "more than %d entries", SM_LIST_MAX);
  json_object *arr = NULL;
  int rc = add_array(v, o, key, &arr);
  if (rc) return rc;
  for (size_t i = 0; i < n->n; i++) {
    const cfg_ynode *it = n->kids[i];
    char ip[600];
    const char *s = NULL;
    snprintf(ip, sizeof ip, "%s[%zu]", path, i);
    if ((rc = scalar(v, it, ip, &s))) return rc;
    if (check && !check(s)) return config_verr(v, it, ip, "'%s' is not %s", s, what);
    if ((rc = push_string(v, arr, s))) return rc;
  }
  if (out) *out = arr;
  return 0;
}

/* ---- input_schema: the JSON Schema subset ---- */

static const char *const prop_types[] = {"string", "number", "integer", "boolean", "array", NULL};

static int schema_type(cfg_vctx *v, const cfg_ynode *map, const char *path,
                       const char *const *allowed, const char **out) {
  const cfg_ynode *t = config_map_get(map, "type");
  char p[600];
  snprintf(p, sizeof p, "%s.type", path);
  if (t == NULL)
    return config_verr(v, map, p, "missing (one of string, number, integer, boolean, array)");
  const char *s = NULL;
  int rc = scalar(v, t, p, &s);
  if (rc) return rc;
  for (const char *const *a = allowed; *a; a++)
    if (strcmp(*a, s) == 0) return *out = *a, 0;
  return config_verr(v, t, p, "type '%s' is not supported here", s);
}

static int schema_enum(cfg_vctx *v, const cfg_ynode *n, const char *path, int numeric,
                       json_object *o) {
  if (n->type != CFG_Y_SEQ || n->n == 0 || n->n > BK_MAX_ENUM)
    return config_verr(v, n, path, "expected a list of 1 to %d values", BK_MAX_ENUM);
  json_object *arr = NULL;
  int rc = add_array(v, o, "enum", &arr);
  for (size_t i = 0; rc == 0 && i < n->n; i++) {
    char ip[640];
    snprintf(ip, sizeof ip, "%s[%zu]", path, i);
    if (numeric) {
      double d = 0;
      if ((rc = number(v, n->kids[i], ip, &d))) return rc;
      json_object *j = json_object_new_double(d);
      if (!j || json_object_array_add(arr, j)) return json_object_put(j), oom(v);
    } else {
      const char *s = NULL;
      if ((rc = scalar(v, n->kids[i], ip, &s))) return rc;
      rc = push_string(v, arr, s);
    }
  }
  return rc;
}

/* The keywords of one value (a property, or an array's items). */
static int schema_value(cfg_vctx *v, const cfg_ynode *n, const char *path, int is_item,
                        json_object *o) {
  if (n->type != CFG_Y_MAP) return config_verr(v, n, path, "expected a mapping (a JSON Schema)");
  static const char *const item_types[] = {"string", NULL};
  const char *type = NULL;
  int rc = schema_type(v, n, path, is_item ? item_types : prop_types, &type);
  if (rc) return rc;
  const char *const *known = is_item                        ? item_keys
                             : strcmp(type, "string") == 0  ? string_keys
                             : strcmp(type, "boolean") == 0 ? boolean_keys
                             : strcmp(type, "array") == 0   ? array_keys
                                                            : number_keys;
  if ((rc = check_map(v, n, path, known))) return rc;
  if ((rc = add_string(v, o, "type", type))) return rc;
  for (size_t i = 0; i < config_map_size(n); i++) {
    const char *k = config_map_key(n, i)->str;
    const cfg_ynode *val = config_map_value(n, i);
    char p[640];
    snprintf(p, sizeof p, "%s.%s", path, k);
    const char *s = NULL;
    int64_t iv = 0;
    double d = 0;
    if (!strcmp(k, "type")) continue;
    if (!strcmp(k, "description") || !strcmp(k, "title")) {
      if ((rc = scalar(v, val, p, &s)) || (rc = add_string(v, o, k, s))) return rc;
    } else if (!strcmp(k, "enum")) {
      if ((rc = schema_enum(v, val, p, strcmp(type, "string") != 0, o))) return rc;
    } else if (!strcmp(k, "maxLength") || !strcmp(k, "minLength") || !strcmp(k, "maxItems")) {
      if ((rc = whole(v, val, p, 0, 1 << 24, &iv)) || (rc = add_int(v, o, k, iv))) return rc;
    } else if (!strcmp(k, "minimum") || !strcmp(k, "maximum")) {
      if ((rc = number(v, val, p, &d)) || (rc = add_number(v, o, k, d))) return rc;
    } else if (!strcmp(k, "items")) {
      json_object *items = NULL;
      if ((rc = add_obj(v, o, "items", &items)) || (rc = schema_value(v, val, p, 1, items)))
        return rc;
    }
  }
  if (!strcmp(type, "array") && !config_map_get(n, "items"))
    return config_verr(v, n, path, "an array needs items (of type string)");
  return 0;
}

static int schema_required(cfg_vctx *v, const cfg_ynode *n, const char *path, json_object *props,
                           json_object *o) {
  json_object *arr = NULL;
  int rc = string_list(v, n, path, valid_prop, "a property name", o, "required", &arr);
  for (size_t i = 0; rc == 0 && i < json_object_array_length(arr); i++) {
    const char *name = json_object_get_string(json_object_array_get_idx(arr, i));
    if (!json_object_object_get_ex(props, name, NULL))
      return config_verr(v, n->kids[i], path, "'%s' is not one of the properties", name);
  }
  return rc;
}

/* input_schema: an object with properties (none: no arguments). */
static int parse_schema(cfg_vctx *v, const cfg_ynode *n, const char *path, json_object *tool) {
  json_object *o = NULL, *props = NULL;
  int rc = add_obj(v, tool, "input_schema", &o);
  if (rc || (rc = add_obj(v, o, "properties", &props))) return rc;
  if (n == NULL || config_ynode_is_null(n)) {
    if ((rc = add_string(v, o, "type", "object"))) return rc;
    return add_bool(v, o, "additionalProperties", 0);
  }
  static const char *const object_type[] = {"object", NULL};
  const char *type = NULL;
  if (n->type != CFG_Y_MAP) return config_verr(v, n, path, "expected a mapping (a JSON Schema)");
  if ((rc = check_map(v, n, path, schema_keys))) return rc;
  if ((rc = schema_type(v, n, path, object_type, &type))) return rc;
  if ((rc = add_string(v, o, "type", type))) return rc;
  const cfg_ynode *p = config_map_get(n, "properties");
  char pp[600];
  snprintf(pp, sizeof pp, "%s.properties", path);
  if (p && !config_ynode_is_null(p)) {
    if ((rc = check_map(v, p, pp, NULL))) return rc;
    if (config_map_size(p) > BK_MAX_PROPS)
      return config_verr(v, p, pp, "more than %d properties", BK_MAX_PROPS);
    for (size_t i = 0; i < config_map_size(p); i++) {
      const cfg_ynode *k = config_map_key(p, i);
      char kp[640];
      snprintf(kp, sizeof kp, "%s.%s", pp, k->str);
      if (!valid_prop(k->str))
        return config_verr(
            v, k, kp, "property names are letters, digits and '_' (not starting with a digit)");
      json_object *po = NULL;
      if ((rc = add_obj(v, props, k->str, &po)) ||
          (rc = schema_value(v, config_map_value(p, i), kp, 0, po)))
        return rc;
    }
  }
  const cfg_ynode *req = config_map_get(n, "required");
  snprintf(pp, sizeof pp, "%s.required", path);
  if (req && !config_ynode_is_null(req) && (rc = schema_required(v, req, pp, props, o))) return rc;
  int extra = 0;
  const cfg_ynode *ap = config_map_get(n, "additionalProperties");
  snprintf(pp, sizeof pp, "%s.additionalProperties", path);
  if (ap && (rc = boolean(v, ap, pp, &extra))) return rc;
  if ((rc = add_bool(v, o, "additionalProperties", extra))) return rc;
  for (const char *const *k = (const char *const[]){"description", "title", NULL}; *k; k++) {
    const cfg_ynode *d = config_map_get(n, *k);
    const char *s = NULL;
    snprintf(pp, sizeof pp, "%s.%s", path, *k);
    if (d && ((rc = scalar(v, d, pp, &s)) || (rc = add_string(v, o, *k, s)))) return rc;
  }
  return 0;
}

/* ---- how a tool runs ---- */

/* "{name}" inside a longer argument: refused (a placeholder is always one
 * whole argument, so a value can never become part of a flag or a path). */
static int embedded_placeholder(const char *arg) {
  for (const char *o = strchr(arg, '{'); o; o = strchr(o + 1, '{')) {
    const char *c = strchr(o, '}');
    if (!c || c == o + 1) continue;
    char name[CFG_NAME_MAX];
    size_t len = (size_t)(c - o - 1);
    if (len >= sizeof name) continue;
    memcpy(name, o + 1, len);
    name[len] = '\0';
    if (is_ident(name, sizeof name)) return 1;
  }
  return 0;
}

static int parse_argv(cfg_vctx *v, const cfg_ynode *n, const char *path, json_object *props,
                      json_object *tool) {
  if (n->type != CFG_Y_SEQ || n->n == 0)
    return config_verr(v, n, path, "expected a list such as [gh, api, \"{path}\"]");
  if (n->n >= SM_CONFIG_MAX_ARGV)
    return config_verr(v, n, path, "more than %d arguments", SM_CONFIG_MAX_ARGV - 1);
  json_object *arr = NULL;
  int rc = string_list(v, n, path, NULL, "an argument", tool, "argv", &arr);
  for (size_t i = 0; rc == 0 && i < n->n; i++) {
    const char *a = n->kids[i]->str;
    char ip[600], name[CFG_NAME_MAX];
    snprintf(ip, sizeof ip, "%s[%zu]", path, i);
    if (config_placeholder(a, name, sizeof name)) {
      if (i == 0)
        return config_verr(v, n->kids[i], ip, "the command itself cannot be a placeholder");
      if (!json_object_object_get_ex(props, name, NULL))
        return config_verr(v, n->kids[i], ip, "placeholder {%s} is not a property of input_schema",
                           name);
    } else if (embedded_placeholder(a)) {
      return config_verr(
          v, n->kids[i], ip,
          "a placeholder must be a whole argument (write \"{name}\" alone, never inside "
          "a longer string such as '%s')",
          a);
    } else if (i == 0 && a[0] == '\0') {
      return config_verr(v, n->kids[i], ip, "the command is empty");
    }
  }
  return rc;
}

static int valid_header_name(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || strchr("!#$%&'*+-.^_`|~", *s))) return 0;
  return 1;
}

static int parse_http(cfg_vctx *v, const cfg_ynode *n, const char *path, json_object *tool) {
  int rc = check_map(v, n, path, http_keys);
  if (rc) return rc;
  if (n->type != CFG_Y_MAP)
    return config_verr(v, n, path, "expected a mapping {url, method, headers}");
  json_object *h = NULL, *hd = NULL;
  if ((rc = add_obj(v, tool, "http", &h)) || (rc = add_obj(v, h, "headers", &hd))) return rc;
  char p[600];
  const char *s = NULL;
  snprintf(p, sizeof p, "%s.url", path);
  const cfg_ynode *u = config_map_get(n, "url");
  if (!u) return config_verr(v, n, p, "missing (e.g. http://127.0.0.1:8080/lookup)");
  if ((rc = scalar(v, u, p, &s))) return rc;
  if (strncmp(s, "http://", 7) && strncmp(s, "https://", 8))
    return config_verr(v, u, p, "'%s' is not an http:// or https:// URL", s);
  if ((rc = add_string(v, h, "url", s))) return rc;
  const char *method = "POST";
  const cfg_ynode *m = config_map_get(n, "method");
  snprintf(p, sizeof p, "%s.method", path);
  if (m) {
    if ((rc = scalar(v, m, p, &method))) return rc;
    if (strcmp(method, "POST") && strcmp(method, "PUT") && strcmp(method, "PATCH"))
      return config_verr(v, m, p,
                         "'%s' is not one of POST, PUT, PATCH (the arguments are the body)",
                         method);
  }
  if ((rc = add_string(v, h, "method", method))) return rc;
  const cfg_ynode *hs = config_map_get(n, "headers");
  snprintf(p, sizeof p, "%s.headers", path);
  if (hs && !config_ynode_is_null(hs)) {
    if ((rc = check_map(v, hs, p, NULL))) return rc;
    if (config_map_size(hs) > BK_MAX_HEADERS)
      return config_verr(v, hs, p, "more than %d headers", BK_MAX_HEADERS);
    for (size_t i = 0; i < config_map_size(hs); i++) {
      const cfg_ynode *k = config_map_key(hs, i);
      char kp[640];
      snprintf(kp, sizeof kp, "%s.%s", p, k->str);
      if (!valid_header_name(k->str)) return config_verr(v, k, kp, "not a header name");
      if ((rc = scalar(v, config_map_value(hs, i), kp, &s))) return rc;
      if (strpbrk(s, "\r\n"))
        return config_verr(v, config_map_value(hs, i), kp, "a header value has no line breaks");
      if ((rc = add_string(v, hd, k->str, s))) return rc;
    }
  }
  return 0;
}

static int parse_mcp_ref(cfg_vctx *v, const cfg_ynode *n, const char *path, json_object *servers,
                         json_object *tool) {
  int rc = check_map(v, n, path, mcp_keys);
  if (rc) return rc;
  if (n->type != CFG_Y_MAP) return config_verr(v, n, path, "expected a mapping {server, tool}");
  json_object *m = NULL;
  if ((rc = add_obj(v, tool, "mcp", &m))) return rc;
  for (const char *const *k = (const char *const[]){"server", "tool", NULL}; *k; k++) {
    char p[600];
    const char *s = NULL;
    snprintf(p, sizeof p, "%s.%s", path, *k);
    const cfg_ynode *x = config_map_get(n, *k);
    if (!x) return config_verr(v, n, p, "missing");
    if ((rc = scalar(v, x, p, &s))) return rc;
    if (!config_valid_name(s)) return config_verr(v, x, p, "'%s' is not a name", s);
    if (!strcmp(*k, "server") && !json_object_object_get_ex(servers, s, NULL))
      return config_verr(v, x, p, "no broker.mcp_servers.%s", s);
    if ((rc = add_string(v, m, *k, s))) return rc;
  }
  return 0;
}

/* argv, http or mcp: exactly one; env, credentials and cwd go with argv. */
static int parse_runner(cfg_vctx *v, const cfg_ynode *body, const char *path, json_object *servers,
                        json_object *tool) {
  const cfg_ynode *a = config_map_get(body, "argv"), *h = config_map_get(body, "http"),
                  *m = config_map_get(body, "mcp");
  if ((a != NULL) + (h != NULL) + (m != NULL) != 1)
    return config_verr(v, body, path, "says how it runs with exactly one of argv, http, mcp");
  json_object *props = NULL, *schema = NULL;
  json_object_object_get_ex(tool, "input_schema", &schema);
  json_object_object_get_ex(schema, "properties", &props);
  char p[600];
  int rc;
  if (a) {
    snprintf(p, sizeof p, "%s.argv", path);
    if ((rc = add_string(v, tool, "kind", "argv")) || (rc = parse_argv(v, a, p, props, tool)))
      return rc;
  } else if (h) {
    snprintf(p, sizeof p, "%s.http", path);
    if ((rc = add_string(v, tool, "kind", "http")) || (rc = parse_http(v, h, p, tool))) return rc;
  } else {
    snprintf(p, sizeof p, "%s.mcp", path);
    if ((rc = add_string(v, tool, "kind", "mcp")) || (rc = parse_mcp_ref(v, m, p, servers, tool)))
      return rc;
  }
  for (const char *const *k = (const char *const[]){"env", "credentials", "cwd", NULL}; *k; k++) {
    const cfg_ynode *x = config_map_get(body, *k);
    if (!x || config_ynode_is_null(x)) continue;
    snprintf(p, sizeof p, "%s.%s", path, *k);
    if (!a) return config_verr(v, x, p, "only an argv tool takes %s", *k);
    const char *s = NULL;
    if (!strcmp(*k, "env"))
      rc = string_list(v, x, p, valid_env_name, "a variable name", tool, "env", NULL);
    else if (!strcmp(*k, "credentials"))
      rc = string_list(v, x, p, valid_tool, "a service of the credentials file", tool,
                       "credentials", NULL);
    else if ((rc = scalar(v, x, p, &s)) == 0)
      rc = s[0] == '/' ? add_string(v, tool, "cwd", s)
                       : config_verr(v, x, p, "'%s' is not an absolute path", s);
    if (rc) return rc;
  }
  return 0;
}

static int parse_limits(cfg_vctx *v, const cfg_ynode *body, const char *path, json_object *tool) {
  char p[600];
  int rc = 0;
  double d = BK_DEF_TIMEOUT, at = BK_DEF_APPROVAL_TIMEOUT;
  int64_t out = BK_DEF_OUTPUT, conc = BK_DEF_CONCURRENCY, rate = BK_DEF_RATE;
  const cfg_ynode *x;
  snprintf(p, sizeof p, "%s.timeout", path);
  if ((x = config_map_get(body, "timeout")) && (rc = duration(v, x, p, BK_MAX_TIMEOUT, &d)))
    return rc;
  snprintf(p, sizeof p, "%s.approval_timeout", path);
  if ((x = config_map_get(body, "approval_timeout")) && (rc = duration(v, x, p, 86400, &at)))
    return rc;
  snprintf(p, sizeof p, "%s.max_output", path);
  if ((x = config_map_get(body, "max_output"))) {
    const char *s = NULL;
    sm_error perr = SM_ERROR_INIT;
    if ((rc = scalar(v, x, p, &s))) return rc;
    if (sm_parse_size(s, &out, &perr) || out < 1 || out > BK_MAX_OUTPUT)
      return config_verr(v, x, p, "expected a size from 1 to 4m, got '%s'", s);
  }
  snprintf(p, sizeof p, "%s.concurrency", path);
  if ((x = config_map_get(body, "concurrency")) && (rc = whole(v, x, p, 1, 64, &conc))) return rc;
  snprintf(p, sizeof p, "%s.rate", path);
  if ((x = config_map_get(body, "rate")) && (rc = whole(v, x, p, 1, 100000, &rate))) return rc;
  int approval = 0;
  snprintf(p, sizeof p, "%s.approval", path);
  if ((x = config_map_get(body, "approval"))) {
    const char *s = NULL;
    if ((rc = scalar(v, x, p, &s))) return rc;
    if (strcmp(s, "required") && strcmp(s, "none"))
      return config_verr(v, x, p, "'%s' is not one of required, none", s);
    approval = strcmp(s, "required") == 0;
  }
  if ((rc = add_number(v, tool, "timeout", d)) || (rc = add_int(v, tool, "max_output", out)) ||
      (rc = add_int(v, tool, "concurrency", conc)) || (rc = add_int(v, tool, "rate", rate)) ||
      (rc = add_bool(v, tool, "approval", approval)) ||
      (rc = add_number(v, tool, "approval_timeout", at)))
    return rc;
  return 0;
}

/* A list of input_schema's property names under key (secret, allow_dash);
 * [] when absent. allow_dash: argv tools only (a value that may start with
 * '-', so become an option of the host program, must be said so). */
static int prop_list(cfg_vctx *v, const cfg_ynode *body, const char *p, const char *key,
                     json_object *tool) {
  json_object *schema = NULL, *props = NULL, *list = NULL, *kind = NULL;
  json_object_object_get_ex(tool, "input_schema", &schema);
  json_object_object_get_ex(schema, "properties", &props);
  const cfg_ynode *x = config_map_get(body, key);
  char q[600];
  snprintf(q, sizeof q, "%s.%s", p, key);
  if (!x || config_ynode_is_null(x)) return add_array(v, tool, key, &list);
  json_object_object_get_ex(tool, "kind", &kind);
  if (!strcmp(key, "allow_dash") && strcmp(json_object_get_string(kind), "argv") != 0)
    return config_verr(v, x, q, "only an argv tool takes allow_dash");
  int rc = string_list(v, x, q, valid_prop, "a property name", tool, key, &list);
  for (size_t i = 0; rc == 0 && i < json_object_array_length(list); i++) {
    const char *name = json_object_get_string(json_object_array_get_idx(list, i));
    if (!json_object_object_get_ex(props, name, NULL))
      return config_verr(v, x->kids[i], q, "'%s' is not a property of input_schema", name);
  }
  return rc;
}

static int parse_tool(cfg_vctx *v, const cfg_ynode *k, const cfg_ynode *body, json_object *servers,
                      json_object *tools) {
  char p[512];
  snprintf(p, sizeof p, "broker.tools.%s", k->str);
  if (!config_valid_name(k->str))
    return config_verr(v, k, p, "host tool names may only hold letters, digits, '.', '_' and '-'");
  int rc = check_map(v, body, p, tool_keys);
  if (rc) return rc;
  if (config_ynode_is_null(body))
    return config_verr(v, k, p, "empty (a host tool needs argv, http or mcp)");
  json_object *tool = NULL;
  if ((rc = add_obj(v, tools, k->str, &tool))) return rc;
  char q[600];
  const char *s = "";
  const cfg_ynode *d = config_map_get(body, "description");
  snprintf(q, sizeof q, "%s.description", p);
  if (d && (rc = scalar(v, d, q, &s))) return rc;
  if ((rc = add_string(v, tool, "description", s))) return rc;
  snprintf(q, sizeof q, "%s.input_schema", p);
  if ((rc = parse_schema(v, config_map_get(body, "input_schema"), q, tool))) return rc;
  if ((rc = parse_runner(v, body, p, servers, tool))) return rc;
  if ((rc = prop_list(v, body, p, "secret", tool)) || (rc = prop_list(v, body, p, "allow_dash", tool)))
    return rc;
  return parse_limits(v, body, p, tool);
}

/* A server's tools (globs of its tools' names; absent: all) and prefix
 * (put before each name in the catalog). */
static int parse_server_exports(cfg_vctx *v, const cfg_ynode *body, const char *p, json_object *s) {
  char q[600];
  int rc = 0;
  const cfg_ynode *t = config_map_get(body, "tools");
  snprintf(q, sizeof q, "%s.tools", p);
  if (t && !config_ynode_is_null(t) &&
      (rc = string_list(v, t, q, valid_glob, "a tool name or glob", s, "tools", NULL)))
    return rc;
  const cfg_ynode *x = config_map_get(body, "prefix");
  const char *str = NULL;
  snprintf(q, sizeof q, "%s.prefix", p);
  if (x && !config_ynode_is_null(x)) {
    if ((rc = scalar(v, x, q, &str))) return rc;
    if (strlen(str) > 32 || strspn(str, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_.-") != strlen(str))
      return config_verr(v, x, q, "'%s' is not a prefix (up to 32 of A-Z a-z 0-9 _ . -)", str);
    if ((rc = add_string(v, s, "prefix", str))) return rc;
  }
  return 0;
}

static int parse_servers(cfg_vctx *v, const cfg_ynode *n, json_object *out) {
  const char *path = "broker.mcp_servers";
  int rc = check_map(v, n, path, NULL);
  if (rc || config_ynode_is_null(n)) return rc;
  if (config_map_size(n) > BK_MAX_SERVERS)
    return config_verr(v, n, path, "more than %d servers", BK_MAX_SERVERS);
  for (size_t i = 0; i < config_map_size(n); i++) {
    const cfg_ynode *k = config_map_key(n, i), *body = config_map_value(n, i);
    char p[512], q[600];
    snprintf(p, sizeof p, "%s.%s", path, k->str);
    if (!config_valid_name(k->str)) return config_verr(v, k, p, "not a name");
    if ((rc = check_map(v, body, p, server_keys))) return rc;
    if (config_ynode_is_null(body)) return config_verr(v, k, p, "empty (a server needs command)");
    json_object *s = NULL;
    if ((rc = add_obj(v, out, k->str, &s))) return rc;
    const cfg_ynode *c = config_map_get(body, "command");
    snprintf(q, sizeof q, "%s.command", p);
    if (!c)
      return config_verr(v, body, q,
                         "missing (e.g. [npx, -y, \"@modelcontextprotocol/server-everything\"])");
    if (c->type != CFG_Y_SEQ || c->n == 0 || c->n >= SM_CONFIG_MAX_ARGV)
      return config_verr(v, c, q, "expected a list of 1 to %d arguments", SM_CONFIG_MAX_ARGV - 1);
    if ((rc = string_list(v, c, q, NULL, "an argument", s, "command", NULL))) return rc;
    const cfg_ynode *e = config_map_get(body, "env");
    snprintf(q, sizeof q, "%s.env", p);
    if (e && !config_ynode_is_null(e) &&
        (rc = string_list(v, e, q, valid_env_name, "a variable name", s, "env", NULL)))
      return rc;
    const cfg_ynode *w = config_map_get(body, "cwd");
    const char *str = NULL;
    snprintf(q, sizeof q, "%s.cwd", p);
    if (w && !config_ynode_is_null(w)) {
      if ((rc = scalar(v, w, q, &str))) return rc;
      if (str[0] != '/') return config_verr(v, w, q, "'%s' is not an absolute path", str);
      if ((rc = add_string(v, s, "cwd", str))) return rc;
    }
    if ((rc = parse_server_exports(v, body, p, s))) return rc;
    double t = BK_DEF_TIMEOUT;
    const cfg_ynode *to = config_map_get(body, "timeout");
    snprintf(q, sizeof q, "%s.timeout", p);
    if (to && (rc = duration(v, to, q, BK_MAX_TIMEOUT, &t))) return rc;
    if ((rc = add_number(v, s, "timeout", t))) return rc;
  }
  return 0;
}

static int parse_groups(cfg_vctx *v, const cfg_ynode *n, json_object *out) {
  const char *path = "broker.groups";
  int rc = check_map(v, n, path, NULL);
  if (rc || config_ynode_is_null(n)) return rc;
  if (config_map_size(n) > BK_MAX_GROUPS)
    return config_verr(v, n, path, "more than %d groups", BK_MAX_GROUPS);
  for (size_t i = 0; i < config_map_size(n); i++) {
    const cfg_ynode *k = config_map_key(n, i);
    char p[512];
    snprintf(p, sizeof p, "%s.%s", path, k->str);
    if (!config_valid_name(k->str)) return config_verr(v, k, p, "not a group name");
    if ((rc = string_list(v, config_map_value(n, i), p, valid_glob, "a host tool name or glob", out,
                          k->str, NULL)))
      return rc;
  }
  return 0;
}

/* allow / deny: host tool names, globs, or group:G of broker.groups. */
static int host_patterns(cfg_vctx *v, const cfg_ynode *n, const char *path, json_object *groups,
                         json_object *o, const char *key) {
  json_object *arr = NULL;
  int rc = string_list(v, n, path, NULL, "a pattern", o, key, &arr);
  for (size_t i = 0; rc == 0 && i < json_object_array_length(arr); i++) {
    const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
    char ip[600];
    snprintf(ip, sizeof ip, "%s[%zu]", path, i);
    if (strncmp(s, "group:", 6) == 0) {
      if (!json_object_object_get_ex(groups, s + 6, NULL))
        return config_verr(v, n->kids[i], ip, "no broker.groups.%s", s + 6);
    } else if (!valid_glob(s)) {
      return config_verr(
          v, n->kids[i], ip,
          "'%s' is not a host tool name or pattern (letters, digits, '_', '.', '-', the "
          "globs * ? [...], or group:NAME of broker.groups)",
          s);
    }
  }
  return rc;
}

static int parse_policy(cfg_vctx *v, const cfg_ynode *n, const char *path, json_object *groups,
                        json_object *parent, const char *key) {
  int rc = check_map(v, n, path, policy_keys);
  if (rc || config_ynode_is_null(n)) return rc;
  json_object *o = NULL;
  if ((rc = add_obj(v, parent, key, &o))) return rc;
  char p[600];
  for (const char *const *k = (const char *const[]){"allow", "deny", NULL}; *k; k++) {
    const cfg_ynode *x = config_map_get(n, *k);
    snprintf(p, sizeof p, "%s.%s", path, *k);
    if (x && !config_ynode_is_null(x) && (rc = host_patterns(v, x, p, groups, o, *k))) return rc;
  }
  const cfg_ynode *f = config_map_get(n, "from_tools");
  snprintf(p, sizeof p, "%s.from_tools", path);
  if (f && !config_ynode_is_null(f))
    rc = string_list(v, f, p, valid_tool_pattern,
                     "a tool name, pattern or built-in group (group:runtime, ...)", o,
                     "from_tools", NULL);
  return rc;
}

static int parse_section(cfg_vctx *v, const cfg_ynode *root, json_object *b) {
  const cfg_ynode *top = config_map_get(root, "broker");
  json_object *tools = NULL, *groups = NULL, *servers = NULL, *agents = NULL;
  int rc = check_map(v, top, "broker", broker_keys);
  if (rc || (rc = add_obj(v, b, "tools", &tools)) || (rc = add_obj(v, b, "groups", &groups)) ||
      (rc = add_obj(v, b, "mcp_servers", &servers)) || (rc = add_obj(v, b, "agents", &agents)))
    return rc;
  if (top && !config_ynode_is_null(top)) {
    if ((rc = parse_servers(v, config_map_get(top, "mcp_servers"), servers))) return rc;
    if ((rc = parse_groups(v, config_map_get(top, "groups"), groups))) return rc;
    const cfg_ynode *t = config_map_get(top, "tools");
    if ((rc = check_map(v, t, "broker.tools", NULL))) return rc;
    if (config_map_size(t) > BK_MAX_TOOLS)
      return config_verr(v, t, "broker.tools", "more than %d host tools", BK_MAX_TOOLS);
    for (size_t i = 0; i < config_map_size(t); i++)
      if ((rc = parse_tool(v, config_map_key(t, i), config_map_value(t, i), servers, tools)))
        return rc;
  }
  const cfg_ynode *d = config_map_get(root, "defaults");
  if (d && d->type == CFG_Y_MAP && (d = config_map_get(d, "broker")) &&
      (rc = parse_policy(v, d, "defaults.broker", groups, b, "defaults")))
    return rc;
  const cfg_ynode *as = config_map_get(root, "agents");
  for (size_t i = 0; as && as->type == CFG_Y_MAP && i < config_map_size(as); i++) {
    const cfg_ynode *a = config_map_value(as, i), *pb;
    char p[512];
    snprintf(p, sizeof p, "agents.%s.broker", config_map_key(as, i)->str);
    if (a && a->type == CFG_Y_MAP && (pb = config_map_get(a, "broker")) &&
        (rc = parse_policy(v, pb, p, groups, agents, config_map_key(as, i)->str)))
      return rc;
  }
  return 0;
}

int config_broker_parse(cfg_vctx *v, const cfg_ynode *root, sm_config *c) {
  json_object *b = json_object_new_object();
  if (!b) return oom(v);
  int rc = parse_section(v, root, b);
  if (rc) {
    json_object_put(b);
    return rc;
  }
  c->broker = b;
  return 0;
}

json_object *sm_config_broker(const sm_config *cfg) { return cfg ? cfg->broker : NULL; }

int sm_config_tool_matches(const char *pattern, const char *tool) {
  return pattern && tool && config_pattern_match(pattern, tool);
}
