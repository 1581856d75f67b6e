/* Small I/O helpers (io.h). */
#include <errno.h>
#include <unistd.h>

#include "common/io.h"

int sm_write_all(int fd, const void *data, size_t len) {
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
