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

/* A byte stream cut into lines (without their '\n') of at most line.max
 * bytes; a longer one is dropped up to its end. sm_buf_init the line. */
typedef struct sm_lines {
  sm_buf line;  /* the partial line so far */
  int overlong; /* the current line passed the cap */
} sm_lines;

/* Gets each complete line, or line NULL for one that passed the cap; a
 * non-zero return stops the feed and is its result. */
typedef int (*sm_line_fn)(void *ud, const char *line, size_t len);

int sm_lines_feed(sm_lines *l, const char *data, size_t len, sm_line_fn fn, void *ud);
/* The last line when the stream ended without a '\n' (nothing if empty). */
int sm_lines_flush(sm_lines *l, sm_line_fn fn, void *ud);

#endif
