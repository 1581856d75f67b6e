/* The sandbox lifecycle through the library (sm_run) against the real
 * engine: reuse, replacement on a configuration change (never under a call
 * in flight), busy and last-used state, cleanup after failed creation,
 * many threads on one runner, per_tool cleanup, clear runtime errors. */
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

#include "sandbox/spec.h"
#include "support/itest.h"

static sm_engine *engine;
static sm_runner *runner;

static const char *instance(void) {
  return itest_instance("test_lifecycle");
}

static int count(const char *extra_label, int volumes) {
  char l1[128];
  snprintf(l1, sizeof l1, "io.sandman.instance=%s", instance());
  const char *labels[] = {l1, extra_label};
  size_t n = extra_label ? 2 : 1;
  json_object *list = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = volumes ? sm_engine_volume_list(engine, labels, n, &list, &err)
                   : sm_engine_container_list(engine, 1, labels, n, &list, &err);
  if (rc) fail_msg("listing: %s", err.message);
  int c = list ? (int)json_object_array_length(list) : 0;
  json_object_put(list);
  return c;
}

static void cleanup(void) { itest_remove_instance(engine, instance()); }

static int setup(void **state) {
  (void)state;
  /* Unique per process: the same test may run from several build trees. */
  char inst[128];
  snprintf(inst, sizeof inst, "%s-%ld", instance(), (long)getpid());
  setenv("SANDMAN_INSTANCE", inst, 1);
  engine = itest_engine();
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&runner, &o, &err) != 0) fail_msg("runner: %s", err.message);
  cleanup();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (engine) cleanup();
  sm_runner_free(runner);
  sm_engine_free(engine);
  return 0;
}

static void request(sm_run_request *req, sm_mode mode, const char *run_id,
                    const char *const *argv, size_t argc) {
  sm_run_request_init(req);
  req->settings.mode = mode;
  req->run_id = run_id;
  req->argv = argv;
  req->argc = argc;
  req->settings.timeout_s = 60;
}

static void keyed_name(const char *key, char out[SM_NAME_MAX]) {
  assert_int_equal(sandbox_keyed_name(sm_runner_instance(runner), SM_MODE_PER_RUN, key, out,
                                      SM_NAME_MAX, NULL),
                   0);
}

static void test_reuse_busy_and_last_used(void **state) {
  (void)state;
  const char *argv[] = {"sh", "-c", "echo hi; exit 3"};
  sm_run_request req;
  request(&req, SM_MODE_PER_RUN, "life-1", argv, 3);
  sm_run_result a, b;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(runner, &req, &a, &err), 0);
  assert_int_equal(a.exit_code, 3);
  assert_string_equal(a.stdout_data, "hi\n");
  assert_int_equal(a.failure_kind, SM_FAIL_TOOL);
  assert_false(a.reused);
  assert_int_equal(sm_run(runner, &req, &b, &err), 0);
  assert_true(b.reused);
  assert_string_equal(a.sandbox_id, b.sandbox_id);
  char name[SM_NAME_MAX];
  keyed_name("run:default:life-1", name);
  const char *sd = sm_runner_state_dir(runner);
  assert_int_equal(sm_state_is_busy(sd, name), 0);
  assert_true(sm_state_last_used(sd, name) > sm_now() - 60);
  sm_run_result_dispose(&a);
  sm_run_result_dispose(&b);
}

typedef struct slow_call {
  sm_run_result result;
  int order;
} slow_call;

static int finished;
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;

static void *run_slow(void *p) {
  slow_call *c = p;
  const char *argv[] = {"sh", "-c", "sleep 3; echo old-config"};
  sm_run_request req;
  request(&req, SM_MODE_PER_RUN, "life-2", argv, 3);
  sm_error err = SM_ERROR_INIT;
  sm_run(runner, &req, &c->result, &err);
  pthread_mutex_lock(&order_lock);
  c->order = ++finished;
  pthread_mutex_unlock(&order_lock);
  return NULL;
}

static void test_config_change_waits_for_call_in_flight(void **state) {
  (void)state;
  const char *argv[] = {"true"};
  sm_run_request req;
  request(&req, SM_MODE_PER_RUN, "life-2", argv, 1);
  sm_run_result first;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(runner, &req, &first, &err), 0);
  assert_int_equal(first.exit_code, 0);

  finished = 0;
  slow_call slow;
  memset(&slow, 0, sizeof slow);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, run_slow, &slow), 0);
  char name[SM_NAME_MAX];
  keyed_name("run:default:life-2", name);
  /* Wait until the slow call holds the sandbox. */
  for (int i = 0; i < 200 && !sm_state_is_busy(sm_runner_state_dir(runner), name); i++)
    usleep(50 * 1000);
  assert_int_equal(sm_state_is_busy(sm_runner_state_dir(runner), name), 1);

  const char *argv2[] = {"cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  sm_run_request req2;
  request(&req2, SM_MODE_PER_RUN, "life-2", argv2, 2);
  req2.settings.memory = 256LL << 20;
  sm_run_result second;
  assert_int_equal(sm_run(runner, &req2, &second, &err), 0);
  pthread_mutex_lock(&order_lock);
  int second_order = ++finished;
  pthread_mutex_unlock(&order_lock);
  pthread_join(t, NULL);

  /* The old call finished undisturbed, before the replacement ran. */
  assert_int_equal(slow.result.exit_code, 0);
  assert_string_equal(slow.result.stdout_data, "old-config\n");
  assert_string_equal(slow.result.sandbox_id, first.sandbox_id);
  assert_int_equal(slow.order, 1);
  assert_int_equal(second_order, 2);
  assert_int_equal(second.exit_code, 0);
  assert_false(second.reused);
  assert_string_not_equal(second.sandbox_id, first.sandbox_id);
  assert_string_equal(second.stdout_data, "268435456\n");
  assert_int_equal(count("io.sandman.scope-key=run:default:life-2", 0), 1);
  assert_int_equal(count("io.sandman.scope-key=run:default:life-2", 1), 1);
  sm_run_result_dispose(&first);
  sm_run_result_dispose(&second);
  sm_run_result_dispose(&slow.result);
}

