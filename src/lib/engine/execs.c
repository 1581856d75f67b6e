/* Exec: create, start (attached, see hijack.c), inspect. */
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "engine/engine_call.h"
#include "engine/hijack.h"
#include "engine/path.h"
#include "engine/response.h"
#include "engine/transport.h"

#define PATH_CAP (64u << 10)

int sm_engine_exec_create(sm_engine *engine, const char *container_id, json_object *config,
                          char out_exec_id[SM_ENGINE_ID_MAX], sm_error *err) {
  if (out_exec_id) out_exec_id[0] = '\0';
  if (engine == NULL || config == NULL)
    return sm_error_set(err, SM_EINVAL, "exec create: needs a client and a config");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_ref_path(&path, "/containers/", container_id, NULL, "/exec", "container id", err);
  cleanup_json json_object *resp = NULL;
  if (rc == 0) rc = engine_call_json(engine, "POST", path.data, config, 0, NULL, &resp, err);
  if (rc == 0) rc = engine_answer_id(resp, out_exec_id, "exec create", err);
  return rc;
}

int sm_engine_exec_start(sm_engine *engine, const char *exec_id, const sm_exec_io *io,
                         sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  int rc = engine_check_ref(exec_id, "exec id", err);
  if (rc != 0) return rc;
  sm_exec_io none = SM_EXEC_IO_INIT;
  return engine_exec_hijack(engine, exec_id, io ? io : &none, err);
}

int sm_engine_exec_inspect(sm_engine *engine, const char *exec_id, int *out_running,
                           int *out_exit_code, int64_t *out_pid, sm_error *err) {
  if (out_running) *out_running = 0;
  if (out_exit_code) *out_exit_code = -1;
  if (out_pid) *out_pid = 0;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_ref_path(&path, "/exec/", exec_id, NULL, "/json", "exec id", err);
  json_object *resp = NULL;
  if (rc == 0) rc = engine_call_json(engine, "GET", path.data, NULL, 0, NULL, &resp, err);
  if (rc != 0) return rc;
  if (!json_object_is_type(resp, json_type_object)) {
    json_object_put(resp);
    return sm_error_set(err, SM_EPROTOCOL, "exec inspect: the answer is not an object");
  }
  json_object *v = NULL;
  if (out_running && json_object_object_get_ex(resp, "Running", &v))
    *out_running = json_object_get_boolean(v);
  /* ExitCode is null while the process runs. */
  if (out_exit_code && json_object_object_get_ex(resp, "ExitCode", &v) &&
      json_object_is_type(v, json_type_int))
    *out_exit_code = json_object_get_int(v);
  if (out_pid && json_object_object_get_ex(resp, "Pid", &v) && json_object_is_type(v, json_type_int))
    *out_pid = json_object_get_int64(v);
  json_object_put(resp);
  return 0;
}
