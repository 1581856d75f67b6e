/* sandman: small parsers and helpers shared by the library and the CLI. */
#ifndef SANDMAN_UTIL_H
#define SANDMAN_UTIL_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>

#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "512", "64k", "10m", "2g" (powers of 1024, case-insensitive, optional
 * trailing "b"/"ib"). Rejects negatives, garbage and overflow. */
SM_API int sm_parse_size(const char *s, int64_t *out, sm_error *err);
/* "90s", "10m", "2h", "7d", "0s", "1.5s"; a bare number is seconds. */
SM_API int sm_parse_duration(const char *s, double *out_seconds, sm_error *err);
/* Decimal integer in [min, max]; no garbage, no overflow. */
SM_API int sm_parse_int(const char *s, int64_t min, int64_t max, int64_t *out, sm_error *err);
/* Non-negative decimal like "1.5" (CPUs). */
SM_API int sm_parse_double(const char *s, double min, double max, double *out, sm_error *err);
/* Formats bytes as "64m" style when exact, else the number of bytes. */
SM_API void sm_format_size(int64_t bytes, char *buf, size_t len);

/* Wall clock, seconds since the epoch, and a monotonic clock in ms. */
SM_API double sm_now(void);
SM_API double sm_monotonic_ms(void);
/* RFC 3339 UTC ("2026-11-22T01:53:35Z") of an epoch time. */
SM_API void sm_format_time(double epoch, char *buf, size_t len);
/* Parses RFC 3339 (fractions and offsets allowed); -1 on failure. */
SM_API double sm_parse_time(const char *s);

/* fnmatch-style glob match ('*', '?', '[...]'), no special '/' handling. */
SM_API int sm_glob_match(const char *pattern, const char *s);
/* Edit distance where a swap of two neighbouring letters counts once
 * (for "did you mean" suggestions); (size_t)-1 for words over 63 bytes. */
SM_API size_t sm_edit_distance(const char *a, const char *b);
/* nbytes (at most 64) random bytes from the kernel (getrandom) as 2 *
 * nbytes lowercase hex characters; out has room for 2 * nbytes + 1. */
SM_API int sm_random_hex(char *out, size_t nbytes, sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
