/* String vectors: common_strv, a growable NULL-terminated array of owned
 * strings (argv, environment lists), and common_strings_free for the counted
 * arrays (char **, n) some public calls hand out. Internal to the library. */
#ifndef SANDMAN_COMMON_STRV_H
#define SANDMAN_COMMON_STRV_H

#include <stddef.h>

typedef struct common_strv {
  char **v; /* always NULL-terminated once anything was added */
  size_t n;
  size_t alloc;
} common_strv;

/* Both copy; SM_ENOMEM leaves the vector as it was. */
int common_strv_add(common_strv *sv, const char *s);
int common_strv_addf(common_strv *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees the strings and the array; the vector is left empty and reusable. */
void common_strv_dispose(common_strv *sv);

/* Makes room for one more element in the array *itemsp (a T **) of *cap
 * elements of elem bytes, n of them in use: the capacity doubles (the
 * first time: first). 0, or SM_ENOMEM with the array as it was. */
int common_grow(void *itemsp, size_t *cap, size_t n, size_t elem, size_t first);
/* Appends a copy of s to the counted array (*v, *n, capacity *cap). */
int common_strings_push(char ***v, size_t *n, size_t *cap, const char *s);

/* Frees v[0..n) and v itself (NULL entries and a NULL v are fine). */
void common_strings_free(char **v, size_t n);

#endif
