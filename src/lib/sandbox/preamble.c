/* The call's preamble: the first line the wrapper prints on stdout before
 * it execs the tool (see sm_exec_wrapper_script), "sandman-call TOKEN PID
 * START OOM". It is stripped from the tool's output and kept: the pid and
 * start time of the call's process (what a timeout kills by), the memory
 * cgroup's oom_kill count before the call. Anything on stdout before it,
 * or on either stream when it never comes, is not the tool's: the wrapper
 * never ran, so it is the runtime's own message. stderr that arrives before
 * it is held: the engine relays the two streams separately, so the tool's
 * first stderr can overtake the preamble on the wire (the wrapper's own
 * stderr is /dev/null until it prints it). Pure: unit-tested on its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/capture.h"
#include "sandbox/preamble.h"

#define PREFIX "sandman-call "

void sandbox_call_watch_init(sandbox_call_watch *w, const char *token, sandbox_capture *cap) {
  memset(w, 0, sizeof *w);
  w->token = token;
  w->cap = cap;
  w->oom_before = -1;
  common_buf_init(&w->runtime, SM_CALL_RUNTIME_TEXT_MAX);
  /* As much as the capture would keep of stderr; past it, only the flag. */
  common_buf_init(&w->early_err, cap ? cap->err.max : SM_CALL_RUNTIME_TEXT_MAX);
}

void sandbox_call_watch_dispose(sandbox_call_watch *w) {
  common_buf_dispose(&w->runtime);
  common_buf_dispose(&w->early_err);
}

static int all_digits(const char *s) {
  if (*s == '\0') return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* Parses the complete line in w->line (no newline). */
static int parse_line(sandbox_call_watch *w) {
  char tok[128], pid[32], start[32], oom[32];
  char rest;
  if (sscanf(w->line, PREFIX "%127s %31s %31s %31s %c", tok, pid, start, oom, &rest) != 4)
    return -1;
  if (w->token == NULL || strcmp(tok, w->token) != 0) return -1;
  if (!all_digits(pid) || !all_digits(start) || strlen(pid) > 10) return -1;
  if (strcmp(oom, "-") != 0 && !all_digits(oom)) return -1;
  snprintf(w->pid, sizeof w->pid, "%s", pid);
  snprintf(w->start, sizeof w->start, "%s", start);
  w->oom_before = strcmp(oom, "-") == 0 ? -1 : strtoll(oom, NULL, 10);
  return 0;
}

static void not_ours(sandbox_call_watch *w, const char *data, size_t len) {
  if (w->state != SM_CALL_WATCH_RUNTIME) {
    w->state = SM_CALL_WATCH_RUNTIME;
    common_buf_append_capped(&w->runtime, w->line, w->len);
  }
  common_buf_append_capped(&w->runtime, data, len);
}

/* The preamble came: stderr held meanwhile was the tool's. */
static int started(sandbox_call_watch *w) {
  w->state = SM_CALL_WATCH_STARTED;
  if (w->on_start) w->on_start(w->on_start_ud, w->pid, w->start);
  int rc = 0;
  if (w->early_err.len) rc = sandbox_capture_output(w->cap, 2, w->early_err.data, w->early_err.len);
  if (w->early_err_dropped) w->cap->err_truncated = 1;
  common_buf_reset(&w->early_err);
  return rc;
}

int sandbox_call_watch_output(void *ud, int stream, const char *data, size_t len) {
  sandbox_call_watch *w = ud;
  if (w->state == SM_CALL_WATCH_STARTED) return sandbox_capture_output(w->cap, stream, data, len);
  if (w->state == SM_CALL_WATCH_RUNTIME) {
    common_buf_append_capped(&w->runtime, data, len);
    return 0;
  }
  if (stream == 2) {
    if (common_buf_append_capped(&w->early_err, data, len) > 0) w->early_err_dropped = 1;
    return 0;
  }
  size_t i = 0;
  while (i < len) {
    char c = data[i++];
    if (c == '\n') {
      w->line[w->len] = '\0';
      if (parse_line(w) != 0) {
        not_ours(w, "\n", 1);
        not_ours(w, data + i, len - i);
        return 0;
      }
      int rc = started(w);
      if (rc == 0 && i < len) rc = sandbox_capture_output(w->cap, stream, data + i, len - i);
      return rc;
    }
    /* The line must spell the prefix from its first byte, and fit. */
    if (w->len + 1 >= sizeof w->line ||
        (w->len < sizeof PREFIX - 1 && c != PREFIX[w->len])) {
      not_ours(w, data + i - 1, len - i + 1);
      return 0;
    }
    w->line[w->len++] = c;
  }
  return 0;
}

int sandbox_call_watch_runtime_text(const sandbox_call_watch *w, char *out, size_t len) {
  /* No preamble: whatever came on stderr was the runtime's too. */
  const common_buf *b = w->runtime.len ? &w->runtime : &w->early_err;
  size_t n = b->len;
  const char *d = b->data ? b->data : "";
  while (n > 0 && (d[n - 1] == '\n' || d[n - 1] == '\r' || d[n - 1] == ' ')) n--;
  size_t o = 0;
  for (size_t i = 0; i < n && o + 1 < len; i++) {
    unsigned char c = (unsigned char)d[i];
    out[o++] = c == '\n' ? ' ' : (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  if (len) out[o] = '\0';
  return o > 0;
}
