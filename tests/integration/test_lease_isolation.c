/* A leased credential is readable only by the call that consumed the lease
 * (issue 13, item 2), written as the attack: an earlier call in the same
 * per_run or per_worker sandbox leaves a snooper running that reads every process's
 * /proc/<pid>/environ and cmdline, ptrace-attaches to every new process
 * and reads its stack through /proc/<pid>/mem, and writes what looks like
 * a credential to /tmp/loot. A plain call's -e value is caught (the snooper
 * works); the leased call's value is not, through the engine's exec (the
 * path of `sandman run`) and in a runner whose other calls go through the
 * in-sandbox agent; a call in flight beside it that snoops too gets
 * nothing either (the leased call waits for it). The snooper itself lives on (it was only stopped), and
 * what the leased call left in the background (it inherited the value) is
 * gone. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "support/itest.h"

ITEST_TWO_RUNNERS_GROUP("it-test_lease_isolation")

static const char *runtime = ""; /* the engine's default, or runsc */

/* Reads every other process's environ and cmdline, and seizes every new
 * process with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT: the same access
 * check as an attach, and no stray SIGSTOP left behind) to read its stack
 * through /proc/<pid>/mem; what looks like a credential goes to /tmp/loot
 * as "<where> <value>". Runs for argv[1] seconds (default 600). */
static const char snooper[] =
    "import os, sys, time, ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]\n"
    "MARK = b'snoopval_'\n"
    "loot = open('/tmp/loot', 'ab', 0)\n"
    "def note(what, data):\n"
    "    i = data.find(MARK)\n"
    "    while i >= 0:\n"
    "        j = i + len(MARK)\n"
    "        while j < len(data) and chr(data[j]).isalnum(): j += 1\n"
    "        loot.write(what + b' ' + data[i:j] + b'\\n')\n"
    "        i = data.find(MARK, j)\n"
    "def stack(pid):\n"
    "    for line in open('/proc/%d/maps' % pid):\n"
    "        if '[stack]' in line:\n"
    "            lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
    "            with open('/proc/%d/mem' % pid, 'rb') as m:\n"
    "                m.seek(lo)\n"
    "                note(b'mem', m.read(hi - lo))\n"
    "me, traced = os.getpid(), set()\n"
    "end = time.time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 600)\n"
    "open('/tmp/snooper.ready', 'w').close()\n"
    "while time.time() < end:\n"
    "    for d in os.listdir('/proc'):\n"
    "        if not d.isdigit() or int(d) == me: continue\n"
    "        pid = int(d)\n"
    "        for f in ('environ', 'cmdline'):\n"
    "            try: note(f.encode(), open('/proc/%d/%s' % (pid, f), 'rb').read())\n"
    "            except OSError: pass\n"
    "        if pid in traced: continue\n"
    "        traced.add(pid)\n"
    "        if libc.ptrace(0x4206, pid, None, None) != 0: continue\n"
    "        try:\n"
    "            libc.ptrace(0x4207, pid, None, None)\n"
    "            os.waitpid(pid, 0x40000000)\n"
    "            stack(pid)\n"
    "        except OSError: pass\n"
    "        libc.ptrace(17, pid, None, None)\n"
    "    time.sleep(0.002)\n";

static int run_call(sm_runner *r, const char *run_id, const char *script, const char *const *env,
                    size_t n_env, const char *const *secret, size_t n_secret, sm_run_result *res,
                    sm_error *err) {
  const char *argv[] = {"sh", "-c", script, "sh", snooper};
  sm_run_request req;
  sm_run_request_init(&req);
  /* The engine's exec in a per_run sandbox, the agent in a per_worker one. */
  req.settings.mode = r == with_agent ? SM_MODE_PER_WORKER : SM_MODE_PER_RUN;
  snprintf(req.settings.image, sizeof req.settings.image, "sandman/general:latest");
  snprintf(req.settings.runtime, sizeof req.settings.runtime, "%s", runtime);
  req.run_id = run_id;
  req.worker_id = run_id;
  req.argv = argv;
  req.argc = 5;
  req.env = env;
  req.n_env = n_env;
  req.secret_env = secret;
  req.n_secret_env = n_secret;
  req.settings.timeout_s = 60;
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

/* A call in flight beside the leased one: it snoops in the foreground for
 * 3 s, then notes that it has finished. */
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
                   "touch /tmp/concurrent.started; python3 -c \"$1\" 3; "
                   "touch /tmp/concurrent.done; echo done",
                   NULL, 0, NULL, 0, &c->res, &err);
  return NULL;
}

static void attack(sm_runner *r, const char *run_id) {
  sm_run_result res;
  /* 1. An earlier call leaves the snooper behind ($1 is its program). */
  call(r, run_id,
       "setsid python3 -c \"$1\" </dev/null >/dev/null 2>&1 &\n"
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

  /* 3. A call in flight that snoops too (it has started when the wait
   * call sees its mark), then the leased call: as long as the plain one
   * took to be caught and more, with a child left in the background
   * holding the value. It runs only once the concurrent call is over. */
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
  before = agent_calls(r);
  call(r, run_id,
       "sleep 300 </dev/null >/dev/null 2>&1 &\n"
       "i=0; while [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done\n"
       "test -e /tmp/concurrent.done && echo alone\n"
       "case \"$GH_TOKEN\" in snoopval_lease*) echo has-it ;; esac",
       NULL, 0, secret, 1, &res);
  assert_string_equal(res.stdout_data, "alone\nhas-it\n");
  sm_run_result_dispose(&res);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(c.rc, 0);
  assert_string_equal(c.res.stdout_data, "done\n");
  sm_run_result_dispose(&c.res);
  /* Never through the agent. */
  assert_int_equal(agent_calls(r), before);

  /* 4. What the snooper got, and what is left running. */
  call(r, run_id,
       "sort -u /tmp/loot; echo ---\n"
       "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done > /tmp/ps\n"
       "grep -c '^python3 -c' /tmp/ps; grep -c '^sleep 300 $' /tmp/ps || true\n"
       "awk '/^Uid:/ { print \"pid 1 uid \" $2 }' /proc/1/status",
       NULL, 0, NULL, 0, &res);
  const char *out = res.stdout_data;
  assert_non_null(strstr(out, "snoopval_plain"));
  if (strstr(out, value)) fail_msg("the snooper read the leased value: %s", out);
  assert_null(strstr(out, "snoopval_lease"));
  const char *tail = strstr(out, "---\n");
  assert_non_null(tail);
  /* The snooper is still running (resumed); the leased call's child is not. */
  /* pid 1 is root's: out of the user's reach (it could not be stopped). */
  if (strcmp(tail, "---\n1\n0\npid 1 uid 0\n") != 0)
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

/* Under gVisor (its own /proc and ptrace): the same attack, the same
 * result. */
static void test_gvisor(void **state) {
  (void)state;
  runtime = "runsc";
  attack(without_agent, "lease-gvisor");
  runtime = "";
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_engine_exec),
      cmocka_unit_test(test_runner_with_agent_sessions),
      cmocka_unit_test(test_gvisor),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
