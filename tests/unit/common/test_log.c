/* The one escaping of log values (a table of inputs and what they become)
 * and the text and JSON lines built with it: nothing from outside can end a
 * line, fake another one or break the JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"
#include <json-c/json.h>

#include <sandman/sandman.h>

static const struct {
  const char *in;
  size_t len; /* 0: strlen(in) */
  const char *quoted; /* with SM_LOG_ESCAPE_QUOTES */
  const char *plain;  /* without */
} cases[] = {
    {"plain text", 0, "plain text", "plain text"},
    {"a\nb", 0, "a\\nb", "a\\nb"},
    {"a\r\nb\tc", 0, "a\\r\\nb\\tc", "a\\r\\nb\\tc"},
    {"say \"hi\" \\o/", 0, "say \\\"hi\\\" \\\\o/", "say \"hi\" \\o/"},
    {"bell\a esc\x1b[31m del\x7f", 0, "bell\\u0007 esc\\u001b[31m del\\u007f",
     "bell\\u0007 esc\\u001b[31m del\\u007f"},
    {"nul\0after", 9, "nul\\u0000after", "nul\\u0000after"},
    {"caf\xc3\xa9 \xe2\x9c\x93", 0, "caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93"},
    {"bad \xff byte", 0, "bad \\ufffd byte", "bad \\ufffd byte"},
    {"cut \xe2\x9c", 0, "cut \\ufffd\\ufffd", "cut \\ufffd\\ufffd"},
    {"overlong \xc0\xaf", 0, "overlong \\ufffd\\ufffd", "overlong \\ufffd\\ufffd"},
    {"surrogate \xed\xa0\x80", 0, "surrogate \\ufffd\\ufffd\\ufffd", "surrogate \\ufffd\\ufffd\\ufffd"},
    {"nel \xc2\x85 c1", 0, "nel \\u0085 c1", "nel \\u0085 c1"},
    {"ls \xe2\x80\xa8 ps \xe2\x80\xa9", 0, "ls \\u2028 ps \\u2029", "ls \\u2028 ps \\u2029"},
    {"bidi \xe2\x80\xae txt \xe2\x81\xa6", 0, "bidi \\u202e txt \\u2066", "bidi \\u202e txt \\u2066"},
    {"", 0, "", ""},
};

static void test_escape_table(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[256];
    size_t len = cases[i].len ? cases[i].len : strlen(cases[i].in);
    size_t n = sm_log_escape(out, sizeof out, cases[i].in, len, SM_LOG_ESCAPE_QUOTES);
    assert_string_equal(out, cases[i].quoted);
    assert_int_equal(n, strlen(cases[i].quoted));
    sm_log_escape(out, sizeof out, cases[i].in, len, 0);
    assert_string_equal(out, cases[i].plain);
    /* The quoted form is a JSON string body that decodes back (valid UTF-8 in). */
    char doc[300];
    sm_log_escape(out, sizeof out, cases[i].in, len, SM_LOG_ESCAPE_QUOTES);
    snprintf(doc, sizeof doc, "[\"%s\"]", out);
    json_object *j = json_tokener_parse(doc);
    assert_non_null(j);
    json_object_put(j);
  }
}

static void test_escape_never_cuts_an_escape(void **state) {
  (void)state;
  char out[8];
  /* "ab" + "\n" needs 4 bytes; with room for 3 the escape is left out whole. */
  size_t n = sm_log_escape(out, 4, "ab\n", 3, 0);
  assert_int_equal(n, 2);
  assert_string_equal(out, "ab");
  n = sm_log_escape(out, 3, "\xc3\xa9\xc3\xa9", 4, 0);
  assert_int_equal(n, 2);
  assert_string_equal(out, "\xc3\xa9");
  assert_int_equal(sm_log_escape(out, 0, "x", 1, 0), 0);
}

static sm_log_record record(const char *msg, const sm_log_field *f, size_t n) {
  sm_log_record r = {SM_LOG_WARN, 1700000000.25, "req-1", "workspace.conflict", msg, f, n};
  return r;
}

/* The forged line: a file name carrying a newline and a fake log line. */
#define FORGED "evil\n2099-01-01T00:00:00.000Z ERROR [admin] forged line"

