/* Allocation failure on demand (libgit2's strict-alloc and curl's torture
 * tests are the model): with the test program linked with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup
 * (CMake: sandman_alloc_fail_test), every allocation the library's own
 * code makes through those goes through alloc_fail.c, which can make the
 * Nth of them fail. Allocations inside other libraries (json-c, libyaml,
 * libarchive) are theirs and are not counted. Every unit test program is
 * linked so: SANDMAN_ALLOC_FAIL_AT=N in the environment makes the Nth
 * allocation of the program fail, once (scripts/alloc-fail.py). */
#ifndef SANDMAN_TESTS_ALLOC_FAIL_H
#define SANDMAN_TESTS_ALLOC_FAIL_H

/* The nth allocation from now fails (n >= 1); 0 turns failing off. */
void af_fail_at(long n);
/* Allocations counted since af_fail_at. */
long af_count(void);
/* 1 when the allocation set to fail was reached. */
int af_failed(void);

/* Runs op(ud) with its 1st, 2nd, ... allocation failing in turn, until a
 * run no longer reaches the one set to fail; op must free what it made
 * whatever happens (the sanitizer tree's LeakSanitizer checks that). The
 * return value of that last, undisturbed run: op's. *allocs (may be NULL)
 * gets how many allocations it makes. */
int af_torture(int (*op)(void *ud), void *ud, long *allocs);

#endif
