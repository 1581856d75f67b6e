/* The host-tool route's peer (src/shared/agent/route_peer.c): the /proc/PID/stat
 * reader against names that try to fool it, the walk up this process's own
 * parents (each no younger than its child; a bound before the process
 * started gives nothing: a pid used again), and the peer block both ways. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/route_peer.h"

static void test_parse_stat(void **state) {
  (void)state;
  long ppid = 0;
  unsigned long long st = 0;
  const char *ok = "1234 (sh) S 77 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 74501 5 6\n";
  assert_int_equal(agent_route_peer_parse_stat(ok, strlen(ok), &ppid, &st), 0);
  assert_int_equal(ppid, 77);
  assert_int_equal(st, 74501);
  /* A process named "x) S 1 ... 1 0 9" cannot pose as another parent or
   * start time: the fields are read after the last ')'. */
  const char *named = "42 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9) R 5 1 1 0 -1 0 0 0 0 0 0 0 0 "
                      "0 20 0 1 0 3000 0\n";
  assert_int_equal(agent_route_peer_parse_stat(named, strlen(named), &ppid, &st), 0);
  assert_int_equal(ppid, 5);
  assert_int_equal(st, 3000);
  const char *bad[] = {"", "1 (sh) S", "1 (sh) S x 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n",
                       "1 sh S 7 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n",
                       "1 (sh) S 7 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0\n5\n",
                       "1 (sh) S 99999999999 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (agent_route_peer_parse_stat(bad[i], strlen(bad[i]), &ppid, &st) == 0)
      fail_msg("took '%s'", bad[i]);
}

static void test_walk_own_parents(void **state) {
  (void)state;
  static route_peer p;
  agent_route_peer_walk("/proc", (long)getpid(), agent_route_peer_now_ticks(), &p);
  assert_true(p.n >= 1);
  assert_int_equal(p.pid[0], (uint32_t)getpid());
  if (getppid() > 1) {
    assert_true(p.n >= 2);
    assert_int_equal(p.pid[1], (uint32_t)getppid());
  }
  for (uint32_t i = 1; i < p.n; i++) assert_true(p.start[i] <= p.start[i - 1]);
  for (uint32_t i = 0; i < p.n; i++) assert_true(p.pid[i] > 1);
  /* A bound before this process started: its pid is not its. */
  unsigned long long mine = p.start[0];
  if (mine > 1) {
    agent_route_peer_walk("/proc", (long)getpid(), mine - 1, &p);
    assert_int_equal(p.n, 0);
  }
  agent_route_peer_walk("/proc", 1, 0, &p);
  assert_int_equal(p.n, 0); /* init is nobody's call */
  agent_route_peer_walk("/proc", 0, 0, &p);
  assert_int_equal(p.n, 0); /* outside the pid namespace */
  agent_route_peer_walk("/nonexistent", (long)getpid(), 0, &p);
  assert_int_equal(p.n, 0);
}

static void test_block(void **state) {
  (void)state;
  static route_peer p, q;
  memset(&p, 0, sizeof p);
  p.uid = 1000;
  p.gid = 1001;
  p.n = ROUTE_PEER_CHAIN_MAX;
  for (uint32_t i = 0; i < p.n; i++) {
    p.pid[i] = 1000 + i;
    p.start[i] = ((uint64_t)1 << 40) + i;
  }
  unsigned char buf[ROUTE_PEER_BLOCK_MAX + 8];
  size_t n = agent_route_peer_encode(&p, buf, sizeof buf);
  assert_int_equal(n, ROUTE_PEER_BLOCK_MAX);
  assert_int_equal(agent_route_peer_encode(&p, buf, n - 1), 0);
  memcpy(buf + n, "GET /", 5);
  assert_int_equal(agent_route_peer_decode(buf, n + 5, &q), n);
  assert_int_equal(q.uid, 1000);
  assert_int_equal(q.gid, 1001);
  assert_int_equal(q.n, p.n);
  assert_memory_equal(q.pid, p.pid, sizeof p.pid);
  assert_memory_equal(q.start, p.start, sizeof p.start);
  assert_int_equal(agent_route_peer_decode(buf, n - 1, &q), 0); /* short */
  buf[11] = (unsigned char)(ROUTE_PEER_CHAIN_MAX + 1);    /* over the cap */
  assert_int_equal(agent_route_peer_decode(buf, sizeof buf, &q), 0);
  p.n = 0;
  assert_int_equal(agent_route_peer_encode(&p, buf, sizeof buf), 12);
  assert_int_equal(agent_route_peer_decode(buf, 12, &q), 12);
  assert_int_equal(q.n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_stat),
      cmocka_unit_test(test_walk_own_parents),
      cmocka_unit_test(test_block),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
