/* Internal to src/lib/terminal: a terminal's screen as sandman keeps it
 * (terminal_screen.c): a real terminal emulator (libvterm) fed with the
 * terminal's output, so that a client attaching again gets the screen as
 * it is, and GET .../screen the visible text and the cursor as a model
 * reads them. Lines scrolled off the top are kept up to a byte cap (the
 * scrollback); nothing else of the output is kept. Not thread-safe: the
 * terminal's lock guards it. */
#ifndef SANDMAN_TERMINAL_SCREEN_H
#define SANDMAN_TERMINAL_SCREEN_H

#include <stddef.h>

#include <json-c/json.h>

#include "common/buf.h"

typedef struct terminal_screen terminal_screen;

/* NULL when out of memory. scrollback_max: bytes of text kept of the lines
 * that left the screen. */
terminal_screen *terminal_screen_new(unsigned rows, unsigned cols, size_t scrollback_max);
void terminal_screen_free(terminal_screen *s);
/* The terminal's output. What the emulator answers (a cursor position
 * report asked by the program...) is appended to answers (capped), for
 * the caller to type back when no client of its own answers. */
void terminal_screen_feed(terminal_screen *s, const char *data, size_t len, common_buf *answers);
void terminal_screen_resize(terminal_screen *s, unsigned rows, unsigned cols);
/* {"rows", "cols", "cursor": {"row", "col", "visible"}, "alt_screen",
 * "title", "lines": [visible rows, trailing blanks trimmed], "text": the
 * rows joined with "\n" with trailing empty rows dropped, and, when
 * scrollback > 0, "scrollback": the last lines that left the screen}.
 * Rows and columns count from 0. */
json_object *terminal_screen_json(terminal_screen *s, size_t scrollback);
/* The visible text alone (as "text" above). */
int terminal_screen_text(terminal_screen *s, common_buf *out);
/* Bytes that draw the screen as it is on a terminal of its size: the
 * alternate screen when in use, every row with its colours and
 * attributes, the cursor and its visibility. */
int terminal_screen_redraw(terminal_screen *s, common_buf *out);

#endif
