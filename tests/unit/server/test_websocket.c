/* WebSocket framing (src/lib/server/websocket.c) and connections
 * (websocket_conn.c) without a runner: the handshake's accept value, frame
 * headers, masking, fragmentation and its rules, control frames, the caps
 * on frames and messages, text that is not UTF-8, the close handshake,
 * pings, and a peer that does not read. Connections run on socketpairs;
 * waits are bounded polls, never sleeps that decide. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"
#include "support/xalloc.h"

#include "server/websocket.h"
#include "server/websocket_conn.h"

#define GUARD_MS 20000

/* ---- frames as a client writes them ---- */

typedef struct bytes {
  unsigned char p[1 << 17];
  size_t len;
} bytes;

static const unsigned char MASK[4] = {0x37, 0xfa, 0x21, 0x3d};

static void put_frame(bytes *b, int fin, int opcode, const void *data, size_t len, int masked) {
  b->len += server_ws_header(b->p + b->len, fin, opcode, len, masked ? MASK : NULL);
  memcpy(b->p + b->len, data, len);
  if (masked) server_ws_mask(b->p + b->len, len, MASK, 0);
  b->len += len;
}

/* What a reader delivered. */
typedef struct got {
  int n;
  int opcode[16];
  unsigned char data[16][4096];
  size_t len[16];
} got;

static int collect(void *ud, int opcode, const unsigned char *data, size_t len) {
  got *g = ud;
  if (g->n < 16) {
    g->opcode[g->n] = opcode;
    memcpy(g->data[g->n], data, len < 4096 ? len : 4096);
    g->len[g->n] = len;
    g->n++;
  }
  return 0;
}

static int feed(const bytes *b, int masked, size_t max_frame, size_t max_msg, got *g) {
  server_ws_reader r;
  memset(g, 0, sizeof *g);
  server_ws_reader_init(&r, masked, max_frame, max_msg, collect, g);
  int rc = server_ws_reader_feed(&r, b->p, b->len);
  server_ws_reader_dispose(&r);
  return rc;
}

/* ---- the pure parts ---- */

