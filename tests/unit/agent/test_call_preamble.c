/* A helper call's own preamble (src/shared/agent/call_preamble.c): the line the
 * shell wrapper prints for a tool, for the same process, which the host's
 * call watch (src/lib/sandbox/preamble.c) takes as the call's first process;
 * a token that is not one word is refused, and a process whose name
 * imitates the fields cannot move its start time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "agent/call_preamble.h"
#include "agent/route_peer.h"
#include "sandbox/capture.h"
#include "sandbox/preamble.h"

/* This process's start time, from /proc/self/stat, as text. */
static void own_start(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/stat", "r");
  assert_non_null(f);
  char line[1024];
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  long ppid = 0;
  unsigned long long st = 0;
  assert_int_equal(agent_route_peer_parse_stat(line, n, &ppid, &st), 0);
  snprintf(out, cap, "%llu", st);
}

static void test_the_host_takes_it(void **state) {
  (void)state;
  char line[192], pid[32], start[32];
  int n = agent_call_preamble("0123456789abcdef", line, sizeof line);
  assert_true(n > 0);
  assert_int_equal((size_t)n, strlen(line));
  assert_int_equal(line[n - 1], '\n');

  sandbox_capture cap;
  sandbox_call_watch w;
  sandbox_capture_init(&cap, 1024, 1024, NULL, NULL);
  sandbox_call_watch_init(&w, "0123456789abcdef", &cap);
  assert_int_equal(sandbox_call_watch_output(&w, 1, line, (size_t)n), 0);
  assert_int_equal(sandbox_call_watch_output(&w, 1, "{\"event\":\"end\"}\n", 16), 0);
  assert_int_equal(w.state, SM_CALL_WATCH_STARTED);
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  own_start(start, sizeof start);
  assert_string_equal(w.pid, pid);
  assert_string_equal(w.start, start);
  assert_string_equal(cap.out.data, "{\"event\":\"end\"}\n"); /* the answer, without it */
  sandbox_call_watch_dispose(&w);
  sandbox_capture_dispose(&cap);

  /* Another call's token: not this call's first line. */
  sandbox_capture_init(&cap, 1024, 1024, NULL, NULL);
  sandbox_call_watch_init(&w, "fedcba9876543210", &cap);
  sandbox_call_watch_output(&w, 1, line, (size_t)n);
  assert_int_equal(w.state, SM_CALL_WATCH_RUNTIME);
  sandbox_call_watch_dispose(&w);
  sandbox_capture_dispose(&cap);
}

static void test_a_name_cannot_move_the_start(void **state) {
  (void)state;
  char before[32], line[192], w1[32], w2[32], w3[32], w4[32];
  own_start(before, sizeof before);
  /* The process names itself like the fields after its name. */
  assert_int_equal(prctl(PR_SET_NAME, "x) R 1 1 1 0 9"), 0);
  int n = agent_call_preamble("tok", line, sizeof line);
  prctl(PR_SET_NAME, "test_call_pre");
  assert_true(n > 0);
  assert_int_equal(sscanf(line, "sandman-call %31s %31s %31s %31s", w1, w2, w3, w4), 4);
  assert_string_equal(w1, "tok");
  assert_string_equal(w3, before);
}

static void test_bad_tokens(void **state) {
  (void)state;
  char line[192], long_token[80];
  memset(long_token, 'a', 65);
  long_token[65] = '\0';
  assert_int_equal(agent_call_preamble("", line, sizeof line), -1);
  assert_int_equal(agent_call_preamble(NULL, line, sizeof line), -1);
  assert_int_equal(agent_call_preamble("a b", line, sizeof line), -1);
  assert_int_equal(agent_call_preamble("a\nsandman-call", line, sizeof line), -1);
  assert_int_equal(agent_call_preamble(long_token, line, sizeof line), -1);
  long_token[64] = '\0';
  assert_true(agent_call_preamble(long_token, line, sizeof line) > 0);
  assert_int_equal(agent_call_preamble("tok", line, 10), -1); /* no room: nothing half */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_host_takes_it),
      cmocka_unit_test(test_a_name_cannot_move_the_start),
      cmocka_unit_test(test_bad_tokens),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
