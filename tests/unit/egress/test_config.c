/* The configuration's egress keys: network allowlist, egress.allow/deny by
 * level, the egress_proxy section, and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "support/config_errors.h"

static int load(const char *text, sm_config **cfg, sm_error *err) {
  return sm_config_load_string(cfg, "t.yaml", text, strlen(text), err);
}

static void test_levels_and_proxy(void **state) {
  (void)state;
  const char *text =
      "defaults:\n"
      "  network: allowlist\n"
      "  egress:\n"
      "    allow: [pypi.org, \"*.pythonhosted.org\"]\n"
      "    deny: [\"*.evil.example\"]\n"
      "agents:\n"
      "  coder:\n"
      "    egress:\n"
      "      allow: [\"pypi.org:443\"]\n"
      "  plain: {}\n"
      "egress_proxy:\n"
      "  network: corp-out\n"
      "  hosts: {mirror.corp: 10.1.2.3, v6.corp: \"fd00::1\"}\n"
      "  max_connections: 100\n"
      "  max_per_sandbox: 10\n"
      "  idle_timeout: 2m\n"
      "  connect_timeout: 5s\n";
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (load(text, &cfg, &err) != 0) fail_msg("%s", err.message);
  sm_config_egress eg;
  sm_config_egress_get(cfg, "coder", &eg);
  assert_int_equal(eg.n_levels, 2);
  assert_string_equal(eg.levels[0].name, "defaults");
  assert_int_equal(eg.levels[0].n_allow, 2);
  assert_int_equal(eg.levels[0].n_deny, 1);
  assert_string_equal(eg.levels[1].name, "agents.coder");
  assert_string_equal(eg.levels[1].allow[0], "pypi.org:443");
  sm_config_egress_get(cfg, "plain", &eg);
  assert_int_equal(eg.n_levels, 1); /* an agent without egress adds no level */
  sm_config_egress_get(cfg, NULL, &eg);
  assert_int_equal(eg.n_levels, 1);
  json_object *j = sm_config_egress_json(&eg);
  assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                      "{\"allow\":[{\"level\":\"defaults\",\"patterns\":[\"pypi.org\",\"*.pythonhosted.org\"]}],"
                      "\"deny\":[{\"level\":\"defaults\",\"patterns\":[\"*.evil.example\"]}]}");
  json_object_put(j);
  sm_egress_proxy_options po;
  sm_config_egress_proxy(cfg, &po);
  assert_string_equal(po.network, "corp-out");
  assert_int_equal(po.n_hosts, 2);
  assert_string_equal(po.hosts[0], "mirror.corp=10.1.2.3");
  assert_string_equal(po.hosts[1], "v6.corp=fd00::1");
  assert_int_equal(po.max_connections, 100);
  assert_int_equal(po.max_per_sandbox, 10);
  assert_int_equal(po.idle_timeout_s, 120);
  assert_int_equal(po.connect_timeout_s, 5);
  sm_resolved r;
  assert_int_equal(sm_config_resolve(cfg, "coder", NULL, NULL, NULL, &r, &err), 0);
  assert_string_equal(r.settings.network, "allowlist");
  sm_config_free(cfg);

  /* Nothing said: no levels, default proxy settings. */
  assert_int_equal(load("version: 1\n", &cfg, &err), 0);
  sm_config_egress_get(cfg, "coder", &eg);
  assert_int_equal(eg.n_levels, 0);
  sm_config_egress_proxy(cfg, &po);
  assert_null(po.network);
  assert_int_equal(po.max_connections, 0);
  sm_config_free(cfg);
}

static void test_errors(void **state) {
  (void)state;
  static const tc_config_error cases[] = {
      {"defaults:\n  network: wide\n", "t.yaml:2:12: defaults.network: 'wide' is not one of none, bridge, allowlist"},
      {"defaults:\n  egress:\n    allow: [\"a.*.b\"]\n", "t.yaml:3:13: defaults.egress.allow[0]: 'a.*.b' is not a host pattern"},
      {"defaults:\n  egress:\n    allow: pypi.org\n", "t.yaml:3:12: defaults.egress.allow: expected a list"},
      {"defaults:\n  egress:\n    allowed: []\n", "t.yaml:3:5: defaults.egress.allowed: unknown key"},
      {"agents:\n  a:\n    egress:\n      deny: [\"10.1.2.3/8\"]\n", "t.yaml:4:14: agents.a.egress.deny[0]: '10.1.2.3/8'"},
      {"egress_proxy:\n  hosts: {mirror.corp: nope}\n", "t.yaml:2:24: egress_proxy.hosts.mirror.corp: expected an IP address"},
      {"egress_proxy:\n  hosts: {\"*.corp\": 10.0.0.1}\n", "t.yaml:2:11: egress_proxy.hosts.*.corp: '*.corp' is not a host name"},
      {"egress_proxy:\n  network: \"a b\"\n", "t.yaml:2:12: egress_proxy.network: 'a b' is not a network name"},
      {"egress_proxy:\n  max_connections: 0\n", "t.yaml:2:20: egress_proxy.max_connections: expected a whole number from 1"},
      {"egress_proxy:\n  idle_timeout: 0s\n", "t.yaml:2:17: egress_proxy.idle_timeout: expected a duration from 1s"},
      {"egress_proxy:\n  port: 8080\n", "t.yaml:2:3: egress_proxy.port: unknown key"},
  };
  tc_config_errors(cases, sizeof cases / sizeof cases[0]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_levels_and_proxy),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
