/* Containers: create, start, inspect, list by label, stop, kill, pause,
 * unpause, remove, wait. */
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "engine/engine_call.h"
#include "engine/path.h"
#include "engine/response.h"
#include "engine/transport.h"

#define PATH_CAP (64u << 10)

/* "/containers/<escaped id><suffix>" */
static int container_path(common_buf *b, const char *id, const char *suffix, sm_error *err) {
  return engine_ref_path(b, "/containers/", id, NULL, suffix, "container id", err);
}

int sm_engine_container_create(sm_engine *engine, const char *name, json_object *config,
                               char out_id[SM_ENGINE_ID_MAX], json_object **out_warnings,
                               sm_error *err) {
  if (out_id) out_id[0] = '\0';
  if (out_warnings) *out_warnings = NULL;
  if (engine == NULL || config == NULL)
    return sm_error_set(err, SM_EINVAL, "container create: needs a client and a config");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = 0;
  if (common_buf_append(&path, "/containers/create", 18) != 0) rc = SM_ENOMEM;
  if (rc == 0 && name != NULL) {
    rc = engine_check_ref(name, "container name", err);
    if (rc == 0 &&
        (common_buf_append(&path, "?name=", 6) != 0 || engine_url_escape(&path, name, NULL) != 0))
      rc = sm_error_set(err, SM_EINVAL, "container name too long");
  } else if (rc != 0) {
    sm_error_set(err, rc, "container create: out of memory");
  }
  cleanup_json json_object *resp = NULL;
  if (rc == 0) rc = engine_call_json(engine, "POST", path.data, config, 0, NULL, &resp, err);
  if (rc == 0) rc = engine_answer_id(resp, out_id, "container create", err);
  if (rc != 0) return rc;
  json_object *w = NULL;
  if (out_warnings && json_object_object_get_ex(resp, "Warnings", &w) &&
      json_object_is_type(w, json_type_array))
    *out_warnings = json_object_get(w);
  return 0;
}

static int simple_post(sm_engine *engine, const char *id, const char *suffix, long timeout_ms,
                       sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = container_path(&path, id, suffix, err);
  if (rc == 0) rc = engine_call_json(engine, "POST", path.data, NULL, timeout_ms, NULL, NULL, err);
  return rc;
}

int sm_engine_container_start(sm_engine *engine, const char *id, sm_error *err) {
  /* 304 (already started) is not an error. */
  return simple_post(engine, id, "/start", 0, err);
}

int sm_engine_container_pause(sm_engine *engine, const char *id, sm_error *err) {
  return simple_post(engine, id, "/pause", 0, err);
}

int sm_engine_container_unpause(sm_engine *engine, const char *id, sm_error *err) {
  return simple_post(engine, id, "/unpause", 0, err);
}

int sm_engine_container_inspect(sm_engine *engine, const char *id, json_object **out,
                                sm_error *err) {
  *out = NULL;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = container_path(&path, id, "/json", err);
  if (rc == 0) rc = engine_call_json(engine, "GET", path.data, NULL, 0, NULL, out, err);
  if (rc == 0) rc = engine_expect_json(out, json_type_object, "container inspect", err);
  return rc;
}

int sm_engine_container_list(sm_engine *engine, int all, const char *const *labels,
                             size_t n_labels, json_object **out, sm_error *err) {
  *out = NULL;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = common_buf_printf(&path, "/containers/json?all=%d", all ? 1 : 0);
  if (rc == 0 && n_labels > 0) {
    rc = common_buf_append(&path, "&", 1);
    if (rc == 0) rc = engine_label_filters(&path, labels, n_labels, err);
  }
  return engine_call_list(engine, rc, path.data, "container list", "label filter", out, err);
}

