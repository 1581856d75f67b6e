/* Fuzzes the exec stream demultiplexer. The first byte picks the frame cap
 * and how the rest is split into reads; the output must be the same
 * whatever the split (differential check), and never crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/mux.h"

typedef struct acc {
  uint64_t hash[3];
  size_t bytes[3];
} acc;

static int take(void *ud, int stream, const char *data, size_t len) {
  acc *a = ud;
  if (stream != 1 && stream != 2) abort();
  for (size_t i = 0; i < len; i++) a->hash[stream] = (a->hash[stream] ^ (uint8_t)data[i]) * 1099511628211ull;
  a->bytes[stream] += len;
  return 0;
}

static int run(const uint8_t *data, size_t size, size_t cap, unsigned split, acc *a,
               sm_error *err) {
  engine_mux m;
  engine_mux_init(&m, cap, take, a);
  size_t off = 0;
  unsigned seed = split | 1u;
  while (off < size) {
    seed = seed * 1103515245u + 12345u;
    size_t n = split == 0 ? size - off : 1 + (seed >> 16) % (split * 3u + 1u);
    if (n > size - off) n = size - off;
    int rc = engine_mux_feed(&m, (const char *)data + off, n, err);
    if (rc != 0) return rc;
    off += n;
  }
  return engine_mux_finish(&m, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t cap = (size_t)(data[0] & 0x0f) * 64 + 1; /* small caps reach the limit */
  if (data[0] & 0x80) cap = 0;                     /* default 1 MiB */
  unsigned split = (data[0] >> 4) & 0x07;
  acc whole, pieces;
  memset(&whole, 0, sizeof whole);
  memset(&pieces, 0, sizeof pieces);
  sm_error e1 = SM_ERROR_INIT, e2 = SM_ERROR_INIT;
  int r1 = run(data + 1, size - 1, cap, 0, &whole, &e1);
  int r2 = run(data + 1, size - 1, cap, split + 1, &pieces, &e2);
  if (r1 != r2) abort();
  if (r1 == 0 && memcmp(&whole, &pieces, sizeof whole) != 0) abort();
  if (r1 != 0 && e1.message[0] == '\0') abort();
  return 0;
}
