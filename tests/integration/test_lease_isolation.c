/* A leased credential is readable only by the call that consumed the lease
 * (issue 13, item 2; issue 25, item 1), written as the attack: an earlier
 * call in the same per_run or per_worker sandbox leaves a snooper running
 * (tests/support/lease_snooper.c) that arms a POSIX timer sending itself
 * SIGCONT every 20 ms, so that no SIGSTOP holds it, reads every process's
 * /proc/<pid>/environ and cmdline, ptrace-seizes every new process and
 * reads its stack through /proc/<pid>/mem, and writes what looks like a
 * credential to /tmp/loot. A plain call's -e value is caught (the snooper
 * works); the leased call's value is not, through the engine's exec (the
 * path of `sandman run`), in a runner whose other calls go through the
 * in-sandbox agent, and under gVisor; a call in flight beside it that
 * snoops too gets nothing either (the leased call waits for it). The
 * leased call sees and changes the sandbox's /workspace (its change comes
 * back to the host and reaches the next call), the snooper runs on, never
 * stopped, and nothing of the leased call is left: not its background
 * child, not the container it ran in. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "support/itest.h"

ITEST_TWO_RUNNERS_GROUP("test_lease_isolation")

static const char *runtime = ""; /* the engine's default, or runsc */
static char workspace[256];      /* the calls' host workspace, holding the snooper */

/* Copies the static snooper into a fresh host workspace: every call of a
 * test copies it into the sandbox's /workspace. */
static void make_workspace(void) {
  snprintf(workspace, sizeof workspace, "/tmp/sandman-lease-ws-XXXXXX");
  assert_non_null(mkdtemp(workspace));
  char dst[320];
  snprintf(dst, sizeof dst, "%s/snoop", workspace);
  int in = open(SANDMAN_LEASE_SNOOPER, O_RDONLY);
  if (in < 0) fail_msg("the snooper %s is not built", SANDMAN_LEASE_SNOOPER);
  int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0755);
  assert_true(out >= 0);
  char buf[65536];
  for (ssize_t n; (n = read(in, buf, sizeof buf)) > 0;) assert_int_equal(write(out, buf, (size_t)n), n);
  close(in);
  close(out);
}

/* After each test, passed or not. */
static int remove_workspace(void **state) {
  (void)state;
  if (workspace[0] == '\0') return 0;
  const char *names[] = {"snoop", "leased.txt", "concurrent.done"};
  for (size_t i = 0; i < 3; i++) {
    char p[320];
    snprintf(p, sizeof p, "%s/%s", workspace, names[i]);
    unlink(p);
  }
  rmdir(workspace);
  workspace[0] = '\0';
  return 0;
}

static int run_call(sm_runner *r, const char *run_id, const char *script, const char *const *env,
                    size_t n_env, const char *const *secret, size_t n_secret, sm_run_result *res,
                    sm_error *err) {
  const char *argv[] = {"sh", "-c", script};
  sm_run_request req;
  sm_run_request_init(&req);
  /* The engine's exec in a per_run sandbox, the agent in a per_worker one. */
  req.settings.mode = r == with_agent ? SM_MODE_PER_WORKER : SM_MODE_PER_RUN;
  snprintf(req.settings.image, sizeof req.settings.image, "%s", ITEST_IMAGE);
  snprintf(req.settings.runtime, sizeof req.settings.runtime, "%s", runtime);
  req.run_id = run_id;
  req.worker_id = run_id;
  req.argv = argv;
  req.argc = 3;
  req.env = env;
  req.n_env = n_env;
  req.secret_env = secret;
  req.n_secret_env = n_secret;
  req.workspace = workspace;
  req.settings.timeout_s = 120;
  memset(res, 0, sizeof *res);
  return sm_run(r, &req, res, err);
}

static void call(sm_runner *r, const char *run_id, const char *script, const char *const *env,
                 size_t n_env, const char *const *secret, size_t n_secret, sm_run_result *res) {
  sm_error err = SM_ERROR_INIT;
  if (run_call(r, run_id, script, env, n_env, secret, n_secret, res, &err) != 0)
    fail_msg("call [%.40s]: %s", script, err.message);
  if (res->failure_kind != SM_FAIL_NONE && res->failure_kind != SM_FAIL_TOOL)
    fail_msg("call [%.40s] failed: %s", script, res->error);
}

