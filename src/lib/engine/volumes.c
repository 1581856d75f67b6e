/* Volumes: create (with driver options, e.g. a size-capped tmpfs), remove,
 * list by label. */
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "engine/engine_call.h"
#include "engine/path.h"
#include "engine/response.h"
#include "engine/transport.h"

#define PATH_CAP (64u << 10)

int sm_engine_volume_create(sm_engine *engine, const char *name, const char *driver,
                            json_object *driver_opts, json_object *labels, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  int rc = engine_check_ref(name, "volume name", err);
  if (rc != 0) return rc;
  if (driver_opts != NULL && !json_object_is_type(driver_opts, json_type_object))
    return sm_error_set(err, SM_EINVAL, "volume create: driver options must be a JSON object");
  json_object *body = NULL;
  rc = engine_create_body("volume create", name, driver ? driver : "local", labels, &body, err);
  if (rc != 0) return rc;
  if (driver_opts) json_object_object_add(body, "DriverOpts", json_object_get(driver_opts));
  rc = engine_call_json(engine, "POST", "/volumes/create", body, 0, NULL, NULL, err);
  json_object_put(body);
  return rc;
}

int sm_engine_volume_remove(sm_engine *engine, const char *name, int force, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_ref_path(&path, "/volumes/", name, NULL, force ? "?force=1" : NULL,
                           "volume name", err);
  if (rc == 0) rc = engine_call_json(engine, "DELETE", path.data, NULL, 0, NULL, NULL, err);
  return rc;
}

int sm_engine_volume_inspect(sm_engine *engine, const char *name, json_object **out,
                             sm_error *err) {
  *out = NULL;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_ref_path(&path, "/volumes/", name, NULL, NULL, "volume name", err);
  if (rc == 0) rc = engine_call_json(engine, "GET", path.data, NULL, 0, NULL, out, err);
  return rc;
}

int sm_engine_volume_list(sm_engine *engine, const char *const *labels, size_t n_labels,
                          json_object **out, sm_error *err) {
  *out = NULL;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = common_buf_append(&path, "/volumes", 8);
  if (rc == 0 && n_labels > 0) {
    rc = common_buf_append(&path, "?", 1);
    if (rc == 0) rc = engine_label_filters(&path, labels, n_labels, err);
  }
  if (rc != 0) rc = sm_error_set(err, SM_EINVAL, "volume list: label filter too long");
  json_object *resp = NULL;
  if (rc == 0) rc = engine_call_json(engine, "GET", path.data, NULL, 0, NULL, &resp, err);
  if (rc != 0) return rc;
  /* {"Volumes": [...] or null, "Warnings": ...}: hand back the array. */
  json_object *v = NULL;
  if (!json_object_is_type(resp, json_type_object)) {
    json_object_put(resp);
    return sm_error_set(err, SM_EPROTOCOL, "volume list: the answer is not an object");
  }
  if (json_object_object_get_ex(resp, "Volumes", &v) && json_object_is_type(v, json_type_array))
    *out = json_object_get(v);
  else
    *out = json_object_new_array();
  json_object_put(resp);
  return 0;
}
