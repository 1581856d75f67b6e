/* The warm pool and the fast paths against the real engine: containers made
 * ahead of time with the usual labels, the pool label and every limit, each
 * with its own /workspace volume; each taken by one call and never reused;
 * refilled; drained when a caller's configuration changes; removed when the
 * runner is freed; listed and reaped like other sandboxes. Also: per_tool
 * removal in the background, a ready container removed behind the pool's
 * back, and the lookup cache of keyed sandboxes when the sandbox is removed
 * or stopped behind the runner's back; a burst of calls grows the pool
 * within its maximum, and every container of the burst is still taken once
 * and removed. Behaviour only: no timings. */
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

#define SETTLE_S 120

static sm_engine *engine;
static char inst[128];

static sm_runner *new_runner(unsigned pool_size) {
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  o.instance = inst;
  sm_runner *r = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&r, &o, &err) != 0) fail_msg("runner: %s", err.message);
  sm_runner_set_background_removal(r, 1);
  if (sm_runner_pool_set_size(r, pool_size, &err) != 0) fail_msg("pool: %s", err.message);
  return r;
}

static void settle(sm_runner *r) {
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_settle(r, SETTLE_S, &err) != 0) fail_msg("settle: %s", err.message);
}

/* This instance's containers (all states) carrying extra_label, or all. */
static json_object *containers(const char *extra_label) {
  char l1[200];
  snprintf(l1, sizeof l1, "io.sandman.instance=%s", inst);
  const char *labels[] = {l1, extra_label};
  json_object *list = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_list(engine, 1, labels, extra_label ? 2 : 1, &list, &err) != 0)
    fail_msg("listing: %s", err.message);
  return list;
}

static int count(const char *extra_label) {
  json_object *l = containers(extra_label);
  int n = (int)json_object_array_length(l);
  json_object_put(l);
  return n;
}

static int count_volumes(void) {
  char l1[200];
  snprintf(l1, sizeof l1, "io.sandman.instance=%s", inst);
  const char *labels[] = {l1};
  json_object *list = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_volume_list(engine, labels, 1, &list, &err) != 0) fail_msg("%s", err.message);
  int n = list ? (int)json_object_array_length(list) : 0;
  json_object_put(list);
  return n;
}

static const char *str_at(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x)) return NULL;
  if (b == NULL) return json_object_get_string(x);
  if (!json_object_object_get_ex(x, b, &y)) return NULL;
  return json_object_get_string(y);
}

static int64_t int_at(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x) || !json_object_object_get_ex(x, b, &y)) return -1;
  return json_object_get_int64(y);
}

static void ids_of(const char *extra_label, char ids[][SM_ENGINE_ID_MAX], int max, int *n) {
  json_object *l = containers(extra_label);
  *n = 0;
  for (size_t i = 0; i < json_object_array_length(l) && *n < max; i++)
    snprintf(ids[(*n)++], SM_ENGINE_ID_MAX, "%s", str_at(json_object_array_get_idx(l, i), "Id", NULL));
  json_object_put(l);
}

static void request(sm_run_request *req, sm_mode mode, const char *argv0) {
  static const char *argv_echo[] = {"sh", "-c", "echo hi; id -u; stat -c %u /workspace"};
  static const char *argv_true[] = {"true"};
  sm_run_request_init(req);
  req->settings.mode = mode;
  if (argv0 && strcmp(argv0, "echo") == 0) {
    req->argv = argv_echo;
    req->argc = 3;
  } else {
    req->argv = argv_true;
    req->argc = 1;
  }
}

static void run_ok(sm_runner *r, const sm_run_request *req, sm_run_result *res) {
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(r, req, res, &err), 0);
  if (!res->ok) fail_msg("call failed: %s (exit %d)", res->error, res->exit_code);
}

