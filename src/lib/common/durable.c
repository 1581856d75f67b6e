/* Files replaced whole (durable.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/durable.h"
#include "common/io.h"

void common_sync_dir_of(const char *path) {
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return;
  char *slash = strrchr(dir, '/');
  if (slash == NULL) return;
  *slash = '\0';
  int fd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

static int file_replace(const char *path, const void *data, size_t len, int flush,
                        sm_error *err) {
  char tmp[PATH_MAX];
  /* Unique per writer: threads of one process may write the same file. */
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
    return sm_error_set(err, SM_EINVAL, "path too long: %s", path);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  int bad = common_write_all(fd, data, len) != 0 || (flush && fsync(fd) != 0);
  int e = errno;
  if (close(fd) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  if (bad || rename(tmp, path) != 0) {
    if (!bad) e = errno;
    unlink(tmp);
    return sm_error_set_errno(err, SM_EIO, e, "writing %s", path);
  }
  if (flush) common_sync_dir_of(path);
  return 0;
}

int common_file_replace(const char *path, const void *data, size_t len, sm_error *err) {
  return file_replace(path, data, len, 1, err);
}

int common_file_replace_quick(const char *path, const void *data, size_t len, sm_error *err) {
  return file_replace(path, data, len, 0, err);
}

int common_file_read_small(const char *path, size_t cap, char **out, size_t *out_len,
                           sm_error *err) {
  *out = NULL;
  if (out_len) *out_len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return sm_error_set_errno(err, SM_ENOTFOUND, ENOENT, "reading %s", path);
    return sm_error_set_errno(err, SM_EIO, errno, "reading %s", path);
  }
  char *buf = malloc(cap + 1);
  size_t n = 0;
  int rc = buf ? 0 : sm_error_set(err, SM_ENOMEM, NULL);
  while (rc == 0) {
    if (n == cap + 1) {
      rc = sm_error_set(err, SM_ETOOBIG, "%s is larger than %zu bytes", path, cap);
      break;
    }
    ssize_t r = common_read_retry(fd, buf + n, cap + 1 - n);
    if (r < 0) rc = sm_error_set_errno(err, SM_EIO, errno, "reading %s", path);
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (rc == 0 && n > cap) rc = sm_error_set(err, SM_ETOOBIG, "%s is larger than %zu bytes", path, cap);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  if (out_len) *out_len = n;
  return 0;
}
