/* Random ids: getrandom, hex. An id is a handle, not a secret, but an
 * approval id must not be guessable by a sandbox (it names what an
 * operator approves). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "broker/ids.h"

void bk_random_id(char *out, size_t len, const char *prefix, size_t bytes) {
  unsigned char raw[32] = {0};
  size_t got = 0;
  if (bytes > sizeof raw) bytes = sizeof raw;
  while (got < bytes) {
    ssize_t r = getrandom(raw + got, bytes - got, 0);
    if (r < 0 && errno != EINTR) break;
    if (r > 0) got += (size_t)r;
  }
  size_t used = (size_t)snprintf(out, len, "%s", prefix);
  for (size_t i = 0; i < bytes && used + 2 < len; i++, used += 2) snprintf(out + used, 3, "%02x", raw[i]);
}
