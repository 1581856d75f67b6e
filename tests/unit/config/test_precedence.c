/* Precedence and list merging, one table row per case:
 *   flag > agents.<a> > defaults > project environment (mode) > built-in.
 * Each row resolves a call and checks one setting's value (as compact JSON)
 * and its source. "BUILTIN" compares against sm_sandbox_settings_defaults()
 * so the built-in values are never restated here. */
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

typedef struct flagset {
  const char *mode, *image, *network, *runtime, *cpu, *memory, *pids, *disk, *tmpfs, *timeout;
  const char *env;  /* --project-environment */
  const char *pass; /* one --env-passthrough */
  const char *excl; /* one --exclude */
  const char *prot; /* one --protect */
  const char *copy_env; /* --copy-env-files */
} flagset;

typedef struct pcase {
  const char *name;
  const char *yaml; /* NULL: no file */
  const char *agent, *tool;
  flagset flags;
  const char *setting;
  const char *value;  /* compact JSON, or "BUILTIN" */
  const char *source;
} pcase;

#define AGENTS_A                                                                          \
  "defaults:\n  mode: per_run\n  memory: 256m\n  image: base:1\n  cpu: 0.5\n  timeout: 90s\n" \
  "  excludes: [\"*.log\"]\n  env:\n    passthrough: [LANG, \"LC_*\"]\n"                        \
  "agents:\n  a:\n    mode: per_tool\n    memory: 1g\n    pids: 64\n    runtime: runsc\n"        \
  "    read_only_root: false\n    excludes: [node_modules]\n    env:\n      passthrough: [TERM]\n" \
  "    workspace_root: /srv/a\n  empty_pass:\n    env:\n      passthrough: []\n"

#define PROTECT_A                                                                         \
  "defaults:\n  workspace:\n    protect: [\".git/hooks/**\", \".envrc\"]\n"                  \
  "agents:\n  narrow:\n    workspace:\n      protect: [\".git/hooks/**\"]\n"                   \
  "  extend:\n    workspace:\n      protect_add: [\"secrets/**\"]\n"

