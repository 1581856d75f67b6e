/* Internal to src/lib/terminal: a running terminal (terminal_run.c), what the
 * runner's terminals (src/lib/server/terminal.c) and the MCP terminal tools
 * (src/lib/mcp/terminal_tools.c) share: a call on a pseudo-terminal (sm_run
 * with a tty) on a thread of its own, its screen kept by the emulator
 * (terminal_screen.h), what is typed and the size's changes passed on,
 * and waits for its start, its end or a quiet screen.
 *
 * The owner's hooks run on the terminal's thread; output under the
 * terminal's lock (terminal_run_lock), so that a client added under the
 * same lock gets the screen and then exactly what follows. */
#ifndef SANDMAN_TERMINAL_RUN_H
#define SANDMAN_TERMINAL_RUN_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/run.h>
#include <sandman/terminal.h>

#include "common/buf.h"

typedef struct terminal_run terminal_run;

typedef enum {
  TERMINAL_STARTING = 0, /* the sandbox and the program are being started */
  TERMINAL_RUNNING,
  TERMINAL_EXITED,
} terminal_state;

typedef struct terminal_run_hooks {
  /* Runs the call (sm_run, or the runner's own way to): its result in res. */
  void (*run)(void *ud, const sm_run_request *req, sm_run_result *res);
  /* Under the lock: the program's output, once the screen has it, and
   * what the emulator answered to it (a cursor position report...). 1
   * when the owner's clients answer for themselves; 0 (or no hook): the
   * answers are typed back. */
  int (*output)(void *ud, const char *data, size_t len, const common_buf *answers);
  /* The program started in that sandbox; non-zero refuses it (it is
   * ended at once and never counts as started). */
  int (*started)(void *ud, const char *sandbox_id);
  /* Under the lock: the program ended (state, exit code and error set). */
  void (*ended)(void *ud, const sm_run_result *res);
  void *ud;
} terminal_run_hooks;

/* req (borrowed: it must outlive the terminal) gets the terminal's tty,
 * output and cancel flag, no time limit and no host-tool route; then the
 * thread starts. NULL with err when it cannot. */
terminal_run *terminal_run_start(sm_run_request *req, unsigned rows, unsigned cols,
                                 size_t scrollback, const terminal_run_hooks *hooks, sm_error *err);
/* Ends the program if it runs and waits for the thread; then frees. Never
 * from a hook. */
void terminal_run_free(terminal_run *t);
void terminal_run_cancel(terminal_run *t);

/* Waits for the program to start (1) or the call to end without it (0),
 * at most wait_ms. */
int terminal_run_wait_started(terminal_run *t, double wait_ms);
/* Waits at most wait_ms for its end; 1 once ended. */
int terminal_run_wait_ended(terminal_run *t, double wait_ms);
/* Waits until the screen has been quiet for quiet_ms (from now at the
 * earliest; need_change: after it changed at least once, as the echo of
 * what was just typed), or wait_ms passed, or the program ended. */
void terminal_run_settle(terminal_run *t, int quiet_ms, int wait_ms, int need_change);

/* The state; with the lock held or not (a snapshot). exit_code and the
 * error (failure, message: "" when none) once ended. */
terminal_state terminal_run_state(terminal_run *t, int *exit_code, sm_failure_kind *failure,
                                  char *error, size_t error_len);
void terminal_run_size(terminal_run *t, unsigned *rows, unsigned *cols);

/* Typed input (SM_ECONFLICT once ended, SM_EBUSY when too much waits). */
int terminal_run_input(terminal_run *t, const void *data, size_t len, sm_error *err);
int terminal_run_resize(terminal_run *t, unsigned rows, unsigned cols, sm_error *err);

/* The screen (terminal_screen.h), taken under the lock. */
json_object *terminal_run_screen_json(terminal_run *t, size_t scrollback);
int terminal_run_screen_text(terminal_run *t, common_buf *out);

/* For the owner's clients: the lock that output runs under, and the
 * screen's redraw with it held. */
void terminal_run_lock(terminal_run *t);
void terminal_run_unlock(terminal_run *t);
int terminal_run_redraw_locked(terminal_run *t, common_buf *out);
terminal_state terminal_run_state_locked(terminal_run *t, int *exit_code);

#endif
