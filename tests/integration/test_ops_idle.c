/* The runner service's idle reap (sm_ops_reap_idle) and the library's
 * list/reap JSON, against the real engine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/ops.h>
#include <sandman/sandman.h>

#include "support/itest.h"

static const char *instance(void) {
  return itest_instance("test_ops_idle");
}

static const char *state_dir(void) {
  const char *s = getenv("SANDMAN_STATE_DIR");
  return s && *s ? s : "/tmp/sandman-it-ops-idle";
}

/* A running sandbox as the sandbox module labels it (no volume). */
static void make(sm_engine *e, const char *part, const char *mode, int pool, char id[SM_ENGINE_ID_MAX]) {
  char name[SM_NAME_MAX], created[40];
  snprintf(name, sizeof name, "sandman-%s-%s", instance(), part);
  sm_format_time(sm_now(), created, sizeof created);
  json_object *labels = json_object_new_object();
  json_object_object_add(labels, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(labels, "io.sandman.instance", json_object_new_string(instance()));
  json_object_object_add(labels, "io.sandman.mode", json_object_new_string(mode));
  json_object_object_add(labels, "io.sandman.project", json_object_new_string("p"));
  json_object_object_add(labels, "io.sandman.created", json_object_new_string(created));
  if (pool) json_object_object_add(labels, "io.sandman.pool", json_object_new_string("true"));
  json_object *cfg = json_object_new_object();
  json_object_object_add(cfg, "Image", json_object_new_string(ITEST_IMAGE));
  json_object *cmd = json_object_new_array();
  json_object_array_add(cmd, json_object_new_string("sleep"));
  json_object_array_add(cmd, json_object_new_string("600"));
  json_object_object_add(cfg, "Cmd", cmd);
  json_object_object_add(cfg, "Labels", labels);
  json_object *host = json_object_new_object();
  json_object_object_add(host, "NetworkMode", json_object_new_string("none"));
  json_object_object_add(cfg, "HostConfig", host);
  sm_error err = SM_ERROR_INIT;
  int rc = sm_engine_container_create(e, name, cfg, id, NULL, &err);
  json_object_put(cfg);
  if (rc) fail_msg("create %s: %s", name, err.message);
  if (sm_engine_container_start(e, id, &err) != 0) fail_msg("start %s: %s", name, err.message);
}

static void cleanup(sm_engine *e) {
  char label[128];
  snprintf(label, sizeof label, "io.sandman.instance=%s", instance());
  const char *labels[] = {label};
  json_object *list = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_list(e, 1, labels, 1, &list, &err) != 0) return;
  for (size_t i = 0; i < json_object_array_length(list); i++) {
    json_object *id = NULL;
    json_object_object_get_ex(json_object_array_get_idx(list, i), "Id", &id);
    sm_engine_container_remove(e, json_object_get_string(id), 1, 1, &err);
  }
  json_object_put(list);
}

static int in_items(const sm_ops_item *items, size_t n, const char *id) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(items[i].id, id) == 0) return 1;
  return 0;
}

static void test_idle_reap(void **state) {
  (void)state;
  sm_engine *e = itest_engine();
  cleanup(e);
  char old_id[SM_ENGINE_ID_MAX], recent_id[SM_ENGINE_ID_MAX], pool_id[SM_ENGINE_ID_MAX];
  make(e, "per_run-old", "per_run", 0, old_id);
  make(e, "per_worker-recent", "per_worker", 0, recent_id);
  make(e, "per_run-pool", "per_run", 1, pool_id);
  char name[SM_NAME_MAX];
  double now = sm_now();
  snprintf(name, sizeof name, "sandman-%s-per_run-old", instance());
  assert_int_equal(sm_state_touch(state_dir(), name, now - 3600, NULL), 0);
  snprintf(name, sizeof name, "sandman-%s-per_run-pool", instance());
  assert_int_equal(sm_state_touch(state_dir(), name, now - 3600, NULL), 0);
  snprintf(name, sizeof name, "sandman-%s-per_worker-recent", instance());
  assert_int_equal(sm_state_touch(state_dir(), name, now, NULL), 0);

  sm_runner_options ro = SM_RUNNER_OPTIONS_INIT;
  ro.state_dir = state_dir();
  ro.instance = instance();
  sm_runner *runner = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_new(&runner, &ro, &err), 0);

  /* The listing the HTTP API serves. */
  sm_ops_scope scope;
  assert_int_equal(sm_ops_scope_from_runner(&scope, runner, &err), 0);
  sm_ops_sandbox_list list;
  assert_int_equal(sm_ops_list(&scope, 0, &list, &err), 0);
  assert_int_equal(list.n, 3);
  json_object *j = sm_ops_list_to_json(&list);
  assert_int_equal(json_object_array_length(j), 3);
  json_object_put(j);
  sm_ops_sandbox_list_dispose(&list);

  /* idle_timeout 0: nothing is reaped for idleness. */
  sm_ops_report report;
  assert_int_equal(sm_ops_reap_idle(runner, 0, &report, &err), 0);
  assert_int_equal(report.n_removed, 0);
  sm_ops_report_dispose(&report);

  /* idle_timeout 10m: the hour-old one goes, the pool's and the fresh stay. */
  assert_int_equal(sm_ops_reap_idle(runner, 600, &report, &err), 0);
  assert_int_equal(report.n_removed, 1);
  assert_true(in_items(report.removed, report.n_removed, old_id));
  assert_true(in_items(report.spared, report.n_spared, recent_id));
  assert_true(in_items(report.spared, report.n_spared, pool_id));
  j = sm_ops_report_to_json(&report);
  json_object *v = NULL;
  assert_true(json_object_object_get_ex(j, "dry_run", &v));
  assert_false(json_object_get_boolean(v));
  json_object_put(j);
  sm_ops_report_dispose(&report);
  json_object *c = NULL;
  assert_int_equal(sm_engine_container_inspect(e, old_id, &c, &err), SM_ENOTFOUND);
  assert_int_equal(sm_engine_container_inspect(e, recent_id, &c, &err), 0);
  json_object_put(c);

  /* The HTTP reap request, with a body as the API gets it. */
  json_object *body = json_tokener_parse("{\"older_than_s\": 0, \"dry_run\": true}");
  sm_ops_reap_options opts;
  assert_int_equal(sm_ops_reap_options_from_json(body, &opts, &err), 0);
  json_object_put(body);
  assert_int_equal(sm_ops_reap(&scope, &opts, &report, &err), 0);
  assert_int_equal(report.n_removed, 2); /* would remove both */
  sm_ops_report_dispose(&report);
  assert_int_equal(sm_engine_container_inspect(e, pool_id, &c, &err), 0); /* dry run */
  json_object_put(c);

  sm_runner_free(runner);
  cleanup(e);
  sm_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_idle_reap)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
