/* The host side of port forwarding (sandman/ports.h) against a program in
 * the sandbox played by the test: its frames go in through the call's
 * output hook, the host's frames come out of the call's input channel
 * (sm_tty). A connection opens, carries bytes both ways and acknowledges
 * them; a program that sends past a connection's window, acknowledges more
 * than was sent, or sends a frame of no known type ends that connection or
 * the relay instead of growing memory; a failed connect resets the
 * client's connection; ports outside 1-65535 are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/ports.h>
#include <sandman/terminal.h>

#include "agent/frame.h"
#include "sandbox/tty.h"

#include "support/xalloc.h"

typedef struct rig {
  sm_port_relay *relay;
  sm_run_request req;
  unsigned char took[1 << 20];
  size_t took_len;
} rig;

static rig *rig_new(void) {
  rig *g = xcalloc(1, sizeof *g);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_port_relay_new(&g->relay, &err), 0);
  sm_port_relay_request(g->relay, &g->req);
  assert_non_null(g->req.tty);
  assert_non_null(g->req.on_output);
  assert_int_equal(g->req.argc, 2);
  assert_string_equal(g->req.argv[1], "ports");
  return g;
}

static void rig_free(rig *g) {
  sm_port_relay_free(g->relay);
  free(g);
}

/* The program sends a frame. */
static void far(rig *g, int type, uint32_t id, const void *p, uint32_t len) {
  unsigned char *b = xmalloc(SM_FRAME_HEADER + len + 1);
  agent_frame_header(b, type, id, len);
  if (len) memcpy(b + SM_FRAME_HEADER, p, len);
  g->req.on_output(g->req.on_output_ud, 1, (const char *)b, SM_FRAME_HEADER + len);
  free(b);
}

static void far_u32(rig *g, int type, uint32_t id, uint32_t v) {
  unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                        (unsigned char)v};
  far(g, type, id, b, 4);
}

static int step(rig *g) {
  sm_error err = SM_ERROR_INIT;
  return sm_port_relay_step(g->relay, NULL, 0, 50, &err);
}

/* What the host queued for the program since the last call. */
static void take(rig *g) {
  int resized, ended;
  unsigned rows, cols;
  g->took_len = sandbox_tty_take(g->req.tty, g->took, sizeof g->took, &resized, &rows, &cols,
                                 &ended);
}

/* The first frame of type in what was taken: its payload's offset, or -1. */
static long find_frame(const rig *g, int type, uint32_t id, uint32_t *len) {
  size_t at = 0;
  while (at + SM_FRAME_HEADER <= g->took_len) {
    const unsigned char *h = g->took + at;
    uint32_t fid = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
    uint32_t fl = (uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8];
    if (h[0] == type && fid == id) {
      *len = fl;
      return (long)(at + SM_FRAME_HEADER);
    }
    at += SM_FRAME_HEADER + fl;
  }
  return -1;
}

/* A connection to port 8000 the program has opened: the client's end. */
static int open_conn(rig *g, uint32_t id) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_port_relay_add(g->relay, sv[1], 8000, &err), 0);
  take(g);
  uint32_t len = 0;
  long at = find_frame(g, SM_FRAME_PORT_OPEN, id, &len);
  assert_true(at >= 0);
  assert_int_equal(len, 2);
  assert_int_equal(g->took[at] << 8 | g->took[at + 1], 8000);
  far_u32(g, SM_FRAME_PORT_OPENED, id, 0);
  assert_int_equal(step(g), 0);
  return sv[0];
}

