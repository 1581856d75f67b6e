/* The exec stream demultiplexer: frames split across reads at every byte
 * boundary, zero-length frames, the frame cap, cut streams, bad headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/mux.h"
#include "support/sock.h"

typedef struct sink {
  char out[4096], err[4096];
  size_t out_len, err_len, calls;
  int fail_after; /* return an error on this call (1-based), 0 never */
} sink;

static int collect(void *ud, int stream, const char *data, size_t len) {
  sink *s = ud;
  s->calls++;
  if (s->fail_after && s->calls == (size_t)s->fail_after) return SM_ECANCELLED;
  assert_true(stream == 1 || stream == 2);
  assert_true(len > 0);
  char *dst = stream == 1 ? s->out : s->err;
  size_t *dl = stream == 1 ? &s->out_len : &s->err_len;
  assert_true(*dl + len <= sizeof s->out);
  memcpy(dst + *dl, data, len);
  *dl += len;
  return 0;
}

static size_t frame(unsigned char *p, int type, const char *payload, size_t len) {
  ts_mux_head(p, type, (uint32_t)len);
  memcpy(p + 8, payload, len);
  return 8 + len;
}

/* A stream with stdout, stderr, a zero-length frame and a stdin-typed one. */
static size_t sample(unsigned char *buf) {
  size_t n = 0;
  n += frame(buf + n, 1, "hello ", 6);
  n += frame(buf + n, 2, "warning\n", 8);
  n += frame(buf + n, 1, "", 0);
  n += frame(buf + n, 1, "world\n", 6);
  n += frame(buf + n, 2, "", 0);
  n += frame(buf + n, 0, "!", 1);
  return n;
}

static void check_sample(const sink *s) {
  assert_int_equal(s->out_len, 13);
  assert_memory_equal(s->out, "hello world\n!", 13);
  assert_int_equal(s->err_len, 8);
  assert_memory_equal(s->err, "warning\n", 8);
}

static void test_whole(void **st) {
  (void)st;
  unsigned char buf[256];
  size_t n = sample(buf);
  sink s = {0};
  engine_mux m;
  sm_error err = SM_ERROR_INIT;
  engine_mux_init(&m, 0, collect, &s);
  assert_int_equal(m.max_frame, ENGINE_DEFAULT_MAX_FRAME);
  assert_int_equal(engine_mux_feed(&m, (char *)buf, n, &err), 0);
  assert_int_equal(engine_mux_finish(&m, &err), 0);
  check_sample(&s);
  /* No data at all is a clean, empty stream. */
  engine_mux_init(&m, 0, collect, &s);
  assert_int_equal(engine_mux_finish(&m, &err), 0);
}

static void test_split_everywhere(void **st) {
  (void)st;
  unsigned char buf[256];
  size_t n = sample(buf);
  /* Two pieces, cut at every boundary. */
  for (size_t cut = 0; cut <= n; cut++) {
    sink s = {0};
    engine_mux m;
    sm_error err = SM_ERROR_INIT;
    engine_mux_init(&m, 64, collect, &s);
    assert_int_equal(engine_mux_feed(&m, (char *)buf, cut, &err), 0);
    assert_int_equal(engine_mux_feed(&m, (char *)buf + cut, n - cut, &err), 0);
    assert_int_equal(engine_mux_finish(&m, &err), 0);
    check_sample(&s);
  }
  /* One byte at a time. */
  sink s = {0};
  engine_mux m;
  sm_error err = SM_ERROR_INIT;
  engine_mux_init(&m, 64, collect, &s);
  for (size_t i = 0; i < n; i++) assert_int_equal(engine_mux_feed(&m, (char *)buf + i, 1, &err), 0);
  assert_int_equal(engine_mux_finish(&m, &err), 0);
  check_sample(&s);
  /* Three pieces at every pair of boundaries. */
  for (size_t a = 0; a <= n; a++)
    for (size_t b = a; b <= n; b++) {
      sink s3 = {0};
      engine_mux_init(&m, 64, collect, &s3);
      assert_int_equal(engine_mux_feed(&m, (char *)buf, a, &err), 0);
      assert_int_equal(engine_mux_feed(&m, (char *)buf + a, b - a, &err), 0);
      assert_int_equal(engine_mux_feed(&m, (char *)buf + b, n - b, &err), 0);
      assert_int_equal(engine_mux_finish(&m, &err), 0);
      check_sample(&s3);
    }
}

