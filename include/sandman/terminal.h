/* sandman: a call on a pseudo-terminal (`sandman exec -t`, the runner's
 * terminals; docs/terminals.md).
 *
 * An sm_tty is the channel between the thread that runs the call (sm_run
 * with sm_run_request.tty set) and the threads that type into it and
 * resize it. The terminal itself is opened inside the sandbox by
 * sandman's agent (openpty there), so it works wherever the agent does:
 * network none, a remote engine over TLS, docker-in-docker. What the
 * program writes comes back through sm_run_request.on_output (stream 1;
 * a terminal has one stream), what is written here goes to its input, and
 * a resize gives it SIGWINCH. All functions are thread-safe.
 *
 * Made with 0 rows and 0 columns it is an input channel without a
 * terminal (`sandman exec -i` without -t): the call runs on pipes, its
 * stdout and stderr apart, and its stdin ends at sm_tty_end_input. Either
 * way input is sent as it comes, never waited for: output keeps flowing
 * while nothing is typed. */
#ifndef SANDMAN_TERMINAL_H
#define SANDMAN_TERMINAL_H

#include <sandman/export.h>

#include <stddef.h>

#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest terminal (rows and columns alike). */
#define SM_TTY_DIM_MAX 4096
/* Input waiting to be sent at most; a write past it is SM_EBUSY. */
#define SM_TTY_INPUT_MAX ((size_t)1 << 20)

typedef struct sm_tty sm_tty;

/* A terminal of rows x cols (1..SM_TTY_DIM_MAX each; both 0: pipes, see
 * above). The caller owns it (sm_tty_free, once sm_run has returned). */
SM_API int sm_tty_new(sm_tty **out, unsigned rows, unsigned cols, sm_error *err);
SM_API void sm_tty_free(sm_tty *tty);
/* Queues what is typed: sent once the program has started, in order.
 * SM_EBUSY when more than SM_TTY_INPUT_MAX bytes would wait. */
SM_API int sm_tty_write(sm_tty *tty, const void *data, size_t len, sm_error *err);
/* The input ends (pipes: the program reads end of file once what was
 * written has gone; a terminal has no end of input but ^D: nothing). */
SM_API void sm_tty_end_input(sm_tty *tty);
/* A new size (SM_EINVAL outside 1..SM_TTY_DIM_MAX; ignored without a
 * terminal): the program gets SIGWINCH. Sizes given while one is still on
 * its way: the last wins. */
SM_API int sm_tty_resize(sm_tty *tty, unsigned rows, unsigned cols, sm_error *err);
SM_API void sm_tty_size(sm_tty *tty, unsigned *rows, unsigned *cols);
/* Told once, on the thread that runs the call, when the program has
 * started: in which sandbox (its container id). The runner counts its
 * terminals per sandbox there (and cancels a call past the cap). */
typedef void (*sm_tty_start_fn)(void *ud, const char *sandbox_id);
SM_API void sm_tty_on_start(sm_tty *tty, sm_tty_start_fn fn, void *ud);

#ifdef __cplusplus
}
#endif
#endif
