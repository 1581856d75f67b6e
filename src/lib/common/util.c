/* Parsers for sizes, durations and numbers; clocks; glob matching; random
 * names. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <sandman/util.h>

int sm_parse_int(const char *s, int64_t min, int64_t max, int64_t *out, sm_error *err) {
  if (s == NULL || *s == '\0') return sm_error_set(err, SM_EINVAL, "expected a number, got nothing");
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0')
    return sm_error_set(err, SM_EINVAL, "'%s' is not a whole number", s);
  if (v < min || v > max)
    return sm_error_set(err, SM_EINVAL, "%s is out of range (%lld to %lld)", s, (long long)min,
                        (long long)max);
  *out = v;
  return 0;
}

int sm_parse_double(const char *s, double min, double max, double *out, sm_error *err) {
  if (s == NULL || *s == '\0') return sm_error_set(err, SM_EINVAL, "expected a number, got nothing");
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v))
    return sm_error_set(err, SM_EINVAL, "'%s' is not a number", s);
  if (v < min || v > max)
    return sm_error_set(err, SM_EINVAL, "%s is out of range (%g to %g)", s, min, max);
  *out = v;
  return 0;
}

int sm_parse_size(const char *s, int64_t *out, sm_error *err) {
  if (s == NULL || *s == '\0') return sm_error_set(err, SM_EINVAL, "expected a size, got nothing");
  const char *p = s;
  if (!isdigit((unsigned char)*p))
    return sm_error_set(err, SM_EINVAL, "'%s' is not a size (use e.g. 512k, 64m, 2g)", s);
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (errno != 0) return sm_error_set(err, SM_EINVAL, "size '%s' is too large", s);
  int shift = 0;
  switch (tolower((unsigned char)*end)) {
    case '\0': break;
    case 'b': shift = 0; end++; break;
    case 'k': shift = 10; end++; break;
    case 'm': shift = 20; end++; break;
    case 'g': shift = 30; end++; break;
    case 't': shift = 40; end++; break;
    default:
      return sm_error_set(err, SM_EINVAL, "'%s' is not a size (use e.g. 512k, 64m, 2g)", s);
  }
  if (shift && (strcasecmp(end, "b") == 0 || strcasecmp(end, "ib") == 0)) end += strlen(end);
  if (*end != '\0')
    return sm_error_set(err, SM_EINVAL, "'%s' is not a size (use e.g. 512k, 64m, 2g)", s);
  if (v > ((unsigned long long)INT64_MAX >> shift))
    return sm_error_set(err, SM_EINVAL, "size '%s' is too large", s);
  *out = (int64_t)(v << shift);
  return 0;
}

int sm_parse_duration(const char *s, double *out_seconds, sm_error *err) {
  if (s == NULL || *s == '\0')
    return sm_error_set(err, SM_EINVAL, "expected a duration, got nothing");
  if (!isdigit((unsigned char)s[0]) && s[0] != '.')
    return sm_error_set(err, SM_EINVAL, "'%s' is not a duration (use e.g. 90s, 10m, 2h, 7d)", s);
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || !isfinite(v) || v < 0)
    return sm_error_set(err, SM_EINVAL, "'%s' is not a duration (use e.g. 90s, 10m, 2h, 7d)", s);
  double mult = 1;
  if (strcmp(end, "") == 0 || strcmp(end, "s") == 0) mult = 1;
  else if (strcmp(end, "ms") == 0) mult = 0.001;
  else if (strcmp(end, "m") == 0) mult = 60;
  else if (strcmp(end, "h") == 0) mult = 3600;
  else if (strcmp(end, "d") == 0) mult = 86400;
  else
    return sm_error_set(err, SM_EINVAL, "'%s' is not a duration (use e.g. 90s, 10m, 2h, 7d)", s);
  *out_seconds = v * mult;
  return 0;
}

void sm_format_size(int64_t bytes, char *buf, size_t len) {
  static const char units[] = {'t', 'g', 'm', 'k'};
  static const int shifts[] = {40, 30, 20, 10};
  for (int i = 0; i < 4; i++) {
    int64_t unit = (int64_t)1 << shifts[i];
    if (bytes >= unit && bytes % unit == 0) {
      snprintf(buf, len, "%lld%c", (long long)(bytes / unit), units[i]);
      return;
    }
  }
  snprintf(buf, len, "%lld", (long long)bytes);
}

double sm_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double sm_monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void sm_format_time(double epoch, char *buf, size_t len) {
  time_t t = (time_t)epoch;
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

double sm_parse_time(const char *s) {
  if (s == NULL) return -1;
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (p == NULL) return -1;
  double frac = 0;
  if (*p == '.') {
    double scale = 0.1;
    p++;
    while (isdigit((unsigned char)*p)) {
      frac += (*p - '0') * scale;
      scale /= 10;
      p++;
    }
  }
  long offset = 0;
  if (*p == 'Z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p == '-' ? -1 : 1;
    int hh = 0, mm = 0;
    if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2) return -1;
    offset = sign * (hh * 3600L + mm * 60L);
    p += 6;
  } else {
    return -1;
  }
  if (*p != '\0') return -1;
  time_t t = timegm(&tm);
  if (t == (time_t)-1) return -1;
  return (double)(t - offset) + frac;
}

int sm_glob_match(const char *pattern, const char *s) {
  return fnmatch(pattern, s, 0) == 0;
}

/* Optimal string alignment distance (a swap of two letters counts once). */
size_t sm_edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return (size_t)-1;
  size_t d[64][64];
  for (size_t i = 0; i <= la; i++) d[i][0] = i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = j;
  for (size_t i = 1; i <= la; i++) {
    for (size_t j = 1; j <= lb; j++) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  }
  return d[la][lb];
}

int sm_random_hex(char *out, size_t nbytes, sm_error *err) {
  unsigned char raw[64];
  if (nbytes > sizeof raw) return sm_error_set(err, SM_EINVAL, "too many random bytes");
  size_t got = 0;
  while (got < nbytes) {
    ssize_t r = getrandom(raw + got, nbytes - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return sm_error_set_errno(err, SM_EIO, errno, "reading random bytes");
    }
    got += (size_t)r;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < nbytes; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[2 * nbytes] = '\0';
  return 0;
}
