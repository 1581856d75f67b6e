/* Tool policy, placement and scopes, one table row per case: whether the
 * call is allowed, whether it is sandboxed, a piece of the deciding rule,
 * and the scope key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "common/unconst.h"

#include "support/xalloc.h"

typedef struct qcase {
  const char *name;
  const char *yaml; /* NULL: no file */
  const char *agent, *tool, *user;
  const char *mode_flag;
  int allowed, sandboxed;
  const char *rule;      /* substring of r.rule, or NULL */
  const char *scope_key; /* exact, or NULL not to check */
  const char *mode;      /* resolved mode, or NULL not to check */
} qcase;

#define PT "defaults:\n  mode: per_tool\n"
#define FAMILY                                                                         \
  "agents:\n  personal:\n    mode: none\n  family:\n    mode: per_tool\n    tools:\n" \
  "      allow: [group:fs_read]\n"

static const qcase cases[] = {
    /* Allow / deny and the narrowing chain. */
    {"no_file_allows_all", NULL, NULL, "shell", NULL, NULL, 1, 0, "no mode was chosen", "", "none"},
    {"empty_allow_allows_all", PT "  tools:\n    allow: []\n", NULL, "anything", NULL, NULL, 1, 1,
     "no tools.allow or tools.deny refuses anything", NULL, NULL},
    {"global_allow_refuses_others", PT "  tools:\n    allow: [group:fs]\n", NULL, "shell", NULL,
     NULL, 0, 1, "defaults.tools.allow does not include shell", NULL, NULL},
    {"global_allow_then_agent_deny",
     PT "  tools:\n    allow: [group:fs, shell]\nagents:\n  a:\n    tools:\n      deny: [shell]\n",
     "a", "shell", NULL, NULL, 0, 1, "agents.a.tools.deny: shell matches shell", NULL, NULL},
    {"global_allow_agent_deny_other_tool_ok",
     PT "  tools:\n    allow: [group:fs, shell]\nagents:\n  a:\n    tools:\n      deny: [shell]\n",
     "a", "read_file", NULL, NULL, 1, 1, NULL, NULL, NULL},
    {"agent_cannot_widen_global",
     PT "  tools:\n    allow: [group:fs_read]\nagents:\n  a:\n    tools:\n      allow: [shell]\n",
     "a", "shell", NULL, NULL, 0, 1, "defaults.tools.allow does not include shell", NULL, NULL},
    {"agent_narrows_global",
     PT "  tools:\n    allow: [group:fs]\nagents:\n  a:\n    tools:\n      allow: [read_file]\n",
     "a", "write_file", NULL, NULL, 0, 1, "agents.a.tools.allow does not include write_file",
     NULL, NULL},
    {"agent_narrowed_tool_allowed",
     PT "  tools:\n    allow: [group:fs]\nagents:\n  a:\n    tools:\n      allow: [read_file]\n",
     "a", "read_file", NULL, NULL, 1, 1, NULL, NULL, NULL},
    {"deny_wins_over_allow_star", PT "  tools:\n    allow: [\"*\"]\n    deny: [\"web_*\"]\n", NULL,
     "web_fetch", NULL, NULL, 0, 1, "defaults.tools.deny: web_* matches web_fetch", NULL, NULL},
    {"deny_wins_same_name", PT "  tools:\n    allow: [shell]\n    deny: [shell]\n", NULL, "shell",
     NULL, NULL, 0, 1, "defaults.tools.deny: shell matches shell", NULL, NULL},
    {"glob_star_allows", PT "  tools:\n    allow: [\"read_*\"]\n", NULL, "read_file", NULL, NULL,
     1, 1, NULL, NULL, NULL},
    {"glob_star_refuses", PT "  tools:\n    allow: [\"read_*\"]\n", NULL, "list_dir", NULL, NULL,
     0, 1, "defaults.tools.allow does not include list_dir", NULL, NULL},
    {"glob_brackets", PT "  tools:\n    allow: [\"[rw]*_file\"]\n", NULL, "edit_file", NULL,
     NULL, 0, 1, "does not include edit_file", NULL, NULL},
    {"glob_question", PT "  tools:\n    deny: [\"gre?\"]\n", NULL, "grep", NULL, NULL, 0, 1,
     "defaults.tools.deny: gre? matches grep", NULL, NULL},
    {"group_web_deny", PT "  tools:\n    deny: [group:web]\n", NULL, "browser", NULL, NULL, 0, 1,
     "defaults.tools.deny: group:web matches browser", NULL, NULL},
    {"group_runtime_allow", PT "  tools:\n    allow: [group:runtime]\n", NULL, "python", NULL,
     NULL, 1, 1, "group:runtime matches python", NULL, NULL},
    {"no_tool_is_exec", PT "  tools:\n    allow: [group:fs]\n", NULL, NULL, NULL, NULL, 0, 1,
     "defaults.tools.allow does not include exec", NULL, NULL},
    {"family_read_file", FAMILY, "family", "read_file", NULL, NULL, 1, 1,
     "built-in worker_tools: group:fs matches read_file", NULL, "per_tool"},
    {"family_write_file_refused", FAMILY, "family", "write_file", NULL, NULL, 0, 1,
     "agents.family.tools.allow does not include write_file", NULL, NULL},
    {"family_shell_refused", FAMILY, "family", "shell", NULL, NULL, 0, 1,
     "agents.family.tools.allow does not include shell", NULL, NULL},
    {"personal_shell_on_host", FAMILY, "personal", "shell", NULL, NULL, 1, 0,
     "mode is none (from agent)", NULL, "none"},
    /* Placement. */
    {"mode_none_runs_on_host", "defaults:\n  mode: none\n", NULL, "shell", NULL, NULL, 1, 0,
     "mode is none (from defaults)", NULL, "none"},
    {"always_overrides_mode_none",
     "defaults:\n  mode: none\n  sandbox_tools:\n    always: [web_fetch]\n", NULL, "web_fetch",
     NULL, NULL, 1, 1, "defaults.sandbox_tools.always: web_fetch matches web_fetch (mode none "
     "becomes per_tool)", NULL, "per_tool"},
    {"always_beats_mode_flag_none",
     "defaults:\n  sandbox_tools:\n    always: [browser]\n", NULL, "browser", NULL, "none", 1, 1,
     "sandbox_tools.always", NULL, "per_tool"},
    {"always_keeps_per_run", "defaults:\n  mode: per_run\n  sandbox_tools:\n    always: [browser]\n",
     NULL, "browser", NULL, NULL, 1, 1, "always: browser matches browser", NULL, "per_run"},
    {"never_keeps_on_host", PT "  sandbox_tools:\n    never: [shell]\n", NULL, "shell", NULL,
     NULL, 1, 0, "defaults.sandbox_tools.never: shell matches shell", NULL, "none"},
    {"always_beats_never",
     PT "  sandbox_tools:\n    never: [\"web_*\"]\n    always: [web_fetch]\n", NULL, "web_fetch",
     NULL, NULL, 1, 1, "always: web_fetch", NULL, NULL},
    {"agent_always_extends_defaults",
     PT "  sandbox_tools:\n    always: [web_fetch]\nagents:\n  a:\n    sandbox_tools:\n"
     "      always: [browser]\n",
     "a", "web_fetch", NULL, NULL, 1, 1, "defaults.sandbox_tools.always", NULL, NULL},
    {"agent_never", PT "agents:\n  a:\n    sandbox_tools:\n      never: [python]\n", "a",
     "python", NULL, NULL, 1, 0, "agents.a.sandbox_tools.never: python matches python", NULL,
     NULL},
    {"host_tools_builtin_message", PT "  sandbox_tools:\n    always: [\"*\"]\n", NULL, "message",
     NULL, NULL, 1, 0, "built-in host_tools: group:messaging matches message", NULL, "none"},
    {"host_tools_custom", PT "  host_tools: [gmail]\n", NULL, "gmail", NULL, NULL, 1, 0,
     "defaults.host_tools: gmail matches gmail", NULL, NULL},
    {"host_tools_custom_replaces_builtin", PT "  host_tools: [gmail]\n", NULL, "message", NULL,
     NULL, 1, 1, "worker_tools is unset and neither host_tools nor sandbox_tools.never names message",
     NULL, "per_tool"},
    {"worker_tools_unset_builtin_fs", PT, NULL, "read_file", NULL, NULL, 1, 1,
     "built-in worker_tools: group:fs matches read_file (mode per_tool)", NULL, "per_tool"},
    {"worker_tools_unset_builtin_code", PT, NULL, "code_interpreter", NULL, NULL, 1, 1,
     "group:code", NULL, NULL},
    /* Unset worker_tools keep no tool on the host: an unknown tool is
     * sandboxed; only host_tools and sandbox_tools.never keep one there. */
    {"worker_tools_unset_unknown_tool_sandboxed", PT, NULL, "web_search", NULL, NULL, 1, 1,
     "worker_tools is unset and neither host_tools nor sandbox_tools.never names web_search",
     NULL, "per_tool"},
    {"worker_tools_unset_pytest_under_mode_flag", NULL, NULL, "pytest", NULL, "per_tool", 1, 1,
     "names pytest (mode per_tool)", NULL, "per_tool"},
    {"worker_tools_unset_never_keeps_host", PT "  sandbox_tools:\n    never: [pytest]\n", NULL,
     "pytest", NULL, "per_run", 1, 0, "sandbox_tools.never: pytest matches pytest", NULL, "none"},
    {"worker_tools_set_list_decides", PT "  worker_tools: [shell]\n", NULL, "pytest", NULL,
     "per_tool", 1, 0, "defaults.worker_tools does not include pytest", NULL, "none"},
    {"worker_tools_null_is_builtin", PT "  worker_tools: null\n", NULL, "shell", NULL, NULL, 1,
     1, "built-in worker_tools", NULL, NULL},
    {"worker_tools_empty_none_sandboxed", PT "  worker_tools: []\n", NULL, "shell", NULL, NULL,
     1, 0, "defaults.worker_tools is empty: shell runs on the host", NULL, "none"},
    {"worker_tools_list_member", PT "  worker_tools: [python]\n", NULL, "python", NULL, NULL, 1,
     1, "defaults.worker_tools: python matches python", NULL, NULL},
    {"worker_tools_list_exactly", PT "  worker_tools: [python]\n", NULL, "shell", NULL, NULL, 1,
     0, "defaults.worker_tools does not include shell", NULL, NULL},
    {"worker_tools_narrow_always", PT "  worker_tools: [python]\n  sandbox_tools:\n"
     "    always: [shell]\n", NULL, "shell", NULL, NULL, 0, 1,
     "defaults.worker_tools does not include shell (sandbox_tools.always", NULL, NULL},
    {"worker_tools_agent_replaces",
     PT "  worker_tools: [shell]\nagents:\n  a:\n    worker_tools: [python]\n", "a", "shell",
     NULL, NULL, 1, 0, "agents.a.worker_tools does not include shell", NULL, NULL},
    /* Scopes. */
    {"scope_unset", PT, "a", "shell", "bob", NULL, 1, 1, NULL, "", NULL},
    {"scope_per_call", PT "  scope: per_call\n", "a", "shell", "bob", NULL, 1, 1, NULL, "", NULL},
    /* Every scope includes the project (the file's project.id, else default). */
    {"scope_shared", PT "  scope: shared\n", "a", "shell", "bob", NULL, 1, 1, NULL,
     "shared:default:a", NULL},
    {"scope_user", PT "  scope: user\n", "a", "shell", "bob", NULL, 1, 1, NULL,
     "user:default:bob", NULL},
    {"scope_user_agent", PT "  scope: user_agent\n", "a", "shell", "bob", NULL, 1, 1, NULL,
     "user_agent:default:bob:a", NULL},
    {"scope_user_project", "version: 1\nproject:\n  id: p:1\n" PT "  scope: user\n", "a",
     "shell", "bob", NULL, 1, 1, NULL, "user:p%3A1:bob", NULL},
    {"scope_user_without_user", PT "  scope: user\n", "a", "shell", NULL, NULL, 1, 1, NULL, "",
     NULL},
    {"scope_shared_without_agent", PT "  scope: shared\n", NULL, "shell", NULL, NULL, 1, 1, NULL,
     "", NULL},
    {"scope_agent_overrides", PT "  scope: user\nagents:\n  a:\n    scope: shared\n", "a",
     "shell", "bob", NULL, 1, 1, NULL, "shared:default:a", NULL},
};

