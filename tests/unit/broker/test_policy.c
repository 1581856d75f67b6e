/* Host-tool policy, one row per case: which agent's calling tool may see
 * which host tool, and the rule that decides (deny wins, allows narrow,
 * nobody by default). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "broker/broker_policy.h"

#define TOOLS                                                                        \
  "broker:\n  groups:\n    keys: [\"kc_*\"]\n  tools:\n    gh: {argv: [gh]}\n"      \
  "    kc_get: {argv: [secret-tool]}\n    kc_list: {argv: [secret-tool]}\n"

typedef struct pcase {
  const char *name, *yaml, *agent, *tool, *host_tool;
  int allowed;
  const char *rule;
} pcase;

static const pcase cases[] = {
    {"nobody_by_default", TOOLS, "a", "shell", "gh", 0, "no broker.allow names gh"},
    {"no_section", "defaults:\n  mode: none\n", "a", "shell", "gh", 0, "no broker.allow names gh"},
    {"defaults_allow", TOOLS "defaults:\n  broker:\n    allow: [gh]\n", "a", "shell", "gh", 1,
     "defaults.broker.allow: gh matches gh"},
    {"defaults_allow_other_agent", TOOLS "defaults:\n  broker:\n    allow: [gh]\n", "zzz", "shell",
     "gh", 1, "defaults.broker.allow: gh matches gh"},
    {"agent_allow_only_that_agent", TOOLS "agents:\n  a:\n    broker:\n      allow: [gh]\n", "b",
     "shell", "gh", 0, "no broker.allow names gh"},
    {"agent_allow", TOOLS "agents:\n  a:\n    broker:\n      allow: [gh]\n", "a", "shell", "gh", 1,
     "agents.a.broker.allow: gh matches gh"},
    {"group_glob", TOOLS "agents:\n  a:\n    broker:\n      allow: [group:keys]\n", "a", "shell",
     "kc_get", 1, "agents.a.broker.allow: group:keys matches kc_get"},
    {"agent_narrows_defaults",
     TOOLS "defaults:\n  broker:\n    allow: [\"*\"]\nagents:\n  a:\n    broker:\n      allow: [gh]\n",
     "a", "shell", "kc_get", 0, "agents.a.broker.allow does not include kc_get"},
    {"defaults_narrow_agent",
     TOOLS "defaults:\n  broker:\n    allow: [gh]\nagents:\n  a:\n    broker:\n      allow: [\"*\"]\n",
     "a", "shell", "kc_get", 0, "defaults.broker.allow does not include kc_get"},
    {"deny_wins_over_allow",
     TOOLS "defaults:\n  broker:\n    deny: [kc_list]\nagents:\n  a:\n    broker:\n      allow: [group:keys]\n",
     "a", "shell", "kc_list", 0, "defaults.broker.deny: kc_list matches kc_list"},
    {"agent_deny", TOOLS "defaults:\n  broker:\n    allow: [\"*\"]\nagents:\n  a:\n    broker:\n      deny: [\"kc_*\"]\n",
     "a", "shell", "kc_get", 0, "agents.a.broker.deny: kc_* matches kc_get"},
    {"from_tools_refuses",
     TOOLS "agents:\n  a:\n    broker:\n      allow: [gh]\n      from_tools: [group:runtime]\n", "a",
     "web_fetch", "gh", 0, "agents.a.broker.from_tools does not include web_fetch"},
    {"from_tools_group",
     TOOLS "agents:\n  a:\n    broker:\n      allow: [gh]\n      from_tools: [group:runtime]\n", "a",
     "shell", "gh", 1, "agents.a.broker.allow: gh matches gh"},
    {"from_tools_exec_default",
     TOOLS "defaults:\n  broker:\n    allow: [gh]\n    from_tools: [exec]\n", "a", NULL, "gh", 1,
     "defaults.broker.allow"},
};

static void table(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const pcase *c = &cases[i];
    sm_config *cfg = NULL;
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(sm_config_load_string(&cfg, "p.yaml", c->yaml, strlen(c->yaml), &err), 0);
    char rule[256] = "";
    int got = broker_policy_tool(sm_config_broker(cfg), c->agent, c->tool, c->host_tool, rule,
                                 sizeof rule);
    if (got != c->allowed || !strstr(rule, c->rule))
      fprintf(stderr, "%s: allowed %d (wanted %d), rule '%s' (wanted '%s')\n", c->name, got,
              c->allowed, rule, c->rule);
    assert_int_equal(got, c->allowed);
    assert_non_null(strstr(rule, c->rule));
    /* offers agrees with the policy: a route only with something to see */
    sm_broker *b = NULL;
    sm_broker_options o = {cfg, NULL, 0, NULL, NULL};
    assert_int_equal(sm_broker_new(&b, &o, &err), 0);
    if (c->allowed) assert_int_equal(sm_broker_offers(b, c->agent, c->tool), 1);
    sm_broker_free(b);
    sm_config_free(cfg);
  }
}

static void offers_nothing_without_allow(void **state) {
  (void)state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  const char *y = TOOLS "agents:\n  a:\n    broker:\n      allow: [gh]\n";
  assert_int_equal(sm_config_load_string(&cfg, "p.yaml", y, strlen(y), &err), 0);
  sm_broker *b = NULL;
  sm_broker_options o = {cfg, NULL, 0, NULL, NULL};
  assert_int_equal(sm_broker_new(&b, &o, &err), 0);
  assert_int_equal(sm_broker_offers(b, "a", "shell"), 1);
  assert_int_equal(sm_broker_offers(b, "b", "shell"), 0);
  assert_int_equal(sm_broker_offers(b, NULL, NULL), 0);
  json_object *ex = sm_broker_explain(b, "a", "shell");
  const char *s = json_object_to_json_string(ex);
  assert_non_null(strstr(s, "\"route\": true"));
  assert_non_null(strstr(s, "agents.a.broker.allow does not include kc_get"));
  json_object_put(ex);
  sm_broker_free(b);
  sm_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(table),
      cmocka_unit_test(offers_nothing_without_allow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
