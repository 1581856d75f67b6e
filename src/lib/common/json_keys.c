/* Repeated keys in JSON text (json_keys.h). The text's key tokens (every
 * string followed by ':') are counted and compared with the keys json-c
 * kept, one per name and object: fewer kept means some object repeated a
 * key. */
#include "common/json_keys.h"

#include <ctype.h>
#include <string.h>

/* Key tokens of a valid JSON text; -1 when a key holds \u0000. */
static long count_raw_keys(const char *s, size_t n) {
  long keys = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '"') continue;
    int nul = 0;
    for (i++; i < n && s[i] != '"'; i++) {
      if (s[i] != '\\') continue;
      if (i + 5 < n && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0) nul = 1;
      i++; /* the escaped character ("\u" digits are plain characters) */
    }
    size_t j = i + 1;
    while (j < n && isspace((unsigned char)s[j])) j++;
    if (j < n && s[j] == ':') {
      if (nul) return -1;
      keys++;
    }
  }
  return keys;
}

static long count_tree_keys(json_object *o) {
  long n = 0;
  if (json_object_is_type(o, json_type_object)) {
    json_object_object_foreach(o, k, v) {
      (void)k;
      n += 1 + count_tree_keys(v);
    }
  } else if (json_object_is_type(o, json_type_array)) {
    size_t len = json_object_array_length(o);
    for (size_t i = 0; i < len; i++) n += count_tree_keys(json_object_array_get_idx(o, i));
  }
  return n;
}

int common_json_keys_unique(const char *text, size_t len, json_object *parsed, const char **why) {
  long raw = count_raw_keys(text, len);
  if (raw < 0) {
    *why = "a key holds a NUL character";
    return -1;
  }
  if (count_tree_keys(parsed) != raw) {
    *why = "an object repeats a key (each key may appear once)";
    return -1;
  }
  return 0;
}
