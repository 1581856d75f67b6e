/* Fuzz target: what the runner's gate reads of a request head before
 * libmicrohttpd gets the connection (where the head ends, its class). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *buf = (const char *)data;
  size_t len = server_gate_head_length(buf, size);
  if (len > size) abort();
  if (len > 0 && !(memcmp(buf + len - 2, "\n\n", 2) == 0 || memcmp(buf + len - 4, "\r\n\r\n", 4) == 0))
    abort();
  server_gate_class c =
      server_gate_head_class(buf, len ? len : size, "fuzz-control-token-0123456789");
  if (c != SM_GATE_HEALTH && c != SM_GATE_CONTROL && c != SM_GATE_OTHER) abort();
  /* The control class needs the token itself. */
  if (c == SM_GATE_CONTROL && memmem(buf, size, "fuzz-control-token-0123456789", 29) == NULL)
    abort();
  return 0;
}