static void test_prepared_with_labels_and_limits(void **state) {
  (void)state;
  sm_runner *r = new_runner(2);
  sm_run_request req;
  request(&req, SM_MODE_PER_TOOL, NULL);
  req.project = "pool-proj";
  req.settings.memory = 96LL << 20;
  req.settings.pids = 77;
  req.settings.cpu = 0.5;
  req.settings.disk = 32LL << 20;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_pool_prepare(r, &req, &err), 0);
  settle(r);
  sm_pool_stats st;
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.ready, 2);
  assert_int_equal(count("io.sandman.pool=true"), 2);
  assert_int_equal(count_volumes(), 2);

  char hash[65];
  sm_sandbox_settings_hash(&req.settings, hash);
  json_object *l = containers("io.sandman.pool=true");
  char volumes[2][SM_NAME_MAX];
  for (size_t i = 0; i < 2; i++) {
    const char *id = str_at(json_object_array_get_idx(l, i), "Id", NULL);
    json_object *c = NULL;
    assert_int_equal(sm_engine_container_inspect(engine, id, &c, &err), 0);
    assert_true(json_object_get_boolean(json_object_object_get(json_object_object_get(c, "State"),
                                                               "Running")));
    json_object *labels = json_object_object_get(json_object_object_get(c, "Config"), "Labels");
    assert_string_equal(json_object_get_string(json_object_object_get(labels, "io.sandman.managed")),
                        "true");
    assert_string_equal(json_object_get_string(json_object_object_get(labels, "io.sandman.mode")),
                        "per_tool");
    assert_string_equal(
        json_object_get_string(json_object_object_get(labels, "io.sandman.project")), "pool-proj");
    assert_string_equal(
        json_object_get_string(json_object_object_get(labels, "io.sandman.config-hash")), hash);
    assert_non_null(json_object_object_get(labels, "io.sandman.owner"));
    assert_non_null(json_object_object_get(labels, "io.sandman.created"));
    assert_non_null(strstr(str_at(c, "Name", NULL), "-pool-"));
    /* The same limits and hardening as any per_tool sandbox. */
    assert_int_equal(int_at(c, "HostConfig", "Memory"), 96LL << 20);
    assert_int_equal(int_at(c, "HostConfig", "MemorySwap"), 96LL << 20);
    assert_int_equal(int_at(c, "HostConfig", "PidsLimit"), 77);
    assert_int_equal(int_at(c, "HostConfig", "NanoCpus"), 500000000LL);
    assert_string_equal(str_at(c, "HostConfig", "NetworkMode"), "none");
    json_object *ro = json_object_object_get(json_object_object_get(c, "HostConfig"),
                                             "ReadonlyRootfs");
    assert_true(json_object_get_boolean(ro));
    /* Its own /workspace volume. */
    const char *vol = json_object_get_string(json_object_object_get(labels, "io.sandman.volume"));
    assert_non_null(vol);
    snprintf(volumes[i], sizeof volumes[i], "%s", vol);
    json_object_put(c);
  }
  assert_string_not_equal(volumes[0], volumes[1]);
  json_object_put(l);

  /* They count in `sandbox list`, flagged as pool containers. */
  sm_ops_scope scope;
  assert_int_equal(sm_ops_scope_from_runner(&scope, r, &err), 0);
  sm_ops_sandbox_list list = {0, NULL};
  assert_int_equal(sm_ops_list(&scope, 1, &list, &err), 0);
  assert_int_equal(list.n, 2);
  for (size_t i = 0; i < list.n; i++) {
    assert_true(list.items[i].pool);
    assert_string_equal(list.items[i].mode, "per_tool");
  }
  sm_ops_sandbox_list_dispose(&list);

  /* Freeing the runner removes them, volumes too. */
  sm_runner_free(r);
  assert_int_equal(count(NULL), 0);
  assert_int_equal(count_volumes(), 0);
}

static void test_taken_once_never_reused_and_refilled(void **state) {
  (void)state;
  sm_runner *r = new_runner(2);
  sm_run_request req;
  request(&req, SM_MODE_PER_TOOL, "echo");
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_pool_prepare(r, &req, &err), 0);
  settle(r);
  enum { CALLS = 5 };
  char seen[CALLS][SM_ENGINE_ID_MAX];
  for (int k = 0; k < CALLS; k++) {
    char ready[4][SM_ENGINE_ID_MAX];
    int n_ready = 0;
    ids_of("io.sandman.pool=true", ready, 4, &n_ready);
    assert_int_equal(n_ready, 2);
    sm_run_result res;
    run_ok(r, &req, &res);
    assert_string_equal(res.stdout_data, "hi\n1000\n1000\n");
    /* The call ran in one of the containers that were ready... */
    int from_pool = 0;
    for (int i = 0; i < n_ready; i++) from_pool |= strcmp(ready[i], res.sandbox_id) == 0;
    assert_true(from_pool);
    assert_int_equal(res.reused, 0);
    /* ...never in one an earlier call had. */
    for (int j = 0; j < k; j++) assert_string_not_equal(seen[j], res.sandbox_id);
    snprintf(seen[k], sizeof seen[k], "%s", res.sandbox_id);
    sm_run_result_dispose(&res);
    /* Removed after the call, in the background; the pool is full again. */
    settle(r);
    json_object *c = NULL;
    assert_int_equal(sm_engine_container_inspect(engine, seen[k], &c, &err), SM_ENOTFOUND);
    assert_int_equal(count("io.sandman.pool=true"), 2);
    assert_int_equal(count_volumes(), 2);
  }
  sm_pool_stats st;
  sm_runner_pool_stats(r, &st);
  assert_int_equal(st.taken, CALLS);
  assert_int_equal(st.missed, 0);
  assert_true(st.created >= CALLS + 2);
  sm_runner_free(r);
  assert_int_equal(count(NULL), 0);
  assert_int_equal(count_volumes(), 0);
}

