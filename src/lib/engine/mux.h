/* The multiplexed exec stream: 8-byte frame headers, pure (mux.c). */
#ifndef SANDMAN_ENGINE_MUX_H
#define SANDMAN_ENGINE_MUX_H

#include <stddef.h>
#include <stdint.h>

#include <sandman/engine.h>

#define ENGINE_DEFAULT_MAX_FRAME ((size_t)1 << 20)

/* ---- the multiplexed exec stream (pure) ---- */
typedef struct engine_mux {
  unsigned char head[8];
  size_t head_len;      /* bytes of the current header received */
  uint32_t remaining;   /* payload bytes left in the current frame */
  int stream;           /* of the current frame */
  size_t max_frame;
  sm_output_fn out;
  void *ud;
  char syserr[512];     /* a stream-3 (engine error) frame, capped */
  size_t syserr_len;
} engine_mux;

void engine_mux_init(engine_mux *m, size_t max_frame, sm_output_fn out, void *ud);
/* Feeds bytes as they arrive; payload is handed to out as it comes (a frame
 * may arrive in several pieces). Errors: SM_ETOOBIG (frame over the cap),
 * SM_EPROTOCOL (bad header), SM_EENGINE (engine error frame), or the
 * callback's code. */
int engine_mux_feed(engine_mux *m, const char *data, size_t len, sm_error *err);
/* End of stream: SM_EPROTOCOL when cut inside a header or a frame. */
int engine_mux_finish(const engine_mux *m, sm_error *err);

#endif
