/* Internal to src/lib/sandbox: the wrapper's preamble before a call's output (preamble.c). */
#ifndef SANDMAN_SANDBOX_PREAMBLE_H
#define SANDMAN_SANDBOX_PREAMBLE_H

#include <stddef.h>

#include <sandman/sandbox.h>

#include "common/buf.h"
#include "sandbox/capture.h"

#define SM_CALL_RUNTIME_TEXT_MAX 4096
enum { SM_CALL_WATCH_WAITING = 0, SM_CALL_WATCH_STARTED, SM_CALL_WATCH_RUNTIME };

/* Sits between a call's output and its capture: strips and parses the
 * wrapper's preamble; output before it is the runtime's (kept apart). */
typedef struct sandbox_call_watch {
  const char *token;
  sandbox_capture *cap;
  int state;            /* SM_CALL_WATCH_* */
  char line[192];
  size_t len;
  char pid[16];         /* the call's process (in the sandbox's pid namespace) */
  char start[24];       /* its start time, clock ticks since boot */
  long long oom_before; /* the oom_kill count before the call, -1 unknown */
  common_buf runtime;   /* what came on stdout instead of a preamble */
  common_buf early_err; /* stderr before the preamble (the tool's if it comes) */
  int early_err_dropped;
  /* Told the call's first process when the preamble comes (NULL: nobody):
   * the host-tool route knows the call's processes by it. */
  void (*on_start)(void *ud, const char *pid, const char *start);
  void *on_start_ud;
} sandbox_call_watch;

void sandbox_call_watch_init(sandbox_call_watch *w, const char *token, sandbox_capture *cap);
void sandbox_call_watch_dispose(sandbox_call_watch *w);
/* An sm_output_fn (ud: the watch). */
int sandbox_call_watch_output(void *ud, int stream, const char *data, size_t len);
/* The runtime's text on one printable line into out; 0 when there is none. */
int sandbox_call_watch_runtime_text(const sandbox_call_watch *w, char *out, size_t len);

#endif
