/* Internal to src/lib/sandbox: a call's output, kept under its caps (capture.c). */
#ifndef SANDMAN_SANDBOX_CAPTURE_H
#define SANDMAN_SANDBOX_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include <sandman/run.h>

#include "common/buf.h"

typedef struct sandbox_capture {
  common_buf out;
  common_buf err;
  int out_truncated;
  int err_truncated;
  int lost;             /* out of memory keeping output under its cap: not a truncation */
  sm_output_fn forward; /* gets the bytes that were kept, as they arrive */
  void *forward_ud;
  int forward_failed;   /* the forwarder asked to stop: stop forwarding only */
  int forward_only;     /* stdout is forwarded whole and not kept */
} sandbox_capture;

void sandbox_capture_init(sandbox_capture *c, int64_t out_cap, int64_t err_cap,
                          sm_output_fn forward, void *forward_ud);
/* An sm_output_fn: keeps what fits under the cap, flags the rest as
 * truncated and keeps accepting (the tool runs on undisturbed). */
int sandbox_capture_output(void *userdata, int stream, const char *data, size_t len);
/* Moves the captured output into the result (NUL-terminated copies);
 * SM_ENOMEM when output under the caps could not be kept (lost). */
int sandbox_capture_to_result(sandbox_capture *c, sm_run_result *r);
void sandbox_capture_dispose(sandbox_capture *c);

#endif
