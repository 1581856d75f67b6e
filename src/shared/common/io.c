/* Small I/O helpers (io.h). */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io.h"

int common_write_all(int fd, const void *data, size_t len) {
  const unsigned char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

ssize_t common_read_retry(int fd, void *buf, size_t len) {
  for (;;) {
    ssize_t n = read(fd, buf, len);
    if (n >= 0 || errno != EINTR) return n;
  }
}

int common_mkdirs(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
  return 0;
}