static void test_frame_cap(void **st) {
  (void)st;
  unsigned char buf[256];
  char payload[100];
  memset(payload, 'x', sizeof payload);
  sink s = {0};
  engine_mux m;
  sm_error err = SM_ERROR_INIT;
  /* Exactly at the cap is fine... */
  size_t n = frame(buf, 1, payload, 100);
  engine_mux_init(&m, 100, collect, &s);
  assert_int_equal(engine_mux_feed(&m, (char *)buf, n, &err), 0);
  assert_int_equal(s.out_len, 100);
  /* ...one over is refused before any of it is delivered. */
  memset(&s, 0, sizeof s);
  engine_mux_init(&m, 99, collect, &s);
  assert_int_equal(engine_mux_feed(&m, (char *)buf, n, &err), SM_ETOOBIG);
  assert_non_null(strstr(err.message, "100 bytes"));
  assert_int_equal(s.calls, 0);
  /* A 4 GiB length announced in a header. */
  unsigned char huge[8] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  engine_mux_init(&m, 0, collect, &s);
  assert_int_equal(engine_mux_feed(&m, (char *)huge, 8, &err), SM_ETOOBIG);
}

static void test_cut_streams(void **st) {
  (void)st;
  unsigned char buf[64];
  size_t n = frame(buf, 1, "abcdef", 6);
  sm_error err = SM_ERROR_INIT;
  for (size_t cut = 1; cut < n; cut++) {
    sink s = {0};
    engine_mux m;
    engine_mux_init(&m, 0, collect, &s);
    assert_int_equal(engine_mux_feed(&m, (char *)buf, cut, &err), 0);
    assert_int_equal(engine_mux_finish(&m, &err), SM_EPROTOCOL);
    if (cut < 8)
      assert_non_null(strstr(err.message, "frame header"));
    else
      assert_non_null(strstr(err.message, "payload bytes missing"));
    /* What did arrive was delivered as it came. */
    assert_int_equal(s.out_len, cut > 8 ? cut - 8 : 0);
  }
}

static void test_bad_headers(void **st) {
  (void)st;
  sm_error err = SM_ERROR_INIT;
  engine_mux m;
  sink s = {0};
  unsigned char unknown[8] = {7, 0, 0, 0, 0, 0, 0, 1};
  engine_mux_init(&m, 0, collect, &s);
  assert_int_equal(engine_mux_feed(&m, (char *)unknown, 8, &err), SM_EPROTOCOL);
  assert_non_null(strstr(err.message, "unknown stream type 7"));
  /* Raw TTY output is not a multiplexed stream. */
  engine_mux_init(&m, 0, collect, &s);
  assert_int_equal(engine_mux_feed(&m, "hello world\n", 12, &err), SM_EPROTOCOL);
  unsigned char pad[8] = {1, 0, 1, 0, 0, 0, 0, 1};
  engine_mux_init(&m, 0, collect, &s);
  assert_int_equal(engine_mux_feed(&m, (char *)pad, 8, &err), SM_EPROTOCOL);
}

static void test_system_error_frame(void **st) {
  (void)st;
  unsigned char buf[128];
  size_t n = frame(buf, 3, "exec failed: boom\n", 18);
  sm_error err = SM_ERROR_INIT;
  engine_mux m;
  sink s = {0};
  engine_mux_init(&m, 0, collect, &s);
  assert_int_equal(engine_mux_feed(&m, (char *)buf, 10, &err), 0);
  assert_int_equal(engine_mux_feed(&m, (char *)buf + 10, n - 10, &err), SM_EENGINE);
  assert_non_null(strstr(err.message, "exec failed: boom"));
  assert_int_equal(s.calls, 0);
}

static void test_callback_stops(void **st) {
  (void)st;
  unsigned char buf[256];
  size_t n = sample(buf);
  sm_error err = SM_ERROR_INIT;
  engine_mux m;
  sink s = {0};
  s.fail_after = 2;
  engine_mux_init(&m, 0, collect, &s);
  assert_int_equal(engine_mux_feed(&m, (char *)buf, n, &err), SM_ECANCELLED);
  /* No output callback: everything is discarded, still validated. */
  engine_mux_init(&m, 0, NULL, NULL);
  assert_int_equal(engine_mux_feed(&m, (char *)buf, n, &err), 0);
  assert_int_equal(engine_mux_finish(&m, &err), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_whole),        cmocka_unit_test(test_split_everywhere),
      cmocka_unit_test(test_frame_cap),    cmocka_unit_test(test_cut_streams),
      cmocka_unit_test(test_bad_headers),  cmocka_unit_test(test_system_error_frame),
      cmocka_unit_test(test_callback_stops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
