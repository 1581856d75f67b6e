/* The agent protocol's codec: headers, the incremental reader whatever the
 * read sizes, the caps, and splitting a call frame. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "agent/frame.h"

#define MAX_SEEN 16

typedef struct seen {
  int n;
  int type[MAX_SEEN];
  uint32_t id[MAX_SEEN], len[MAX_SEEN];
  unsigned char data[MAX_SEEN][256];
  int stop_at; /* return 7 from this frame on (1-based), 0 never */
} seen;

static int collect(void *ud, int type, uint32_t id, const unsigned char *payload, uint32_t len) {
  seen *s = ud;
  assert_non_null(payload);
  assert_true(s->n < MAX_SEEN);
  assert_true(len <= sizeof s->data[0]);
  s->type[s->n] = type;
  s->id[s->n] = id;
  s->len[s->n] = len;
  memcpy(s->data[s->n], payload, len);
  s->n++;
  return s->stop_at && s->n >= s->stop_at ? 7 : 0;
}

static size_t put(unsigned char *out, int type, uint32_t id, const void *payload, uint32_t len) {
  agent_frame_header(out, type, id, len);
  if (len) memcpy(out + SM_FRAME_HEADER, payload, len);
  return SM_FRAME_HEADER + len;
}

static void test_header_round_trip(void **state) {
  (void)state;
  unsigned char h[SM_FRAME_HEADER];
  agent_frame_header(h, SM_FRAME_STDOUT, 0x01020304u, 0xa0b0c0d0u);
  const unsigned char want[SM_FRAME_HEADER] = {'O', 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0};
  assert_memory_equal(h, want, sizeof want);

  unsigned char buf[64];
  size_t n = put(buf, SM_FRAME_EXIT, 0xfffffffeu, "\0\0\0\x89", 4);
  seen s = {0};
  agent_frame_reader r;
  agent_frame_reader_init(&r, SM_FRAME_CALL_MAX, collect, &s);
  assert_true(agent_frame_reader_idle(&r));
  assert_int_equal(agent_frame_reader_feed(&r, buf, n), 0);
  assert_true(agent_frame_reader_idle(&r));
  assert_int_equal(s.n, 1);
  assert_int_equal(s.type[0], SM_FRAME_EXIT);
  assert_int_equal(s.id[0], 0xfffffffeu);
  assert_int_equal(s.len[0], 4);
  assert_memory_equal(s.data[0], "\0\0\0\x89", 4);
  agent_frame_reader_dispose(&r);
}

#define FAIL_MSG "\0\0\0\2exec /x: No such file"

/* A stream of several frames, including empty ones. */
static size_t sample_stream(unsigned char *buf) {
  static const char call[] = "/workspace\0" "2\0" "/bin/sh\0" "-c\0" "X=1";
  size_t n = 0;
  n += put(buf + n, SM_FRAME_CALL, 1, call, sizeof call);
  n += put(buf + n, SM_FRAME_STDIN, 1, "hello", 5);
  n += put(buf + n, SM_FRAME_STDIN, 1, "", 0);
  n += put(buf + n, SM_FRAME_EOF, 1, "", 0);
  n += put(buf + n, SM_FRAME_STDOUT, 1, "out\n", 4);
  n += put(buf + n, SM_FRAME_STDERR, 1, "err\n", 4);
  n += put(buf + n, SM_FRAME_EXIT, 1, "\0\0\0\3", 4);
  n += put(buf + n, SM_FRAME_FAIL, 2, FAIL_MSG, sizeof FAIL_MSG - 1);
  n += put(buf + n, SM_FRAME_HELLO, 0, SM_AGENT_HELLO, sizeof SM_AGENT_HELLO - 1);
  return n;
}