static void run_case(void **state) {
  const qcase *c = *state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (c->yaml && sm_config_load_string(&cfg, c->name, c->yaml, strlen(c->yaml), &err))
    fail_msg("%s: load: %s", c->name, err.message);
  static sm_config_flags f;
  memset(&f, 0, sizeof f);
  f.mode = c->mode_flag;
  static sm_resolved r;
  if (sm_config_resolve(cfg, c->agent, c->tool, c->user, &f, &r, &err))
    fail_msg("%s: resolve: %s", c->name, err.message);
  if (r.allowed != c->allowed)
    fail_msg("%s: allowed %d, want %d (rule: %s)", c->name, r.allowed, c->allowed, r.rule);
  if (r.sandboxed != c->sandboxed)
    fail_msg("%s: sandboxed %d, want %d (%s)", c->name, r.sandboxed, c->sandboxed,
             r.sandbox_rule);
  /* A refusal's rule is in r.rule; an allowed call's may be either decision. */
  if (c->rule && !strstr(r.rule, c->rule) &&
      (!c->allowed || (!strstr(r.allow_rule, c->rule) && !strstr(r.sandbox_rule, c->rule))))
    fail_msg("%s: rule '%s' (allow: '%s', sandbox: '%s') lacks '%s'", c->name, r.rule,
             r.allow_rule, r.sandbox_rule, c->rule);
  if (!c->allowed) assert_true(r.rule[0] != '\0');
  if (c->scope_key && strcmp(r.scope_key, c->scope_key) != 0)
    fail_msg("%s: scope key '%s', want '%s'", c->name, r.scope_key, c->scope_key);
  if (c->mode && strcmp(sm_mode_name(r.settings.mode), c->mode) != 0)
    fail_msg("%s: mode %s, want %s", c->name, sm_mode_name(r.settings.mode), c->mode);
  /* Not sandboxed always means mode none, and the reverse. */
  assert_int_equal(r.sandboxed, r.settings.mode != SM_MODE_NONE);
  /* The JSON carries the same decision, and the rule on a refusal. */
  json_object *j = sm_resolved_to_json(&r, c->agent, c->tool), *v = NULL;
  assert_true(json_object_object_get_ex(j, "allowed", &v));
  assert_int_equal(json_object_get_boolean(v), c->allowed);
  assert_true(json_object_object_get_ex(j, "rule", &v));
  assert_string_equal(json_object_get_string(v), r.rule);
  json_object_put(j);
  sm_config_free(cfg);
}

