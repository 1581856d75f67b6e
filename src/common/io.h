/* Small I/O helpers shared by the library and the in-sandbox agent. */
#ifndef SANDMAN_COMMON_IO_H
#define SANDMAN_COMMON_IO_H

#include <stddef.h>

/* Writes all len bytes to fd, retrying after EINTR and short writes. 0, or
 * -1 with errno set (EIO when the descriptor took nothing). */
int sm_write_all(int fd, const void *data, size_t len);

#endif
