/* Shared by the tests: files and folders on the host (tests/support/files.c).
 * Each returns 0 or -1 (errno set) and never fails a test itself, so the
 * fuzz drivers and plain programs can use them as the cmocka tests do
 * (wrap them in assert_int_equal(..., 0)). */
#ifndef SANDMAN_TESTS_FILES_H
#define SANDMAN_TESTS_FILES_H

#include <stddef.h>

/* Writes len bytes of data to path (created or truncated, mode 0644). */
int tf_write(const char *path, const void *data, size_t len);
/* Writes a string to path. */
int tf_write_str(const char *path, const char *text);
/* Writes a string to dir/name. */
int tf_write_at(const char *dir, const char *name, const char *text);
/* The whole file, NUL-terminated (the caller frees it); *len (may be NULL)
 * its length. NULL when it cannot be read or is over 64 MiB. */
char *tf_read(const char *path, size_t *len);
/* dir/name read as tf_read does. */
char *tf_read_at(const char *dir, const char *name);
/* Removes path and everything below it (opening up folders made
 * unreadable); 0 when it is gone, also when it was never there. */
int tf_rm_rf(const char *path);
/* A fresh folder "$TMPDIR/<name>-XXXXXX" (TMPDIR unset: /tmp) into out. */
int tf_temp_dir(char *out, size_t len, const char *name);

#endif
