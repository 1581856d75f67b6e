/* Text from outside (tool output, file names) as JSON strings. */
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *p, size_t left) {
  unsigned char c = p[0];
  size_t need;
  unsigned int cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) { need = 2; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { need = 3; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { need = 4; cp = c & 0x07; }
  else return 0;
  if (left < need) return 0;
  for (size_t i = 1; i < need; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (need == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (need == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return need;
}

int common_utf8_valid(const char *data, size_t len) {
  for (size_t i = 0; i < len;) {
    size_t n = utf8_seq((const unsigned char *)data + i, len - i);
    if (n == 0) return 0;
    i += n;
  }
  return 1;
}

json_object *common_json_text(const char *data, size_t len) {
  if (data == NULL) return json_object_new_string("");
  size_t i = 0;
  for (; i < len; i++) {
    size_t n = utf8_seq((const unsigned char *)data + i, len - i);
    if (n == 0) break;
    i += n - 1;
  }
  if (i == len) return json_object_new_string_len(data, (int)len);
  char *clean = malloc(len * 3 + 1);
  if (clean == NULL) return json_object_new_string("");
  size_t o = 0;
  for (i = 0; i < len;) {
    size_t n = utf8_seq((const unsigned char *)data + i, len - i);
    if (n == 0) {
      memcpy(clean + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
    } else {
      memcpy(clean + o, data + i, n);
      o += n;
      i += n;
    }
  }
  json_object *s = json_object_new_string_len(clean, (int)o);
  free(clean);
  return s;
}

json_object *common_json_strings(const char *const *v, size_t n) {
  json_object *a = json_object_new_array();
  for (size_t i = 0; a && i < n; i++) json_object_array_add(a, json_object_new_string(v[i]));
  return a;
}
