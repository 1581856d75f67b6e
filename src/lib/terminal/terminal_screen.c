/* A terminal's screen on the runner: libvterm fed with the output, a
 * capped scrollback of the lines that left it, and three ways to read it
 * (terminal_screen.h). */
#include "terminal/terminal_screen.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vterm.h>

#define ANSWERS_MAX 4096 /* the emulator's answers kept between two reads */

struct terminal_screen {
  VTerm *vt;
  VTermScreen *screen;
  unsigned rows, cols;
  int cursor_visible, alt_screen;
  char title[256];
  VTermScreenCell *row; /* one row's cells, read at a time */
  common_buf *answers;  /* during a feed only */
  /* the scrollback: a ring of lines, oldest at head */
  char **sb;
  size_t sb_cap, sb_head, sb_n, sb_bytes, sb_max;
};

/* ---- text of cells ---- */

static size_t put_utf8(char *out, uint32_t c) {
  if (c < 0x80) {
    out[0] = (char)c;
    return 1;
  }
  if (c < 0x800) {
    out[0] = (char)(0xc0 | (c >> 6));
    out[1] = (char)(0x80 | (c & 0x3f));
    return 2;
  }
  if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
  if (c < 0x10000) {
    out[0] = (char)(0xe0 | (c >> 12));
    out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[2] = (char)(0x80 | (c & 0x3f));
    return 3;
  }
  if (c > 0x10ffff) return put_utf8(out, 0xfffd);
  out[0] = (char)(0xf0 | (c >> 18));
  out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
  out[3] = (char)(0x80 | (c & 0x3f));
  return 4;
}

/* A cell's characters (a space when empty) appended to b. */
static int cell_text(common_buf *b, const VTermScreenCell *cell) {
  char u[4 * VTERM_MAX_CHARS_PER_CELL];
  size_t n = 0;
  for (int i = 0; i < VTERM_MAX_CHARS_PER_CELL && cell->chars[i]; i++) {
    /* A control character in a cell never reaches a reader. */
    uint32_t c = cell->chars[i] < 0x20 || cell->chars[i] == 0x7f ? 0xfffd : cell->chars[i];
    n += put_utf8(u + n, c);
  }
  if (n == 0) u[n++] = ' ';
  return common_buf_append(b, u, n);
}

/* The right half of a wide character (libvterm marks it so). */
static int continuation(const VTermScreenCell *c) {
  return c->width == 0 || c->chars[0] == (uint32_t)-1;
}

/* A row of cells as text, trailing blanks dropped. */
static int cells_text(common_buf *b, const VTermScreenCell *cells, int n) {
  size_t start = b->len, keep = b->len;
  for (int c = 0; c < n; c++) {
    if (continuation(&cells[c])) continue;
    if (cell_text(b, &cells[c]) != 0) return -1;
    if (cells[c].chars[0] && cells[c].chars[0] != ' ') keep = b->len;
  }
  (void)start;
  b->len = keep;
  if (b->data) b->data[b->len] = '\0';
  return 0;
}

/* Reads a visible row into s->row. */
static void read_row(terminal_screen *s, int row) {
  for (unsigned c = 0; c < s->cols; c++) {
    VTermPos pos = {row, (int)c};
    if (!vterm_screen_get_cell(s->screen, pos, &s->row[c])) memset(&s->row[c], 0, sizeof s->row[c]);
  }
}

static int row_text(terminal_screen *s, int row, common_buf *b) {
  read_row(s, row);
  return cells_text(b, s->row, (int)s->cols);
}

/* ---- the scrollback ---- */

static void sb_drop_oldest(terminal_screen *s) {
  char *old = s->sb[s->sb_head];
  s->sb_bytes -= strlen(old) + 1;
  free(old);
  s->sb_head = (s->sb_head + 1) % s->sb_cap;
  s->sb_n--;
}

