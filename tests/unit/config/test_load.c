/* Finding and loading the file: the search order, explicit files that are
 * missing, empty files, getters, and limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "support/files.h"

static char tmp[] = "/tmp/sandman-config-test-XXXXXX";
static char cwd[4096];

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(tmp)) return -1;
  if (!getcwd(cwd, sizeof cwd)) return -1;
  if (chdir(tmp) != 0) return -1;
  unsetenv("SANDMAN_CONFIG");
  setenv("XDG_CONFIG_HOME", tmp, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unlink("sandman.yaml");
  unlink("sandman/config.yaml");
  unlink("env.yaml");
  unlink("big.yaml");
  rmdir("sandman");
  if (chdir(cwd) != 0) return -1;
  rmdir(tmp);
  return 0;
}

static void test_no_file_is_built_in(void **state) {
  (void)state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load(&cfg, NULL, &err), 0);
  assert_non_null(cfg);
  assert_null(sm_config_path(cfg));
  assert_null(sm_config_project_id(cfg));
  assert_null(sm_config_engine_host(cfg));
  assert_int_equal(sm_config_engine_tls_verify(cfg), -1);
  sm_config_free(cfg);
}

static void test_explicit_missing_is_error(void **state) {
  (void)state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load(&cfg, "nope.yaml", &err), SM_ECONFIG);
  assert_null(cfg);
  assert_non_null(strstr(err.message, "nope.yaml"));
  /* $SANDMAN_CONFIG names a file explicitly too. */
  setenv("SANDMAN_CONFIG", "also-nope.yaml", 1);
  assert_int_equal(sm_config_load(&cfg, NULL, &err), SM_ECONFIG);
  assert_non_null(strstr(err.message, "also-nope.yaml"));
  unsetenv("SANDMAN_CONFIG");
  /* A directory is not a configuration file. */
  assert_int_equal(sm_config_load(&cfg, tmp, &err), SM_ECONFIG);
}

static void test_search_order(void **state) {
  (void)state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(mkdir("sandman", 0700), 0);
  assert_int_equal(tf_write_str("sandman/config.yaml", "project:\n  id: from-xdg\n"), 0);
  assert_int_equal(sm_config_load(&cfg, NULL, &err), 0);
  assert_string_equal(sm_config_project_id(cfg), "from-xdg");
  sm_config_free(cfg);
  assert_int_equal(tf_write_str("sandman.yaml", "project:\n  id: from-cwd\n"), 0);
  assert_int_equal(sm_config_load(&cfg, NULL, &err), 0);
  assert_string_equal(sm_config_project_id(cfg), "from-cwd");
  assert_string_equal(sm_config_path(cfg), "sandman.yaml");
  sm_config_free(cfg);
  assert_int_equal(tf_write_str("env.yaml", "project:\n  id: from-env\n"), 0);
  setenv("SANDMAN_CONFIG", "env.yaml", 1);
  assert_int_equal(sm_config_load(&cfg, NULL, &err), 0);
  assert_string_equal(sm_config_project_id(cfg), "from-env");
  sm_config_free(cfg);
  /* --config beats them all. */
  assert_int_equal(sm_config_load(&cfg, "sandman/config.yaml", &err), 0);
  assert_string_equal(sm_config_project_id(cfg), "from-xdg");
  sm_config_free(cfg);
  unsetenv("SANDMAN_CONFIG");
}

static void test_getters(void **state) {
  (void)state;
  const char *y = "project:\n  id: demo\n  environment: staging\nengine:\n"
                  "  host: tcp://10.0.0.2:2376\n  tls_verify: true\n  cert_path: /certs\n"
                  "agents:\n  family: {mode: none}\n";
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&cfg, "g.yaml", y, strlen(y), &err), 0);
  assert_string_equal(sm_config_project_id(cfg), "demo");
  assert_string_equal(sm_config_project_environment(cfg), "staging");
  assert_string_equal(sm_config_engine_host(cfg), "tcp://10.0.0.2:2376");
  assert_int_equal(sm_config_engine_tls_verify(cfg), 1);
  assert_string_equal(sm_config_engine_cert_path(cfg), "/certs");
  assert_int_equal(sm_config_has_agent(cfg, "family"), 1);
  assert_int_equal(sm_config_has_agent(cfg, "other"), 0);
  sm_config_free(cfg);
}

/* defaults.pool_size: -1 when unset (the runner's own default applies),
 * 0..64 as written, and not an agent's setting. */
