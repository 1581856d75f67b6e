/* Fuzzes the host-tool route's peer pieces (src/shared/agent/route_peer.c): the
 * /proc/PID/stat reader (a process names itself, so its line is partly
 * its own) and the peer block the host decodes in front of each request.
 * The stat reader reads only within the input and gives a parent that fits
 * a pid; a block that decodes re-encodes to the very bytes it took, and a
 * decode never claims more than the input or the cap. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/route_peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *copy = malloc(size ? size : 1);
  if (copy == NULL) return 0;
  if (size) memcpy(copy, data, size);
  long ppid = -1;
  unsigned long long start = 0;
  if (agent_route_peer_parse_stat(copy, size, &ppid, &start) == 0 &&
      (ppid < 0 || ppid > 0x7fffffff))
    abort();
  free(copy);
  static route_peer p;
  static unsigned char again[ROUTE_PEER_BLOCK_MAX];
  size_t used = agent_route_peer_decode(data, size, &p);
  if (used) {
    if (used > size || used > ROUTE_PEER_BLOCK_MAX || p.n > ROUTE_PEER_CHAIN_MAX) abort();
    size_t n = agent_route_peer_encode(&p, again, sizeof again);
    if (n != used || memcmp(again, data, n) != 0) abort();
  }
  return 0;
}
