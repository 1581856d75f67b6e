/* Request paths: percent-escaping, label filters and the checks on ids
 * and names put into a path. Pure functions. */
#include <ctype.h>
#include <string.h>

#include <json-c/json.h>

#include "engine/path.h"

int engine_url_escape(common_buf *b, const char *s, const char *keep) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int rc;
    if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
        (keep && strchr(keep, *p) != NULL)) {
      rc = common_buf_append(b, p, 1);
    } else {
      char enc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
      rc = common_buf_append(b, enc, 3);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

int engine_label_filters(common_buf *b, const char *const *labels, size_t n_labels,
                         sm_error *err) {
  json_object *f = json_object_new_object();
  json_object *arr = json_object_new_array();
  if (f == NULL || arr == NULL) {
    json_object_put(f);
    json_object_put(arr);
    return sm_error_set(err, SM_ENOMEM, "out of memory building a label filter");
  }
  for (size_t i = 0; i < n_labels; i++)
    if (labels[i]) json_object_array_add(arr, json_object_new_string(labels[i]));
  json_object_object_add(f, "label", arr);
  int rc = common_buf_append(b, "filters=", 8);
  if (rc == 0)
    rc = engine_url_escape(
        b, json_object_to_json_string_ext(f, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
        NULL);
  json_object_put(f);
  if (rc != 0)
    return sm_error_set(err, rc, "the label filter is %s",
                        rc == SM_ETOOBIG ? "too long" : "more than memory holds");
  return 0;
}

int engine_check_ref(const char *ref, const char *what, sm_error *err) {
  if (ref == NULL || ref[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "empty %s", what);
  size_t n = strlen(ref);
  if (n > 1024) return sm_error_set(err, SM_EINVAL, "%s too long (%zu bytes)", what, n);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)ref[i] < 0x20)
      return sm_error_set(err, SM_EINVAL, "%s contains a control character", what);
  return 0;
}

int engine_ref_path(common_buf *b, const char *collection, const char *ref, const char *keep,
                    const char *suffix, const char *what, sm_error *err) {
  int rc = engine_check_ref(ref, what, err);
  if (rc != 0) return rc;
  if (common_buf_append(b, collection, strlen(collection)) != 0 ||
      engine_url_escape(b, ref, keep) != 0 ||
      (suffix && common_buf_append(b, suffix, strlen(suffix)) != 0))
    return sm_error_set(err, SM_EINVAL, "%s too long", what);
  return 0;
}