static const pcase cases[] = {
    {"mode_built_in", NULL, NULL, NULL, {0}, "mode", "BUILTIN", "built_in"},
    {"mode_env_staging", "project:\n  environment: staging\n", NULL, NULL, {0}, "mode",
     "\"per_tool\"", "project_environment"},
    {"mode_env_production", "project:\n  environment: production\n", NULL, NULL, {0}, "mode",
     "\"per_run\"", "project_environment"},
    {"mode_env_development", "project:\n  environment: development\n", NULL, NULL, {0}, "mode",
     "\"none\"", "project_environment"},
    {"mode_env_flag_over_file", "project:\n  environment: development\n", NULL, NULL,
     {.env = "production"}, "mode", "\"per_run\"", "project_environment"},
    {"mode_defaults_over_env", "project:\n  environment: staging\ndefaults:\n  mode: per_run\n",
     NULL, NULL, {0}, "mode", "\"per_run\"", "defaults"},
    {"mode_agent_over_defaults", AGENTS_A, "a", NULL, {0}, "mode", "\"per_tool\"", "agent"},
    {"mode_flag_over_agent", AGENTS_A, "a", NULL, {.mode = "per_worker"}, "mode",
     "\"per_worker\"", "flag"},
    {"mode_unknown_agent_uses_defaults", AGENTS_A, "nobody", NULL, {0}, "mode", "\"per_run\"",
     "defaults"},
    {"memory_built_in", "defaults:\n  mode: none\n", NULL, NULL, {0}, "memory", "BUILTIN",
     "built_in"},
    {"memory_defaults", AGENTS_A, NULL, NULL, {0}, "memory", "268435456", "defaults"},
    {"memory_agent", AGENTS_A, "a", NULL, {0}, "memory", "1073741824", "agent"},
    {"memory_flag", AGENTS_A, "a", NULL, {.memory = "128m"}, "memory", "134217728", "flag"},
    {"image_defaults", AGENTS_A, "a", NULL, {0}, "image", "\"base:1\"", "defaults"},
    {"image_flag", AGENTS_A, "a", NULL, {.image = "other:2"}, "image", "\"other:2\"", "flag"},
    {"network_built_in", AGENTS_A, "a", NULL, {0}, "network", "BUILTIN", "built_in"},
    {"network_flag", AGENTS_A, "a", NULL, {.network = "bridge"}, "network", "\"bridge\"", "flag"},
    {"cpu_defaults", AGENTS_A, "a", NULL, {0}, "cpu", "0.5", "defaults"},
    {"cpu_flag_fraction", AGENTS_A, "a", NULL, {.cpu = "1.5"}, "cpu", "1.5", "flag"},
    {"pids_agent", AGENTS_A, "a", NULL, {0}, "pids", "64", "agent"},
    {"pids_flag", AGENTS_A, "a", NULL, {.pids = "32"}, "pids", "32", "flag"},
    {"runtime_agent", AGENTS_A, "a", NULL, {0}, "runtime", "\"runsc\"", "agent"},
    {"read_only_root_agent", AGENTS_A, "a", NULL, {0}, "read_only_root", "false", "agent"},
    {"timeout_defaults_duration", AGENTS_A, "a", NULL, {0}, "timeout", "90.0", "defaults"},
    {"timeout_flag_minutes", AGENTS_A, "a", NULL, {.timeout = "10m"}, "timeout", "600.0",
     "flag"},
    {"idle_timeout_hours", "defaults:\n  idle_timeout: 2h\n", NULL, NULL, {0}, "idle_timeout",
     "7200.0", "defaults"},
    {"disk_flag", NULL, NULL, NULL, {.disk = "2g"}, "disk", "2147483648", "flag"},
    {"tmpfs_defaults", "defaults:\n  tmpfs: 16m\n", NULL, NULL, {0}, "tmpfs", "16777216",
     "defaults"},
    {"output_cap_sets_stdout", "defaults:\n  output_cap: 64k\n", NULL, NULL, {0}, "stdout_cap",
     "65536", "defaults"},
    {"output_cap_sets_stderr", "defaults:\n  output_cap: 64k\n", NULL, NULL, {0}, "stderr_cap",
     "65536", "defaults"},
    {"stderr_cap_beats_output_cap", "defaults:\n  output_cap: 64k\n  stderr_cap: 1k\n", NULL,
     NULL, {0}, "stderr_cap", "1024", "defaults"},
    {"agent_stdout_cap_over_defaults_output_cap",
     "defaults:\n  output_cap: 64k\nagents:\n  a:\n    stdout_cap: 2k\n", "a", NULL, {0},
     "stdout_cap", "2048", "agent"},
    {"excludes_built_in", NULL, NULL, NULL, {0}, "excludes", "[\".env\",\".env.*\"]", "built_in"},
    {"excludes_extend_defaults_only", AGENTS_A, NULL, NULL, {0}, "excludes",
     "[\".env\",\".env.*\",\"*.log\"]", "defaults"},
    {"excludes_agent_extends_defaults", AGENTS_A, "a", NULL, {0}, "excludes",
     "[\".env\",\".env.*\",\"*.log\",\"node_modules\"]", "agent"},
    {"excludes_flag_extends", AGENTS_A, "a", NULL, {.excl = "dist"}, "excludes",
     "[\".env\",\".env.*\",\"*.log\",\"node_modules\",\"dist\"]", "flag"},
    {"copy_env_files_built_in", NULL, NULL, NULL, {0}, "copy_env_files", "false", "built_in"},
    {"copy_env_files_defaults", "defaults:\n  workspace:\n    copy_env_files: true\n", NULL, NULL,
     {0}, "excludes", "[]", "built_in"},
    {"copy_env_files_agent_over_defaults",
     "defaults:\n  workspace:\n    copy_env_files: true\nagents:\n  a:\n    workspace:\n"
     "      copy_env_files: false\n",
     "a", NULL, {0}, "copy_env_files", "false", "agent"},
    {"copy_env_files_flag", AGENTS_A, "a", NULL, {.copy_env = "true"}, "excludes",
     "[\"*.log\",\"node_modules\"]", "agent"},
    {"passthrough_defaults", AGENTS_A, NULL, NULL, {0}, "env_passthrough",
     "[\"LANG\",\"LC_*\"]", "defaults"},
    {"passthrough_agent_replaces", AGENTS_A, "a", NULL, {0}, "env_passthrough", "[\"TERM\"]",
     "agent"},
    {"passthrough_agent_empty_replaces", AGENTS_A, "empty_pass", NULL, {0}, "env_passthrough",
     "[]", "agent"},
    {"passthrough_flag_extends", AGENTS_A, "a", NULL, {.pass = "HOME"}, "env_passthrough",
     "[\"TERM\",\"HOME\"]", "flag"},
    {"workspace_root_agent", AGENTS_A, "a", NULL, {0}, "workspace_root", "\"/srv/a\"", "agent"},
    {"workspace_root_unset", AGENTS_A, NULL, NULL, {0}, "workspace_root", "null", "built_in"},
    {"scope_defaults", "defaults:\n  scope: user\n", NULL, NULL, {0}, "scope", "\"user\"",
     "defaults"},
    {"scope_agent", "defaults:\n  scope: user\nagents:\n  a:\n    scope: shared\n", "a", NULL,
     {0}, "scope", "\"shared\"", "agent"},
    {"worker_tools_built_in", NULL, NULL, NULL, {0}, "worker_tools",
     "[\"group:runtime\",\"group:fs\",\"group:code\"]", "built_in"},
    {"worker_tools_agent_replaces", "defaults:\n  worker_tools: [shell]\nagents:\n  a:\n"
     "    worker_tools: [python]\n", "a", NULL, {0}, "worker_tools", "[\"python\"]", "agent"},
    {"sandbox_always_extends",
     "defaults:\n  sandbox_tools:\n    always: [web_fetch]\nagents:\n  a:\n    sandbox_tools:\n"
     "      always: [browser]\n",
     "a", NULL, {0}, "sandbox_tools.always", "[\"web_fetch\",\"browser\"]", "agent"},
    /* workspace.protect: the built-in list unless a layer says otherwise;
     * protect replaces, protect_add and --protect extend; [] means none. */
    {"protect_built_in", NULL, NULL, NULL, {0}, "protect", "BUILTIN", "built_in"},
    {"protect_defaults_empty", "defaults:\n  workspace:\n    protect: []\n", NULL, NULL, {0},
     "protect", "[]", "defaults"},
    {"protect_agent_narrows", PROTECT_A, "narrow", NULL, {0}, "protect", "[\".git/hooks/**\"]",
     "agent"},
    {"protect_agent_extends", PROTECT_A, "extend", NULL, {0}, "protect",
     "[\".git/hooks/**\",\".envrc\",\"secrets/**\"]", "agent"},
    {"protect_flag_extends", PROTECT_A, "narrow", NULL, {.prot = "*.pem"}, "protect",
     "[\".git/hooks/**\",\"*.pem\"]", "flag"},
    {"protect_flag_extends_empty", "defaults:\n  workspace:\n    protect: []\n", NULL, NULL,
     {.prot = ".envrc"}, "protect", "[\".envrc\"]", "flag"},
};

