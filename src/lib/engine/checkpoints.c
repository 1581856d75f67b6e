/* A container's state kept by the engine: commit (its writable layer as an
 * image) and the experimental checkpoints (its processes' memory, written
 * by the runtime: gVisor's own, or CRIU under runc), with a start that
 * restores one. */
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "engine/engine_call.h"
#include "engine/path.h"
#include "engine/response.h"
#include "engine/transport.h"

#define PATH_CAP (64u << 10)
/* A commit or a checkpoint writes a layer or a memory image: it may take
 * longer than an ordinary request. */
#define SAVE_TIMEOUT_MS (10L * 60 * 1000)

int sm_engine_container_commit(sm_engine *engine, const char *id, const char *repo,
                               const char *tag, json_object *config, int pause,
                               char out_id[SM_ENGINE_ID_MAX], sm_error *err) {
  if (out_id) out_id[0] = '\0';
  if (engine == NULL || id == NULL || repo == NULL || tag == NULL)
    return sm_error_set(err, SM_EINVAL, "commit: needs a client, a container, a repository and a tag");
  int rc = engine_check_ref(id, "container id", err);
  if (rc) return rc;
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  if (common_buf_append(&path, "/commit?container=", 18) != 0 ||
      engine_url_escape(&path, id, NULL) != 0 || common_buf_append(&path, "&repo=", 6) != 0 ||
      engine_url_escape(&path, repo, NULL) != 0 || common_buf_append(&path, "&tag=", 5) != 0 ||
      engine_url_escape(&path, tag, NULL) != 0 ||
      common_buf_printf(&path, "&pause=%d", pause ? 1 : 0) != 0)
    return sm_error_set(err, SM_EINVAL, "commit: reference too long");
  cleanup_json json_object *resp = NULL;
  rc = engine_call_json(engine, "POST", path.data, config, SAVE_TIMEOUT_MS, NULL, &resp, err);
  if (rc == 0) rc = engine_answer_id(resp, out_id, "commit", err);
  return rc;
}

int sm_engine_checkpoint_create(sm_engine *engine, const char *id, const char *name,
                                const char *dir, int exit_after, sm_error *err) {
  if (engine == NULL || name == NULL)
    return sm_error_set(err, SM_EINVAL, "checkpoint: needs a client and a name");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_ref_path(&path, "/containers/", id, NULL, "/checkpoints", "container id", err);
  if (rc) return rc;
  cleanup_json json_object *body = json_object_new_object();
  if (body == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  json_object_object_add(body, "CheckpointID", json_object_new_string(name));
  if (dir && *dir) json_object_object_add(body, "CheckpointDir", json_object_new_string(dir));
  json_object_object_add(body, "Exit", json_object_new_boolean(exit_after));
  return engine_call_json(engine, "POST", path.data, body, SAVE_TIMEOUT_MS, NULL, NULL, err);
}

int sm_engine_checkpoint_remove(sm_engine *engine, const char *id, const char *name,
                                sm_error *err) {
  if (engine == NULL || name == NULL)
    return sm_error_set(err, SM_EINVAL, "checkpoint: needs a client and a name");
  cleanup_buf common_buf suffix;
  common_buf_init(&suffix, PATH_CAP);
  if (common_buf_append(&suffix, "/checkpoints/", 13) != 0 ||
      engine_url_escape(&suffix, name, NULL) != 0)
    return sm_error_set(err, SM_EINVAL, "checkpoint name too long");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_ref_path(&path, "/containers/", id, NULL, suffix.data, "container id", err);
  if (rc == 0) rc = engine_call_json(engine, "DELETE", path.data, NULL, 0, NULL, NULL, err);
  return rc;
}

int sm_engine_container_restore(sm_engine *engine, const char *id, const char *checkpoint,
                                sm_error *err) {
  if (engine == NULL || checkpoint == NULL)
    return sm_error_set(err, SM_EINVAL, "restore: needs a client and a checkpoint");
  cleanup_buf common_buf suffix;
  common_buf_init(&suffix, PATH_CAP);
  if (common_buf_append(&suffix, "/start?checkpoint=", 18) != 0 ||
      engine_url_escape(&suffix, checkpoint, NULL) != 0)
    return sm_error_set(err, SM_EINVAL, "checkpoint name too long");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_ref_path(&path, "/containers/", id, NULL, suffix.data, "container id", err);
  if (rc == 0) rc = engine_call_json(engine, "POST", path.data, NULL, SAVE_TIMEOUT_MS, NULL, NULL, err);
  return rc;
}