static void check_sample(const seen *s) {
  static const char call[] = "/workspace\0" "2\0" "/bin/sh\0" "-c\0" "X=1";
  const int types[] = {SM_FRAME_CALL,   SM_FRAME_STDIN,  SM_FRAME_STDIN,
                       SM_FRAME_EOF,    SM_FRAME_STDOUT, SM_FRAME_STDERR,
                       SM_FRAME_EXIT,   SM_FRAME_FAIL,   SM_FRAME_HELLO};
  assert_int_equal(s->n, 9);
  for (int i = 0; i < 9; i++) assert_int_equal(s->type[i], types[i]);
  assert_int_equal(s->len[0], sizeof call);
  assert_memory_equal(s->data[0], call, sizeof call);
  assert_int_equal(s->len[1], 5);
  assert_memory_equal(s->data[1], "hello", 5);
  assert_int_equal(s->len[2], 0);
  assert_int_equal(s->len[3], 0);
  assert_memory_equal(s->data[5], "err\n", 4);
  assert_int_equal(s->id[7], 2);
  assert_int_equal(s->len[7], sizeof FAIL_MSG - 1);
  assert_memory_equal(s->data[7], FAIL_MSG, sizeof FAIL_MSG - 1);
  assert_int_equal(s->id[8], 0);
  assert_memory_equal(s->data[8], SM_AGENT_HELLO, sizeof SM_AGENT_HELLO - 1);
}

static void test_split_at_every_byte(void **state) {
  (void)state;
  unsigned char buf[512];
  size_t n = sample_stream(buf);
  /* Whole, then two pieces cut at every offset. */
  for (size_t cut = 0; cut <= n; cut++) {
    seen s = {0};
    agent_frame_reader r;
    agent_frame_reader_init(&r, SM_FRAME_CALL_MAX, collect, &s);
    assert_int_equal(agent_frame_reader_feed(&r, buf, cut), 0);
    assert_int_equal(agent_frame_reader_feed(&r, buf + cut, n - cut), 0);
    assert_true(agent_frame_reader_idle(&r));
    check_sample(&s);
    agent_frame_reader_dispose(&r);
  }
  /* One byte at a time: idle exactly at frame boundaries. */
  seen s = {0};
  agent_frame_reader r;
  agent_frame_reader_init(&r, SM_FRAME_CALL_MAX, collect, &s);
  for (size_t i = 0; i < n; i++) {
    int before = s.n;
    assert_int_equal(agent_frame_reader_feed(&r, buf + i, 1), 0);
    if (s.n == before) assert_false(agent_frame_reader_idle(&r));
  }
  assert_true(agent_frame_reader_idle(&r));
  check_sample(&s);
  /* A partial frame held at dispose is freed (checked under ASan). */
  assert_int_equal(agent_frame_reader_feed(&r, buf, 12), 0);
  assert_false(agent_frame_reader_idle(&r));
  agent_frame_reader_dispose(&r);
  assert_true(agent_frame_reader_idle(&r));
}

static void test_zero_length_frames(void **state) {
  (void)state;
  unsigned char buf[64];
  size_t n = put(buf, SM_FRAME_EOF, 5, "", 0);
  n += put(buf + n, SM_FRAME_EOF, 6, "", 0);
  n += put(buf + n, SM_FRAME_STDOUT, 7, "", 0);
  seen s = {0};
  agent_frame_reader r;
  agent_frame_reader_init(&r, SM_FRAME_CALL_MAX, collect, &s);
  assert_int_equal(agent_frame_reader_feed(&r, buf, n), 0);
  assert_int_equal(s.n, 3);
  assert_int_equal(s.id[0], 5);
  assert_int_equal(s.id[1], 6);
  assert_int_equal(s.type[2], SM_FRAME_STDOUT);
  assert_int_equal(s.len[2], 0);
  agent_frame_reader_dispose(&r);
}

static int feed_one(int type, uint32_t len, uint32_t max_len) {
  unsigned char h[SM_FRAME_HEADER];
  agent_frame_header(h, type, 1, len);
  seen s = {0};
  agent_frame_reader r;
  agent_frame_reader_init(&r, max_len, collect, &s);
  int rc = agent_frame_reader_feed(&r, h, sizeof h);
  agent_frame_reader_dispose(&r);
  if (rc != 0) assert_int_equal(s.n, 0);
  return rc;
}

