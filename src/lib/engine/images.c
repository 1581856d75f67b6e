/* Images: inspect, list, import a root file system tar stream, build from a
 * tar context stream. Import and build stream their request body from the
 * caller's reader and their JSON progress lines to the caller. */
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "engine/engine_call.h"
#include "engine/path.h"
#include "engine/response.h"
#include "engine/transport.h"

#define PATH_CAP (64u << 10)

int sm_engine_image_inspect(sm_engine *engine, const char *ref, json_object **out,
                            sm_error *err) {
  *out = NULL;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  /* The engine routes /images/{name:.*}/json: slashes and colons stay. */
  int rc = engine_ref_path(&path, "/images/", ref, "/:@", "/json", "image reference", err);
  if (rc == 0) rc = engine_call_json(engine, "GET", path.data, NULL, 0, NULL, out, err);
  if (rc == 0) rc = engine_expect_json(out, json_type_object, "image inspect", err);
  return rc;
}

int sm_engine_image_list(sm_engine *engine, json_object *filters, json_object **out,
                         sm_error *err) {
  *out = NULL;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = common_buf_append(&path, "/images/json", 12);
  if (rc == 0 && filters != NULL) {
    rc = common_buf_append(&path, "?filters=", 9);
    if (rc == 0)
      rc = engine_url_escape(&path,
                             json_object_to_json_string_ext(
                                 filters, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                             NULL);
  }
  return engine_call_list(engine, rc, path.data, "image list", "filters", out, err);
}

int sm_engine_image_remove(sm_engine *engine, const char *ref, int force, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_ref_path(&path, "/images/", ref, "/:@", force ? "?force=1" : NULL,
                           "image reference", err);
  if (rc == 0) rc = engine_call_json(engine, "DELETE", path.data, NULL, 0, NULL, NULL, err);
  return rc;
}

typedef struct progress_sink {
  engine_progress p;
  sm_error cb_err;
} progress_sink;

static int progress_write(void *ud, const char *buf, size_t len) {
  progress_sink *s = ud;
  int rc = engine_progress_feed(&s->p, buf, len);
  if (rc != 0) sm_error_set(&s->cb_err, rc, "%s", s->p.message);
  return rc;
}

/* POSTs the tar stream to rel_path and follows the progress stream. */
static int streamed_post(sm_engine *e, const char *rel_path, const char *what, sm_read_fn reader,
                         void *reader_ud, sm_progress_fn progress, void *progress_ud,
                         sm_error *err) {
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = engine_versioned_path(e, &path, rel_path, err);
  if (rc != 0) return rc;
  progress_sink sink;
  memset(&sink, 0, sizeof sink);
  engine_progress_init(&sink.p, progress, progress_ud);
  engine_request req;
  engine_request_tar(&req, "POST", path.data, reader, reader_ud);
  req.sink = progress_write;
  req.sink_ud = &sink;
  req.timeout_ms = -1; /* a build takes as long as it takes */
  req.cb_err = &sink.cb_err;
  rc = engine_call_stream(e, &req, what, NULL, NULL, err);
  if (rc == 0) rc = engine_progress_finish(&sink.p, what, err);
  engine_progress_dispose(&sink.p);
  return rc;
}

int sm_engine_image_import(sm_engine *engine, sm_read_fn reader, void *reader_ud,
                           const char *repo, const char *tag,
                           const char *const *changes, size_t n_changes,
                           sm_progress_fn progress, void *progress_ud, sm_error *err) {
  if (engine == NULL || reader == NULL)
    return sm_error_set(err, SM_EINVAL, "image import: needs a client and a reader");
  int rc = engine_check_ref(repo, "image repository", err);
  if (rc != 0) return rc;
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  rc = common_buf_append(&path, "/images/create?fromSrc=-&repo=", 30);
  if (rc == 0) rc = engine_url_escape(&path, repo, NULL);
  if (rc == 0 && tag != NULL && tag[0] != '\0') {
    rc = common_buf_append(&path, "&tag=", 5);
    if (rc == 0) rc = engine_url_escape(&path, tag, NULL);
  }
  for (size_t i = 0; rc == 0 && i < n_changes; i++) {
    if (changes[i] == NULL) continue;
    rc = common_buf_append(&path, "&changes=", 9);
    if (rc == 0) rc = engine_url_escape(&path, changes[i], NULL);
  }
  if (rc != 0) rc = sm_error_set(err, SM_EINVAL, "image import: parameters too long");
  if (rc == 0)
    rc = streamed_post(engine, path.data, "image import", reader, reader_ud, progress,
                       progress_ud, err);
  return rc;
}

int sm_engine_image_load(sm_engine *engine, sm_read_fn reader, void *reader_ud,
                         sm_progress_fn progress, void *progress_ud, sm_error *err) {
  if (engine == NULL || reader == NULL)
    return sm_error_set(err, SM_EINVAL, "image load: needs a client and a reader");
  return streamed_post(engine, "/images/load?quiet=0", "image load", reader, reader_ud, progress,
                       progress_ud, err);
}

int sm_engine_image_build(sm_engine *engine, sm_read_fn reader, void *reader_ud,
                          const char *tag, const char *dockerfile,
                          sm_progress_fn progress, void *progress_ud, sm_error *err) {
  if (engine == NULL || reader == NULL)
    return sm_error_set(err, SM_EINVAL, "image build: needs a client and a reader");
  cleanup_buf common_buf path;
  common_buf_init(&path, PATH_CAP);
  int rc = common_buf_append(&path, "/build?rm=1&forcerm=1", 21);
  if (rc == 0 && tag != NULL && tag[0] != '\0') {
    rc = common_buf_append(&path, "&t=", 3);
    if (rc == 0) rc = engine_url_escape(&path, tag, NULL);
  }
  if (rc == 0 && dockerfile != NULL && dockerfile[0] != '\0') {
    rc = common_buf_append(&path, "&dockerfile=", 12);
    if (rc == 0) rc = engine_url_escape(&path, dockerfile, NULL);
  }
  if (rc != 0) rc = sm_error_set(err, SM_EINVAL, "image build: parameters too long");
  if (rc == 0)
    rc = streamed_post(engine, path.data, "image build", reader, reader_ud, progress,
                       progress_ud, err);
  return rc;
}
