#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/error.h>

void common_buf_init(common_buf *b, size_t max) {
  b->data = NULL;
  b->len = 0;
  b->alloc = 0;
  b->max = max;
}

static int grow(common_buf *b, size_t need) {
  if (need + 1 <= b->alloc) return 0;
  size_t n = b->alloc ? b->alloc : 256;
  while (n < need + 1) {
    if (n > ((size_t)-1) / 2) return SM_ENOMEM;
    n *= 2;
  }
  if (n > b->max + 1) n = b->max + 1;
  char *p = realloc(b->data, n);
  if (p == NULL) return SM_ENOMEM;
  b->data = p;
  b->alloc = n;
  return 0;
}

int common_buf_append(common_buf *b, const void *data, size_t len) {
  if (len > b->max || b->len > b->max - len) return SM_ETOOBIG;
  int rc = grow(b, b->len + len);
  if (rc != 0) return rc;
  if (len) memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
  return 0;
}

size_t common_buf_append_capped(common_buf *b, const void *data, size_t len) {
  size_t room = b->max > b->len ? b->max - b->len : 0;
  size_t take = len < room ? len : room;
  if (take > 0 && common_buf_append(b, data, take) != 0) return len;
  if (b->data == NULL && grow(b, 0) == 0) b->data[0] = '\0';
  return len - take;
}

int common_buf_printf(common_buf *b, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return SM_EINVAL;
  if ((size_t)n < sizeof small) return common_buf_append(b, small, (size_t)n);
  char *big = malloc((size_t)n + 1);
  if (big == NULL) return SM_ENOMEM;
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  int rc = common_buf_append(b, big, (size_t)n);
  free(big);
  return rc;
}

void common_buf_reset(common_buf *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
}

char *common_buf_steal(common_buf *b, size_t *out_len) {
  char *p = b->data;
  if (p == NULL) p = calloc(1, 1);
  if (out_len) *out_len = b->len;
  b->data = NULL;
  b->len = 0;
  b->alloc = 0;
  return p;
}

void common_buf_dispose(common_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = 0;
  b->alloc = 0;
}

/* The line gathered so far to fn, then a fresh one. */
static int lines_end(common_lines *l, common_line_fn fn, void *ud) {
  int rc = l->overlong ? fn(ud, NULL, 0) : fn(ud, l->line.data ? l->line.data : "", l->line.len);
  l->overlong = 0;
  common_buf_reset(&l->line);
  return rc;
}

int common_lines_feed(common_lines *l, const char *data, size_t len, common_line_fn fn, void *ud) {
  while (len > 0) {
    const char *nl = memchr(data, '\n', len);
    size_t take = nl ? (size_t)(nl - data) : len;
    if (!l->overlong && common_buf_append(&l->line, data, take) != 0) {
      l->overlong = 1;
      common_buf_reset(&l->line);
    }
    if (nl == NULL) return 0;
    int rc = lines_end(l, fn, ud);
    if (rc != 0) return rc;
    data = nl + 1;
    len -= take + 1;
  }
  return 0;
}

int common_lines_flush(common_lines *l, common_line_fn fn, void *ud) {
  if (!l->overlong && l->line.len == 0) return 0;
  return lines_end(l, fn, ud);
}