static void sb_push(terminal_screen *s, char *line) {
  size_t need = strlen(line) + 1;
  if (s->sb_max == 0 || need > s->sb_max) {
    free(line);
    return;
  }
  while (s->sb_n > 0 && s->sb_bytes + need > s->sb_max) sb_drop_oldest(s);
  if (s->sb_n == s->sb_cap) {
    size_t cap = s->sb_cap ? s->sb_cap * 2 : 256;
    char **v = malloc(cap * sizeof *v);
    if (v == NULL) {
      free(line);
      return;
    }
    for (size_t i = 0; i < s->sb_n; i++) v[i] = s->sb[(s->sb_head + i) % s->sb_cap];
    free(s->sb);
    s->sb = v;
    s->sb_cap = cap;
    s->sb_head = 0;
  }
  s->sb[(s->sb_head + s->sb_n) % s->sb_cap] = line;
  s->sb_n++;
  s->sb_bytes += need;
}

/* ---- libvterm's callbacks ---- */

static int on_pushline(int cols, const VTermScreenCell *cells, void *user) {
  terminal_screen *s = user;
  common_buf b;
  common_buf_init(&b, (size_t)cols * 4 * VTERM_MAX_CHARS_PER_CELL + 1);
  if (cells_text(&b, cells, cols) == 0) {
    size_t n = 0;
    char *line = common_buf_steal(&b, &n);
    sb_push(s, line ? line : strdup(""));
  }
  common_buf_dispose(&b);
  return 1;
}

static int on_prop(VTermProp prop, VTermValue *val, void *user) {
  terminal_screen *s = user;
  if (prop == VTERM_PROP_CURSORVISIBLE) s->cursor_visible = val->boolean;
  else if (prop == VTERM_PROP_ALTSCREEN) s->alt_screen = val->boolean;
  else if (prop == VTERM_PROP_TITLE && val->string)
    snprintf(s->title, sizeof s->title, "%s", val->string);
  return 1;
}

static void on_output(const char *data, size_t len, void *user) {
  terminal_screen *s = user;
  if (s->answers) common_buf_append_capped(s->answers, data, len);
}

static const VTermScreenCallbacks callbacks = {
    .settermprop = on_prop,
    .sb_pushline = on_pushline,
};

terminal_screen *terminal_screen_new(unsigned rows, unsigned cols, size_t scrollback_max) {
  terminal_screen *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->vt = vterm_new((int)rows, (int)cols);
  if (s->vt == NULL) {
    free(s);
    return NULL;
  }
  s->rows = rows;
  s->cols = cols;
  s->row = calloc(cols, sizeof *s->row);
  if (s->row == NULL) {
    vterm_free(s->vt);
    free(s);
    return NULL;
  }
  s->sb_max = scrollback_max;
  s->cursor_visible = 1;
  vterm_set_utf8(s->vt, 1);
  vterm_output_set_callback(s->vt, on_output, s);
  s->screen = vterm_obtain_screen(s->vt);
  vterm_screen_set_callbacks(s->screen, &callbacks, s);
  vterm_screen_enable_altscreen(s->screen, 1);
  vterm_screen_reset(s->screen, 1);
  return s;
}

void terminal_screen_free(terminal_screen *s) {
  if (s == NULL) return;
  vterm_free(s->vt);
  free(s->row);
  while (s->sb_n > 0) sb_drop_oldest(s);
  free(s->sb);
  free(s);
}

void terminal_screen_feed(terminal_screen *s, const char *data, size_t len, common_buf *answers) {
  s->answers = answers;
  vterm_input_write(s->vt, data, len);
  s->answers = NULL;
}

void terminal_screen_resize(terminal_screen *s, unsigned rows, unsigned cols) {
  VTermScreenCell *row = realloc(s->row, cols * sizeof *row);
  if (row == NULL) return; /* the old size stays, as the emulator's */
  s->row = row;
  s->rows = rows;
  s->cols = cols;
  vterm_set_size(s->vt, (int)rows, (int)cols);
}

