/* Internal to src/lib/sandbox: replacing a keyed sandbox whose settings a call
 * changes, its /workspace carried over (carry.c), and the tar streams of
 * that copy (tar_carry.c). */
#ifndef SANDMAN_SANDBOX_CARRY_H
#define SANDMAN_SANDBOX_CARRY_H

#include <stdint.h>
#include <sys/types.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/run.h>

#include "sandbox/sandbox_box.h"
#include "sandbox/context.h"

/* Replaces the sandbox found under sb->name (its id in sb->replaced, why
 * in sb->because; the caller holds its exclusive lock) with a new one of
 * req's settings, made and started (sb->id), its /workspace carried:
 * sb->carried says how. running: the old one was running (else its
 * /workspace is gone already). SM_EPOLICY, with nothing changed, when the
 * workspace cannot be carried and req->replace is not set. */
int sandbox_replace(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                    sandbox_box *sb, int running, sm_error *err);

/* An engine archive written to a file, up to cap bytes (then the writer
 * fails, bytes past cap). */
typedef struct sandbox_tar_sink {
  int fd;
  int64_t bytes, cap;
} sandbox_tar_sink;
int sandbox_tar_sink_write(void *ud, const char *buf, size_t len);

/* The tar in fd again, for the engine's upload into /workspace: the
 * leading folder `strip` ("workspace") taken off every path, every entry
 * owned by uid:gid (uid < 0: as the tar says). A failure ends the stream (read returns -1) and is
 * kept in err. */
typedef struct sandbox_tar_source {
  struct archive *in, *out;
  char *buf;
  size_t len, off, cap;
  int phase; /* 0 next header, 1 data, 2 closed */
  const char *strip;
  int uid, gid;
  int failed;
  sm_error err;
} sandbox_tar_source;
int sandbox_tar_source_open(sandbox_tar_source *s, int fd, const char *strip, int uid, int gid,
                            sm_error *err);
ssize_t sandbox_tar_source_read(void *ud, char *dst, size_t len);
void sandbox_tar_source_close(sandbox_tar_source *s);

#endif
