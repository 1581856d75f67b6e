/* The reap decision: labels, state, busy, last use, owner -> remove or
 * spare, with the reason in words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/ops.h>
#include <sandman/util.h>

#define NOW 1000000.0

static sm_ops_reap_input base(void) {
  sm_ops_reap_input in;
  memset(&in, 0, sizeof in);
  in.mode = "per_run";
  in.state = "running";
  in.created_at = NOW - 3600;
  in.last_used_at = NOW - 600; /* used 10 minutes ago */
  in.now = NOW;
  in.owner = SM_OPS_OWNER_NONE;
  in.older_than_s = 1800; /* 30m */
  return in;
}

static sm_ops_verdict decide(const sm_ops_reap_input *in, char *reason) {
  return sm_ops_reap_decide(in, reason, 320);
}

static void test_idle(void **state) {
  (void)state;
  char why[320];
  sm_ops_reap_input in = base();
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  assert_string_equal(why, "used 10m ago (limit 30m)");
  in.older_than_s = 300;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_string_equal(why, "idle for 10m (limit 5m)");
  /* 0s removes anything not busy, however fresh. */
  in.older_than_s = 0;
  in.last_used_at = NOW;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  /* Never used: the creation time counts. */
  in = base();
  in.last_used_at = -1;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_string_equal(why, "never used, created 1h ago (limit 30m)");
  in.created_at = NOW - 60;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  assert_string_equal(why, "created 1m ago, not used yet (limit 30m)");
  /* No idle criterion: a healthy running sandbox stays. */
  in = base();
  in.older_than_s = -1;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  /* A clock that went backwards is not "idle for -5m". */
  in = base();
  in.last_used_at = NOW + 300;
  in.older_than_s = 0;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_string_equal(why, "idle for 0s (limit 0s)");
}

/* A sandbox's own idle timeout and life (its labels). */
static void test_own_limits(void **state) {
  (void)state;
  char why[320];
  sm_ops_reap_input in = base(); /* used 10m ago, reap --older-than 30m */
  in.own_idle_s = 300;           /* its own: 5m */
  assert_int_equal(decide(&in, why), SM_OPS_SPARE); /* the reap's limit wins when given */
  in.own_first = 1;              /* the runner's idle reap: its own wins */
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_string_equal(why, "idle for 10m (limit 5m)");
  in.own_idle_s = 3600;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  assert_string_equal(why, "used 10m ago (limit 1h)");
  /* No --older-than: its own applies. */
  in = base();
  in.older_than_s = -1;
  in.own_idle_s = 300;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  /* Its life is over: removed whatever its use, but never while busy. */
  in = base();
  in.older_than_s = -1;
  in.last_used_at = NOW;
  in.expires_at = NOW - 1;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_string_equal(why, "its life of 59m59s is over");
  in.busy = 1;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  in.busy = 0;
  in.expires_at = NOW + 60;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
}

static void test_busy(void **state) {
  (void)state;
  char why[320];
  sm_ops_reap_input in = base();
  in.busy = 1;
  in.older_than_s = 0;
  in.last_used_at = NOW - 86400;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  assert_non_null(strstr(why, "busy"));
  /* Busy beats every other reason... */
  in.state = "exited";
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  in.owner = SM_OPS_OWNER_GONE;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  /* ...except --force. */
  in.force = 1;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_non_null(strstr(why, "--force"));
  in = base();
  in.busy = 1;
  in.force = 1;
  in.older_than_s = 3600; /* force still honours the age */
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
}

/* A fork cut short keeps its "-forking-" name: removed once its maker is
 * gone, whatever the age; spared while the maker lives (unless --force). */
