/* `sandman-agent ports` run directly on this machine over pipes, spoken to
 * as the host side does (SM_FRAME_PORT_*), against a TCP server of the
 * test on 127.0.0.1: a connection opens, bytes go both ways and are
 * acknowledged, the host's end reaches the server at once even with
 * nothing left to write (a connection whose client had closed was never
 * ended before: its slot leaked), the server's end comes back as EOF then
 * CLOSE; a port nothing listens on is refused with its errno; a reused
 * connection id is a protocol error. No timing assertions: hang guards. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/frame.h"

#ifndef SANDMAN_AGENT_PATH
#error "SANDMAN_AGENT_PATH must name the built sandman-agent"
#endif

#define GUARD_MS 60000

typedef struct got {
  int type;
  uint32_t id, len;
  unsigned char data[256];
} got;

typedef struct relay {
  pid_t pid;
  int to, from;
  agent_frame_reader r;
  got q[64];
  size_t nq;
} relay;

static int on_frame(void *ud, int type, uint32_t id, const unsigned char *p, uint32_t len) {
  relay *r = ud;
  assert_true(r->nq < 64);
  got *g = &r->q[r->nq++];
  g->type = type;
  g->id = id;
  g->len = len;
  memcpy(g->data, p, len < sizeof g->data ? len : sizeof g->data);
  return 0;
}

/* The next frame the relay sends (hang guard). */
static got next(relay *r) {
  while (r->nq == 0) {
    struct pollfd pf = {r->from, POLLIN, 0};
    assert_true(poll(&pf, 1, GUARD_MS) == 1);
    unsigned char buf[65536];
    ssize_t n = read(r->from, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(agent_frame_reader_feed(&r->r, buf, (size_t)n), 0);
  }
  got g = r->q[0];
  memmove(r->q, r->q + 1, (r->nq - 1) * sizeof r->q[0]);
  r->nq--;
  return g;
}

static void send_frame(relay *r, int type, uint32_t id, const void *p, uint32_t len) {
  unsigned char h[SM_FRAME_HEADER];
  agent_frame_header(h, type, id, len);
  assert_int_equal(write(r->to, h, sizeof h), (ssize_t)sizeof h);
  if (len) assert_int_equal(write(r->to, p, len), (ssize_t)len);
}

static void send_open(relay *r, uint32_t id, unsigned port) {
  unsigned char p[2] = {(unsigned char)(port >> 8), (unsigned char)port};
  send_frame(r, SM_FRAME_PORT_OPEN, id, p, 2);
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void relay_start(relay *r) {
  int in[2], out[2];
  memset(r, 0, sizeof *r);
  assert_int_equal(pipe2(in, O_CLOEXEC), 0);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  r->pid = fork();
  assert_true(r->pid >= 0);
  if (r->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    execl(SANDMAN_AGENT_PATH, "sandman-agent", "ports", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  r->to = in[1];
  r->from = out[0];
  agent_frame_reader_init(&r->r, SM_FRAME_DATA_MAX, on_frame, r);
  got g = next(r);
  assert_int_equal(g.type, SM_FRAME_HELLO);
  assert_memory_equal(g.data, SM_PORTS_HELLO, sizeof SM_PORTS_HELLO - 1);
}

/* Ends the relay's input; its exit status. */
static int relay_end(relay *r) {
  close(r->to);
  int st = -1;
  assert_int_equal(waitpid(r->pid, &st, 0), r->pid);
  close(r->from);
  agent_frame_reader_dispose(&r->r);
  return st;
}

/* A listening socket on 127.0.0.1 and its port. */
static int listener(unsigned *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(fd, 4), 0);
  socklen_t l = sizeof a;
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

static void test_connection_both_ways_and_its_ends(void **state) {
  (void)state;
  unsigned port;
  int lfd = listener(&port);
  relay r;
  relay_start(&r);
  send_open(&r, 7, port);
  got g = next(&r);
  assert_int_equal(g.type, SM_FRAME_PORT_OPENED);
  assert_int_equal(g.id, 7);
  assert_int_equal(be32(g.data), 0);
  int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  assert_true(s >= 0);
  send_frame(&r, SM_FRAME_PORT_DATA, 7, "ping", 4);
  char buf[16];
  assert_int_equal(read(s, buf, sizeof buf), 4);
  assert_memory_equal(buf, "ping", 4);
  g = next(&r);
  assert_int_equal(g.type, SM_FRAME_PORT_ACK);
  assert_int_equal(be32(g.data), 4);
  assert_int_equal(write(s, "pong!", 5), 5);
  g = next(&r);
  assert_int_equal(g.type, SM_FRAME_PORT_DATA);
  assert_int_equal(g.len, 5);
  assert_memory_equal(g.data, "pong!", 5);
  /* The host's end with nothing left to write: the server reads its end. */
  send_frame(&r, SM_FRAME_PORT_EOF, 7, NULL, 0);
  struct pollfd pf = {s, POLLIN, 0};
  assert_int_equal(poll(&pf, 1, GUARD_MS), 1);
  assert_int_equal(read(s, buf, sizeof buf), 0);
  /* The server's end: EOF, then the connection is over. */
  close(s);
  g = next(&r);
  assert_int_equal(g.type, SM_FRAME_PORT_EOF);
  g = next(&r);
  assert_int_equal(g.type, SM_FRAME_PORT_CLOSE);
  assert_int_equal(g.id, 7);
  int st = relay_end(&r);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(lfd);
}

static void test_nothing_listening_is_refused(void **state) {
  (void)state;
  unsigned port;
  int lfd = listener(&port);
  close(lfd); /* the port is free now: nothing listens there */
  relay r;
  relay_start(&r);
  send_open(&r, 1, port);
  got g = next(&r);
  assert_int_equal(g.type, SM_FRAME_PORT_OPENED);
  assert_int_equal(be32(g.data), ECONNREFUSED);
  int st = relay_end(&r);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_reused_id_is_a_protocol_error(void **state) {
  (void)state;
  unsigned port;
  int lfd = listener(&port);
  relay r;
  relay_start(&r);
  send_open(&r, 3, port);
  got g = next(&r);
  assert_int_equal(be32(g.data), 0);
  send_open(&r, 3, port);
  int st = -1;
  assert_int_equal(waitpid(r.pid, &st, 0), r.pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  r.pid = 0;
  close(r.to);
  close(r.from);
  agent_frame_reader_dispose(&r.r);
  close(lfd);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_connection_both_ways_and_its_ends),
      cmocka_unit_test(test_nothing_listening_is_refused),
      cmocka_unit_test(test_reused_id_is_a_protocol_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
