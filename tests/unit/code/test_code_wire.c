/* The parser of the code driver's answers (src/lib/code/code_wire.c): what a
 * hostile sandbox could send, against the caps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "code/code_wire.h"

#include "support/xalloc.h"

typedef struct seen {
  int n[SM_CODE_EV_END + 1];
  char out[4096];
  size_t out_len;
  char mimes[512];
  char status[16];
  char error_name[64];
  int stop_at; /* stop (-1) when this many events came; 0: never */
  int total;
} seen;

static int on_event(void *ud, const sm_code_event *ev) {
  seen *s = ud;
  s->n[ev->type]++;
  s->total++;
  if (ev->type == SM_CODE_EV_STDOUT && s->out_len + ev->text_len < sizeof s->out) {
    memcpy(s->out + s->out_len, ev->text, ev->text_len);
    s->out_len += ev->text_len;
  }
  if (ev->type == SM_CODE_EV_DISPLAY || ev->type == SM_CODE_EV_RESULT) {
    json_object_object_foreach(ev->data, key, val) {
      (void)val;
      strncat(s->mimes, key, sizeof s->mimes - strlen(s->mimes) - 2);
      strncat(s->mimes, ",", sizeof s->mimes - strlen(s->mimes) - 1);
    }
  }
  if (ev->type == SM_CODE_EV_END) snprintf(s->status, sizeof s->status, "%s", ev->status);
  if (ev->type == SM_CODE_EV_ERROR) snprintf(s->error_name, sizeof s->error_name, "%s", ev->name);
  return s->stop_at && s->total >= s->stop_at ? SM_ECANCELLED : 0;
}

/* Feeds text in pieces of step bytes (0: whole) and finishes. */
static int feed(code_wire *w, const char *text, size_t step, sm_error *err) {
  size_t len = strlen(text);
  for (size_t off = 0; off < len;) {
    size_t n = step == 0 || len - off < step ? len - off : step;
    int rc = code_wire_feed(w, text + off, n, err);
    if (rc) return rc;
    off += n;
  }
  return code_wire_finish(w, err);
}

static int run_text(const char *text, size_t max, size_t step, seen *s, code_wire *w, sm_error *err) {
  code_wire_init(w, CODE_WIRE_RUN, max, on_event, s);
  return feed(w, text, step, err);
}

#define RUN_OK                                                                               \
  "{\"event\":\"start\",\"context\":\"default\"}\n"                                            \
  "{\"event\":\"stdout\",\"text\":\"hi \\u00e9\\n\"}\n"                                        \
  "{\"event\":\"display\",\"data\":{\"text/plain\":\"<Figure>\",\"image/png\":\"iVBOR\","     \
  "\"application/x-evil\":\"dropped\"}}\n"                                                     \
  "{\"event\":\"result\",\"data\":{\"text/plain\":\"42\",\"application/json\":{\"a\":[1]}},"  \
  "\"execution_count\":3}\n"                                                                   \
  "{\"event\":\"end\",\"status\":\"ok\",\"execution_count\":3,\"duration_ms\":4.5}\n"

static void a_run_in_any_pieces(void **state) {
  (void)state;
  size_t steps[] = {0, 1, 2, 7, 64};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    seen s;
    memset(&s, 0, sizeof s);
    code_wire w;
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(run_text(RUN_OK, 0, steps[i], &s, &w, &err), 0);
    assert_int_equal(s.n[SM_CODE_EV_START], 1);
    assert_int_equal(s.n[SM_CODE_EV_DISPLAY], 1);
    assert_int_equal(s.n[SM_CODE_EV_RESULT], 1);
    assert_string_equal(s.status, "ok");
    assert_int_equal(s.out_len, strlen("hi \xc3\xa9\n"));
    assert_memory_equal(s.out, "hi \xc3\xa9\n", s.out_len);
    /* The unknown type is dropped, the known ones kept. */
    assert_null(strstr(s.mimes, "evil"));
    assert_non_null(strstr(s.mimes, "image/png"));
    assert_non_null(strstr(s.mimes, "application/json"));
    assert_int_equal(w.end.execution_count, 3);
    assert_string_equal(w.end.status, "ok");
    code_wire_dispose(&w);
  }
}