static void test_text_line_cannot_be_forged(void **state) {
  (void)state;
  sm_log_field f[] = {SM_LOG_STR("path", FORGED), SM_LOG_INT("exit_code", 3),
                      SM_LOG_NUM("duration_ms", 2.5), SM_LOG_BOOL("timed_out", 0),
                      SM_LOG_STR("tool", "make"), SM_LOG_STR("none", NULL)};
  sm_log_record r = record("conflict on '" FORGED "'", f, 6);
  char line[1024];
  size_t n = sm_log_format_text(&r, line, sizeof line);
  assert_int_equal(n, strlen(line));
  assert_null(strchr(line, '\n'));
  assert_string_equal(
      line,
      "2023-11-14T22:13:20.250Z WARN [req-1] conflict on 'evil\\n2099-01-01T00:00:00.000Z ERROR "
      "[admin] forged line' event=workspace.conflict path=\"evil\\n2099-01-01T00:00:00.000Z "
      "ERROR [admin] forged line\" exit_code=3 duration_ms=2.5 timed_out=false tool=make");
}

static void test_json_line_fields(void **state) {
  (void)state;
  sm_log_field f[] = {SM_LOG_STR("path", FORGED), SM_LOG_INT("exit_code", 3),
                      SM_LOG_NUM("duration_ms", 2.5), SM_LOG_BOOL("timed_out", 1)};
  sm_log_record r = record("conflict \"x\"", f, 4);
  char line[1024];
  sm_log_format_json(&r, line, sizeof line);
  assert_null(strchr(line, '\n'));
  json_object *j = json_tokener_parse(line);
  assert_non_null(j);
  json_object *v;
  assert_true(json_object_object_get_ex(j, "time", &v));
  assert_string_equal(json_object_get_string(v), "2023-11-14T22:13:20.250Z");
  assert_true(json_object_object_get_ex(j, "level", &v));
  assert_string_equal(json_object_get_string(v), "warn");
  assert_true(json_object_object_get_ex(j, "request_id", &v));
  assert_string_equal(json_object_get_string(v), "req-1");
  assert_true(json_object_object_get_ex(j, "event", &v));
  assert_string_equal(json_object_get_string(v), "workspace.conflict");
  assert_true(json_object_object_get_ex(j, "msg", &v));
  assert_string_equal(json_object_get_string(v), "conflict \"x\"");
  assert_true(json_object_object_get_ex(j, "path", &v));
  assert_string_equal(json_object_get_string(v), FORGED);
  assert_true(json_object_object_get_ex(j, "exit_code", &v));
  assert_true(json_object_is_type(v, json_type_int));
  assert_int_equal(json_object_get_int(v), 3);
  assert_true(json_object_object_get_ex(j, "duration_ms", &v));
  assert_true(json_object_get_double(v) == 2.5);
  assert_true(json_object_object_get_ex(j, "timed_out", &v));
  assert_true(json_object_is_type(v, json_type_boolean));
  json_object_put(j);
}

static void test_long_lines_stay_lines(void **state) {
  (void)state;
  char big[6000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  big[100] = '\n';
  sm_log_field f[] = {SM_LOG_STR("a", big), SM_LOG_INT("exit_code", 1)};
  sm_log_record r = record(big, f, 2);
  char line[512];
  size_t n = sm_log_format_json(&r, line, sizeof line);
  assert_true(n < sizeof line);
  assert_null(strchr(line, '\n'));
  json_object *j = json_tokener_parse(line);
  assert_non_null(j); /* cut, and still one JSON object */
  json_object *v;
  assert_true(json_object_object_get_ex(j, "truncated", &v));
  json_object_put(j);
  n = sm_log_format_text(&r, line, sizeof line);
  assert_true(n < sizeof line);
  assert_null(strchr(line, '\n'));
  assert_string_equal(line + n - 3, "...");
}

static char seen[2048];
static void plain_handler(sm_log_level level, const char *rid, const char *msg, void *ud) {
  (void)level, (void)rid, (void)ud;
  snprintf(seen, sizeof seen, "%s", msg);
}

static void test_plain_handler_gets_escaped_lines(void **state) {
  (void)state;
  sm_log_set_handler(plain_handler, NULL);
  sm_log_set_level(SM_LOG_DEBUG);
  sm_log(SM_LOG_INFO, "file %s", FORGED);
  assert_null(strchr(seen, '\n'));
  sm_log_event(SM_LOG_INFO, "call.end", SM_LOG_FIELDS(SM_LOG_STR("tool", "a b"), SM_LOG_INT("exit_code", 0)),
               "done");
  assert_string_equal(seen, "done event=call.end tool=\"a b\" exit_code=0");
  sm_log_set_handler(NULL, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape_table),
      cmocka_unit_test(test_escape_never_cuts_an_escape),
      cmocka_unit_test(test_text_line_cannot_be_forged),
      cmocka_unit_test(test_json_line_fields),
      cmocka_unit_test(test_long_lines_stay_lines),
      cmocka_unit_test(test_plain_handler_gets_escaped_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
