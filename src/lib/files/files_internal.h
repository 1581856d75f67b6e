/* Internal to src/lib/files: one call of sandman's helper (files.c), shared by
 * the operations and the tar conversions (tar.c). */
#ifndef SANDMAN_FILES_INTERNAL_H
#define SANDMAN_FILES_INTERNAL_H

#include <sandman/files.h>

#include "files/files_wire.h"

typedef struct fs_call {
  fs_wire wire;
  int parse_rc;        /* the first error of the parser (or a handler) */
  sm_error parse_err;
  int in_rc;           /* the first error of the stdin producer */
  sm_error in_err;
} fs_call;

/* A helper call of argv built from base: sandman's agent as the sandbox's
 * user, no stdin, no environment of the caller's, stdout only to on_out,
 * stderr capped at 64 KiB. */
void files_helper_request(sm_run_request *req, const sm_run_request *base, const char *const *argv,
                          size_t argc, sm_output_fn on_out, void *ud);
void files_call_init(fs_call *c, fs_wire_mode mode, const fs_wire_handlers *h, int64_t max_records);
void files_call_dispose(fs_call *c);
/* Runs argv ({"fs", OP, "/workspace", ...}) as a helper call built from
 * base, stdin from in (may be NULL), and turns its outcome into 0 or an
 * error: what the producer or the parser met first, else the helper's
 * "err" answer, else the call's own failure. */
int files_call_run(fs_call *c, sm_runner *runner, const sm_run_request *base,
                   const char *const *argv, size_t argc, sm_read_fn in, void *in_ud,
                   sm_run_result *call, sm_error *err);

#endif
