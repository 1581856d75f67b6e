/* A growable byte buffer with a hard cap (in the spirit of curl's dynbuf):
 * appending past max is SM_ETOOBIG and leaves the buffer as it was. The data
 * is always NUL-terminated. Internal to the library. */
#ifndef SANDMAN_COMMON_BUF_H
#define SANDMAN_COMMON_BUF_H

#include <stddef.h>

typedef struct common_buf {
  char *data;
  size_t len;
  size_t alloc;
  size_t max; /* hard cap on len */
} common_buf;

void common_buf_init(common_buf *b, size_t max);
/* Returns 0, SM_ETOOBIG (nothing appended) or SM_ENOMEM. */
int common_buf_append(common_buf *b, const void *data, size_t len);
/* Appends as much as fits under the cap; returns the bytes dropped. */
size_t common_buf_append_capped(common_buf *b, const void *data, size_t len);
int common_buf_printf(common_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void common_buf_reset(common_buf *b);
/* Hands the data to the caller (free()); the buffer is left empty. */
char *common_buf_steal(common_buf *b, size_t *out_len);
void common_buf_dispose(common_buf *b);

/* A byte stream cut into lines (without their '\n') of at most line.max
 * bytes; a longer one is dropped up to its end. common_buf_init the line. */
typedef struct common_lines {
  common_buf line; /* the partial line so far */
  int overlong; /* the current line passed the cap */
} common_lines;

/* Gets each complete line, or line NULL for one that passed the cap; a
 * non-zero return stops the feed and is its result. */
typedef int (*common_line_fn)(void *ud, const char *line, size_t len);

int common_lines_feed(common_lines *l, const char *data, size_t len, common_line_fn fn, void *ud);
/* The last line when the stream ended without a '\n' (nothing if empty). */
int common_lines_flush(common_lines *l, common_line_fn fn, void *ud);

#endif
