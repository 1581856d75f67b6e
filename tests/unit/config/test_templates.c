/* Tool argv templates: placeholders are whole arguments, filled from the
 * call's params without any shell; missing params are errors. */
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

typedef struct tcase {
  const char *name;
  const char *yaml;   /* NULL: no file (built-in templates only) */
  const char *tool;
  const char *params; /* JSON */
  int rc;
  const char *argv;   /* expected args joined by '|', or a message piece on error */
} tcase;

#define TOOLS                                                                             \
  "tools:\n  grep:\n    argv: [grep, -rn, --, \"{pattern}\", \"{paths}\"]\n"                 \
  "  awk:\n    argv: [awk, \"{print $1}\", \"{file}\"]\n"                                    \
  "  shell:\n    argv: [bash, --noprofile, -c, \"{command}\"]\n"                             \
  "  mixed:\n    argv: [echo, \"x{value}\", \"{value}\"]\n"

static const tcase cases[] = {
    {"shell_builtin_one_arg", NULL, "shell", "{\"command\": \"ls -l; rm -rf /\"}", 0,
     "sh|-c|ls -l; rm -rf /"},
    {"python_builtin", NULL, "python", "{\"code\": \"print(1)\"}", 0, "python3|-c|print(1)"},
    {"metachars_stay_literal", NULL, "shell", "{\"command\": \"$(reboot) `id` > /x\"}", 0,
     "sh|-c|$(reboot) `id` > /x"},
    {"config_overrides_builtin", TOOLS, "shell", "{\"command\": \"echo hi\"}", 0,
     "bash|--noprofile|-c|echo hi"},
    {"two_placeholders_array", TOOLS, "grep", "{\"pattern\": \"a b\", \"paths\": [\"x\", \"y z\"]}",
     0, "grep|-rn|--|a b|x|y z"},
    {"empty_array_no_args", TOOLS, "grep", "{\"pattern\": \"p\", \"paths\": []}", 0,
     "grep|-rn|--|p"},
    {"literal_braces_not_placeholder", TOOLS, "awk", "{\"file\": \"f.txt\"}", 0,
     "awk|{print $1}|f.txt"},
    {"partial_brace_is_literal", TOOLS, "mixed", "{\"value\": \"v\"}", 0, "echo|x{value}|v"},
    {"number_param", TOOLS, "mixed", "{\"value\": 42}", 0, "echo|x{value}|42"},
    {"bool_param", TOOLS, "mixed", "{\"value\": true}", 0, "echo|x{value}|true"},
    {"missing_param", TOOLS, "grep", "{\"pattern\": \"p\"}", SM_EINVAL,
     "tool grep: missing parameter 'paths'"},
    {"null_params", NULL, "shell", NULL, SM_EINVAL, "missing parameter 'command'"},
    {"object_param_refused", TOOLS, "mixed", "{\"value\": {\"a\": 1}}", SM_EINVAL,
     "parameter 'value' must be"},
    {"unknown_tool", TOOLS, "web_fetch", "{}", SM_ENOTFOUND, "no tool 'web_fetch'"},
    {"builtin_kept_when_file_defines_others", TOOLS, "python", "{\"code\": \"1\"}", 0,
     "python3|-c|1"},
};

static void run_case(void **state) {
  const tcase *c = *state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (c->yaml && sm_config_load_string(&cfg, c->name, c->yaml, strlen(c->yaml), &err))
    fail_msg("%s: load: %s", c->name, err.message);
  json_object *params = c->params ? json_tokener_parse(c->params) : NULL;
  if (c->params) assert_non_null(params);
  char **argv = NULL;
  size_t argc = 0;
  int rc = sm_config_tool_argv(cfg, c->tool, params, &argv, &argc, &err);
  if (rc != c->rc) fail_msg("%s: rc %d, want %d (%s)", c->name, rc, c->rc, err.message);
  if (rc) {
    assert_null(argv);
    if (!strstr(err.message, c->argv)) fail_msg("%s: '%s' lacks '%s'", c->name, err.message, c->argv);
  } else {
    char joined[1024] = "";
    for (size_t i = 0; i < argc; i++) {
      if (i) strncat(joined, "|", sizeof joined - strlen(joined) - 1);
      strncat(joined, argv[i], sizeof joined - strlen(joined) - 1);
      free(argv[i]);
    }
    free(argv);
    assert_string_equal(joined, c->argv);
  }
  if (params) json_object_put(params);
  sm_config_free(cfg);
}

int main(void) {
  size_t n = sizeof cases / sizeof cases[0];
  struct CMUnitTest *tests = xcalloc(n, sizeof *tests);
  for (size_t i = 0; i < n; i++) {
    tests[i].name = cases[i].name;
    tests[i].test_func = run_case;
    tests[i].initial_state = SM_UNCONST(&cases[i]);
  }
  int rc = _cmocka_run_group_tests("config_templates", tests, n, NULL, NULL);
  free(tests);
  return rc;
}