static void test_fork_cut_short(void **state) {
  (void)state;
  char why[320];
  sm_ops_reap_input in = base();
  in.older_than_s = -1;
  in.making_label = "host:77";
  in.making = SM_OPS_OWNER_GONE;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_string_equal(why, "a fork cut short: its maker host:77 is gone");
  in.making = SM_OPS_OWNER_ALIVE;
  in.older_than_s = 0;
  in.last_used_at = NOW - 86400;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  assert_string_equal(why, "being made from a snapshot by host:77");
  in.force = 1;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  /* Not a fork being made: the usual rules (no age given: spared). */
  in = base();
  in.older_than_s = -1;
  in.making = SM_OPS_OWNER_NONE;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
}

static void test_state_and_owner(void **state) {
  (void)state;
  char why[320];
  sm_ops_reap_input in = base();
  in.older_than_s = 86400;
  in.state = "exited";
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_string_equal(why, "not running (exited)");
  in.state = "dead";
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  in.state = "removing";
  in.older_than_s = 0;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);

  in = base();
  in.mode = "per_tool";
  in.owner_label = "host:42";
  in.older_than_s = -1;
  in.owner = SM_OPS_OWNER_GONE;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  assert_string_equal(why, "its owner host:42 is gone");
  /* A live owner is setting its container up or tearing it down. */
  in.owner = SM_OPS_OWNER_ALIVE;
  in.older_than_s = 0;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  assert_non_null(strstr(why, "alive"));
  in.force = 1;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
  /* Another host's owner: only the age can tell. */
  in = base();
  in.owner = SM_OPS_OWNER_UNKNOWN;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE);
  in.older_than_s = 60;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE);
}

static void test_pool(void **state) {
  (void)state;
  char why[320];
  sm_ops_reap_input in = base();
  in.pool = 1;
  in.older_than_s = 0;
  assert_int_equal(decide(&in, why), SM_OPS_REMOVE); /* an operator's reap takes them */
  in.keep_pool = 1;
  assert_int_equal(decide(&in, why), SM_OPS_SPARE); /* the worker's idle reap does not */
  assert_string_equal(why, "kept by the warm pool");
}

static void test_owner_check(void **state) {
  (void)state;
  char host[256], label[320];
  assert_int_equal(gethostname(host, sizeof host), 0);
  double now = sm_now();
  assert_int_equal(sm_ops_owner_check(NULL, now), SM_OPS_OWNER_NONE);
  assert_int_equal(sm_ops_owner_check("", now), SM_OPS_OWNER_NONE);
  assert_int_equal(sm_ops_owner_check("nocolon", now), SM_OPS_OWNER_UNKNOWN);
  assert_int_equal(sm_ops_owner_check("h:notapid", now), SM_OPS_OWNER_UNKNOWN);
  assert_int_equal(sm_ops_owner_check("some-other-host-xyz:1", now), SM_OPS_OWNER_UNKNOWN);

  snprintf(label, sizeof label, "%s:%ld", host, (long)getpid());
  assert_int_equal(sm_ops_owner_check(label, now), SM_OPS_OWNER_ALIVE);
  /* Our pid, but on a container made long before we started: reused. */
  assert_int_equal(sm_ops_owner_check(label, 1000), SM_OPS_OWNER_GONE);

  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(0);
  /* A zombie (exited, not waited for) is gone... */
  for (int i = 0; i < 200; i++) {
    snprintf(label, sizeof label, "%s:%ld", host, (long)child);
    if (sm_ops_owner_check(label, now) == SM_OPS_OWNER_GONE) break;
    usleep(10000);
  }
  assert_int_equal(sm_ops_owner_check(label, now), SM_OPS_OWNER_GONE);
  /* ...and so is a reaped one. */
  waitpid(child, NULL, 0);
  assert_int_equal(sm_ops_owner_check(label, now), SM_OPS_OWNER_GONE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idle),       cmocka_unit_test(test_busy),
      cmocka_unit_test(test_own_limits),
      cmocka_unit_test(test_state_and_owner), cmocka_unit_test(test_pool),
      cmocka_unit_test(test_fork_cut_short),
      cmocka_unit_test(test_owner_check),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
