/* Internal to src/lib/sandbox: the driver's side of an sm_tty (tty.c). The
 * call's thread polls sandbox_tty_fd (readable when something was typed
 * or the size changed) and takes what waits with sandbox_tty_take. */
#ifndef SANDMAN_SANDBOX_TTY_H
#define SANDMAN_SANDBOX_TTY_H

#include <stddef.h>

#include <sandman/terminal.h>

/* The descriptor to poll (an eventfd). */
int sandbox_tty_fd(sm_tty *tty);
/* Clears the descriptor, then takes up to cap bytes of input into buf
 * (cap 0: none, the input stays queued) and a size not yet passed on
 * (*resized 1, with *rows and *cols; *rows 0: pipes, no terminal).
 * *ended: the input has ended and all of it was taken. Returns the bytes
 * taken. */
size_t sandbox_tty_take(sm_tty *tty, unsigned char *buf, size_t cap, int *resized, unsigned *rows,
                        unsigned *cols, int *ended);
/* While fn is set, input typed when none waits queued goes to fn at once,
 * on the typing thread and under the terminal's lock (so fn never runs
 * after it is cleared): fn returns 0 when it took all of it, 1 when it
 * took all of it and the driver must be woken, or -1 when it took none
 * (the input is queued as before). Saves a keystroke the wake of the
 * call's thread. fn NULL clears it. */
typedef int (*sandbox_tty_direct_fn)(void *ud, const void *data, size_t len);
void sandbox_tty_set_direct(sm_tty *tty, sandbox_tty_direct_fn fn, void *ud);
/* The program started in sandbox_id: the sm_tty_on_start hook. */
void sandbox_tty_started(sm_tty *tty, const char *sandbox_id);

#endif
