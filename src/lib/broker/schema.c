/* Argument validation: type object with properties of type string,
 * number, integer, boolean or array of strings; required, enum, maxLength,
 * minLength, minimum, maximum, maxItems, additionalProperties. The
 * messages name the argument and the rule, never the value (which may be a
 * secret). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "broker/schema.h"

static int fail(char *msg, size_t len, const char *fmt, const char *name, const char *what) {
  snprintf(msg, len, fmt, name, what);
  return -1;
}

static int in_enum(json_object *e, json_object *val) {
  for (size_t i = 0; i < json_object_array_length(e); i++) {
    json_object *x = json_object_array_get_idx(e, i);
    if (json_object_is_type(x, json_type_string)) {
      if (json_object_is_type(val, json_type_string) &&
          strcmp(json_object_get_string(x), json_object_get_string(val)) == 0)
        return 1;
    } else if ((json_object_is_type(val, json_type_int) || json_object_is_type(val, json_type_double)) &&
               json_object_get_double(x) == json_object_get_double(val)) {
      return 1;
    }
  }
  return 0;
}

static int64_t get_int(json_object *s, const char *key, int64_t dflt) {
  json_object *v = NULL;
  return json_object_object_get_ex(s, key, &v) ? json_object_get_int64(v) : dflt;
}

static int check_string(json_object *s, json_object *val, const char *name, char *msg, size_t len) {
  if (!json_object_is_type(val, json_type_string))
    return fail(msg, len, "argument '%s' must be %s", name, "a string");
  size_t n = (size_t)json_object_get_string_len(val);
  if (strlen(json_object_get_string(val)) != n)
    return fail(msg, len, "argument '%s' %s", name, "holds a NUL byte");
  if ((int64_t)n > get_int(s, "maxLength", INT64_MAX))
    return fail(msg, len, "argument '%s' %s", name, "is longer than its maxLength");
  if ((int64_t)n < get_int(s, "minLength", 0))
    return fail(msg, len, "argument '%s' %s", name, "is shorter than its minLength");
  return 0;
}

static int check_value(json_object *s, json_object *val, const char *name, char *msg, size_t len) {
  json_object *t = NULL, *e = NULL, *b = NULL;
  json_object_object_get_ex(s, "type", &t);
  const char *type = json_object_get_string(t);
  if (strcmp(type, "string") == 0) {
    if (check_string(s, val, name, msg, len)) return -1;
  } else if (strcmp(type, "boolean") == 0) {
    if (!json_object_is_type(val, json_type_boolean))
      return fail(msg, len, "argument '%s' must be %s", name, "true or false");
  } else if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0) {
    int is_int = json_object_is_type(val, json_type_int);
    double d = json_object_get_double(val);
    if (!is_int && !json_object_is_type(val, json_type_double))
      return fail(msg, len, "argument '%s' must be %s", name, "a number");
    if (strcmp(type, "integer") == 0 && !is_int && (!isfinite(d) || floor(d) != d))
      return fail(msg, len, "argument '%s' must be %s", name, "a whole number");
    if (json_object_object_get_ex(s, "minimum", &b) && d < json_object_get_double(b))
      return fail(msg, len, "argument '%s' %s", name, "is below its minimum");
    if (json_object_object_get_ex(s, "maximum", &b) && d > json_object_get_double(b))
      return fail(msg, len, "argument '%s' %s", name, "is above its maximum");
  } else if (strcmp(type, "array") == 0) {
    json_object *items = NULL;
    if (!json_object_is_type(val, json_type_array))
      return fail(msg, len, "argument '%s' must be %s", name, "a list");
    if ((int64_t)json_object_array_length(val) > get_int(s, "maxItems", INT64_MAX))
      return fail(msg, len, "argument '%s' %s", name, "has more items than its maxItems");
    json_object_object_get_ex(s, "items", &items);
    for (size_t i = 0; i < json_object_array_length(val); i++)
      if (check_value(items, json_object_array_get_idx(val, i), name, msg, len)) return -1;
    return 0;
  } else {
    return fail(msg, len, "argument '%s' has %s", name, "a type sandman does not check");
  }
  if (json_object_object_get_ex(s, "enum", &e) && !in_enum(e, val))
    return fail(msg, len, "argument '%s' %s", name, "is not one of its enum values");
  return 0;
}

int broker_schema_check(json_object *schema, json_object *args, char *msg, size_t len) {
  json_object *props = NULL, *req = NULL, *extra = NULL;
  if (!json_object_is_type(args, json_type_object))
    return fail(msg, len, "%s%s", "arguments must be a JSON object", "");
  json_object_object_get_ex(schema, "properties", &props);
  json_object_object_get_ex(schema, "required", &req);
  int open = json_object_object_get_ex(schema, "additionalProperties", &extra) &&
             json_object_get_boolean(extra);
  for (size_t i = 0; req && i < json_object_array_length(req); i++) {
    const char *name = json_object_get_string(json_object_array_get_idx(req, i));
    if (!json_object_object_get_ex(args, name, NULL))
      return fail(msg, len, "argument '%s' %s", name, "is required");
  }
  json_object_object_foreach(args, key, val) {
    json_object *ps = NULL;
    if (!props || !json_object_object_get_ex(props, key, &ps)) {
      if (open) continue;
      char k[80];
      snprintf(k, sizeof k, "%.64s", key);
      return fail(msg, len, "argument '%s' %s", k, "is not in the tool's schema");
    }
    if (check_value(ps, val, key, msg, len)) return -1;
  }
  return 0;
}