/* ---- reading it ---- */

/* The visible rows' text; *last: the last row that is not empty, -1. */
static json_object *rows_json(terminal_screen *s, int *last) {
  json_object *lines = json_object_new_array();
  *last = -1;
  common_buf b;
  common_buf_init(&b, (size_t)s->cols * 4 * VTERM_MAX_CHARS_PER_CELL + 1);
  for (unsigned r = 0; r < s->rows; r++) {
    common_buf_reset(&b);
    row_text(s, (int)r, &b);
    if (b.len) *last = (int)r;
    json_object_array_add(lines, json_object_new_string_len(b.data ? b.data : "", (int)b.len));
  }
  common_buf_dispose(&b);
  return lines;
}

int terminal_screen_text(terminal_screen *s, common_buf *out) {
  int last = -1;
  json_object *lines = rows_json(s, &last);
  int rc = 0;
  for (int r = 0; r <= last && rc == 0; r++) {
    const char *l = json_object_get_string(json_object_array_get_idx(lines, (size_t)r));
    rc = common_buf_append(out, l, strlen(l));
    if (rc == 0 && r < last) rc = common_buf_append(out, "\n", 1);
  }
  json_object_put(lines);
  return rc;
}

json_object *terminal_screen_json(terminal_screen *s, size_t scrollback) {
  json_object *o = json_object_new_object();
  VTermPos cur;
  vterm_state_get_cursorpos(vterm_obtain_state(s->vt), &cur);
  int last = -1;
  json_object *lines = rows_json(s, &last);
  common_buf text;
  common_buf_init(&text, (size_t)s->rows * (s->cols * 4 * VTERM_MAX_CHARS_PER_CELL + 1) + 1);
  for (int r = 0; r <= last; r++) {
    const char *l = json_object_get_string(json_object_array_get_idx(lines, (size_t)r));
    common_buf_append(&text, l, strlen(l));
    if (r < last) common_buf_append(&text, "\n", 1);
  }
  json_object *c = json_object_new_object();
  json_object_object_add(c, "row", json_object_new_int(cur.row));
  json_object_object_add(c, "col", json_object_new_int(cur.col));
  json_object_object_add(c, "visible", json_object_new_boolean(s->cursor_visible));
  json_object_object_add(o, "rows", json_object_new_int((int)s->rows));
  json_object_object_add(o, "cols", json_object_new_int((int)s->cols));
  json_object_object_add(o, "cursor", c);
  json_object_object_add(o, "alt_screen", json_object_new_boolean(s->alt_screen));
  json_object_object_add(o, "title", json_object_new_string(s->title));
  json_object_object_add(o, "text",
                         json_object_new_string_len(text.data ? text.data : "", (int)text.len));
  json_object_object_add(o, "lines", lines);
  common_buf_dispose(&text);
  if (scrollback > 0) {
    json_object *sb = json_object_new_array();
    size_t from = s->sb_n > scrollback ? s->sb_n - scrollback : 0;
    for (size_t i = from; i < s->sb_n; i++)
      json_object_array_add(sb, json_object_new_string(s->sb[(s->sb_head + i) % s->sb_cap]));
    json_object_object_add(o, "scrollback", sb);
  }
  return o;
}

/* ---- the redraw ---- */

static int color_sgr(common_buf *b, const VTermColor *col, int fg) {
  if (fg ? VTERM_COLOR_IS_DEFAULT_FG(col) : VTERM_COLOR_IS_DEFAULT_BG(col)) return 0;
  if (VTERM_COLOR_IS_INDEXED(col)) {
    unsigned i = col->indexed.idx;
    if (i < 8) return common_buf_printf(b, ";%u", (fg ? 30 : 40) + i);
    if (i < 16) return common_buf_printf(b, ";%u", (fg ? 90 : 100) + i - 8);
    return common_buf_printf(b, ";%u;5;%u", fg ? 38 : 48, i);
  }
  return common_buf_printf(b, ";%u;2;%u;%u;%u", fg ? 38 : 48, col->rgb.red, col->rgb.green,
                           col->rgb.blue);
}