static void test_accept_value(void **state) {
  (void)state;
  char out[SERVER_WS_ACCEPT_LEN + 1];
  /* RFC 6455 section 1.3's example. */
  assert_int_equal(server_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
  assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  assert_int_equal(server_ws_accept("dGhlIHNhbXBsZSBub25jZQ=", out), -1);  /* too short */
  assert_int_equal(server_ws_accept("dGhlIHNhbXBsZSBub25jZQ=x", out), -1); /* no padding */
  assert_int_equal(server_ws_accept("dGhlIHNhbXBsZSBub25j*Q==", out), -1); /* not base64 */
  assert_int_equal(server_ws_accept("dGhlIHNhbXBsZSBub25jZR==", out), -1); /* 17 bits set */
  assert_int_equal(server_ws_accept(NULL, out), -1);
}

static void test_header_lengths(void **state) {
  (void)state;
  unsigned char h[SERVER_WS_HEADER_MAX];
  assert_int_equal(server_ws_header(h, 1, SERVER_WS_BINARY, 125, NULL), 2);
  assert_int_equal(h[0], 0x82);
  assert_int_equal(h[1], 125);
  assert_int_equal(server_ws_header(h, 1, SERVER_WS_TEXT, 126, NULL), 4);
  assert_int_equal(h[1], 126);
  assert_int_equal(h[2] << 8 | h[3], 126);
  assert_int_equal(server_ws_header(h, 0, SERVER_WS_TEXT, 65535, NULL), 4);
  assert_int_equal(h[0], 0x01);
  assert_int_equal(server_ws_header(h, 1, SERVER_WS_BINARY, 65536, MASK), 14);
  assert_int_equal(h[1], 0x80 | 127);
  assert_memory_equal(h + 10, MASK, 4);
}

static void test_masking_is_its_own_inverse(void **state) {
  (void)state;
  unsigned char d[100], orig[100];
  for (int i = 0; i < 100; i++) d[i] = orig[i] = (unsigned char)i;
  server_ws_mask(d, 100, MASK, 0);
  assert_memory_not_equal(d, orig, 100);
  /* In two pieces, the second at its offset. */
  server_ws_mask(d, 37, MASK, 0);
  server_ws_mask(d + 37, 63, MASK, 37);
  assert_memory_equal(d, orig, 100);
}

static void test_utf8(void **state) {
  (void)state;
  assert_true(server_ws_utf8_valid((const unsigned char *)"plain", 5));
  assert_true(
      server_ws_utf8_valid((const unsigned char *)"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
  assert_false(server_ws_utf8_valid((const unsigned char *)"\xc0\xaf", 2));         /* overlong */
  assert_false(server_ws_utf8_valid((const unsigned char *)"\xed\xa0\x80", 3));     /* surrogate */
  assert_false(server_ws_utf8_valid((const unsigned char *)"\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
  assert_false(server_ws_utf8_valid((const unsigned char *)"\xe2\x82", 2));         /* cut */
  assert_false(server_ws_utf8_valid((const unsigned char *)"\xff", 1));
}

static void test_masked_frames_and_fragments(void **state) {
  (void)state;
  static bytes b;
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_BINARY, "\x01\x02\x03", 3, 1);
  put_frame(&b, 0, SERVER_WS_TEXT, "hel", 3, 1);
  put_frame(&b, 1, SERVER_WS_PING, "p", 1, 1); /* control frames may come between fragments */
  put_frame(&b, 0, SERVER_WS_CONT, "lo ", 3, 1);
  put_frame(&b, 1, SERVER_WS_CONT, "w\xc3\xb6rld", 6, 1);
  put_frame(&b, 1, SERVER_WS_TEXT, "", 0, 1);
  static got g;
  assert_int_equal(feed(&b, 1, 1024, 4096, &g), 0);
  assert_int_equal(g.n, 4);
  assert_int_equal(g.opcode[0], SERVER_WS_BINARY);
  assert_memory_equal(g.data[0], "\x01\x02\x03", 3);
  assert_int_equal(g.opcode[1], SERVER_WS_PING);
  assert_int_equal(g.opcode[2], SERVER_WS_TEXT);
  assert_int_equal(g.len[2], 12);
  assert_memory_equal(g.data[2], "hello w\xc3\xb6rld", 12);
  assert_int_equal(g.opcode[3], SERVER_WS_TEXT);
  assert_int_equal(g.len[3], 0);
  /* Byte by byte: the same messages. */
  static got g2;
  server_ws_reader r;
  memset(&g2, 0, sizeof g2);
  server_ws_reader_init(&r, 1, 1024, 4096, collect, &g2);
  for (size_t i = 0; i < b.len; i++) assert_int_equal(server_ws_reader_feed(&r, b.p + i, 1), 0);
  server_ws_reader_dispose(&r);
  assert_int_equal(g2.n, 4);
  assert_memory_equal(g2.data[2], "hello w\xc3\xb6rld", 12);
}

static void test_long_lengths(void **state) {
  (void)state;
  static bytes b;
  static unsigned char big[70000];
  memset(big, 'z', sizeof big);
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_BINARY, big, 300, 1);   /* 16-bit length */
  put_frame(&b, 1, SERVER_WS_BINARY, big, 70000, 1); /* 64-bit length */
  static got g;
  assert_int_equal(feed(&b, 1, 100000, 100000, &g), 0);
  assert_int_equal(g.n, 2);
  assert_int_equal(g.len[0], 300);
  assert_int_equal(g.len[1], 70000);
}

/* Each is a protocol error with its code. */
static void expect_error(const bytes *b, int masked, size_t max_frame, size_t max_msg, int code) {
  got g;
  assert_int_equal(feed(b, masked, max_frame, max_msg, &g), code);
}

static void test_protocol_errors(void **state) {
  (void)state;
  static bytes b;
  /* A client frame that is not masked, and a server frame that is. */
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_TEXT, "x", 1, 0);
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_TEXT, "x", 1, 1);
  expect_error(&b, 0, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  /* Unknown opcodes (data 3, control 0xB), reserved bits. */
  int bad_ops[] = {0x3, 0x7, 0xB, 0xF};
  for (size_t i = 0; i < 4; i++) {
    b.len = 0;
    put_frame(&b, 1, bad_ops[i], "x", 1, 1);
    expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  }
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_TEXT, "x", 1, 1);
  b.p[0] |= 0x40; /* RSV1 */
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  /* A fragmented control frame, one over 125 bytes. */
  b.len = 0;
  put_frame(&b, 0, SERVER_WS_PING, "p", 1, 1);
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  static unsigned char c126[126];
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_PING, c126, 126, 1);
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  /* A continuation with no message, a new message inside one. */
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_CONT, "x", 1, 1);
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  b.len = 0;
  put_frame(&b, 0, SERVER_WS_TEXT, "a", 1, 1);
  put_frame(&b, 1, SERVER_WS_BINARY, "b", 1, 1);
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  /* Close payloads: one byte, a code not allowed on the wire, bad text. */
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_CLOSE, "\x03", 1, 1);
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_CLOSE, "\x03\xed", 2, 1); /* 1005 */
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_CLOSE, "\x03\xe8\xff", 3, 1);
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
  /* Text that is not UTF-8 (over two fragments): 1007. */
  b.len = 0;
  put_frame(&b, 0, SERVER_WS_TEXT, "ok\xe2", 3, 1);
  put_frame(&b, 1, SERVER_WS_CONT, "\x28\xa1", 2, 1);
  expect_error(&b, 1, 1024, 1024, SERVER_WS_BAD_DATA);
  /* A 64-bit length with its top bit set. */
  b.len = 0;
  unsigned char h[14] = {0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4};
  memcpy(b.p, h, sizeof h);
  b.len = sizeof h;
  expect_error(&b, 1, 1024, 1024, SERVER_WS_PROTOCOL_ERROR);
}

