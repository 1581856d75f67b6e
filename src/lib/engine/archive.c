/* Archives: tar streams into and out of a container, never held whole in
 * memory (the body goes from the reader to the socket, and from the socket
 * to the writer, a libcurl buffer at a time). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "common/cleanup.h"
#include "engine/engine_call.h"
#include "engine/path.h"
#include "engine/response.h"
#include "engine/transport.h"

#define PATH_CAP (64u << 10)

static int archive_path(sm_engine *e, common_buf *out, const char *id, const char *path,
                        sm_error *err) {
  cleanup_buf common_buf rel;
  common_buf_init(&rel, PATH_CAP);
  int rc = engine_ref_path(&rel, "/containers/", id, NULL, "/archive?path=", "container id", err);
  if (rc == 0) rc = engine_ref_path(&rel, "", path, "/", NULL, "archive path", err);
  if (rc == 0) rc = engine_versioned_path(e, out, rel.data, err);
  return rc;
}

/* One archive call (req: its method and body or sink), the stream as long
 * as it lasts while it moves. */
static int archive_call(sm_engine *engine, const char *id, const char *path, engine_request *req,
                        const char *what, long *status, sm_error *err) {
  cleanup_buf common_buf full;
  common_buf_init(&full, PATH_CAP);
  int rc = archive_path(engine, &full, id, path, err);
  if (rc != 0) return rc;
  req->path = full.data;
  req->timeout_ms = -1;
  req->stall_timeout = 1;
  return engine_call_stream(engine, req, what, status, NULL, err);
}

int sm_engine_archive_put(sm_engine *engine, const char *id, const char *path,
                          sm_read_fn reader, void *reader_ud, sm_error *err) {
  if (engine == NULL || reader == NULL)
    return sm_error_set(err, SM_EINVAL, "archive put: needs a client and a reader");
  engine_request req;
  engine_request_tar(&req, "PUT", NULL, reader, reader_ud);
  return archive_call(engine, id, path, &req, "archive put", NULL, err);
}

int sm_engine_archive_get(sm_engine *engine, const char *id, const char *path,
                          sm_write_fn writer, void *writer_ud, sm_error *err) {
  if (engine == NULL || writer == NULL)
    return sm_error_set(err, SM_EINVAL, "archive get: needs a client and a writer");
  engine_request req = {0};
  req.method = "GET";
  req.sink = writer;
  req.sink_ud = writer_ud;
  long status = 0;
  int rc = archive_call(engine, id, path, &req, "archive get", &status, err);
  if (rc == 0 && status != 200)
    rc = sm_error_set(err, SM_EPROTOCOL, "archive get: unexpected HTTP status %ld", status);
  return rc;
}

/* Go's os.FileMode bits, as the engine's path stat carries them. */
#define GO_MODE_DIR (1u << 31)
#define GO_MODE_SYMLINK (1u << 27)
#define GO_MODE_SETUID (1u << 23)
#define GO_MODE_SETGID (1u << 22)
#define GO_MODE_STICKY (1u << 20)

int sm_engine_path_mode(sm_engine *engine, const char *id, const char *path, unsigned *out_mode,
                        sm_error *err) {
  if (engine == NULL || out_mode == NULL)
    return sm_error_set(err, SM_EINVAL, "path mode: needs a client");
  cleanup_buf common_buf full;
  common_buf_init(&full, PATH_CAP);
  int rc = archive_path(engine, &full, id, path, err);
  char stat[ENGINE_PATH_STAT_MAX] = "";
  if (rc == 0) {
    engine_request req = {0};
    req.method = "HEAD";
    req.path = full.data;
    rc = engine_call_stream(engine, &req, "path stat", NULL, stat, err);
  }
  unsigned char json[800];
  int n = -1;
  size_t b64 = strlen(stat);
  if (rc == 0 && b64 > 0 && b64 % 4 == 0 && b64 / 4 * 3 < sizeof json)
    n = EVP_DecodeBlock(json, (const unsigned char *)stat, (int)b64);
  if (rc == 0 && n <= 0)
    rc = sm_error_set(err, SM_EPROTOCOL, "path stat of %s: the engine sent no usable stat", path);
  if (rc == 0) {
    json[n] = '\0';
    json_object *st = json_tokener_parse((const char *)json), *m = NULL;
    if (st == NULL || !json_object_object_get_ex(st, "mode", &m)) {
      rc = sm_error_set(err, SM_EPROTOCOL, "path stat of %s: no mode in %s", path, (char *)json);
    } else {
      unsigned go = (unsigned)json_object_get_int64(m);
      unsigned mode = go & 0777;
      if (go & GO_MODE_SETUID) mode |= S_ISUID;
      if (go & GO_MODE_SETGID) mode |= S_ISGID;
      if (go & GO_MODE_STICKY) mode |= S_ISVTX;
      mode |= (go & GO_MODE_DIR) ? S_IFDIR : (go & GO_MODE_SYMLINK) ? S_IFLNK : S_IFREG;
      *out_mode = mode;
    }
    json_object_put(st);
  }
  return rc;
}