static void output_is_capped_here(void **state) {
  (void)state;
  /* The driver claims no truncation; the host's cap holds anyway. */
  const char *text =
      "{\"event\":\"start\"}\n"
      "{\"event\":\"stdout\",\"text\":\"0123456789\"}\n"
      "{\"event\":\"stdout\",\"text\":\"0123456789\"}\n"
      "{\"event\":\"result\",\"data\":{\"text/plain\":\"0123456789\"}}\n"
      "{\"event\":\"stdout\",\"text\":\"x\"}\n"
      "{\"event\":\"end\",\"status\":\"ok\"}\n";
  seen s;
  memset(&s, 0, sizeof s);
  code_wire w;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(run_text(text, 15, 0, &s, &w, &err), 0);
  assert_int_equal(s.out_len, 10);
  assert_int_equal(s.n[SM_CODE_EV_TRUNCATED], 1);
  assert_int_equal(s.n[SM_CODE_EV_RESULT], 0);
  assert_int_equal(w.end.truncated, 1);
  code_wire_dispose(&w);
}

static void bad_lines_are_protocol_errors(void **state) {
  (void)state;
  const char *bad[] = {
      "not json\n",
      "[1,2]\n",
      "{\"event\":\"start\"} trailing\n",
      "{\"event\":\"start\",\"event\":\"end\"}\n",                       /* a repeated key */
      "{\"event\":\"stdout\",\"text\":\"before start\"}\n",
      "{\"event\":\"start\"}\n{\"event\":\"start\"}\n",                   /* a second start */
      "{\"event\":\"start\"}\n{\"event\":\"stdout\",\"text\":5}\n",
      "{\"event\":\"start\"}\n{\"event\":\"display\",\"data\":{\"image/png\":5}}\n",
      "{\"event\":\"start\"}\n{\"event\":\"display\",\"data\":\"x\"}\n",
      "{\"event\":\"start\"}\n{\"event\":\"error\",\"value\":\"no name\"}\n",
      "{\"event\":\"start\"}\n{\"event\":\"end\",\"status\":\"won\"}\n",
      "{\"event\":\"start\"}\n{\"event\":\"end\",\"status\":\"ok\",\"duration_ms\":-1}\n",
      "{\"event\":\"start\"}\n{\"event\":\"end\",\"status\":\"ok\",\"execution_count\":\"3\"}\n",
      "{\"event\":\"start\"}\n{\"event\":\"mystery\"}\n",
      "{\"event\":\"start\"}\n{\"event\":\"end\",\"status\":\"ok\"}\n{\"event\":\"start\"}\n",
      "{\"event\":\"start\"}\n{\"event\":\"stdout\",\"text\":\"\xff\xfe\"}\n", /* not UTF-8 */
      "{\"event\":\"start\"}\n",                                          /* no end */
      "{\"event\":\"start\"}\n{\"event\":\"end\",\"status\":\"ok\"}",     /* cut line */
      "{\"event\":\"context\",\"name\":\"x\"}\n",                         /* not a run's */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    seen s;
    memset(&s, 0, sizeof s);
    code_wire w;
    sm_error err = SM_ERROR_INIT;
    int rc = run_text(bad[i], 0, 0, &s, &w, &err);
    if (rc != SM_EPROTOCOL) fail_msg("case %zu: rc %d (%s)", i, rc, err.message);
    code_wire_dispose(&w);
  }
}

static void a_line_over_the_cap(void **state) {
  (void)state;
  size_t n = SM_CODE_LINE_MAX + 10;
  char *line = xmalloc(n + 1);
  assert_non_null(line);
  memset(line, 'a', n);
  line[n] = '\0';
  seen s;
  memset(&s, 0, sizeof s);
  code_wire w;
  code_wire_init(&w, CODE_WIRE_RUN, 0, on_event, &s);
  sm_error err = SM_ERROR_INIT;
  int rc = 0;
  for (size_t off = 0; rc == 0 && off < n; off += 1 << 20)
    rc = code_wire_feed(&w, line + off, n - off < (1u << 20) ? n - off : 1u << 20, &err);
  assert_int_equal(rc, SM_EPROTOCOL);
  assert_true(w.line.len <= SM_CODE_LINE_MAX);
  code_wire_dispose(&w);
  free(line);
}

