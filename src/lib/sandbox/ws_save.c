/* /workspace saved as a tar and put back (ws_save.h). The engine streams
 * the archive; nothing is held whole in memory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/durable.h"
#include "sandbox/carry.h"
#include "sandbox/ws_save.h"

int sandbox_ws_save(sm_engine *e, const char *id, const char *path, int64_t cap, int64_t *bytes,
                    sm_error *err) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
    return sm_error_set(err, SM_EINVAL, "path too long: %s", path);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", tmp);
  sandbox_tar_sink sink = {fd, 0, cap > 0 ? cap : INT64_MAX};
  int rc = sm_engine_archive_get(e, id, "/workspace", sandbox_tar_sink_write, &sink, err);
  if (rc && sink.bytes > sink.cap)
    rc = sm_error_set(err, SM_ETOOBIG, "its /workspace holds more than %lld bytes", (long long)cap);
  if (rc == 0 && fsync(fd) != 0) rc = sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  if (close(fd) != 0 && rc == 0) rc = sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  if (rc == 0 && rename(tmp, path) != 0) rc = sm_error_set_errno(err, SM_EIO, errno, "renaming %s", tmp);
  if (rc) {
    unlink(tmp);
    return sm_error_wrap(err, "saving /workspace");
  }
  common_sync_dir_of(path);
  if (bytes) *bytes = sink.bytes;
  return 0;
}

int sandbox_ws_restore(sm_engine *e, const char *id, const char *path, sm_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "reading the saved /workspace %s", path);
  sandbox_tar_source src;
  int rc = sandbox_tar_source_open(&src, fd, "workspace", -1, -1, err);
  if (rc == 0) {
    rc = sm_engine_archive_put(e, id, "/workspace", sandbox_tar_source_read, &src, err);
    if (rc == 0 && src.failed) rc = sm_error_set(err, src.err.code, "%s", src.err.message);
    sandbox_tar_source_close(&src);
  }
  close(fd);
  if (rc) return sm_error_wrap(err, "putting /workspace back");
  return 0;
}