static void test_configuration_change_drains(void **state) {
  (void)state;
  sm_runner *r = new_runner(1);
  sm_run_request req;
  request(&req, SM_MODE_PER_TOOL, NULL);
  req.agent = "agent-x";
  req.tool = "shell";
  sm_run_result res;
  /* The first call of a configuration finds no pool: it makes its own
   * container and the pool fills behind it. */
  run_ok(r, &req, &res);
  sm_run_result_dispose(&res);
  settle(r);
  char old_hash[65], new_hash[65], label[128];
  sm_sandbox_settings_hash(&req.settings, old_hash);
  snprintf(label, sizeof label, "io.sandman.config-hash=%s", old_hash);
  assert_int_equal(count(label), 1);

  /* The caller's configuration changes: the old pool goes, a new one fills. */
  req.settings.memory = 200LL << 20;
  sm_sandbox_settings_hash(&req.settings, new_hash);
  run_ok(r, &req, &res);
  sm_run_result_dispose(&res);
  settle(r);
  assert_int_equal(count(label), 0);
  snprintf(label, sizeof label, "io.sandman.config-hash=%s", new_hash);
  assert_int_equal(count(label), 1);
  assert_int_equal(count(NULL), 1);
  assert_int_equal(count_volumes(), 1);

  /* Size 0: the pool is off and empty. */
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_pool_set_size(r, 0, &err), 0);
  settle(r);
  assert_int_equal(count(NULL), 0);
  run_ok(r, &req, &res); /* still works, on a container of its own */
  sm_run_result_dispose(&res);
  settle(r);
  assert_int_equal(count(NULL), 0);
  assert_int_equal(count_volumes(), 0);
  sm_runner_free(r);
}

static void test_reaped_behind_the_pools_back(void **state) {
  (void)state;
  sm_runner *r = new_runner(2);
  sm_run_request req;
  request(&req, SM_MODE_PER_TOOL, NULL);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_pool_prepare(r, &req, &err), 0);
  settle(r);
  sm_ops_scope scope;
  assert_int_equal(sm_ops_scope_from_runner(&scope, r, &err), 0);

  /* A worker's idle reap keeps the pool... */
  sm_ops_reap_options ro = SM_OPS_REAP_OPTIONS_INIT;
  ro.older_than_s = 0;
  ro.keep_pool = 1;
  sm_ops_report rep;
  memset(&rep, 0, sizeof rep);
  assert_int_equal(sm_ops_reap(&scope, &ro, &rep, &err), 0);
  assert_int_equal(rep.n_removed, 0);
  sm_ops_report_dispose(&rep);
  assert_int_equal(count("io.sandman.pool=true"), 2);

  /* ...an operator's forced reap does not. */
  ro.keep_pool = 0;
  ro.force = 1;
  memset(&rep, 0, sizeof rep);
  assert_int_equal(sm_ops_reap(&scope, &ro, &rep, &err), 0);
  assert_int_equal(rep.n_removed, 2);
  sm_ops_report_dispose(&rep);
  assert_int_equal(count(NULL), 0);

  /* The pool still believes it has two: the call finds its container gone
   * and gets another one. */
  sm_run_result res;
  run_ok(r, &req, &res);
  sm_run_result_dispose(&res);
  settle(r);
  sm_runner_free(r);
  assert_int_equal(count(NULL), 0);
  assert_int_equal(count_volumes(), 0);
}

static void test_background_removal_without_pool(void **state) {
  (void)state;
  sm_runner *r = new_runner(0);
  sm_run_request req;
  request(&req, SM_MODE_PER_TOOL, "echo");
  sm_run_result res;
  run_ok(r, &req, &res);
  assert_string_equal(res.stdout_data, "hi\n1000\n1000\n");
  /* Freeing the runner waits for the removal still queued. */
  sm_runner_free(r);
  json_object *c = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_container_inspect(engine, res.sandbox_id, &c, &err), SM_ENOTFOUND);
  sm_run_result_dispose(&res);
  assert_int_equal(count(NULL), 0);
  assert_int_equal(count_volumes(), 0);
}

