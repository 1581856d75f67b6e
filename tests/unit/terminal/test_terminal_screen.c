/* A terminal's screen (src/lib/terminal/terminal_screen.c): what a model reads
 * (text, cursor), the redraw a client attaching again gets (fed to a second
 * screen it gives the same picture), the alternate screen, the scrollback's
 * cap, the emulator's answers to a program's questions, a resize. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "terminal/terminal_screen.h"

static void feed(terminal_screen *s, const char *text) {
  terminal_screen_feed(s, text, strlen(text), NULL);
}

static const char *json_str(json_object *o, const char *k) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static int cursor(json_object *o, const char *k) {
  json_object *c = NULL, *v = NULL;
  json_object_object_get_ex(o, "cursor", &c);
  json_object_object_get_ex(c, k, &v);
  return json_object_get_int(v);
}

static void test_text_and_cursor(void **state) {
  (void)state;
  terminal_screen *s = terminal_screen_new(5, 20, 1024);
  assert_non_null(s);
  assert_non_null(s);
  feed(s, "hello\r\n\033[1;31mred\033[0m x\r\n\xc3\xa9t\xc3\xa9 \xe4\xb8\xad  ");
  json_object *o = terminal_screen_json(s, 0);
  assert_string_equal(json_str(o, "text"), "hello\nred x\n\xc3\xa9t\xc3\xa9 \xe4\xb8\xad");
  assert_int_equal(cursor(o, "row"), 2);
  assert_int_equal(cursor(o, "col"), 8); /* the wide character takes two columns */
  json_object_put(o);
  /* Overwriting and erasing as a program does. */
  feed(s, "\033[1;1Hjello\033[2;1H\033[2K");
  common_buf b;
  common_buf_init(&b, 1 << 20);
  assert_int_equal(terminal_screen_text(s, &b), 0);
  assert_string_equal(b.data, "jello\n\n\xc3\xa9t\xc3\xa9 \xe4\xb8\xad");
  common_buf_dispose(&b);
  terminal_screen_free(s);
}

/* The redraw, played on a fresh screen of the same size, shows the same. */
static void test_redraw_reproduces_the_screen(void **state) {
  (void)state;
  terminal_screen *a = terminal_screen_new(6, 30, 0), *b = terminal_screen_new(6, 30, 0);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(a);
  feed(a,
       "line one\r\n\033[7mreverse\033[0m and \033[38;5;200mcolour\033[0m\r\n\033[?25l  indented");
  common_buf r;
  common_buf_init(&r, 1 << 20);
  assert_int_equal(terminal_screen_redraw(a, &r), 0);
  terminal_screen_feed(b, r.data, r.len, NULL);
  json_object *ja = terminal_screen_json(a, 0), *jb = terminal_screen_json(b, 0);
  assert_string_equal(json_str(ja, "text"), json_str(jb, "text"));
  assert_int_equal(cursor(ja, "row"), cursor(jb, "row"));
  assert_int_equal(cursor(ja, "col"), cursor(jb, "col"));
  json_object *c = NULL, *v = NULL;
  json_object_object_get_ex(jb, "cursor", &c);
  json_object_object_get_ex(c, "visible", &v);
  assert_false(json_object_get_boolean(v));
  json_object_put(ja);
  json_object_put(jb);
  common_buf_dispose(&r);
  terminal_screen_free(a);
  terminal_screen_free(b);
}

static void test_alternate_screen(void **state) {
  (void)state;
  terminal_screen *s = terminal_screen_new(4, 20, 1024);
  assert_non_null(s);
  feed(s, "shell prompt $ ");
  feed(s, "\033[?1049h\033[H\033[2Jeditor view");
  json_object *o = terminal_screen_json(s, 0);
  assert_string_equal(json_str(o, "text"), "editor view");
  json_object *alt = NULL;
  json_object_object_get_ex(o, "alt_screen", &alt);
  assert_true(json_object_get_boolean(alt));
  json_object_put(o);
  feed(s, "\033[?1049l");
  o = terminal_screen_json(s, 0);
  assert_string_equal(json_str(o, "text"), "shell prompt $");
  json_object_put(o);
  terminal_screen_free(s);
}

/* Lines that scroll off are kept up to the cap, the oldest dropped. */
static void test_scrollback_cap(void **state) {
  (void)state;
  terminal_screen *s = terminal_screen_new(3, 40, 100);
  assert_non_null(s);
  char line[64];
  for (int i = 0; i < 50; i++) {
    snprintf(line, sizeof line, "line %02d with some text\r\n", i);
    feed(s, line);
  }
  json_object *o = terminal_screen_json(s, 1000), *sb = NULL;
  assert_true(json_object_object_get_ex(o, "scrollback", &sb));
  size_t n = json_object_array_length(sb), bytes = 0;
  assert_true(n > 0);
  for (size_t i = 0; i < n; i++)
    bytes += strlen(json_object_get_string(json_object_array_get_idx(sb, i))) + 1;
  assert_true(bytes <= 100);
  /* The newest line that left the screen is the last one kept. */
  assert_string_equal(json_object_get_string(json_object_array_get_idx(sb, n - 1)),
                      "line 47 with some text");
  json_object_put(o);
  terminal_screen_free(s);
}

/* A program that asks where the cursor is gets the emulator's answer. */
static void test_answers(void **state) {
  (void)state;
  terminal_screen *s = terminal_screen_new(10, 40, 0);
  assert_non_null(s);
  common_buf ans;
  common_buf_init(&ans, 4096);
  const char *q = "ab\033[6n";
  terminal_screen_feed(s, q, strlen(q), &ans);
  assert_int_equal(ans.len, 6);
  assert_memory_equal(ans.data, "\033[1;3R", 6);
  common_buf_dispose(&ans);
  terminal_screen_free(s);
}

static void test_resize(void **state) {
  (void)state;
  terminal_screen *s = terminal_screen_new(5, 10, 0);
  assert_non_null(s);
  feed(s, "0123456789abc");
  terminal_screen_resize(s, 8, 40);
  json_object *o = terminal_screen_json(s, 0), *v = NULL;
  json_object_object_get_ex(o, "cols", &v);
  assert_int_equal(json_object_get_int(v), 40);
  json_object_object_get_ex(o, "rows", &v);
  assert_int_equal(json_object_get_int(v), 8);
  json_object_put(o);
  feed(s, "\r\n0123456789012345678901234567890123456789");
  common_buf b;
  common_buf_init(&b, 1 << 20);
  terminal_screen_text(s, &b);
  assert_non_null(strstr(b.data, "0123456789012345678901234567890123456789"));
  common_buf_dispose(&b);
  terminal_screen_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_text_and_cursor),  cmocka_unit_test(test_redraw_reproduces_the_screen),
      cmocka_unit_test(test_alternate_screen), cmocka_unit_test(test_scrollback_cap),
      cmocka_unit_test(test_answers),          cmocka_unit_test(test_resize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
