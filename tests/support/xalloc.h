/* The tests' own allocations, checked (tests/support/xalloc.c). Under the
 * allocation-failure run (alloc_fail.h, scripts/alloc-fail.py) any
 * allocation may fail, the test's own as well as the library's: the
 * library must answer SM_ENOMEM, but a test that cannot make its own
 * fixture has nothing left to check. These say so on stderr and end the
 * program with status 1 (a failure that is said, never a crash). Use them
 * for what the test itself allocates, never around the library's calls. */
#ifndef SANDMAN_TESTS_XALLOC_H
#define SANDMAN_TESTS_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* A fixture the test made with the library's own constructor (not the
 * call under test): NULL (out of memory) ends the test as above. */
void *xfixture(void *p, const char *what);

#endif
