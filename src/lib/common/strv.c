/* String vectors (common/strv.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/error.h>

#include "common/strv.h"

int common_grow(void *itemsp, size_t *cap, size_t n, size_t elem, size_t first) {
  if (n < *cap) return 0;
  size_t c = *cap ? *cap * 2 : first;
  while (c <= n) c *= 2;
  void *old;
  memcpy(&old, itemsp, sizeof old);
  void *nv = realloc(old, c * elem);
  if (nv == NULL) return SM_ENOMEM;
  memcpy(itemsp, &nv, sizeof nv);
  *cap = c;
  return 0;
}

int common_strings_push(char ***v, size_t *n, size_t *cap, const char *s) {
  if (common_grow(v, cap, *n, sizeof **v, 16) != 0) return SM_ENOMEM;
  char *d = strdup(s);
  if (d == NULL) return SM_ENOMEM;
  (*v)[(*n)++] = d;
  return 0;
}

int common_strv_add(common_strv *sv, const char *s) {
  /* Room for s and the NULL after it. */
  if (common_grow(&sv->v, &sv->alloc, sv->n + 1, sizeof *sv->v, 16) != 0) return SM_ENOMEM;
  char *copy = strdup(s);
  if (copy == NULL) return SM_ENOMEM;
  sv->v[sv->n++] = copy;
  sv->v[sv->n] = NULL;
  return 0;
}

int common_strv_addf(common_strv *sv, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) return SM_ENOMEM;
  int rc = common_strv_add(sv, s);
  free(s);
  return rc;
}

void common_strv_dispose(common_strv *sv) {
  common_strings_free(sv->v, sv->n);
  sv->v = NULL;
  sv->n = sv->alloc = 0;
}

void common_strings_free(char **v, size_t n) {
  if (v == NULL) return;
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}