static void test_caps(void **state) {
  (void)state;
  static bytes b;
  static unsigned char data[2048];
  /* A frame over the cap is refused from its header alone. */
  b.len = server_ws_header(b.p, 1, SERVER_WS_BINARY, (uint64_t)1 << 40, MASK);
  expect_error(&b, 1, 1024, 1 << 20, SERVER_WS_TOO_BIG);
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_BINARY, data, 1025, 1);
  expect_error(&b, 1, 1024, 1 << 20, SERVER_WS_TOO_BIG);
  /* Fragments that are each small but together over the message cap. */
  b.len = 0;
  put_frame(&b, 0, SERVER_WS_BINARY, data, 1000, 1);
  put_frame(&b, 0, SERVER_WS_CONT, data, 1000, 1);
  put_frame(&b, 1, SERVER_WS_CONT, data, 1000, 1);
  expect_error(&b, 1, 1024, 2500, SERVER_WS_TOO_BIG);
  /* Exactly at the caps: taken. */
  b.len = 0;
  put_frame(&b, 0, SERVER_WS_BINARY, data, 1024, 1);
  put_frame(&b, 1, SERVER_WS_CONT, data, 1024, 1);
  got g;
  assert_int_equal(feed(&b, 1, 1024, 2048, &g), 0);
  assert_int_equal(g.len[0], 2048);
}

static void test_close_payload(void **state) {
  (void)state;
  unsigned char p[SERVER_WS_CONTROL_MAX];
  size_t n = server_ws_close_payload(p, 1000, "bye");
  assert_int_equal(n, 5);
  assert_int_equal(server_ws_close_code(p, n), 1000);
  /* A long reason is cut on a character boundary (é is 2 bytes). */
  char reason[300];
  for (int i = 0; i < 149; i++) memcpy(reason + 2 * i, "\xc3\xa9", 2);
  reason[298] = 0;
  n = server_ws_close_payload(p, 1001, reason);
  assert_true(n <= SERVER_WS_CONTROL_MAX);
  assert_int_equal(server_ws_close_code(p, n), 1001);
  assert_int_equal(server_ws_close_code(p, 0), SERVER_WS_NO_STATUS);
}

/* ---- connections on a socketpair ---- */

typedef struct peer {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int opened, closed, close_code;
  int n_msgs;
  int last_opcode;
  size_t last_len;
  int echo; /* send each message back */
  server_ws_conn *conn;
} peer;