static void test_pool_size(void **state) {
  (void)state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_pool_size(NULL), -1);
  const char *none = "defaults:\n  mode: per_tool\n";
  assert_int_equal(sm_config_load_string(&cfg, "n.yaml", none, strlen(none), &err), 0);
  assert_int_equal(sm_config_pool_size(cfg), -1);
  sm_config_free(cfg);
  const char *nul = "defaults:\n  pool_size:\n";
  assert_int_equal(sm_config_load_string(&cfg, "z.yaml", nul, strlen(nul), &err), 0);
  assert_int_equal(sm_config_pool_size(cfg), -1);
  sm_config_free(cfg);
  static const struct {
    const char *text;
    int want;
  } ok[] = {{"defaults:\n  pool_size: 0\n", 0},
            {"defaults:\n  pool_size: 1\n", 1},
            {"defaults: {pool_size: 64}\n", 64},
            {"defaults:\n  pool_size: \"5\"\n", 5}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    assert_int_equal(sm_config_load_string(&cfg, "p.yaml", ok[i].text, strlen(ok[i].text), &err),
                     0);
    assert_int_equal(sm_config_pool_size(cfg), ok[i].want);
    sm_config_free(cfg);
  }
  static const char *const bad[] = {"defaults:\n  pool_size: -1\n",
                                    "defaults:\n  pool_size: 65\n",
                                    "defaults:\n  pool_size: 1.5\n",
                                    "defaults:\n  pool_size: {a: 1}\n",
                                    "agents:\n  bot:\n    pool_size: 1\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(sm_config_load_string(&cfg, "b.yaml", bad[i], strlen(bad[i]), &err),
                     SM_ECONFIG);
    assert_null(cfg);
    assert_non_null(strstr(err.message, "pool_size"));
  }
}

static void test_too_big(void **state) {
  (void)state;
  FILE *f = fopen("big.yaml", "w");
  assert_non_null(f);
  for (int i = 0; i < 120000; i++) fputs("# padding\n", f);
  fclose(f);
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load(&cfg, "big.yaml", &err), SM_ECONFIG);
  assert_non_null(strstr(err.message, "larger than"));
}

static void test_deep_nesting_refused(void **state) {
  (void)state;
  char text[512] = "";
  for (int i = 0; i < 100; i++) strncat(text, "[", sizeof text - strlen(text) - 1);
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&cfg, "deep", text, strlen(text), &err), SM_ECONFIG);
  assert_non_null(strstr(err.message, "nested too deeply"));
}

static void test_flow_style_and_comments(void **state) {
  (void)state;
  const char *y = "# comment\ndefaults: {mode: per_tool, memory: 64m, tools: {deny: [browser]}}\n";
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&cfg, "flow", y, strlen(y), &err), 0);
  static sm_resolved r;
  assert_int_equal(sm_config_resolve(cfg, NULL, "browser", NULL, NULL, &r, &err), 0);
  assert_int_equal(r.allowed, 0);
  assert_true(r.settings.memory == 64 << 20);
  sm_config_free(cfg);
}

/* workers.<key>.services: what a worker token may lease; nothing without
 * an entry, "*" for every worker. */
static void test_worker_services(void **state) {
  (void)state;
  const char *text =
      "workers:\n"
      "  agent-7:\n"
      "    services: [github, openai]\n"
      "  \"user@example.org:w2\":\n"
      "    services: []\n"
      "  \"*\":\n"
      "    services: [status]\n";
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&cfg, "w.yaml", text, strlen(text), &err), 0);
  assert_true(sm_config_worker_may_lease(cfg, "agent-7", "github"));
  assert_true(sm_config_worker_may_lease(cfg, "agent-7", "openai"));
  assert_true(sm_config_worker_may_lease(cfg, "agent-7", "status"));
  assert_false(sm_config_worker_may_lease(cfg, "agent-8", "github"));
  assert_true(sm_config_worker_may_lease(cfg, "agent-8", "status"));
  assert_false(sm_config_worker_may_lease(cfg, "user@example.org:w2", "github"));
  assert_false(sm_config_worker_may_lease(cfg, "agent-7", "githu"));
  assert_false(sm_config_worker_may_lease(cfg, "*", "github"));
  static sm_string_list l;
  assert_int_equal(sm_config_worker_services(cfg, "agent-7", &l), 3);
  assert_string_equal(l.items[0], "github");
  assert_string_equal(l.items[2], "status");
  assert_int_equal(sm_config_worker_services(cfg, "nobody", &l), 1);
  assert_int_equal(sm_config_worker_services(NULL, "agent-7", &l), 0);
  sm_config_free(cfg);
  /* No file, no entry: no worker leases anything. */
  assert_false(sm_config_worker_may_lease(NULL, "agent-7", "github"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_file_is_built_in),
      cmocka_unit_test(test_explicit_missing_is_error),
      cmocka_unit_test(test_search_order),
      cmocka_unit_test(test_getters),
      cmocka_unit_test(test_pool_size),
      cmocka_unit_test(test_worker_services),
      cmocka_unit_test(test_too_big),
      cmocka_unit_test(test_deep_nesting_refused),
      cmocka_unit_test(test_flow_style_and_comments),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
