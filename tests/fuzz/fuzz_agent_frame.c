/* Fuzzes the agent protocol's frame reader and call parser. The first byte
 * picks the reader's cap, the read sizes and after how many frames the
 * callback stops; the frames seen must be the same whatever the split
 * (differential check). Call payloads go through agent_frame_parse_call on an
 * exact-size copy, so any read past the payload is caught under ASan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/frame.h"

typedef struct acc {
  uint64_t hash;
  unsigned frames, stop_after;
} acc;

static void check_call(const unsigned char *payload, uint32_t len) {
  unsigned char *copy = malloc(len ? len : 1);
  if (copy == NULL) return;
  if (len) memcpy(copy, payload, len);
  char *argv[9], *env[5];
  const char *cwd;
  size_t argc = 0, envc = 0;
  if (agent_frame_parse_call(copy, len, &cwd, argv, 8, &argc, env, 4, &envc) == 0) {
    /* Every string lies inside the payload and the lists end in NULL. */
    if (argc == 0 || argc > 8 || envc > 4 || argv[argc] != NULL || env[envc] != NULL) abort();
    char *end = (char *)copy + len;
    for (size_t i = 0; i < argc; i++)
      if (argv[i] < (char *)copy || argv[i] + strlen(argv[i]) >= end) abort();
    for (size_t i = 0; i < envc; i++)
      if (env[i] < (char *)copy || env[i] + strlen(env[i]) >= end) abort();
    if (cwd != (const char *)copy) abort();
  }
  free(copy);
}

static int take(void *ud, int type, uint32_t id, const unsigned char *payload, uint32_t len) {
  acc *a = ud;
  if (len > agent_frame_type_max(type)) abort();
  uint64_t h = a->hash ^ (uint64_t)type ^ (uint64_t)id << 8 ^ (uint64_t)len << 40;
  for (uint32_t i = 0; i < len; i++) h = (h ^ payload[i]) * 1099511628211ull;
  a->hash = h * 1099511628211ull;
  if (type == SM_FRAME_CALL) check_call(payload, len);
  a->frames++;
  return a->stop_after && a->frames >= a->stop_after ? 9 : 0;
}

static int run(const uint8_t *data, size_t size, uint32_t cap, unsigned split, acc *a) {
  agent_frame_reader r;
  agent_frame_reader_init(&r, cap, take, a);
  size_t off = 0;
  unsigned seed = split | 1u;
  int rc = 0;
  while (off < size && rc == 0) {
    seed = seed * 1103515245u + 12345u;
    size_t n = split == 0 ? size - off : 1 + (seed >> 16) % (split * 5u + 1u);
    if (n > size - off) n = size - off;
    rc = agent_frame_reader_feed(&r, data + off, n);
    off += n;
  }
  agent_frame_reader_dispose(&r);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint32_t cap = (data[0] & 0x80) ? SM_FRAME_CALL_MAX : (uint32_t)(data[0] & 0x0f) * 16;
  unsigned split = (data[0] >> 4) & 0x07;
  acc whole = {0}, pieces = {0};
  whole.stop_after = pieces.stop_after = (data[0] & 0x03) == 3 ? 2 : 0;
  int r1 = run(data + 1, size - 1, cap, 0, &whole);
  int r2 = run(data + 1, size - 1, cap, split + 1, &pieces);
  if (r1 != r2 || whole.frames != pieces.frames || whole.hash != pieces.hash) abort();
  return 0;
}