static json_object *resolve_json(const pcase *c, sm_resolved *r) {
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (c->yaml) {
    int rc = sm_config_load_string(&cfg, c->name, c->yaml, strlen(c->yaml), &err);
    if (rc) fail_msg("%s: load: %s", c->name, err.message);
  }
  static sm_config_flags f;
  memset(&f, 0, sizeof f);
  f.mode = c->flags.mode;
  f.image = c->flags.image;
  f.network = c->flags.network;
  f.runtime = c->flags.runtime;
  f.cpu = c->flags.cpu;
  f.memory = c->flags.memory;
  f.pids = c->flags.pids;
  f.disk = c->flags.disk;
  f.tmpfs = c->flags.tmpfs;
  f.timeout = c->flags.timeout;
  f.project_environment = c->flags.env;
  f.copy_env_files = c->flags.copy_env;
  if (c->flags.pass) assert_int_equal(sm_string_list_add(&f.env_passthrough, c->flags.pass, NULL), 0);
  if (c->flags.excl) assert_int_equal(sm_string_list_add(&f.excludes, c->flags.excl, NULL), 0);
  if (c->flags.prot) assert_int_equal(sm_string_list_add(&f.protect, c->flags.prot, NULL), 0);
  int rc = sm_config_resolve(cfg, c->agent, c->tool, NULL, &f, r, &err);
  if (rc) fail_msg("%s: resolve: %s", c->name, err.message);
  sm_config_free(cfg);
  return sm_resolved_to_json(r, c->agent, c->tool);
}

static const char *setting_field(json_object *j, const char *setting, const char *field) {
  json_object *settings = NULL, *e = NULL, *v = NULL;
  assert_true(json_object_object_get_ex(j, "settings", &settings));
  if (!json_object_object_get_ex(settings, setting, &e)) fail_msg("no setting '%s'", setting);
  if (!json_object_object_get_ex(e, field, &v)) return "null";
  if (strcmp(field, "source") == 0) return json_object_get_string(v);
  return v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "null";
}

