/* The parser of `sandman-agent watch`'s output (src/lib/files/watch_wire.c):
 * events whole and fed one byte at a time, and the hard caps and
 * malformed output it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "files/watch_wire.h"

typedef struct seen {
  int ready;
  char log[4096];
  size_t n;
} seen;

static int on_ready(void *ud) {
  ((seen *)ud)->ready++;
  return 0;
}

static int on_event(void *ud, const sm_watch_event *ev) {
  seen *s = ud;
  s->n += (size_t)snprintf(s->log + s->n, sizeof s->log - s->n, "%c%d:%s>%s;", (char)ev->kind,
                           ev->is_dir, ev->path, ev->to ? ev->to : "-");
  return 0;
}

static const char STREAM[] = "ok\ne c 0 5 0\na.txte m 0 5 0\na.txt"
                             "e v 1 3 5\ndirdir.2e o 0 0 0\ne d 0 5 0\na.txtend 0 0\n";
static const char EXPECT[] = "c0:a.txt>-;m0:a.txt>-;v1:dir>dir.2;o0:>-;d0:a.txt>-;";

static void whole_and_bytewise(void **state) {
  (void)state;
  for (int bytewise = 0; bytewise < 2; bytewise++) {
    seen s;
    memset(&s, 0, sizeof s);
    watch_wire w;
    files_watch_wire_init(&w, on_ready, on_event, &s);
    sm_error err = SM_ERROR_INIT;
    size_t len = sizeof STREAM - 1;
    if (bytewise) {
      for (size_t i = 0; i < len; i++)
        assert_int_equal(files_watch_wire_feed(&w, STREAM + i, 1, &err), 0);
    } else {
      assert_int_equal(files_watch_wire_feed(&w, STREAM, len, &err), 0);
    }
    assert_int_equal(s.ready, 1);
    assert_string_equal(s.log, EXPECT);
    assert_true(w.ended);
    assert_false(w.failed);
  }
}

static void an_error_line(void **state) {
  (void)state;
  seen s;
  memset(&s, 0, sizeof s);
  watch_wire w;
  files_watch_wire_init(&w, on_ready, on_event, &s);
  sm_error err = SM_ERROR_INIT;
  const char in[] = "err ELOOP lnk: a symbolic link is on the way\n";
  assert_int_equal(files_watch_wire_feed(&w, in, sizeof in - 1, &err), 0);
  assert_true(w.failed);
  assert_string_equal(w.errname, "ELOOP");
  assert_string_equal(w.message, "lnk: a symbolic link is on the way");
  assert_int_equal(s.ready, 0);
}

/* Each is refused with SM_EPROTOCOL, nothing told after it. */
static void malformed_refused(void **state) {
  (void)state;
  char long_line[WATCH_WIRE_LINE_MAX + 8];
  memset(long_line, 'x', sizeof long_line);
  const struct {
    const char *in;
    size_t len;
  } bad[] = {
      {"e c 0 1 0\na", 10},            /* an event before "ok" */
      {"ok\ne c 0 5000 0\n", 16},      /* a path over SM_FILES_PATH_MAX */
      {"ok\ne c 0 0 0\n", 13},         /* a created event with no path */
      {"ok\ne v 0 1 0\na", 14},        /* a move with no destination */
      {"ok\ne o 0 1 0\na", 14},        /* an overflow with a path */
      {"ok\ne x 0 1 0\na", 14},        /* an unknown kind */
      {"ok\ne c 2 1 0\na", 14},        /* a bad folder flag */
      {"ok\ne c 0 -1 0\n", 14},        /* a negative length */
      {"ok\ne c 0 1\n", 11},           /* a field missing */
      {"ok\ne c 0 1 0 9\n", 15},       /* a field too many */
      {"ok\ne c 0 3 0\na\0b", 16},     /* a NUL in a path */
      {"ok\nend 0 0\ne o 0 0 0\n", 22}, /* output after the end */
      {"hello\n", 6},                  /* an unknown line */
      {"ok\nok\n", 6},                 /* "ok" twice */
      {long_line, sizeof long_line},   /* a line past the cap */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    seen s;
    memset(&s, 0, sizeof s);
    watch_wire w;
    files_watch_wire_init(&w, on_ready, on_event, &s);
    sm_error err = SM_ERROR_INIT;
    int rc = files_watch_wire_feed(&w, bad[i].in, bad[i].len, &err);
    if (rc != SM_EPROTOCOL) fail_msg("case %zu: %d, not SM_EPROTOCOL", i, rc);
    assert_int_equal(s.n, 0);
  }
}

/* A handler's refusal stops the parse with its code. */
static int refuse(void *ud) {
  (void)ud;
  return SM_EPOLICY;
}

static void handler_stops(void **state) {
  (void)state;
  watch_wire w;
  files_watch_wire_init(&w, refuse, on_event, NULL);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(files_watch_wire_feed(&w, "ok\ne c 0 1 0\na", 14, &err), SM_EPOLICY);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(whole_and_bytewise),
      cmocka_unit_test(an_error_line),
      cmocka_unit_test(malformed_refused),
      cmocka_unit_test(handler_stops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