static void test_caps_and_types(void **state) {
  (void)state;
  assert_int_equal(feed_one(SM_FRAME_STDIN, SM_FRAME_DATA_MAX, SM_FRAME_CALL_MAX), 0);
  assert_int_equal(feed_one(SM_FRAME_STDIN, SM_FRAME_DATA_MAX + 1, SM_FRAME_CALL_MAX), -1);
  assert_int_equal(feed_one(SM_FRAME_STDOUT, SM_FRAME_DATA_MAX + 1, SM_FRAME_CALL_MAX), -1);
  assert_int_equal(feed_one(SM_FRAME_EOF, 1, SM_FRAME_CALL_MAX), -1);
  assert_int_equal(feed_one(SM_FRAME_EXIT, 5, SM_FRAME_CALL_MAX), -1);
  assert_int_equal(feed_one(SM_FRAME_FAIL, 4097, SM_FRAME_CALL_MAX), -1);
  assert_int_equal(feed_one(SM_FRAME_CALL, SM_FRAME_CALL_MAX, SM_FRAME_CALL_MAX), 0);
  assert_int_equal(feed_one(SM_FRAME_CALL, SM_FRAME_CALL_MAX + 1, UINT32_MAX), -1);
  assert_int_equal(feed_one(SM_FRAME_CALL, 0xffffffffu, UINT32_MAX), -1);
  /* The reader's own cap is tighter than the type's. */
  assert_int_equal(feed_one(SM_FRAME_CALL, 101, 100), -1);
  assert_int_equal(feed_one(SM_FRAME_CALL, 100, 100), 0);
  assert_int_equal(feed_one('j', 0, SM_FRAME_CALL_MAX), -1); /* no frame has type 'j' */
  assert_int_equal(feed_one(0, 0, SM_FRAME_CALL_MAX), -1);
  assert_int_equal(feed_one('c', 1, SM_FRAME_CALL_MAX), -1);
  assert_int_equal(agent_frame_type_max('j'), 0);
  /* A not-after time is 8 bytes (a u64), no more. */
  assert_int_equal(feed_one(SM_FRAME_NOT_AFTER, 8, SM_FRAME_CALL_MAX), 0);
  assert_int_equal(feed_one(SM_FRAME_NOT_AFTER, 9, SM_FRAME_CALL_MAX), -1);
  unsigned char u[8];
  agent_frame_put_u64(u, 0x0102030405060708ull);
  assert_int_equal(u[0], 1);
  assert_int_equal(u[7], 8);
  assert_true(agent_frame_get_u64(u) == 0x0102030405060708ull);
  assert_int_equal(agent_frame_type_max(SM_FRAME_EOF), 0);
  assert_int_equal(agent_frame_type_max(SM_FRAME_EXIT), 4);
}

static void test_callback_stops_reading(void **state) {
  (void)state;
  unsigned char buf[512];
  size_t n = sample_stream(buf);
  seen s = {.stop_at = 2};
  agent_frame_reader r;
  agent_frame_reader_init(&r, SM_FRAME_CALL_MAX, collect, &s);
  assert_int_equal(agent_frame_reader_feed(&r, buf, n), 7);
  assert_int_equal(s.n, 2);
  agent_frame_reader_dispose(&r);
  /* Also when the stopping frame is empty (delivered from the header). */
  seen z = {.stop_at = 1};
  unsigned char two[2 * SM_FRAME_HEADER];
  put(two, SM_FRAME_EOF, 1, "", 0);
  put(two + SM_FRAME_HEADER, SM_FRAME_EOF, 2, "", 0);
  agent_frame_reader_init(&r, SM_FRAME_CALL_MAX, collect, &z);
  assert_int_equal(agent_frame_reader_feed(&r, two, sizeof two), 7);
  assert_int_equal(z.n, 1);
  agent_frame_reader_dispose(&r);
}

static int parse(const void *src, uint32_t len, size_t max_argv, size_t max_env, size_t *argc,
                 size_t *envc, char **argv, char **env, const char **cwd, unsigned char *copy) {
  if (len) memcpy(copy, src, len);
  return agent_frame_parse_call(copy, len, cwd, argv, max_argv, argc, env, max_env, envc);
}

