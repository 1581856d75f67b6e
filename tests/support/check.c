/* The NULL-safe string assertion of check.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/check.h"

void check_string_equal(const char *a, const char *b, const char *a_text, const char *b_text,
                        const char *file, int line) {
  if (a == NULL || b == NULL) {
    print_error("%s is NULL\n", a == NULL ? a_text : b_text);
    _fail(file, line);
  }
  _assert_string_equal(a, b, file, line);
}