static void test_keyed_cache_recovers(void **state) {
  (void)state;
  sm_runner *r = new_runner(0);
  sm_run_request req;
  request(&req, SM_MODE_PER_RUN, "echo");
  req.run_id = "cache-run";
  sm_run_result a, b, c, d;
  run_ok(r, &req, &a);
  run_ok(r, &req, &b);
  assert_string_equal(a.sandbox_id, b.sandbox_id);
  assert_true(b.reused);

  /* Removed behind the runner's back: the next call makes a new one. */
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_container_remove(engine, b.sandbox_id, 1, 1, &err), 0);
  run_ok(r, &req, &c);
  assert_string_not_equal(c.sandbox_id, b.sandbox_id);
  assert_string_equal(c.stdout_data, "hi\n1000\n1000\n");

  /* Stopped behind its back: replaced as well. */
  assert_int_equal(sm_engine_container_kill(engine, c.sandbox_id, "KILL", &err), 0);
  int64_t code = 0;
  sm_engine_container_wait(engine, c.sandbox_id, "not-running", 30000, &code, &err);
  run_ok(r, &req, &d);
  assert_string_not_equal(d.sandbox_id, c.sandbox_id);
  assert_int_equal(count(NULL), 1);
  sm_run_result_dispose(&a);
  sm_run_result_dispose(&b);
  sm_run_result_dispose(&c);
  sm_run_result_dispose(&d);
  sm_runner_free(r);
}

static void cleanup(void) {
  json_object *l = containers(NULL);
  sm_error err = SM_ERROR_INIT;
  for (size_t i = 0; i < json_object_array_length(l); i++)
    sm_engine_container_remove(engine, str_at(json_object_array_get_idx(l, i), "Id", NULL), 1, 1,
                               &err);
  json_object_put(l);
  char l1[200];
  snprintf(l1, sizeof l1, "io.sandman.instance=%s", inst);
  const char *labels[] = {l1};
  json_object *vols = NULL;
  if (sm_engine_volume_list(engine, labels, 1, &vols, &err) == 0) {
    for (size_t i = 0; vols && i < json_object_array_length(vols); i++)
      sm_engine_volume_remove(engine, str_at(json_object_array_get_idx(vols, i), "Name", NULL), 1,
                              &err);
    json_object_put(vols);
  }
}

static int setup(void **state) {
  (void)state;
  snprintf(inst, sizeof inst, "%s-%ld", itest_instance("test_pool"), (long)getpid());
  setenv("SANDMAN_INSTANCE", inst, 1);
  engine = itest_engine();
  cleanup();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (engine) {
    cleanup();
    sm_engine_free(engine);
  }
  return 0;
}

/* Calls back to back outrun a pool of 1: the calls that find it empty
 * grow it (sandman_pool_wanted), never past its maximum; each call still
 * runs in a container of its own, and after the runner nothing is left. */
static void test_burst_grows_within_max(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  for (unsigned max = 1; max <= 3; max += 2) {
    sm_runner *r = new_runner(1);
    assert_int_equal(sm_runner_pool_set_limits(r, max, 1, &err), 0);
    sm_run_request req;
    request(&req, SM_MODE_PER_TOOL, "true");
    assert_int_equal(sm_runner_pool_prepare(r, &req, &err), 0);
    settle(r);
    sm_pool_stats st;
    sm_runner_pool_stats(r, &st);
    assert_int_equal(st.wanted, 1);
    enum { CALLS = 4 };
    char seen[CALLS][SM_ENGINE_ID_MAX];
    for (int k = 0; k < CALLS; k++) {
      sm_run_result res;
      run_ok(r, &req, &res);
      for (int j = 0; j < k; j++) assert_string_not_equal(seen[j], res.sandbox_id);
      snprintf(seen[k], sizeof seen[k], "%s", res.sandbox_id);
      sm_run_result_dispose(&res);
    }
    sm_runner_pool_stats(r, &st);
    /* A call is a few process starts, a container's making a create and a
     * start: the next call finds the pool empty. */
    assert_true(st.missed >= 1);
    assert_int_equal(st.max_size, max);
    assert_true(st.wanted <= max);
    if (max > 1) assert_true(st.wanted >= 2);
    settle(r);
    sm_runner_pool_stats(r, &st);
    assert_int_equal(count("io.sandman.pool=true"), (int)st.wanted);
    sm_runner_free(r);
    assert_int_equal(count(NULL), 0);
    assert_int_equal(count_volumes(), 0);
  }
}

/* Each test starts from nothing, whatever the one before left. */
static int each(void **state) {
  (void)state;
  cleanup();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_prepared_with_labels_and_limits, each),
      cmocka_unit_test_setup(test_taken_once_never_reused_and_refilled, each),
      cmocka_unit_test_setup(test_configuration_change_drains, each),
      cmocka_unit_test_setup(test_reaped_behind_the_pools_back, each),
      cmocka_unit_test_setup(test_background_removal_without_pool, each),
      cmocka_unit_test_setup(test_keyed_cache_recovers, each),
      cmocka_unit_test_setup(test_burst_grows_within_max, each),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
