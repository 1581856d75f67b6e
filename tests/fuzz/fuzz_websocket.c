/* Fuzzes the WebSocket frame reader (src/lib/server/websocket.c), both sides'
 * rules (the first byte picks masked or not, the caps and the read
 * sizes): what it delivers must be the same whatever the split
 * (differential check), every message within its cap, every text message
 * UTF-8, every close payload well formed; and it never reads past what it
 * was given (ASan). The UTF-8 check and the accept value get the input
 * too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/websocket.h"

typedef struct acc {
  uint64_t hash;
  unsigned n;
  size_t max_frame, max_message;
} acc;

static int take(void *ud, int opcode, const unsigned char *data, size_t len) {
  acc *a = ud;
  if (opcode >= 0x8 ? len > SERVER_WS_CONTROL_MAX : len > a->max_message) abort();
  if (opcode == SERVER_WS_TEXT && !server_ws_utf8_valid(data, len)) abort();
  if (opcode == SERVER_WS_CLOSE && server_ws_close_code(data, len) < 0) abort();
  if (opcode != SERVER_WS_TEXT && opcode != SERVER_WS_BINARY && opcode != SERVER_WS_CLOSE &&
      opcode != SERVER_WS_PING && opcode != SERVER_WS_PONG)
    abort();
  uint64_t h = a->hash ^ (uint64_t)opcode ^ (uint64_t)len << 8;
  for (size_t i = 0; i < len; i++) h = (h ^ data[i]) * 1099511628211ull;
  a->hash = h;
  a->n++;
  return 0;
}

static int run(const uint8_t *data, size_t size, int masked, size_t max_frame, size_t max_msg,
               size_t step, acc *a) {
  server_ws_reader r;
  memset(a, 0, sizeof *a);
  a->max_frame = max_frame;
  a->max_message = max_msg;
  server_ws_reader_init(&r, masked, max_frame, max_msg, take, a);
  int rc = 0;
  for (size_t off = 0; off < size && rc == 0; off += step) {
    size_t n = size - off < step ? size - off : step;
    /* An exact-size copy: a read past the piece is caught. */
    uint8_t *piece = malloc(n);
    if (piece == NULL) abort();
    memcpy(piece, data + off, n);
    rc = server_ws_reader_feed(&r, piece, n);
    free(piece);
  }
  server_ws_reader_dispose(&r);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t knob = data[0];
  data++;
  size--;
  int masked = knob & 1;
  size_t max_frame = (size_t)16 << ((knob >> 1) & 7);
  size_t max_msg = max_frame * (1 + ((knob >> 4) & 3));
  acc whole, pieces;
  int rc1 = run(data, size, masked, max_frame, max_msg, size ? size : 1, &whole);
  int rc2 = run(data, size, masked, max_frame, max_msg, 1 + (knob >> 6), &pieces);
  if (rc1 != rc2 || whole.hash != pieces.hash || whole.n != pieces.n) abort();
  server_ws_utf8_valid(data, size);
  if (size >= SERVER_WS_KEY_LEN) {
    char key[SERVER_WS_KEY_LEN + 1], out[SERVER_WS_ACCEPT_LEN + 1];
    memcpy(key, data, SERVER_WS_KEY_LEN);
    key[SERVER_WS_KEY_LEN] = 0;
    server_ws_accept(key, out);
  }
  return 0;
}