static unsigned long agent_calls(sm_runner *r) {
  sm_agent_stats st;
  sm_runner_agent_stats(r, &st);
  return st.calls;
}

/* The instance's containers labelled io.sandman.lease (lease containers). */
static size_t lease_containers(void) {
  char inst[200];
  snprintf(inst, sizeof inst, "io.sandman.instance=%s", instance());
  const char *labels[] = {inst, "io.sandman.lease"};
  json_object *list = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_list(engine, 1, labels, 2, &list, &err) != 0)
    fail_msg("listing containers: %s", err.message);
  size_t n = json_object_array_length(list);
  json_object_put(list);
  return n;
}

/* A call in flight beside the leased one: it snoops in the foreground for
 * 3 s, then notes in /workspace that it has finished. */
typedef struct concurrent {
  sm_runner *r;
  const char *run_id;
  int rc;
  sm_run_result res;
} concurrent;

static void *concurrent_snooper(void *arg) {
  concurrent *c = arg;
  sm_error err = SM_ERROR_INIT;
  c->rc = run_call(c->r, c->run_id,
                   "touch /tmp/concurrent.started; /workspace/snoop 3 /tmp/loot /tmp/c.ready; "
                   "touch /workspace/concurrent.done; echo done",
                   NULL, 0, NULL, 0, &c->res, &err);
  return NULL;
}

/* Prints the leased call's and the concurrent call's results in full. */
static void report_both(const sm_run_result *leased, const concurrent *c) {
  const sm_run_result *r[] = {leased, &c->res};
  const char *what[] = {"the leased call", "the concurrent call"};
  for (int i = 0; i < 2; i++) {
    json_object *o = sm_run_result_to_json(r[i]);
    fprintf(stderr, "%s: %s\n", what[i],
            o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : "(no memory)");
    json_object_put(o);
  }
  fprintf(stderr, "the concurrent call's sm_run: %d\n", c->rc);
}

static void plant_and_check_snooper(sm_runner *r, const char *run_id) {
  sm_run_result res;
  /* 1. An earlier call leaves the snooper behind, and a FIFO in
   * /workspace, which no copy out brings to the host: it stays in the
   * sandbox (a refusal), a leased call in it included. */
  call(r, run_id,
       "mkfifo /workspace/held.fifo\n"
       "setsid /workspace/snoop 900 /tmp/loot /tmp/snooper.ready </dev/null >/dev/null 2>&1 &\n"
       "i=0; while [ ! -e /tmp/snooper.ready ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n"
       "test -e /tmp/snooper.ready && echo planted",
       NULL, 0, NULL, 0, &res);
  assert_string_equal(res.stdout_data, "planted\n");
  sm_run_result_dispose(&res);

  /* 2. The snooper works: a plain call's value is caught (the call waits
   * for it rather than for a time). Through the agent in that runner. */
  unsigned long before = agent_calls(r);
  const char *plain_env[] = {"PLAIN_VALUE=snoopval_plain"};
  call(r, run_id,
       "i=0; while ! grep -q '^environ snoopval_plain$' /tmp/loot 2>/dev/null && [ $i -lt 600 ]; "
       "do sleep 0.05; i=$((i+1)); done; grep -q '^environ snoopval_plain$' /tmp/loot && "
       "echo caught",
       plain_env, 1, NULL, 0, &res);
  assert_string_equal(res.stdout_data, "caught\n");
  sm_run_result_dispose(&res);
  if (r == with_agent) assert_int_equal(agent_calls(r), before + 1);
}

