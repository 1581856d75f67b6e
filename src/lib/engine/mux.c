/* The engine's multiplexed stream (exec and attach without a TTY): frames of
 * an 8-byte header (stream type, three zero bytes, big-endian payload
 * length) followed by the payload. Decoded incrementally: bytes are fed as
 * they arrive, however the reads split them, and payload is handed on at
 * once rather than buffered per frame. */
#include <stdio.h>
#include <string.h>

#include "engine/mux.h"

enum { MUX_STDIN = 0, MUX_STDOUT = 1, MUX_STDERR = 2, MUX_SYSERR = 3 };

void engine_mux_init(engine_mux *m, size_t max_frame, sm_output_fn out, void *ud) {
  memset(m, 0, sizeof *m);
  m->max_frame = max_frame ? max_frame : ENGINE_DEFAULT_MAX_FRAME;
  m->out = out;
  m->ud = ud;
}

static int syserr_done(engine_mux *m, sm_error *err) {
  char text[sizeof m->syserr + 1];
  size_t j = 0;
  for (size_t i = 0; i < m->syserr_len; i++) {
    unsigned char c = (unsigned char)m->syserr[i];
    text[j++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
  }
  while (j > 0 && text[j - 1] == ' ') j--;
  text[j] = '\0';
  return sm_error_set(err, SM_EENGINE, "the engine reported an error in the exec stream: %s",
                      j ? text : "(no message)");
}

static int deliver(engine_mux *m, const char *data, size_t len, sm_error *err) {
  if (m->stream == MUX_SYSERR) {
    size_t room = sizeof m->syserr - m->syserr_len;
    size_t take = len < room ? len : room;
    memcpy(m->syserr + m->syserr_len, data, take);
    m->syserr_len += take;
    return 0;
  }
  if (m->out == NULL || len == 0) return 0;
  /* Docker's stdcopy treats a stdin-typed frame as stdout. */
  int stream = m->stream == MUX_STDERR ? 2 : 1;
  int rc = m->out(m->ud, stream, data, len);
  if (rc != 0) {
    if (rc > 0) rc = SM_EIO;
    return sm_error_set(err, rc, "exec output: the output handler stopped reading");
  }
  return 0;
}

int engine_mux_feed(engine_mux *m, const char *data, size_t len, sm_error *err) {
  while (len > 0) {
    if (m->head_len < sizeof m->head) {
      size_t take = sizeof m->head - m->head_len;
      if (take > len) take = len;
      memcpy(m->head + m->head_len, data, take);
      m->head_len += take;
      data += take;
      len -= take;
      if (m->head_len < sizeof m->head) return 0;
      const unsigned char *h = m->head;
      if (h[0] > MUX_SYSERR)
        return sm_error_set(err, SM_EPROTOCOL,
                            "exec stream: unknown stream type %u in a frame header", h[0]);
      if (h[1] != 0 || h[2] != 0 || h[3] != 0)
        return sm_error_set(err, SM_EPROTOCOL,
                            "exec stream: malformed frame header (bytes 1-3 not zero); was "
                            "the exec created with a TTY?");
      uint32_t n = ((uint32_t)h[4] << 24) | ((uint32_t)h[5] << 16) | ((uint32_t)h[6] << 8) |
                   (uint32_t)h[7];
      if ((size_t)n > m->max_frame)
        return sm_error_set(err, SM_ETOOBIG,
                            "exec stream: a frame of %u bytes is over the %zu-byte cap", n,
                            m->max_frame);
      m->stream = h[0];
      m->remaining = n;
      m->syserr_len = 0;
      if (n == 0) {
        m->head_len = 0;
        if (m->stream == MUX_SYSERR) return syserr_done(m, err);
      }
      continue;
    }
    size_t take = m->remaining < len ? m->remaining : len;
    int rc = deliver(m, data, take, err);
    if (rc != 0) return rc;
    data += take;
    len -= take;
    m->remaining -= (uint32_t)take;
    if (m->remaining == 0) {
      m->head_len = 0;
      if (m->stream == MUX_SYSERR) return syserr_done(m, err);
    }
  }
  return 0;
}

int engine_mux_finish(const engine_mux *m, sm_error *err) {
  if (m->head_len > 0 && m->head_len < sizeof m->head)
    return sm_error_set(err, SM_EPROTOCOL,
                        "exec stream cut inside a frame header (%zu of 8 bytes)", m->head_len);
  if (m->head_len == sizeof m->head && m->remaining > 0)
    return sm_error_set(err, SM_EPROTOCOL,
                        "exec stream cut inside a frame (%u payload bytes missing)",
                        m->remaining);
  return 0;
}
