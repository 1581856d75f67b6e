/* Small I/O helpers shared by the library and the in-sandbox agent. */
#ifndef SANDMAN_COMMON_IO_H
#define SANDMAN_COMMON_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Writes all len bytes to fd, retrying after EINTR and short writes. 0, or
 * -1 with errno set (EIO when the descriptor took nothing). */
int common_write_all(int fd, const void *data, size_t len);

/* read(2) again after EINTR: >0 bytes, 0 at the end, -1 with errno. */
ssize_t common_read_retry(int fd, void *buf, size_t len);

/* mkdir -p of path with mode 0700 for every folder it makes (existing
 * ones are fine). 0, or -1 with errno set and path cut at the folder that
 * could not be made (for the message). */
int common_mkdirs(char *path);

#endif
