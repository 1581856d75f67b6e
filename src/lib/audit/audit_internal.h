/* Internal to src/lib/audit: what the writer and the reader share. */
#ifndef SANDMAN_AUDIT_INTERNAL_H
#define SANDMAN_AUDIT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* "2026-11-22T01:53:35.123Z" */
void audit_format_time_ms(int64_t epoch_ms, char *buf, size_t len);
/* FILE.n (n > 0) or FILE (n == 0) into out. Returns 0, or -1 when too long. */
int audit_rotated_path(const char *file, int n, char *out, size_t len);
/* The lock file beside FILE: DIR/.BASENAME.lock. */
int audit_lock_path(const char *file, char *out, size_t len);

#endif