static void p_open(void *ud, server_ws_conn *c) {
  peer *p = ud;
  pthread_mutex_lock(&p->mu);
  p->opened = 1;
  p->conn = c;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static int p_message(void *ud, server_ws_conn *c, int opcode, const unsigned char *data,
                     size_t len) {
  peer *p = ud;
  pthread_mutex_lock(&p->mu);
  p->n_msgs++;
  p->last_opcode = opcode;
  p->last_len = len;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  if (p->echo) server_ws_send(c, opcode, data, len);
  return 0;
}

static void p_close(void *ud, server_ws_conn *c, int code) {
  peer *p = ud;
  (void)c;
  pthread_mutex_lock(&p->mu);
  p->closed = 1;
  p->close_code = code;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* Waits (bounded) until *flag is set. */
static void wait_flag(peer *p, int *flag) {
  double end = now_ms() + GUARD_MS;
  pthread_mutex_lock(&p->mu);
  while (!*flag) {
    assert_true(now_ms() < end);
    struct timespec w;
    clock_gettime(CLOCK_REALTIME, &w);
    w.tv_sec += 1;
    pthread_cond_timedwait(&p->cv, &p->mu, &w);
  }
  pthread_mutex_unlock(&p->mu);
}

/* The client's side: reads one frame (unmasked, from the server). */
static int client_frame(int fd, int *opcode, unsigned char *data, size_t cap, size_t *len) {
  static unsigned char buf[1 << 16];
  static size_t have;
  double end = now_ms() + GUARD_MS;
  for (;;) {
    if (have >= 2) {
      size_t need = 2, n = buf[1] & 0x7f;
      if (n == 126) need = 4;
      if (n == 127) need = 10;
      if (have >= need) {
        if (n == 126) n = (size_t)buf[2] << 8 | buf[3];
        if (n == 127) n = (size_t)buf[8] << 8 | buf[9];
        if (have >= need + n) {
          *opcode = buf[0] & 0x0f;
          *len = n;
          memcpy(data, buf + need, n < cap ? n : cap);
          memmove(buf, buf + need + n, have - need - n);
          have -= need + n;
          return 0;
        }
      }
    }
    struct pollfd pf = {fd, POLLIN, 0};
    int left = (int)(end - now_ms());
    if (left <= 0 || poll(&pf, 1, left) <= 0) return -1;
    ssize_t k = read(fd, buf + have, sizeof buf - have);
    if (k <= 0) return -1;
    have += (size_t)k;
  }
}

static void client_send(int fd, int opcode, const void *data, size_t len) {
  static bytes b;
  b.len = 0;
  put_frame(&b, 1, opcode, data, len, 1);
  assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
}

static void peer_init(peer *p) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
}

static void test_conn_echo_ping_and_close(void **state) {
  (void)state;
  server_ws_group *g = xfixture(server_ws_group_new(), "server_ws_group_new");
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  peer p;
  peer_init(&p);
  p.echo = 1;
  server_ws_handler h = {p_open, p_message, p_close, NULL, &p};
  /* The first frame came with the request's head. */
  static bytes first;
  first.len = 0;
  put_frame(&first, 1, SERVER_WS_BINARY, "early", 5, 1);
  assert_int_equal(server_ws_conn_start(g, sv[0], (const char *)first.p, first.len, NULL, &h, NULL,
                                        NULL, NULL),
                   0);
  wait_flag(&p, &p.opened);
  int op;
  unsigned char data[256];
  size_t len;
  assert_int_equal(client_frame(sv[1], &op, data, sizeof data, &len), 0);
  assert_int_equal(op, SERVER_WS_BINARY);
  assert_memory_equal(data, "early", 5);
  client_send(sv[1], SERVER_WS_PING, "are you there", 13);
  assert_int_equal(client_frame(sv[1], &op, data, sizeof data, &len), 0);
  assert_int_equal(op, SERVER_WS_PONG);
  assert_memory_equal(data, "are you there", 13);
  client_send(sv[1], SERVER_WS_TEXT, "{\"type\":\"x\"}", 12);
  assert_int_equal(client_frame(sv[1], &op, data, sizeof data, &len), 0);
  assert_int_equal(op, SERVER_WS_TEXT);
  /* The client closes: the server answers with the same code and ends. */
  client_send(sv[1], SERVER_WS_CLOSE, "\x03\xe8", 2);
  assert_int_equal(client_frame(sv[1], &op, data, sizeof data, &len), 0);
  assert_int_equal(op, SERVER_WS_CLOSE);
  assert_int_equal(server_ws_close_code(data, len), 1000);
  wait_flag(&p, &p.closed);
  assert_int_equal(p.close_code, 1000);
  server_ws_group_close_all(g, 5000);
  assert_int_equal(server_ws_group_count(g), 0);
  server_ws_group_free(g);
  close(sv[1]);
}

static void test_conn_protocol_error_closes_1002(void **state) {
  (void)state;
  server_ws_group *g = xfixture(server_ws_group_new(), "server_ws_group_new");
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  peer p;
  peer_init(&p);
  server_ws_handler h = {p_open, p_message, p_close, NULL, &p};
  assert_int_equal(server_ws_conn_start(g, sv[0], NULL, 0, NULL, &h, NULL, NULL, NULL), 0);
  /* Not masked: a client must mask. */
  static bytes b;
  b.len = 0;
  put_frame(&b, 1, SERVER_WS_TEXT, "x", 1, 0);
  assert_int_equal(write(sv[1], b.p, b.len), (ssize_t)b.len);
  int op;
  unsigned char data[256];
  size_t len;
  assert_int_equal(client_frame(sv[1], &op, data, sizeof data, &len), 0);
  assert_int_equal(op, SERVER_WS_CLOSE);
  assert_int_equal(server_ws_close_code(data, len), SERVER_WS_PROTOCOL_ERROR);
  close(sv[1]); /* no answer: the server gives up after its wait */
  wait_flag(&p, &p.closed);
  assert_int_equal(p.n_msgs, 0);
  server_ws_group_close_all(g, 5000);
  server_ws_group_free(g);
}

/* A peer that never reads: queued output passes the cap, the connection
 * is closed with 1008 rather than held in memory. */
static void test_conn_slow_reader_cut_off(void **state) {
  (void)state;
  server_ws_group *g = xfixture(server_ws_group_new(), "server_ws_group_new");
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int small = 4096;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  peer p;
  peer_init(&p);
  server_ws_handler h = {p_open, p_message, p_close, NULL, &p};
  server_ws_limits lim = {0, 0, 256 * 1024, 0};
  assert_int_equal(server_ws_conn_start(g, sv[0], NULL, 0, &lim, &h, NULL, NULL, NULL), 0);
  wait_flag(&p, &p.opened);
  static unsigned char chunk[16384];
  int busy = 0;
  for (int i = 0; i < 1000 && !busy; i++) {
    int rc = server_ws_send(p.conn, SERVER_WS_BINARY, chunk, sizeof chunk);
    busy = rc != 0;
  }
  assert_true(busy);
  close(sv[1]);
  wait_flag(&p, &p.closed);
  server_ws_group_close_all(g, 5000);
  server_ws_group_free(g);
}

/* The runner's stop: every connection is closed with 1001. */
static void test_group_close_all(void **state) {
  (void)state;
  server_ws_group *g = xfixture(server_ws_group_new(), "server_ws_group_new");
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  peer p;
  peer_init(&p);
  server_ws_handler h = {p_open, p_message, p_close, NULL, &p};
  assert_int_equal(server_ws_conn_start(g, sv[0], NULL, 0, NULL, &h, NULL, NULL, NULL), 0);
  wait_flag(&p, &p.opened);
  assert_int_equal(server_ws_group_count(g), 1);
  server_ws_group_close_all(g, 500); /* the client never answers: forced */
  int op;
  unsigned char data[256];
  size_t len;
  assert_int_equal(client_frame(sv[1], &op, data, sizeof data, &len), 0);
  assert_int_equal(op, SERVER_WS_CLOSE);
  assert_int_equal(server_ws_close_code(data, len), SERVER_WS_GOING_AWAY);
  assert_int_equal(server_ws_group_count(g), 0);
  assert_true(p.closed);
  server_ws_group_free(g);
  close(sv[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accept_value),
      cmocka_unit_test(test_header_lengths),
      cmocka_unit_test(test_masking_is_its_own_inverse),
      cmocka_unit_test(test_utf8),
      cmocka_unit_test(test_masked_frames_and_fragments),
      cmocka_unit_test(test_long_lengths),
      cmocka_unit_test(test_protocol_errors),
      cmocka_unit_test(test_caps),
      cmocka_unit_test(test_close_payload),
      cmocka_unit_test(test_conn_echo_ping_and_close),
      cmocka_unit_test(test_conn_protocol_error_closes_1002),
      cmocka_unit_test(test_conn_slow_reader_cut_off),
      cmocka_unit_test(test_group_close_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
