/* The broker's section of the configuration: what loads (normalized, with
 * defaults) and what is refused at load with file, line and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

static sm_config *load_ok(const char *yaml) {
  sm_config *c = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_config_load_string(&c, "t.yaml", yaml, strlen(yaml), &err);
  if (rc) fprintf(stderr, "unexpected: %s\n", err.message);
  assert_int_equal(rc, 0);
  return c;
}

static void refused(const char *yaml, const char *needle) {
  sm_config *c = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_config_load_string(&c, "t.yaml", yaml, strlen(yaml), &err);
  if (rc == 0 || !strstr(err.message, needle))
    fprintf(stderr, "yaml:\n%s\nwanted '%s', got rc %d '%s'\n", yaml, needle, rc, err.message);
  assert_int_equal(rc, SM_ECONFIG);
  assert_non_null(strstr(err.message, needle));
  assert_non_null(strstr(err.message, "t.yaml:"));
  assert_null(c);
}

#define GH                                                                                  \
  "broker:\n  tools:\n    gh_api:\n      description: GitHub API with the host's login\n"  \
  "      input_schema:\n        type: object\n        properties:\n"                      \
  "          path: {type: string, maxLength: 200}\n"                                        \
  "          n: {type: integer, minimum: 1, maximum: 5}\n"                                  \
  "          flags: {type: array, items: {type: string}}\n"                                 \
  "        required: [path]\n"                                                               \
  "      argv: [gh, api, \"{path}\", \"{flags}\"]\n      env: [HOME, GH_CONFIG_DIR]\n"     \
  "      timeout: 90s\n      rate: 10\n"

static const char *str_at(json_object *o, const char *a, const char *b, const char *c) {
  json_object *x = o;
  const char *k[] = {a, b, c};
  for (int i = 0; i < 3 && k[i]; i++)
    if (!json_object_object_get_ex(x, k[i], &x)) return NULL;
  return json_object_get_string(x);
}

static void normalized_with_defaults(void **state) {
  (void)state;
  sm_config *c = load_ok(GH);
  json_object *b = sm_config_broker(c);
  assert_non_null(b);
  assert_string_equal(str_at(b, "tools", "gh_api", "kind"), "argv");
  assert_string_equal(str_at(b, "tools", "gh_api", "timeout"), "90.0");
  assert_string_equal(str_at(b, "tools", "gh_api", "rate"), "10");
  assert_string_equal(str_at(b, "tools", "gh_api", "concurrency"), "4");
  assert_string_equal(str_at(b, "tools", "gh_api", "max_output"), "1048576");
  assert_string_equal(str_at(b, "tools", "gh_api", "approval"), "false");
  json_object *schema = NULL;
  json_object_object_get_ex(json_object_object_get(json_object_object_get(b, "tools"), "gh_api"),
                            "input_schema", &schema);
  /* additionalProperties is false unless the file says otherwise */
  assert_string_equal(json_object_get_string(json_object_object_get(schema, "additionalProperties")),
                      "false");
  assert_string_equal(str_at(schema, "properties", "n", "maximum"), "5.0");
  sm_config_free(c);
}

static void http_mcp_policy_groups(void **state) {
  (void)state;
  sm_config *c = load_ok(
      "broker:\n  mcp_servers:\n    every: {command: [npx, server-everything]}\n"
      "  groups:\n    readers: [\"kc_*\", lookup]\n"
      "  tools:\n    lookup:\n      http: {url: \"http://127.0.0.1:9/x\", headers: {X-Key: a}}\n"
      "    echo:\n      mcp: {server: every, tool: echo}\n      approval: required\n"
      "defaults:\n  broker:\n    allow: [group:readers]\n"
      "agents:\n  coder:\n    broker:\n      deny: [lookup]\n      from_tools: [group:runtime]\n");
  json_object *b = sm_config_broker(c);
  assert_string_equal(str_at(b, "tools", "lookup", "kind"), "http");
  assert_string_equal(str_at(b, "tools", "echo", "kind"), "mcp");
  assert_string_equal(str_at(b, "tools", "echo", "approval"), "true");
  assert_string_equal(str_at(b, "tools", "lookup", "http") ? "x" : "", "x");
  assert_non_null(str_at(b, "agents", "coder", "from_tools"));
  sm_config_free(c);
}

static void refusals(void **state) {
  (void)state;
  /* a JSON Schema keyword sandman does not enforce */
  refused("broker:\n  tools:\n    t:\n      input_schema:\n        type: object\n"
          "        properties:\n          p: {type: string, pattern: \"^a\"}\n      argv: [x]\n",
          "broker.tools.t.input_schema.properties.p.pattern: unknown key");
  refused("broker:\n  tools:\n    t:\n      input_schema: {type: object, oneOf: []}\n      argv: [x]\n",
          "input_schema.oneOf");
  refused("broker:\n  tools:\n    t:\n      input_schema: {type: array}\n      argv: [x]\n",
          "type 'array' is not supported here");
  /* a placeholder inside a longer argument */
  refused("broker:\n  tools:\n    t:\n      input_schema: {type: object, properties: {p: {type: string}}}\n"
          "      argv: [ls, \"--dir={p}\"]\n",
          "a placeholder must be a whole argument");
  refused("broker:\n  tools:\n    t:\n      argv: [ls, \"{nope}\"]\n",
          "placeholder {nope} is not a property");
  refused("broker:\n  tools:\n    t:\n      input_schema: {type: object, properties: {p: {type: string}}}\n"
          "      argv: [\"{p}\"]\n",
          "the command itself cannot be a placeholder");
  refused("broker:\n  tools:\n    t:\n      argv: [x]\n      http: {url: \"http://a\"}\n",
          "exactly one of argv, http, mcp");
  refused("broker:\n  tools:\n    t:\n      description: nothing runs\n", "exactly one of argv");
  refused("broker:\n  tools:\n    t:\n      http: {url: \"file:///etc/passwd\"}\n",
          "not an http:// or https:// URL");
  refused("broker:\n  tools:\n    t:\n      http: {url: \"http://a\"}\n      env: [HOME]\n",
          "only an argv tool takes env");
  refused("broker:\n  tools:\n    t:\n      mcp: {server: nope, tool: x}\n", "no broker.mcp_servers.nope");
  refused("broker:\n  tools:\n    t:\n      argv: [x]\n      secret: [token]\n",
          "'token' is not a property");
  /* allow_dash: properties of the schema, argv tools only */
  refused("broker:\n  tools:\n    t:\n      argv: [x]\n      allow_dash: [ref]\n",
          "'ref' is not a property");
  refused("broker:\n  tools:\n    t:\n      input_schema: {type: object, properties: {q: {type: string}}}\n"
          "      http: {url: \"http://a\"}\n      allow_dash: [q]\n",
          "only an argv tool takes allow_dash");
  refused("broker:\n  tools:\n    t:\n      argv: [x]\n      rate: 0\n", "broker.tools.t.rate");
  refused("broker:\n  tools:\n    t:\n      argv: [x]\n      approval: maybe\n", "not one of required, none");
  refused("defaults:\n  broker:\n    allow: [group:nope]\n", "no broker.groups.nope");
  refused("agents:\n  a:\n    broker:\n      from_tools: [\"bad name!\"]\n", "agents.a.broker.from_tools");
  refused("broker:\n  tool: {}\n", "broker.tool: unknown key");
  refused("agents:\n  a:\n    broker:\n      allowed: [x]\n", "agents.a.broker.allowed");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(normalized_with_defaults),
      cmocka_unit_test(http_mcp_policy_groups),
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
