/* String vectors (common/strv.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/error.h>

#include "common/strv.h"

int sm_strv_add(sm_strv *sv, const char *s) {
  if (sv->n + 2 > sv->alloc) {
    size_t na = sv->alloc ? sv->alloc * 2 : 16;
    char **nv = realloc(sv->v, na * sizeof *nv);
    if (nv == NULL) return SM_ENOMEM;
    sv->v = nv;
    sv->alloc = na;
  }
  char *copy = strdup(s);
  if (copy == NULL) return SM_ENOMEM;
  sv->v[sv->n++] = copy;
  sv->v[sv->n] = NULL;
  return 0;
}

int sm_strv_addf(sm_strv *sv, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) return SM_ENOMEM;
  int rc = sm_strv_add(sv, s);
  free(s);
  return rc;
}

void sm_strv_dispose(sm_strv *sv) {
  sm_strings_free(sv->v, sv->n);
  sv->v = NULL;
  sv->n = sv->alloc = 0;
}

void sm_strings_free(char **v, size_t n) {
  if (v == NULL) return;
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}