int sm_engine_container_listed_paused(sm_engine *engine, const char *id, int *paused,
                                      sm_error *err) {
  *paused = 0;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  int rc = engine_check_ref(id, "container id", err);
  if (rc) return rc;
  json_object *f = json_object_new_object(), *ids = json_object_new_array(),
              *status = json_object_new_array();
  if (f == NULL || ids == NULL || status == NULL) {
    json_object_put(f);
    json_object_put(ids);
    json_object_put(status);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  json_object_array_add(ids, json_object_new_string(id));
  json_object_array_add(status, json_object_new_string("paused"));
  json_object_object_add(f, "id", ids);
  json_object_object_add(f, "status", status);
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  rc = common_buf_append(&path, "/containers/json?all=1&filters=", 31);
  if (rc == 0)
    rc = engine_url_escape(&path, json_object_to_json_string_ext(f, JSON_C_TO_STRING_PLAIN), NULL);
  json_object_put(f);
  json_object *list = NULL;
  rc = engine_call_list(engine, rc, path.data, "container list", "id filter", &list, err);
  /* The id filter takes prefixes: only the full id counts. */
  size_t n = rc == 0 && list ? json_object_array_length(list) : 0;
  for (size_t i = 0; i < n; i++) {
    json_object *c = json_object_array_get_idx(list, i), *v = NULL;
    if (json_object_object_get_ex(c, "Id", &v) && json_object_is_type(v, json_type_string) &&
        strcmp(json_object_get_string(v), id) == 0)
      *paused = 1;
  }
  json_object_put(list);
  return rc;
}

int sm_engine_container_stop(sm_engine *engine, const char *id, int timeout_s, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  if (timeout_s < 0) timeout_s = 0;
  char suffix[48];
  snprintf(suffix, sizeof suffix, "/stop?t=%d", timeout_s);
  /* The engine waits up to t seconds before killing: allow for it. */
  long timeout_ms = engine->request_timeout_ms + (long)timeout_s * 1000L;
  return simple_post(engine, id, suffix, timeout_ms, err);
}

int sm_engine_container_kill(sm_engine *engine, const char *id, const char *signal,
                             sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  if (signal == NULL || signal[0] == '\0') signal = "KILL";
  cleanup_buf common_buf suffix;
  common_buf_init(&suffix, 256);
  int rc = 0;
  if (common_buf_append(&suffix, "/kill?signal=", 13) != 0 ||
      engine_url_escape(&suffix, signal, NULL) != 0)
    rc = sm_error_set(err, SM_EINVAL, "bad signal name");
  if (rc == 0) rc = simple_post(engine, id, suffix.data, 0, err);
  return rc;
}

int sm_engine_container_remove(sm_engine *engine, const char *id, int force,
                               int remove_volumes, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  char suffix[32];
  snprintf(suffix, sizeof suffix, "?v=%d&force=%d", remove_volumes ? 1 : 0, force ? 1 : 0);
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = container_path(&path, id, suffix, err);
  if (rc == 0) rc = engine_call_json(engine, "DELETE", path.data, NULL, 0, NULL, NULL, err);
  return rc;
}

int sm_engine_container_rename(sm_engine *engine, const char *id, const char *new_name,
                               sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  int rc = engine_check_ref(new_name, "container name", err);
  if (rc != 0) return rc;
  cleanup_buf common_buf suffix;
  common_buf_init(&suffix, PATH_CAP);
  rc = engine_ref_path(&suffix, "/rename?name=", new_name, NULL, NULL, "container name", err);
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  if (rc == 0) rc = container_path(&path, id, suffix.data, err);
  if (rc == 0) rc = engine_call_json(engine, "POST", path.data, NULL, 0, NULL, NULL, err);
  return rc;
}

int sm_engine_container_wait(sm_engine *engine, const char *id, const char *condition,
                             long timeout_ms, int64_t *out_status_code, sm_error *err) {
  if (out_status_code) *out_status_code = -1;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  if (condition != NULL && strcmp(condition, "not-running") != 0 &&
      strcmp(condition, "next-exit") != 0 && strcmp(condition, "removed") != 0)
    return sm_error_set(err, SM_EINVAL, "bad wait condition '%s': use not-running, next-exit "
                        "or removed", condition);
  char suffix[64];
  snprintf(suffix, sizeof suffix, "/wait%s%s", condition ? "?condition=" : "",
           condition ? condition : "");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = container_path(&path, id, suffix, err);
  json_object *resp = NULL;
  /* The wait lasts as long as the container runs: no request timeout
   * unless the caller gives one. */
  if (rc == 0)
    rc = engine_call_json(engine, "POST", path.data, NULL, timeout_ms > 0 ? timeout_ms : -1,
                          NULL, &resp, err);
  if (rc != 0) return rc;
  json_object *sc = NULL, *e = NULL, *m = NULL;
  if (!json_object_is_type(resp, json_type_object) ||
      !json_object_object_get_ex(resp, "StatusCode", &sc) ||
      !json_object_is_type(sc, json_type_int)) {
    json_object_put(resp);
    return sm_error_set(err, SM_EPROTOCOL, "container wait: the answer has no StatusCode");
  }
  if (json_object_object_get_ex(resp, "Error", &e) && json_object_is_type(e, json_type_object) &&
      json_object_object_get_ex(e, "Message", &m) && json_object_is_type(m, json_type_string) &&
      json_object_get_string_len(m) > 0) {
    rc = sm_error_set(err, SM_EENGINE, "container wait: %s", json_object_get_string(m));
  }
  if (out_status_code) *out_status_code = json_object_get_int64(sc);
  json_object_put(resp);
  return rc;
}
