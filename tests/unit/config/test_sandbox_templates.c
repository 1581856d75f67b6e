/* templates:, limits: and the templates lists (docs/configuration.md#templates):
 * a template's values, which templates an agent and a worker may ask for
 * (an agent's list replaces the defaults', a worker's narrows it), the
 * limits. The load errors are golden files (test_errors.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

static const char yaml[] =
    "templates:\n"
    "  python: {image: \"sandman/minimal:latest\", cpu: 2, memory: 1g, timeout: 1h, idle_timeout: 10m}\n"
    "  node: {image: \"node:20\"}\n"
    "  go: {}\n"
    "limits: {cpu_max: 4, memory_max: 2g, timeout_max: 24h}\n"
    "defaults:\n  templates: [python, node]\n"
    "agents:\n  coder: {templates: [go]}\n  plain: {memory: 64m}\n"
    "workers:\n  k1: {templates: [node]}\n  \"*\": {templates: [python, go]}\n";

static sm_config *load(void) {
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_config_load_string(&cfg, "t.yaml", yaml, strlen(yaml), &err) != 0) fail_msg("%s", err.message);
  return cfg;
}

static void joined(const sm_string_list *l, char *out, size_t len) {
  out[0] = '\0';
  for (size_t i = 0; i < l->n; i++)
    snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "," : "", l->items[i]);
}

static void test_template_values(void **state) {
  (void)state;
  sm_config *cfg = load();
  sm_config_template t;
  assert_int_equal(sm_config_template_get(cfg, "python", &t), 0);
  assert_string_equal(t.image, "sandman/minimal:latest");
  assert_true(t.cpu == 2 && t.memory == 1LL << 30 && t.timeout_s == 3600 && t.idle_timeout_s == 600);
  assert_null(t.network);
  assert_int_equal(t.pids, 0);
  assert_int_equal(sm_config_template_get(cfg, "nosuch", &t), SM_ENOTFOUND);
  sm_config_limits lim;
  sm_config_limits_get(cfg, &lim);
  assert_true(lim.cpu_max == 4 && lim.memory_max == 2LL << 30 && lim.timeout_max == 86400);
  assert_int_equal(lim.pids_max, 0);
  sm_config_free(cfg);
}

static void test_allowed(void **state) {
  (void)state;
  sm_config *cfg = load();
  sm_string_list l;
  char got[256], rule[160];
  sm_config_templates_allowed(cfg, NULL, NULL, &l, rule, sizeof rule);
  joined(&l, got, sizeof got);
  assert_string_equal(got, "python,node");
  assert_string_equal(rule, "defaults.templates");
  /* An agent's own list replaces the defaults'. */
  sm_config_templates_allowed(cfg, "coder", NULL, &l, rule, sizeof rule);
  joined(&l, got, sizeof got);
  assert_string_equal(got, "go");
  assert_string_equal(rule, "agents.coder.templates");
  /* An entry without a list: the defaults'. */
  sm_config_templates_allowed(cfg, "plain", NULL, &l, rule, sizeof rule);
  joined(&l, got, sizeof got);
  assert_string_equal(got, "python,node");
  /* A worker's lists narrow: k1's and "*"'s together. */
  sm_config_templates_allowed(cfg, NULL, "k1", &l, rule, sizeof rule);
  joined(&l, got, sizeof got);
  assert_string_equal(got, "python,node");
  sm_config_templates_allowed(cfg, NULL, "k2", &l, rule, sizeof rule);
  joined(&l, got, sizeof got);
  assert_string_equal(got, "python");
  sm_config_templates_allowed(cfg, "coder", "k1", &l, rule, sizeof rule);
  joined(&l, got, sizeof got);
  assert_string_equal(got, "go");
  sm_config_free(cfg);
  /* Without a file nothing is allowed. */
  assert_int_equal(sm_config_templates_allowed(NULL, NULL, NULL, &l, rule, sizeof rule), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_template_values),
      cmocka_unit_test(test_allowed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