static void a_handler_stops_the_feed(void **state) {
  (void)state;
  seen s;
  memset(&s, 0, sizeof s);
  s.stop_at = 2;
  code_wire w;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(run_text(RUN_OK, 0, 0, &s, &w, &err), SM_ECANCELLED);
  assert_int_equal(s.total, 2);
  code_wire_dispose(&w);
}

static void fail_answers_map_to_errors(void **state) {
  (void)state;
  static const struct {
    const char *code;
    int rc;
  } cases[] = {{"not_found", SM_ENOTFOUND}, {"exists", SM_ECONFLICT}, {"no_kernel", SM_EINVAL},
               {"limit", SM_EBUSY}, {"start_failed", SM_ESANDBOX}, {"whatever", SM_ESANDBOX}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "{\"event\":\"fail\",\"code\":\"%s\",\"message\":\"m %zu\"}\n",
             cases[i].code, i);
    code_wire w;
    code_wire_init(&w, i % 2 ? CODE_WIRE_RUN : CODE_WIRE_ONE, 0, NULL, NULL);
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(feed(&w, text, 0, &err), 0);
    assert_string_equal(code_wire_fail_code(&w), cases[i].code);
    assert_int_equal(code_wire_fail_error(&w, &err), cases[i].rc);
    assert_non_null(strstr(err.message, "m "));
    code_wire_dispose(&w);
  }
}

/* The driver may fail a run after it started (an internal error): the
 * failure is the run's error, not a protocol error. */
static void a_failure_after_the_start(void **state) {
  (void)state;
  seen s;
  memset(&s, 0, sizeof s);
  code_wire w;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(run_text("{\"event\":\"start\"}\n{\"event\":\"stdout\",\"text\":\"a\"}\n"
                            "{\"event\":\"fail\",\"code\":\"internal\",\"message\":\"boom\"}\n",
                            0, 0, &s, &w, &err),
                   0);
  assert_string_equal(code_wire_fail_code(&w), "internal");
  assert_int_equal(code_wire_fail_error(&w, &err), SM_ESANDBOX);
  assert_string_equal(err.message, "boom");
  assert_int_equal(s.n[SM_CODE_EV_STDOUT], 1);
  code_wire_dispose(&w);
}

static void a_context_answer(void **state) {
  (void)state;
  const char *text =
      "{\"event\":\"context\",\"name\":\"data\",\"kernel\":\"python3\",\"language\":\"python\","
      "\"cwd\":\"/workspace\",\"state\":\"idle\",\"execution_count\":2,\"created_at\":1.5,"
      "\"last_run_at\":null,\"queued\":0}\n";
  code_wire w;
  code_wire_init(&w, CODE_WIRE_ONE, 0, NULL, NULL);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(feed(&w, text, 3, &err), 0);
  sm_code_context c;
  assert_int_equal(code_context_from_json(w.answer, &c, &err), 0);
  assert_string_equal(c.name, "data");
  assert_int_equal(c.execution_count, 2);
  json_object *o = sm_code_context_to_json(&c);
  assert_string_equal(json_object_get_string(json_object_object_get(o, "state")), "idle");
  json_object_put(o);
  code_wire_dispose(&w);
  /* A bad name in a context answer is refused. */
  code_wire_init(&w, CODE_WIRE_ONE, 0, NULL, NULL);
  assert_int_equal(feed(&w, "{\"event\":\"context\",\"name\":\"../x\",\"kernel\":\"k\","
                            "\"state\":\"idle\"}\n", 0, &err), 0);
  assert_int_equal(code_context_from_json(w.answer, &c, &err), SM_EPROTOCOL);
  code_wire_dispose(&w);
}

