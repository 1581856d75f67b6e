/* cmocka 1.1.5's assert_string_equal reads a NULL string: a crash where the
 * test should fail. Under the allocation-failure run (alloc_fail.h) a
 * string the library returns may be NULL (its allocation failed): this one
 * fails the test and says which side was NULL. Include after <cmocka.h>. */
#ifndef SANDMAN_TESTS_CHECK_H
#define SANDMAN_TESTS_CHECK_H

void check_string_equal(const char *a, const char *b, const char *a_text, const char *b_text,
                        const char *file, int line);

#undef assert_string_equal
#define assert_string_equal(a, b) \
  check_string_equal((const char *)(a), (const char *)(b), #a, #b, __FILE__, __LINE__)

#endif