static void attack(sm_runner *r, const char *run_id) {
  make_workspace();
  plant_and_check_snooper(r, run_id);
  sm_run_result res;

  /* 3. A call in flight that snoops too (it has started when the wait
   * call sees its mark), then the leased call: a second of the attackers'
   * time, with a child left in the background holding the value. It runs
   * only once the concurrent call is over, sees the sandbox's /workspace
   * and changes it. */
  concurrent c = {r, run_id, -1, {0}};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, concurrent_snooper, &c), 0);
  call(r, run_id,
       "i=0; while [ ! -e /tmp/concurrent.started ] && [ $i -lt 1200 ]; do sleep 0.05; "
       "i=$((i+1)); done; test -e /tmp/concurrent.started && echo started",
       NULL, 0, NULL, 0, &res);
  assert_string_equal(res.stdout_data, "started\n");
  sm_run_result_dispose(&res);
  char value[64], kv[96];
  snprintf(value, sizeof value, "snoopval_lease%ld%d", (long)getpid(), r == with_agent);
  snprintf(kv, sizeof kv, "GH_TOKEN=%s", value);
  const char *secret[] = {kv};
  unsigned long before = agent_calls(r);
  call(r, run_id,
       "sleep 300 </dev/null >/dev/null 2>&1 &\n"
       "i=0; while [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done\n"
       "test -e /workspace/concurrent.done && echo alone\n"
       "test -x /workspace/snoop && echo sees-workspace\n"
       "echo leased > /workspace/leased.txt\n"
       "case \"$GH_TOKEN\" in snoopval_lease*) echo has-it ;; esac",
       NULL, 0, secret, 1, &res);
  assert_int_equal(pthread_join(th, NULL), 0);
  if (strcmp(res.stdout_data ? res.stdout_data : "", "alone\nsees-workspace\nhas-it\n") != 0)
    report_both(&res, &c); /* what each call saw, to tell a race from a replaced sandbox */
  assert_string_equal(res.stdout_data, "alone\nsees-workspace\nhas-it\n");
  sm_run_result_dispose(&res);
  assert_int_equal(c.rc, 0);
  assert_string_equal(c.res.stdout_data, "done\n");
  sm_run_result_dispose(&c.res);
  /* Never through the agent; nothing of the container it ran in is left. */
  assert_int_equal(agent_calls(r), before);
  assert_int_equal(lease_containers(), 0);
  /* Its change came back to the host. */
  char p[320], got[32] = "";
  snprintf(p, sizeof p, "%s/leased.txt", workspace);
  FILE *f = fopen(p, "r");
  assert_non_null(f);
  assert_non_null(fgets(got, sizeof got, f));
  fclose(f);
  assert_string_equal(got, "leased\n");

  /* 4. What the snooper got, and what is left running: the snooper, not
   * stopped; nothing of the leased call's. */
  call(r, run_id,
       "sort -u /tmp/loot; echo ---\n"
       "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done > /tmp/ps\n"
       "grep -c '^/workspace/snoop 900' /tmp/ps; grep -c '^sleep 300 $' /tmp/ps || true\n"
       "for p in $(pidof snoop); do awk '/^State:/ { print \"snooper \" $2 }' /proc/$p/status; "
       "done\n"
       "awk '/^Uid:/ { print \"pid 1 uid \" $2 }' /proc/1/status\n"
       "cat /workspace/leased.txt; test -p /workspace/held.fifo && echo held",
       NULL, 0, NULL, 0, &res);
  const char *out = res.stdout_data;
  assert_non_null(strstr(out, "snoopval_plain"));
  if (strstr(out, value)) fail_msg("the snooper read the leased value: %s", out);
  assert_null(strstr(out, "snoopval_lease"));
  const char *tail = strstr(out, "---\n");
  assert_non_null(tail);
  /* The snooper runs (S: sleeping, R: running; T would be stopped); the
   * leased call's child is gone; pid 1 is root's; the change is there,
   * and so is the FIFO. */
  if (strcmp(tail, "---\n1\n0\nsnooper S\npid 1 uid 0\nleased\nheld\n") != 0 &&
      strcmp(tail, "---\n1\n0\nsnooper R\npid 1 uid 0\nleased\nheld\n") != 0)
    fail_msg("left running: %s\n%s", tail, res.stderr_data);
  sm_run_result_dispose(&res);
}

static void test_engine_exec(void **state) {
  (void)state;
  attack(without_agent, "lease-engine");
}

static void test_runner_with_agent_sessions(void **state) {
  (void)state;
  attack(with_agent, "lease-agent");
}

/* Under gVisor (its own /proc, ptrace and timers): the same attack, the
 * same result. */
static void test_gvisor(void **state) {
  (void)state;
  runtime = "runsc";
  attack(without_agent, "lease-gvisor");
  runtime = "";
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_engine_exec, remove_workspace),
      cmocka_unit_test_teardown(test_runner_with_agent_sessions, remove_workspace),
      cmocka_unit_test_teardown(test_gvisor, remove_workspace),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