static void names(void **state) {
  (void)state;
  assert_true(sm_code_name_valid("default"));
  assert_true(sm_code_name_valid("a.b_c-1"));
  assert_false(sm_code_name_valid(""));
  assert_false(sm_code_name_valid(".x"));
  assert_false(sm_code_name_valid("-x"));
  assert_false(sm_code_name_valid("a/b"));
  assert_false(sm_code_name_valid("a b"));
  char longer[SM_CODE_NAME_MAX + 2];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  assert_false(sm_code_name_valid(longer));
  longer[SM_CODE_NAME_MAX] = '\0';
  assert_true(sm_code_name_valid(longer));
}

static void an_execution_like_e2b(void **state) {
  (void)state;
  sm_code_execution *x = sm_code_execution_new(0);
  assert_non_null(x);
  code_wire w;
  code_wire_init(&w, CODE_WIRE_RUN, 0, sm_code_execution_add, x);
  sm_error err = SM_ERROR_INIT;
  const char *text =
      "{\"event\":\"restarted\",\"reason\":\"the kernel died\"}\n"
      "{\"event\":\"start\"}\n"
      "{\"event\":\"stdout\",\"text\":\"a\"}\n"
      "{\"event\":\"stderr\",\"text\":\"b\"}\n"
      "{\"event\":\"display\",\"data\":{\"image/png\":\"iVBOR\",\"text/plain\":\"<Figure>\"}}\n"
      "{\"event\":\"error\",\"name\":\"ValueError\",\"value\":\"v\",\"traceback\":\"tb\"}\n"
      "{\"event\":\"end\",\"status\":\"error\",\"execution_count\":1,\"duration_ms\":2}\n";
  assert_int_equal(feed(&w, text, 5, &err), 0);
  json_object *o = sm_code_execution_to_json(x, &w.end);
  const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  assert_non_null(strstr(s, "\"results\":[{\"text\":\"<Figure>\",\"png\":\"iVBOR\",\"is_main_result\":false}]"));
  assert_non_null(strstr(s, "\"logs\":{\"stdout\":[\"a\"],\"stderr\":[\"b\"]}"));
  assert_non_null(strstr(s, "\"error\":{\"name\":\"ValueError\",\"value\":\"v\",\"traceback\":\"tb\"}"));
  assert_non_null(strstr(s, "\"state_lost\":\"the kernel died\""));
  assert_non_null(strstr(s, "\"status\":\"error\""));
  json_object_put(o);
  code_wire_dispose(&w);
  sm_code_execution_free(x);
}

/* Leased credentials never reach a context: refused before any call (no
 * runner is needed to see it). */
static void a_lease_never_enters_a_context(void **state) {
  (void)state;
  const char *secret[] = {"GH_TOKEN=abc123"};
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = SM_MODE_PER_RUN;
  req.run_id = "r1";
  req.secret_env = secret;
  req.n_secret_env = 1;
  sm_code_run_end end;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_code_run(NULL, &req, NULL, "1", NULL, &end, NULL, &err), SM_EPOLICY);
  assert_non_null(strstr(err.message, "leased credentials never enter a code context"));
  sm_code_context c;
  assert_int_equal(sm_code_create(NULL, &req, "x", NULL, &c, NULL, &err), SM_EPOLICY);
  sm_code_context_list l;
  assert_int_equal(sm_code_list(NULL, &req, &l, NULL, &err), SM_EPOLICY);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_run_in_any_pieces),
      cmocka_unit_test(output_is_capped_here),
      cmocka_unit_test(bad_lines_are_protocol_errors),
      cmocka_unit_test(a_line_over_the_cap),
      cmocka_unit_test(a_handler_stops_the_feed),
      cmocka_unit_test(fail_answers_map_to_errors),
      cmocka_unit_test(a_failure_after_the_start),
      cmocka_unit_test(a_context_answer),
      cmocka_unit_test(names),
      cmocka_unit_test(an_execution_like_e2b),
      cmocka_unit_test(a_lease_never_enters_a_context),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