/* The SGR sequence that sets exactly a cell's pen. */
static int pen_sgr(common_buf *b, const VTermScreenCell *c) {
  int rc = common_buf_append(b, "\033[0", 3);
  if (c->attrs.bold) rc = rc ? rc : common_buf_append(b, ";1", 2);
  if (c->attrs.italic) rc = rc ? rc : common_buf_append(b, ";3", 2);
  if (c->attrs.underline) rc = rc ? rc : common_buf_append(b, ";4", 2);
  if (c->attrs.blink) rc = rc ? rc : common_buf_append(b, ";5", 2);
  if (c->attrs.reverse) rc = rc ? rc : common_buf_append(b, ";7", 2);
  if (c->attrs.strike) rc = rc ? rc : common_buf_append(b, ";9", 2);
  if (rc == 0) rc = color_sgr(b, &c->fg, 1);
  if (rc == 0) rc = color_sgr(b, &c->bg, 0);
  return rc ? rc : common_buf_append(b, "m", 1);
}

static int same_pen(const VTermScreenCell *a, const VTermScreenCell *b) {
  return memcmp(&a->attrs, &b->attrs, sizeof a->attrs) == 0 &&
         vterm_color_is_equal(&a->fg, &b->fg) && vterm_color_is_equal(&a->bg, &b->bg) &&
         VTERM_COLOR_IS_DEFAULT_FG(&a->fg) == VTERM_COLOR_IS_DEFAULT_FG(&b->fg) &&
         VTERM_COLOR_IS_DEFAULT_BG(&a->bg) == VTERM_COLOR_IS_DEFAULT_BG(&b->bg);
}

static int plain(const VTermScreenCell *c) {
  VTermScreenCellAttrs none;
  memset(&none, 0, sizeof none);
  return (c->chars[0] == 0 || c->chars[0] == ' ') && memcmp(&c->attrs, &none, sizeof none) == 0 &&
         VTERM_COLOR_IS_DEFAULT_BG(&c->bg);
}

static int redraw_row(terminal_screen *s, int row, common_buf *b, VTermScreenCell *pen,
                      int *have_pen) {
  read_row(s, row);
  const VTermScreenCell *cells = s->row;
  int end = 0;
  for (unsigned c = 0; c < s->cols; c++)
    if (!plain(&cells[c])) end = (int)c + 1;
  int rc = end ? common_buf_printf(b, "\033[%d;1H", row + 1) : 0;
  for (int c = 0; c < end && rc == 0; c++) {
    if (continuation(&cells[c])) continue;
    if (!*have_pen || !same_pen(&cells[c], pen)) {
      rc = pen_sgr(b, &cells[c]);
      *pen = cells[c];
      *have_pen = 1;
    }
    if (rc == 0) rc = cell_text(b, &cells[c]);
  }
  return rc;
}

int terminal_screen_redraw(terminal_screen *s, common_buf *out) {
  int rc = common_buf_printf(out, "\033[0m%s\033[H\033[2J", s->alt_screen ? "\033[?1049h" : "");
  VTermScreenCell pen;
  memset(&pen, 0, sizeof pen);
  int have_pen = 0;
  for (unsigned r = 0; r < s->rows && rc == 0; r++)
    rc = redraw_row(s, (int)r, out, &pen, &have_pen);
  VTermPos cur;
  vterm_state_get_cursorpos(vterm_obtain_state(s->vt), &cur);
  if (rc == 0)
    rc = common_buf_printf(out, "\033[0m\033[%d;%dH\033[?25%c", cur.row + 1, cur.col + 1,
                           s->cursor_visible ? 'h' : 'l');
  return rc;
}
