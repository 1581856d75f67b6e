/* A growable byte buffer with a hard cap (in the spirit of curl's dynbuf):
 * appending past max is SM_ETOOBIG and leaves the buffer as it was. The data
 * is always NUL-terminated. Internal to the library. */
#ifndef SANDMAN_COMMON_BUF_H
#define SANDMAN_COMMON_BUF_H

#include <stddef.h>

typedef struct sm_buf {
  char *data;
  size_t len;
  size_t alloc;
  size_t max; /* hard cap on len */
} sm_buf;

void sm_buf_init(sm_buf *b, size_t max);
/* Returns 0, SM_ETOOBIG (nothing appended) or SM_ENOMEM. */
int sm_buf_append(sm_buf *b, const void *data, size_t len);
/* Appends as much as fits under the cap; returns the bytes dropped. */
size_t sm_buf_append_capped(sm_buf *b, const void *data, size_t len);
int sm_buf_printf(sm_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sm_buf_reset(sm_buf *b);
/* Hands the data to the caller (free()); the buffer is left empty. */
char *sm_buf_steal(sm_buf *b, size_t *out_len);
void sm_buf_dispose(sm_buf *b);

#endif