static void test_parse_call_good(void **state) {
  (void)state;
  unsigned char copy[256];
  char *argv[8], *env[8];
  const char *cwd;
  size_t argc, envc;
  static const char full[] = "/workspace\0" "3\0" "/bin/sh\0" "-c\0" "\0" "A=1\0" "B=";
  assert_int_equal(parse(full, sizeof full, 7, 7, &argc, &envc, argv, env, &cwd, copy), 0);
  assert_string_equal(cwd, "/workspace");
  assert_int_equal(argc, 3);
  assert_string_equal(argv[0], "/bin/sh");
  assert_string_equal(argv[1], "-c");
  assert_string_equal(argv[2], "");
  assert_null(argv[3]);
  assert_int_equal(envc, 2);
  assert_string_equal(env[0], "A=1");
  assert_string_equal(env[1], "B=");
  assert_null(env[2]);
  /* No environment; leading zeros in argc; exactly max_argv arguments. */
  static const char bare[] = "/\0" "01\0" "/bin/true";
  assert_int_equal(parse(bare, sizeof bare, 1, 0, &argc, &envc, argv, env, &cwd, copy), 0);
  assert_int_equal(argc, 1);
  assert_int_equal(envc, 0);
  assert_null(env[0]);
  assert_string_equal(argv[0], "/bin/true");
  /* Exactly max_env entries. */
  static const char two_env[] = "/\0" "1\0" "/x\0" "A=1\0" "B=2";
  assert_int_equal(parse(two_env, sizeof two_env, 1, 2, &argc, &envc, argv, env, &cwd, copy), 0);
  assert_int_equal(envc, 2);
}

static void test_parse_call_malformed(void **state) {
  (void)state;
  unsigned char copy[256];
  char *argv[8], *env[8];
  const char *cwd;
  size_t argc, envc;
#define BAD(lit, max_argv, max_env)                                                              \
  assert_int_equal(parse(lit, sizeof lit, max_argv, max_env, &argc, &envc, argv, env, &cwd, copy), \
                   -1)
  /* No trailing NUL (sizeof - 1 drops it). */
  static const char no_nul[] = "/\0" "1\0" "/bin/true";
  assert_int_equal(parse(no_nul, sizeof no_nul - 1, 7, 7, &argc, &envc, argv, env, &cwd, copy), -1);
  assert_int_equal(parse("", 0, 7, 7, &argc, &envc, argv, env, &cwd, copy), -1);
  BAD("/", 7, 7);                              /* only the cwd */
  BAD("/\0", 7, 7);                            /* empty argc string */
  BAD("/\0" "0\0" "/bin/true", 7, 7);          /* argc 0 */
  BAD("/\0" "00", 7, 7);                       /* argc 0, spelled long */
  BAD("/\0" "1x\0" "/bin/true", 7, 7);         /* argc non-digit */
  BAD("/\0" "-1\0" "/bin/true", 7, 7);
  BAD("/\0" " 1\0" "/bin/true", 7, 7);
  BAD("/\0" "3\0" "/bin/sh\0" "-c", 7, 7);     /* argc larger than the strings */
  BAD("/\0" "1", 7, 7);                        /* no arguments at all */
  BAD("/\0" "8\0" "a\0b\0c\0d\0e\0f\0g\0h", 7, 7); /* argc over max_argv */
  BAD("/\0" "99999999999999999999999\0" "a", 7, 7); /* no overflow */
  BAD("/\0" "1\0" "/x\0" "A=1\0" "B=2\0" "C=3", 7, 2); /* too many env entries */
  BAD("/\0" "1\0" "/x\0" "A=1", 7, 0);
#undef BAD
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_header_round_trip),   cmocka_unit_test(test_split_at_every_byte),
      cmocka_unit_test(test_zero_length_frames),  cmocka_unit_test(test_caps_and_types),
      cmocka_unit_test(test_callback_stops_reading), cmocka_unit_test(test_parse_call_good),
      cmocka_unit_test(test_parse_call_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
