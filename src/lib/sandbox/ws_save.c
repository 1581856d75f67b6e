/* /workspace saved as a tar and put back (ws_save.h). The engine streams
 * the archive; nothing is held whole in memory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/durable.h"
#include "common/io.h"
#include "sandbox/carry.h"
#include "sandbox/ws_save.h"

/* The file, and a copy of every byte to tee (a pipe to a reader that
 * hashes it); a tee that fails is dropped (its reader sees the stream end
 * short and says so). */
typedef struct ws_tee {
  sandbox_tar_sink file;
  int fd;
} ws_tee;

static int ws_tee_write(void *ud, const char *buf, size_t len) {
  ws_tee *t = ud;
  if (sandbox_tar_sink_write(&t->file, buf, len) != 0) return -1;
  if (t->fd >= 0 && common_write_all(t->fd, buf, len) != 0) t->fd = -1;
  return 0;
}

int sandbox_ws_save_produced(const char *path, int64_t cap, int tee, sandbox_ws_producer produce,
                             void *produce_ud, int64_t *bytes, sm_error *err) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
    return sm_error_set(err, SM_EINVAL, "path too long: %s", path);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", tmp);
  ws_tee t = {{fd, 0, cap > 0 ? cap : INT64_MAX}, tee};
  sandbox_tar_sink *sink = &t.file;
  int rc = produce(produce_ud, ws_tee_write, &t, err);
  if (rc && sink->bytes > sink->cap)
    rc = sm_error_set(err, SM_ETOOBIG, "its /workspace holds more than %lld bytes", (long long)cap);
  if (rc == 0 && fsync(fd) != 0) rc = sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  if (close(fd) != 0 && rc == 0) rc = sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  if (rc == 0 && rename(tmp, path) != 0) rc = sm_error_set_errno(err, SM_EIO, errno, "renaming %s", tmp);
  if (rc) {
    unlink(tmp);
    return rc;
  }
  common_sync_dir_of(path);
  if (bytes) *bytes = sink->bytes;
  return 0;
}

/* The engine's archive of src in container id, as a producer. */
typedef struct ws_archive {
  sm_engine *e;
  const char *id, *src;
} ws_archive;

static int produce_archive(void *ud, sm_write_fn writer, void *writer_ud, sm_error *err) {
  ws_archive *a = ud;
  return sm_engine_archive_get(a->e, a->id, a->src, writer, writer_ud, err);
}

static int ws_save_from(sm_engine *e, const char *id, const char *src, const char *path,
                        int64_t cap, int tee, int64_t *bytes, sm_error *err) {
  ws_archive a = {e, id, src};
  int rc = sandbox_ws_save_produced(path, cap, tee, produce_archive, &a, bytes, err);
  return rc ? sm_error_wrap(err, "saving /workspace") : 0;
}

int sandbox_ws_save(sm_engine *e, const char *id, const char *path, int64_t cap, int64_t *bytes,
                    sm_error *err) {
  return ws_save_from(e, id, "/workspace", path, cap, -1, bytes, err);
}

int sandbox_ws_save_tee(sm_engine *e, const char *id, const char *path, int64_t cap, int tee,
                        int64_t *bytes, sm_error *err) {
  /* "/workspace/.": entries "./a/b", which an upload into /workspace takes
   * as they are. */
  return ws_save_from(e, id, "/workspace/.", path, cap, tee, bytes, err);
}

static ssize_t ws_fd_read(void *ud, char *buf, size_t len) {
  ssize_t n;
  do n = read(*(int *)ud, buf, len);
  while (n < 0 && errno == EINTR);
  return n;
}

int sandbox_ws_restore(sm_engine *e, const char *id, const char *path, sm_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "reading the saved /workspace %s", path);
  /* A tar of "/workspace/." ("./a/b") goes up as it is; one of
   * "/workspace" ("workspace/a/b") is rewritten on the way. */
  char head[2] = "";
  sandbox_tar_source src;
  int rc = 0;
  if (pread(fd, head, 2, 0) == 2 && memcmp(head, "./", 2) == 0) {
    rc = sm_engine_archive_put(e, id, "/workspace", ws_fd_read, &fd, err);
  } else if ((rc = sandbox_tar_source_open(&src, fd, "workspace", -1, -1, err)) == 0) {
    rc = sm_engine_archive_put(e, id, "/workspace", sandbox_tar_source_read, &src, err);
    if (rc == 0 && src.failed) rc = sm_error_set(err, src.err.code, "%s", src.err.message);
    sandbox_tar_source_close(&src);
  }
  close(fd);
  if (rc) return sm_error_wrap(err, "putting /workspace back");
  return 0;
}
