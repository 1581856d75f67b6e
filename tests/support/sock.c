/* Whole writes and exec frame headers for the tests' servers (sock.h). */
#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "support/sock.h"

int ts_send_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

void ts_mux_head(unsigned char h[8], int stream, uint32_t len) {
  h[0] = (unsigned char)stream;
  h[1] = h[2] = h[3] = 0;
  h[4] = (unsigned char)(len >> 24);
  h[5] = (unsigned char)(len >> 16);
  h[6] = (unsigned char)(len >> 8);
  h[7] = (unsigned char)len;
}
