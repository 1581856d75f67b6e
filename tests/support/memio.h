/* Shared by the tests: a reader over memory, as the library's stream calls
 * take one (sm_read_fn), handing out at most max_chunk bytes a call when it
 * is set (to split a stream where a test wants it split). */
#ifndef SANDMAN_TESTS_MEMIO_H
#define SANDMAN_TESTS_MEMIO_H

#include <string.h>
#include <sys/types.h>

typedef struct mem_reader {
  const char *data;
  size_t len, off;
  size_t max_chunk; /* 0: as much as asked */
} mem_reader;

static inline ssize_t read_mem(void *ud, char *buf, size_t len) {
  mem_reader *r = ud;
  size_t n = r->len - r->off;
  if (n > len) n = len;
  if (r->max_chunk && n > r->max_chunk) n = r->max_chunk;
  memcpy(buf, r->data + r->off, n);
  r->off += n;
  return (ssize_t)n;
}

#endif