static void test_bad_identities(void **state) {
  (void)state;
  static sm_resolved r;
  sm_error err = SM_ERROR_INIT;
  /* The one name set of sm_name_valid (':' allowed: keys escape it). */
  assert_int_equal(sm_config_resolve(NULL, "a b", NULL, NULL, NULL, &r, &err), SM_EINVAL);
  assert_int_equal(sm_config_resolve(NULL, NULL, "sh -c", NULL, NULL, &r, &err), SM_EINVAL);
  assert_int_equal(sm_config_resolve(NULL, NULL, NULL, "bob\nx", NULL, &r, &err), SM_EINVAL);
  assert_int_equal(sm_config_resolve(NULL, NULL, NULL, "$(id)", NULL, &r, &err), SM_EINVAL);
  assert_int_equal(sm_config_resolve(NULL, NULL, NULL, "bob@example.com", NULL, &r, &err), 0);
  assert_int_equal(sm_config_resolve(NULL, "a:b", NULL, "bob:x", NULL, &r, &err), 0);
}

/* Which container modes the fallback rule may step down (issue 13, item 5):
 * only a mode from the defaults or the project environment. */
static void test_explicit_modes(void **state) {
  (void)state;
  const struct {
    const char *yaml, *agent, *tool, *flag, *env;
    int explicit_, unchosen, by_rule;
  } c[] = {
      {NULL, NULL, "shell", "per_tool", NULL, 1, 0, 0},          /* --mode */
      {PT, NULL, "shell", NULL, NULL, 0, 0, 0},                  /* defaults.mode */
      {NULL, NULL, "shell", NULL, "production", 0, 0, 0},        /* project environment */
      {"agents:\n  a:\n    mode: per_run\n", "a", "shell", NULL, NULL, 1, 0, 0}, /* agent entry */
      {"defaults:\n  sandbox_tools:\n    always: [shell]\n", NULL, "shell", NULL, NULL, 1, 0, 0},
      {PT "  sandbox_tools:\n    always: [shell]\n", NULL, "shell", NULL, NULL, 1, 0, 0},
      {NULL, NULL, "shell", NULL, NULL, 0, 1, 0},                /* nothing chose a mode */
      {NULL, NULL, "shell", "none", NULL, 0, 0, 0},              /* --mode none: chosen */
      {NULL, NULL, "message", "per_tool", NULL, 0, 0, 1},        /* host_tools */
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    sm_config *cfg = NULL;
    sm_error err = SM_ERROR_INIT;
    if (c[i].yaml && sm_config_load_string(&cfg, "t", c[i].yaml, strlen(c[i].yaml), &err))
      fail_msg("case %zu: %s", i, err.message);
    static sm_config_flags f;
    memset(&f, 0, sizeof f);
    f.mode = c[i].flag;
    f.project_environment = c[i].env;
    static sm_resolved r;
    assert_int_equal(sm_config_resolve(cfg, c[i].agent, c[i].tool, NULL, &f, &r, &err), 0);
    if (r.mode_explicit != c[i].explicit_ || r.mode_unchosen != c[i].unchosen ||
        r.host_by_rule != c[i].by_rule)
      fail_msg("case %zu: explicit %d unchosen %d by_rule %d (%s)", i, r.mode_explicit,
               r.mode_unchosen, r.host_by_rule, r.sandbox_rule);
    sm_config_free(cfg);
  }
}

int main(void) {
  size_t n = sizeof cases / sizeof cases[0];
  struct CMUnitTest *tests = xcalloc(n + 2, sizeof *tests);
  for (size_t i = 0; i < n; i++) {
    tests[i].name = cases[i].name;
    tests[i].test_func = run_case;
    tests[i].initial_state = SM_UNCONST(&cases[i]);
  }
  tests[n].name = "bad_identities";
  tests[n].test_func = test_bad_identities;
  tests[n + 1].name = "explicit_modes";
  tests[n + 1].test_func = test_explicit_modes;
  int rc = _cmocka_run_group_tests("config_policy", tests, n + 2, NULL, NULL);
  free(tests);
  return rc;
}
