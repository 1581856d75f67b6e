/* Random ids: a prefix, then hex from sm_random_hex. An id is a handle,
 * not a secret, but an approval id must not be guessable by a sandbox (it
 * names what an operator approves). */
#include <stdio.h>
#include <string.h>

#include <sandman/util.h>

#include "broker/ids.h"

void broker_random_id(char *out, size_t len, const char *prefix, size_t bytes) {
  char hex[2 * 32 + 1] = "";
  sm_error err = SM_ERROR_INIT;
  if (bytes > 32) bytes = 32;
  /* Zeros when the kernel gives no random bytes. */
  if (sm_random_hex(hex, bytes, &err) != 0) memset(hex, '0', 2 * bytes);
  snprintf(out, len, "%s%.*s", prefix, (int)(2 * bytes), hex);
}