static void test_failed_start_removes_everything(void **state) {
  (void)state;
  const char *argv[] = {"true"};
  sm_run_request req;
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  /* Above the kernel's nr_open: created, but the runtime cannot start it. */
  request(&req, SM_MODE_PER_RUN, "life-broken", argv, 1);
  req.settings.nofile = 1LL << 31;
  assert_int_equal(sm_run(runner, &req, &r, &err), 0);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_int_equal(r.exit_code, 125);
  assert_non_null(strstr(r.error, "starting sandbox"));
  assert_int_equal(count("io.sandman.scope-key=run:default:life-broken", 0), 0);
  assert_int_equal(count("io.sandman.scope-key=run:default:life-broken", 1), 0);
  sm_run_result_dispose(&r);

  /* The same for a per_tool sandbox. */
  request(&req, SM_MODE_PER_TOOL, NULL, argv, 1);
  req.settings.nofile = 1LL << 31;
  assert_int_equal(sm_run(runner, &req, &r, &err), 0);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_int_equal(count("io.sandman.mode=per_tool", 0), 0);
  assert_int_equal(count("io.sandman.mode=per_tool", 1), 0);
  sm_run_result_dispose(&r);

  /* A missing image: a clear error, nothing made. */
  request(&req, SM_MODE_PER_TOOL, NULL, argv, 1);
  snprintf(req.settings.image, sizeof req.settings.image, "sandman/no-such-image:1");
  assert_int_equal(sm_run(runner, &req, &r, &err), 0);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "sandman/no-such-image:1"));
  assert_int_equal(count(NULL, 0), 2); /* life-1 and life-2 only */
  sm_run_result_dispose(&r);
}

static void test_unknown_runtime_is_a_clear_error(void **state) {
  (void)state;
  const char *argv[] = {"true"};
  sm_run_request req;
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  request(&req, SM_MODE_PER_TOOL, NULL, argv, 1);
  snprintf(req.settings.runtime, sizeof req.settings.runtime, "no-such-runtime");
  assert_int_equal(sm_run(runner, &req, &r, &err), 0);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "runtime 'no-such-runtime' is not registered"));
  sm_run_result_dispose(&r);

  /* A runtime the engine lacks is refused everywhere: never the host. */
  sm_fallback_decision d;
  assert_int_not_equal(sm_fallback_decide(runner, SM_MODE_PER_RUN, 1, "development",
                                          "no-such-runtime", NULL, &d, &err), 0);
  assert_int_equal(d.mode, SM_MODE_PER_RUN);
  assert_true(d.refused);
  assert_false(d.runtime_ok);
  assert_true(d.engine_ok);
  assert_int_equal(d.n_reasons, 1);
  assert_non_null(strstr(err.message, "no-such-runtime"));
  assert_int_not_equal(sm_fallback_decide(runner, SM_MODE_PER_RUN, 1, "production",
                                          "no-such-runtime", NULL, &d, &err), 0);
  assert_true(d.refused);
  assert_non_null(strstr(err.message, "no-such-runtime"));
  assert_int_equal(sm_fallback_decide(runner, SM_MODE_PER_WORKER, 0, "production", NULL, NULL, &d,
                                      &err), 0);
  assert_int_equal(d.mode, SM_MODE_PER_WORKER);
  json_object *j = sm_fallback_decision_to_json(&d);
  assert_non_null(j);
  json_object_put(j);
}