static void test_bytes_both_ways(void **state) {
  (void)state;
  rig *g = rig_new();
  assert_int_equal(sm_port_relay_ready(g->relay), 0);
  far(g, SM_FRAME_HELLO, 0, SM_PORTS_HELLO, sizeof SM_PORTS_HELLO - 1);
  assert_int_equal(step(g), 0);
  assert_int_equal(sm_port_relay_ready(g->relay), 1);
  int c = open_conn(g, 1);
  far(g, SM_FRAME_PORT_DATA, 1, "hello", 5);
  assert_int_equal(step(g), 0);
  char buf[16];
  assert_int_equal(read(c, buf, sizeof buf), 5);
  assert_memory_equal(buf, "hello", 5);
  take(g);
  uint32_t len = 0;
  long at = find_frame(g, SM_FRAME_PORT_ACK, 1, &len);
  assert_true(at >= 0);
  assert_int_equal(g->took[at + 3], 5); /* the 5 bytes written to the client */
  assert_int_equal(write(c, "ping", 4), 4);
  assert_int_equal(step(g), 0);
  take(g);
  at = find_frame(g, SM_FRAME_PORT_DATA, 1, &len);
  assert_true(at >= 0);
  assert_int_equal(len, 4);
  assert_memory_equal(g->took + at, "ping", 4);
  /* The client's end, then the program's: the client reads its end. */
  shutdown(c, SHUT_WR);
  assert_int_equal(step(g), 0);
  take(g);
  assert_true(find_frame(g, SM_FRAME_PORT_EOF, 1, &len) >= 0);
  far(g, SM_FRAME_PORT_EOF, 1, NULL, 0);
  far(g, SM_FRAME_PORT_CLOSE, 1, NULL, 0);
  assert_int_equal(step(g), 0);
  assert_int_equal(read(c, buf, sizeof buf), 0);
  assert_int_equal(sm_port_relay_connections(g->relay), 0);
  close(c);
  rig_free(g);
}

static void test_past_the_window_ends_the_connection(void **state) {
  (void)state;
  rig *g = rig_new();
  int c = open_conn(g, 1);
  /* The client reads nothing; the program sends five full frames at once:
   * more than SM_PORT_WINDOW without an acknowledgement. */
  unsigned char *chunk = xcalloc(1, SM_FRAME_DATA_MAX);
  for (int i = 0; i < 5; i++) far(g, SM_FRAME_PORT_DATA, 1, chunk, SM_FRAME_DATA_MAX);
  free(chunk);
  assert_int_equal(step(g), 0);
  take(g);
  uint32_t len = 0;
  assert_true(find_frame(g, SM_FRAME_PORT_CLOSE, 1, &len) >= 0);
  assert_int_equal(sm_port_relay_connections(g->relay), 0);
  close(c);
  rig_free(g);
}

static void test_acknowledging_more_than_sent_ends_it(void **state) {
  (void)state;
  rig *g = rig_new();
  int c = open_conn(g, 1);
  far_u32(g, SM_FRAME_PORT_ACK, 1, 1); /* nothing was sent */
  assert_int_equal(step(g), 0);
  take(g);
  uint32_t len = 0;
  assert_true(find_frame(g, SM_FRAME_PORT_CLOSE, 1, &len) >= 0);
  assert_int_equal(sm_port_relay_connections(g->relay), 0);
  close(c);
  rig_free(g);
}

static void test_refused_connect_resets_the_client(void **state) {
  (void)state;
  rig *g = rig_new();
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_port_relay_add(g->relay, sv[1], 9, &err), 0);
  far_u32(g, SM_FRAME_PORT_OPENED, 1, ECONNREFUSED);
  assert_int_equal(step(g), 0);
  char b;
  assert_true(read(sv[0], &b, 1) <= 0);
  assert_int_equal(sm_port_relay_connections(g->relay), 0);
  take(g);
  uint32_t len = 0;
  assert_true(find_frame(g, SM_FRAME_PORT_CLOSE, 1, &len) < 0); /* the program forgot it */
  close(sv[0]);
  rig_free(g);
}

static void test_unknown_frame_breaks_the_relay(void **state) {
  (void)state;
  rig *g = rig_new();
  far(g, SM_FRAME_CALL, 1, "x", 1);
  assert_int_equal(step(g), SM_EPROTOCOL);
  assert_int_equal(step(g), SM_EPROTOCOL);
  rig_free(g);
}

static void test_ports_out_of_range(void **state) {
  (void)state;
  rig *g = rig_new();
  unsigned bad[] = {0, 65536, 100000};
  for (size_t i = 0; i < 3; i++) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(sm_port_relay_add(g->relay, sv[1], bad[i], &err), SM_EINVAL);
    close(sv[0]);
  }
  assert_int_equal(sm_port_relay_connections(g->relay), 0);
  rig_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bytes_both_ways),
      cmocka_unit_test(test_past_the_window_ends_the_connection),
      cmocka_unit_test(test_acknowledging_more_than_sent_ends_it),
      cmocka_unit_test(test_refused_connect_resets_the_client),
      cmocka_unit_test(test_unknown_frame_breaks_the_relay),
      cmocka_unit_test(test_ports_out_of_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
