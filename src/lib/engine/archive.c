/* Archives: tar streams into and out of a container, never held whole in
 * memory (the body goes from the reader to the socket, and from the socket
 * to the writer, a libcurl buffer at a time). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

/* "2026-11-27T17:46:04.123456789Z" or "...+01:00" (Go's RFC 3339 with
 * nanoseconds, trailing zeros cut) into seconds and nanoseconds. */
static int rfc3339_parse(const char *s, int64_t *sec, long *nsec) {
  int y, mo, d, h, mi, se, n = 0;
  if (s == NULL || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 ||
      n != 19)
    return -1;
  const char *p = s + n;
  long ns = 0;
  if (*p == '.') {
    int digits = 0;
    for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
      if (digits >= 9) return -1;
      ns = ns * 10 + (*p - '0');
    }
    if (digits == 0) return -1;
    for (; digits < 9; digits++) ns *= 10;
  }
  long off = 0;
  if (*p == 'Z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh, om, m = 0;
    if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &m) != 2 || m != 5) return -1;
    off = (oh * 3600L + om * 60L) * (*p == '-' ? -1 : 1);
    p += 6;
  } else {
    return -1;
  }
  if (*p != '\0') return -1;
  struct tm tm = {.tm_year = y - 1900,
                  .tm_mon = mo - 1,
                  .tm_mday = d,
                  .tm_hour = h,
                  .tm_min = mi,
                  .tm_sec = se};
  time_t t = timegm(&tm);
  if (t == (time_t)-1 && !(y == 1969 && mo == 12 && d == 31)) return -1;
  *sec = (int64_t)t - off;
  *nsec = ns;
  return 0;
}

int sm_engine_path_stat(sm_engine *engine, const char *id, const char *path,
                        sm_engine_path_info *out, sm_error *err) {
  if (engine == NULL || out == NULL)
    return sm_error_set(err, SM_EINVAL, "path stat: needs a client");
  memset(out, 0, sizeof *out);
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
  if (rc) return rc;
  json[n] = '\0';
  cleanup_json json_object *st = json_tokener_parse((const char *)json);
  json_object *m = NULL, *v = NULL;
  if (st == NULL || !json_object_object_get_ex(st, "mode", &m))
    return sm_error_set(err, SM_EPROTOCOL, "path stat of %s: no mode in %s", path, (char *)json);
  unsigned go = (unsigned)json_object_get_int64(m);
  unsigned mode = go & 0777;
  if (go & GO_MODE_SETUID) mode |= S_ISUID;
  if (go & GO_MODE_SETGID) mode |= S_ISGID;
  if (go & GO_MODE_STICKY) mode |= S_ISVTX;
  mode |= (go & GO_MODE_DIR) ? S_IFDIR : (go & GO_MODE_SYMLINK) ? S_IFLNK : S_IFREG;
  out->mode = mode;
  if (json_object_object_get_ex(st, "size", &v)) out->size = json_object_get_int64(v);
  if (json_object_object_get_ex(st, "name", &v) && json_object_is_type(v, json_type_string))
    snprintf(out->name, sizeof out->name, "%s", json_object_get_string(v));
  out->has_mtime = json_object_object_get_ex(st, "mtime", &v) &&
                   json_object_is_type(v, json_type_string) &&
                   rfc3339_parse(json_object_get_string(v), &out->mtime_s, &out->mtime_ns) == 0;
  return 0;
}

int sm_engine_path_mode(sm_engine *engine, const char *id, const char *path, unsigned *out_mode,
                        sm_error *err) {
  if (engine == NULL || out_mode == NULL)
    return sm_error_set(err, SM_EINVAL, "path mode: needs a client");
  sm_engine_path_info info;
  int rc = sm_engine_path_stat(engine, id, path, &info, err);
  if (rc == 0) *out_mode = info.mode;
  return rc;
}