static void test_fallback_without_engine(void **state) {
  (void)state;
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  o.engine.host = "unix:///nonexistent/docker.sock";
  sm_runner *dead = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_new(&dead, &o, &err), 0);
  sm_fallback_decision d;
  /* A mode from the configuration's defaults steps down outside production. */
  assert_int_equal(sm_fallback_decide(dead, SM_MODE_PER_WORKER, 1, "development", NULL, NULL, &d,
                                      &err), 0);
  assert_int_equal(d.mode, SM_MODE_NONE);
  assert_false(d.engine_ok);
  assert_int_equal(sm_fallback_decide(dead, SM_MODE_PER_RUN, 1, "production", NULL, NULL, &d,
                                      &err),
                   SM_EUNREACHABLE);
  assert_true(d.refused);
  /* An explicit mode, or any runtime, never steps down: refused. */
  assert_int_equal(sm_fallback_decide(dead, SM_MODE_PER_TOOL, 0, "development", NULL, NULL, &d,
                                      &err),
                   SM_EUNREACHABLE);
  assert_true(d.refused);
  assert_int_equal(d.mode, SM_MODE_PER_TOOL);
  assert_non_null(strstr(err.message, "explicitly"));
  assert_int_equal(sm_fallback_decide(dead, SM_MODE_PER_TOOL, 1, "development", "runsc", NULL, &d,
                                      &err),
                   SM_EUNREACHABLE);
  assert_true(d.refused);
  /* A container call with no engine is an engine failure, reported. */
  const char *argv[] = {"true"};
  sm_run_request req;
  sm_run_result r;
  request(&req, SM_MODE_PER_TOOL, NULL, argv, 1);
  assert_int_equal(sm_run(dead, &req, &r, &err), 0);
  assert_int_equal(r.failure_kind, SM_FAIL_ENGINE);
  assert_int_equal(r.exit_code, 125);
  sm_run_result_dispose(&r);
  sm_runner_free(dead);
}

typedef struct thread_call {
  int i;
  sm_run_result r;
} thread_call;

static void *thread_run(void *p) {
  thread_call *c = p;
  char script[64];
  snprintf(script, sizeof script, "echo thread-%d", c->i);
  const char *argv[] = {"sh", "-c", script};
  sm_run_request req;
  request(&req, SM_MODE_PER_RUN, "life-threads", argv, 3);
  sm_error err = SM_ERROR_INIT;
  sm_run(runner, &req, &c->r, &err);
  return NULL;
}

static void test_threads_share_one_runner(void **state) {
  (void)state;
  enum { N = 8 };
  thread_call calls[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    memset(&calls[i], 0, sizeof calls[i]);
    calls[i].i = i;
    assert_int_equal(pthread_create(&t[i], NULL, thread_run, &calls[i]), 0);
  }
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < N; i++) {
    char want[32];
    snprintf(want, sizeof want, "thread-%d\n", i);
    assert_int_equal(calls[i].r.exit_code, 0);
    assert_string_equal(calls[i].r.stdout_data, want);
    assert_string_equal(calls[i].r.sandbox_id, calls[0].r.sandbox_id);
    sm_run_result_dispose(&calls[i].r);
  }
  assert_int_equal(count("io.sandman.scope-key=run:default:life-threads", 0), 1);
}

static void test_per_tool_owner_and_cleanup(void **state) {
  (void)state;
  const char *argv[] = {"sh", "-c", "echo $HOME; id -u"};
  sm_run_request req;
  request(&req, SM_MODE_PER_TOOL, NULL, argv, 3);
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(runner, &req, &r, &err), 0);
  assert_string_equal(r.stdout_data, "/workspace\n1000\n");
  assert_int_equal(strlen(r.sandbox_id), 64);
  json_object *insp = NULL;
  assert_int_equal(sm_engine_container_inspect(engine, r.sandbox_id, &insp, &err), SM_ENOTFOUND);
  assert_int_equal(count("io.sandman.mode=per_tool", 0), 0);
  assert_int_equal(count("io.sandman.mode=per_tool", 1), 0);
  sm_run_result_dispose(&r);
}

static void test_named_users(void **state) {
  (void)state;
  const char *argv[] = {"sh", "-c", "id -u; id -g; stat -c %u /workspace"};
  sm_run_request req;
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  request(&req, SM_MODE_PER_TOOL, NULL, argv, 3);
  /* A user name is looked up in the image's /etc/passwd. */
  snprintf(req.settings.user, sizeof req.settings.user, "sandbox");
  assert_int_equal(sm_run(runner, &req, &r, &err), 0);
  assert_int_equal(r.exit_code, 0);
  assert_string_equal(r.stdout_data, "1000\n1000\n1000\n");
  sm_run_result_dispose(&r);
  snprintf(req.settings.user, sizeof req.settings.user, "no-such-user");
  assert_int_equal(sm_run(runner, &req, &r, &err), 0);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "no-such-user"));
  sm_run_result_dispose(&r);
  /* Neither call left anything (the lookup container included). */
  assert_int_equal(count("io.sandman.mode=per_tool", 0), 0);
  assert_int_equal(count("io.sandman.mode=lookup", 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reuse_busy_and_last_used),
      cmocka_unit_test(test_config_change_waits_for_call_in_flight),
      cmocka_unit_test(test_failed_start_removes_everything),
      cmocka_unit_test(test_unknown_runtime_is_a_clear_error),
      cmocka_unit_test(test_fallback_without_engine),
      cmocka_unit_test(test_threads_share_one_runner),
      cmocka_unit_test(test_per_tool_owner_and_cleanup),
      cmocka_unit_test(test_named_users),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
