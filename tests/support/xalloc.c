/* The checked allocations of xalloc.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/xalloc.h"

/* Says what failed and ends the program: stdout flushed first so that the
 * test runner's own lines come before ours, then exit(1) (atexit handlers,
 * and so LeakSanitizer, still run). */
__attribute__((noreturn)) static void xalloc_die(const char *what, size_t n) {
  fflush(stdout);
  fprintf(stderr, "test: %s of %zu bytes failed (out of memory): the test stops here\n", what, n);
  exit(1);
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p == NULL) xalloc_die("malloc", n);
  return p;
}

void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (p == NULL) xalloc_die("calloc", n * size);
  return p;
}

void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (q == NULL) xalloc_die("realloc", n);
  return q;
}

char *xstrdup(const char *s) {
  char *p = strdup(s);
  if (p == NULL) xalloc_die("strdup", strlen(s) + 1);
  return p;
}

char *xstrndup(const char *s, size_t n) {
  char *p = strndup(s, n);
  if (p == NULL) xalloc_die("strndup", n + 1);
  return p;
}

void *xfixture(void *p, const char *what) {
  if (p == NULL) xalloc_die(what, 0);
  return p;
}