static void run_case(void **state) {
  const pcase *c = *state;
  static sm_resolved r;
  json_object *j = resolve_json(c, &r);
  assert_non_null(j);
  const char *want = c->value;
  json_object *builtin = NULL;
  if (strcmp(want, "BUILTIN") == 0) {
    /* The value with no file and no flags, checked against the sandbox
     * module's defaults for the fields that have a direct counterpart. */
    static sm_resolved b;
    pcase none = {c->name, NULL, NULL, NULL, {0}, c->setting, NULL, NULL};
    builtin = resolve_json(&none, &b);
    want = setting_field(builtin, c->setting, "value");
    sm_sandbox_settings d;
    sm_sandbox_settings_defaults(&d);
    if (strcmp(c->setting, "memory") == 0) assert_true(b.settings.memory == d.memory);
    if (strcmp(c->setting, "network") == 0) assert_string_equal(b.settings.network, d.network);
    if (strcmp(c->setting, "mode") == 0) assert_int_equal(b.settings.mode, d.mode);
    if (strcmp(c->setting, "protect") == 0) {
      sm_string_list l;
      sm_workspace_protect_defaults(&l);
      assert_true(l.n > 0);
      assert_int_equal(b.settings.protect.n, l.n);
      assert_int_equal(d.protect.n, l.n);
    }
  }
  const char *got = setting_field(j, c->setting, "value");
  if (strcmp(got, want) != 0) fail_msg("%s: %s = %s, want %s", c->name, c->setting, got, want);
  const char *src = setting_field(j, c->setting, "source");
  if (strcmp(src, c->source) != 0)
    fail_msg("%s: %s source %s, want %s", c->name, c->setting, src, c->source);
  json_object_put(j);
  if (builtin) json_object_put(builtin);
}

/* Bad flag values are refused with the flag's name. */
static void test_bad_flags(void **state) {
  (void)state;
  static const struct {
    flagset f;
    const char *msg;
  } bad[] = {
      {{.mode = "per_call"}, "--mode: 'per_call' is not one of"},
      {{.memory = "12x"}, "--mem: '12x' is not a size"},
      {{.memory = "1m"}, "--mem: '1m' is below"},
      {{.timeout = "soon"}, "--timeout: 'soon' is not a duration"},
      {{.network = "host"}, "--network: 'host' is not one of none, bridge, allowlist"},
      {{.env = "prod"}, "--project-environment: 'prod' is not one of"},
      {{.pids = "-1"}, "--pids:"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sm_config_flags f;
    memset(&f, 0, sizeof f);
    f.mode = bad[i].f.mode;
    f.memory = bad[i].f.memory;
    f.timeout = bad[i].f.timeout;
    f.network = bad[i].f.network;
    f.project_environment = bad[i].f.env;
    f.pids = bad[i].f.pids;
    static sm_resolved r;
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(sm_config_resolve(NULL, NULL, NULL, NULL, &f, &r, &err), SM_EINVAL);
    if (!strstr(err.message, bad[i].msg)) fail_msg("'%s' lacks '%s'", err.message, bad[i].msg);
  }
}

/* --network allowlist is a flag value like none and bridge (it was refused
 * by the flag parser while the configuration took it). */
static void test_network_flag_allowlist(void **state) {
  (void)state;
  sm_config_flags f;
  memset(&f, 0, sizeof f);
  f.network = "allowlist";
  static sm_resolved r;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_resolve(NULL, NULL, NULL, NULL, &f, &r, &err), 0);
  assert_string_equal(r.settings.network, "allowlist");
}

int main(void) {
  size_t n = sizeof cases / sizeof cases[0];
  struct CMUnitTest *tests = xcalloc(n + 2, sizeof *tests);
  for (size_t i = 0; i < n; i++) {
    tests[i].name = cases[i].name;
    tests[i].test_func = run_case;
    tests[i].initial_state = SM_UNCONST(&cases[i]);
  }
  tests[n].name = "bad_flags";
  tests[n].test_func = test_bad_flags;
  tests[n + 1].name = "network_flag_allowlist";
  tests[n + 1].test_func = test_network_flag_allowlist;
  int rc = _cmocka_run_group_tests("config_precedence", tests, n + 2, NULL, NULL);
  free(tests);
  return rc;
}
