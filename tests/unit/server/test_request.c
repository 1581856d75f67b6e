/* Parsing and validation of request bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "server/server_internal.h"

static int parse(const char *json, server_execute_params *p, sm_error *err) {
  return server_parse_execute(json, strlen(json), 1024, p, err);
}

static void execute_full(void **state) {
  (void)state;
  server_execute_params p;
  sm_error err = SM_ERROR_INIT;
  const char *j =
      "{\"tool\":\"shell\",\"argv\":[\"sh\",\"-c\",\"echo hi\"],\"stdin_b64\":\"aGVsbG8=\","
      "\"env\":{\"A\":\"1\",\"B_2\":\"x=y\"},\"agent\":\"code\",\"user\":\"@u:example.org\","
      "\"project\":\"p1\",\"run_id\":\"r-1\",\"worker_key\":\"w1\",\"mode\":\"per_run\","
      "\"timeout_s\":2.5,\"background_on_timeout\":true,\"lease_id\":\"abc\","
      "\"workspace\":\"agents/code\",\"sync\":\"in\"}";
  assert_int_equal(parse(j, &p, &err), 0);
  assert_string_equal(p.tool, "shell");
  assert_int_equal(p.argc, 3);
  assert_string_equal(p.argv[2], "echo hi");
  assert_null(p.argv[3]);
  assert_int_equal(p.has_stdin, 1);
  assert_int_equal(p.stdin_len, 5);
  assert_memory_equal(p.stdin_data, "hello", 5);
  assert_int_equal(p.n_env, 2);
  assert_string_equal(p.env[1], "B_2=x=y");
  assert_string_equal(p.user, "@u:example.org");
  assert_int_equal(p.has_mode, 1);
  assert_int_equal(p.mode, SM_MODE_PER_RUN);
  assert_true(p.timeout_s > 2.4 && p.timeout_s < 2.6);
  assert_int_equal(p.background_on_timeout, 1);
  assert_string_equal(p.lease_id, "abc");
  assert_string_equal(p.workspace, "agents/code");
  assert_int_equal(p.sync, SM_SYNC_IN);
  server_execute_params_dispose(&p);
}

static void execute_command_and_nulls(void **state) {
  (void)state;
  server_execute_params p;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(parse("{\"command\":\"ls\",\"run_id\":null,\"env\":null}", &p, &err), 0);
  assert_string_equal(p.command, "ls");
  assert_null(p.run_id);
  assert_null(p.argv);
  server_execute_params_dispose(&p);
}

static void execute_rejects(void **state) {
  (void)state;
  static const struct {
    const char *json;
    const char *needle;
  } cases[] = {
      {"", "empty"},
      {"[1]", "JSON object"},
      {"{\"argv\":", "not valid JSON"},
      {"{\"argv\":[\"a\"]} x", "not valid JSON"},
      {"{}", "missing 'argv' or 'command'"},
      {"{\"argv\":[\"a\"],\"command\":\"b\"}", "not both"},
      {"{\"argv\":[]}", "must not be empty"},
      {"{\"argv\":[\"\"]}", "empty"},
      {"{\"argv\":[1]}", "array of strings"},
      {"{\"argv\":\"ls\"}", "array of strings"},
      {"{\"command\":\"\"}", "empty"},
      {"{\"command\":\"ls\",\"bogus\":1}", "unknown field 'bogus'"},
      {"{\"command\":\"ls\",\"tool\":\"-x\"}", "field 'tool'"},
      {"{\"command\":\"ls\",\"run_id\":\"a b\"}", "field 'run_id'"},
      {"{\"command\":\"ls\",\"worker_key\":\"\"}", "field 'worker_key'"},
      {"{\"command\":\"ls\",\"mode\":\"docker\"}", "field 'mode'"},
      {"{\"command\":\"ls\",\"timeout_s\":0}", "timeout_s"},
      {"{\"command\":\"ls\",\"timeout_s\":\"5\"}", "timeout_s"},
      {"{\"command\":\"ls\",\"timeout_s\":1e9}", "timeout_s"},
      {"{\"command\":\"ls\",\"background_on_timeout\":1}", "true or false"},
      {"{\"command\":\"ls\",\"env\":{\"1A\":\"x\"}}", "not a valid variable name"},
      {"{\"command\":\"ls\",\"env\":{\"SANDMAN_TOKEN\":\"x\"}}", "belong to sandman"},
      {"{\"command\":\"ls\",\"env\":{\"A\":1}}", "must be a string"},
      {"{\"command\":\"ls\",\"env\":[]}", "object"},
      {"{\"command\":\"ls\",\"stdin_b64\":\"!!!!\"}", "base64"},
      {"{\"command\":\"ls\",\"stdin_b64\":\"aGVsbG9=\"}", "base64"},
      {"{\"command\":\"ls\",\"sync\":\"out\"}", "sync"},
      {"{\"command\":\"a\\u0000b\"}", "NUL"},
      {"{\"params\":{\"x\":1}}", "needs a 'tool'"},
      {"{\"command\":\"ls\",\"workspace\":\"\"}", "empty"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    server_execute_params p;
    sm_error err = SM_ERROR_INIT;
    int rc = parse(cases[i].json, &p, &err);
    if (rc != SM_EINVAL || strstr(err.message, cases[i].needle) == NULL)
      fail_msg("case %zu %s: rc %d, message '%s'", i, cases[i].json, rc, err.message);
  }
}

static void execute_stdin_cap(void **state) {
  (void)state;
  server_execute_params p;
  sm_error err = SM_ERROR_INIT;
  /* 12 base64 characters are 9 bytes: over a cap of 8. */
  const char *j = "{\"command\":\"cat\",\"stdin_b64\":\"YWFhYWFhYWFh\"}";
  assert_int_equal(server_parse_execute(j, strlen(j), 8, &p, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "more than 8 bytes"));
  assert_int_equal(server_parse_execute(j, strlen(j), 9, &p, &err), 0);
  assert_int_equal(p.stdin_len, 9);
  server_execute_params_dispose(&p);
}

static void base64_variants(void **state) {
  (void)state;
  unsigned char *o;
  size_t n;
  assert_int_equal(server_base64_decode("", 0, 10, &o, &n, NULL), 0);
  assert_int_equal(n, 0);
  free(o);
  assert_int_equal(server_base64_decode("YQ", 2, 10, &o, &n, NULL), 0);
  assert_int_equal(n, 1);
  assert_int_equal(o[0], 'a');
  free(o);
  assert_int_equal(server_base64_decode("YWI=", 4, 10, &o, &n, NULL), 0);
  assert_memory_equal(o, "ab", 2);
  free(o);
  assert_int_equal(server_base64_decode("/+8A", 4, 10, &o, &n, NULL), 0);
  assert_int_equal(n, 3);
  assert_int_equal(o[0], 0xff);
  assert_int_equal(o[1], 0xef);
  assert_int_equal(o[2], 0);
  free(o);
  assert_int_equal(server_base64_decode("Y", 1, 10, &o, &n, NULL), SM_EINVAL);
  assert_int_equal(server_base64_decode("Y W=", 4, 10, &o, &n, NULL), SM_EINVAL);
}

static void lease_parsing(void **state) {
  (void)state;
  server_lease_params p;
  sm_error err = SM_ERROR_INIT;
  const char *j = "{\"tool\":\"shell\",\"services\":[\"github\",\"openai\"]}";
  assert_int_equal(server_parse_lease(j, strlen(j), &p, &err), 0);
  assert_string_equal(p.tool, "shell");
  assert_int_equal(p.n_services, 2);
  assert_string_equal(p.services[1], "openai");
  assert_int_equal(p.max_uses, 1);
  assert_true(p.ttl_s == 60.0);
  assert_string_equal(p.worker_key, "");
  j = "{\"tool\":\"shell\",\"services\":[\"g\"],\"ttl_s\":3600,\"max_uses\":10,"
      "\"worker_key\":\"w1\"}";
  assert_int_equal(server_parse_lease(j, strlen(j), &p, &err), 0);
  assert_int_equal(p.max_uses, 10);
  assert_string_equal(p.worker_key, "w1");
  static const char *const bad[] = {
      "{\"services\":[\"g\"]}",
      "{\"tool\":\"shell\"}",
      "{\"tool\":\"shell\",\"services\":[]}",
      "{\"tool\":\"shell\",\"services\":[\"g\"],\"max_uses\":0}",
      "{\"tool\":\"shell\",\"services\":[\"g\"],\"max_uses\":11}",
      "{\"tool\":\"shell\",\"services\":[\"g\"],\"max_uses\":1.5}",
      "{\"tool\":\"shell\",\"services\":[\"g\"],\"ttl_s\":0.5}",
      "{\"tool\":\"shell\",\"services\":[\"g\"],\"ttl_s\":3601}",
      "{\"tool\":\"shell\",\"services\":[\"a b\"]}",
      "{\"tool\":\"shell\",\"services\":[\"g\"],\"extra\":true}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (server_parse_lease(bad[i], strlen(bad[i]), &p, &err) != SM_EINVAL)
      fail_msg("accepted %s", bad[i]);
  }
}

static void names(void **state) {
  (void)state;
  assert_true(server_name_valid("a", 10));
  assert_true(server_name_valid("user@example.org:x+y=z", 64));
  assert_false(server_name_valid("", 10));
  assert_false(server_name_valid("-a", 10));
  assert_false(server_name_valid(".a", 10));
  assert_false(server_name_valid("a/b", 10));
  assert_false(server_name_valid("abcdefghijk", 10));
  assert_true(server_env_name_valid("_A1"));
  assert_false(server_env_name_valid("1A"));
  assert_false(server_env_name_valid("A-B"));
  sm_mode m;
  assert_int_equal(sm_mode_parse("per_worker", &m, NULL), 0);
  assert_int_equal(m, SM_MODE_PER_WORKER);
  assert_string_equal(sm_mode_name(SM_MODE_PER_TOOL), "per_tool");
  assert_int_equal(sm_mode_parse("PER_RUN", &m, NULL), SM_EINVAL);
}

static void json_depth_is_bounded(void **state) {
  (void)state;
  char deep[200];
  size_t n = 0;
  deep[n++] = '{';
  memcpy(deep + n, "\"params\":", 9);
  n += 9;
  for (int i = 0; i < 40; i++) deep[n++] = '[';
  for (int i = 0; i < 40; i++) deep[n++] = ']';
  deep[n++] = '}';
  json_object *o = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(server_json_object(deep, n, &o, &err), SM_EINVAL);
  assert_null(o);
}

/* Keys: a key repeated in any object, however spelled, and a key holding
 * NUL are refused; env names go by the library's environment rule. */
static void keys_and_env_names(void **state) {
  (void)state;
  static const struct {
    const char *json;
    const char *needle; /* NULL: accepted */
  } cases[] = {
      {"{\"command\":\"ls\",\"command\":\"id\"}", "repeats a key"},
      {"{\"command\":\"ls\",\"env\":{\"A\":\"1\",\"A\":\"2\"}}", "repeats a key"},
      {"{\"command\":\"ls\",\"env\":{\"A\":\"1\",\"\\u0041\":\"2\"}}", "repeats a key"},
      {"{\"tool\":\"t\",\"params\":{\"x\":{\"y\":1,\"y\":2}}}", "repeats a key"},
      {"{\"tool\":\"t\",\"params\":{\"x\":[{\"y\":1},{\"z\":1,\"z\" :2}]}}",
       "repeats a key"},
      {"{\"command\":\"ls\",\"env\":{\"A\\u0000B\":\"1\"}}", "NUL"},
      {"{\"command\\u0000x\":\"ls\"}", "NUL"},
      {"{\"command\":\"ls\",\"env\":{\"A=B\":\"1\"}}", "not a valid variable name"},
      {"{\"command\":\"ls\",\"env\":{\"HOME\":\"/etc\"}}", "HOME and the XDG"},
      {"{\"command\":\"ls\",\"env\":{\"XDG_CONFIG_HOME\":\"/etc\"}}", "HOME and the XDG"},
      {"{\"command\":\"ls\",\"env\":{\"DOCKER_HOST\":\"tcp://x:2375\"}}", "DOCKER_"},
      {"{\"command\":\"ls\",\"env\":{\"SANDMAN_TOKEN\":\"x\"}}", "SANDMAN_"},
      /* Accepted: the same key in different objects, escaped quotes and
       * backslashes in strings, ":" inside values, a "\\u0000" that is text. */
      {"{\"tool\":\"t\",\"params\":{\"a\":{\"a\":{\"a\":1}},\"b\":[{\"a\":1},{\"a\":2}]}}", NULL},
      {"{\"command\":\"echo \\\"k\\\": v\\\\\",\"env\":{\"PATH\":\"/x:/y\",\"B\":\"\\\\u0000\"}}", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    server_execute_params p;
    sm_error err = SM_ERROR_INIT;
    int rc = parse(cases[i].json, &p, &err);
    if (cases[i].needle == NULL) {
      if (rc != 0) fail_msg("refused %s: %s", cases[i].json, err.message);
      server_execute_params_dispose(&p);
      continue;
    }
    if (rc != SM_EINVAL) fail_msg("accepted %s", cases[i].json);
    if (strstr(err.message, cases[i].needle) == NULL)
      fail_msg("%s: '%s' lacks '%s'", cases[i].json, err.message, cases[i].needle);
  }
  /* The worker key a worker token is checked against, before the rest. */
  char key[SM_SERVER_KEY_MAX + 1];
  const char *j = "{\"worker_key\":\"w1\",\"bogus\":1}";
  assert_true(server_json_has_worker_key(j, strlen(j), key));
  assert_string_equal(key, "w1");
  j = "{\"worker_key\":\"w 1\"}";
  assert_false(server_json_has_worker_key(j, strlen(j), key));
  j = "{\"worker_key\":\"w\\u0000x\"}";
  assert_false(server_json_has_worker_key(j, strlen(j), key));
  j = "{\"argv\":";
  assert_false(server_json_has_worker_key(j, strlen(j), key));
}

/* POST /v1/sandboxes: every field typed and bounded, unknown ones refused. */
static void create_parsing(void **state) {
  (void)state;
  server_create_params p;
  sm_error err = SM_ERROR_INIT;
  const char *full =
      "{\"template\": \"py\", \"mode\": \"per_worker\", \"worker_key\": \"k1\", \"cpu\": 1.5,"
      " \"memory\": \"512m\", \"disk\": 1048576, \"pids\": 64, \"network\": \"none\","
      " \"timeout_s\": 600, \"idle_timeout_s\": 60, \"labels\": {\"team\": \"a b\"}}";
  assert_int_equal(server_parse_create(full, strlen(full), &p, &err), 0);
  assert_string_equal(p.template_name, "py");
  assert_int_equal(p.mode, SM_MODE_PER_WORKER);
  assert_true(p.cpu == 1.5 && p.memory == 512LL << 20 && p.disk == 1048576 && p.pids == 64);
  assert_true(p.timeout_s == 600 && p.idle_timeout_s == 60);
  assert_int_equal(p.n_labels, 1);
  assert_string_equal(p.labels[0], "team=a b");
  server_create_params_dispose(&p);
  assert_int_equal(server_parse_create("", 0, &p, &err), 0); /* every default */
  const char *bad[] = {
      "{\"image\": \"x\", \"template\": \"y\"}", "{\"imagee\": \"x\"}", "{\"mode\": \"per_tool\"}",
      "{\"memory\": \"lots\"}", "{\"memory\": 0}", "{\"cpu\": 0}", "{\"labels\": {\"Bad\": \"x\"}}",
      "{\"labels\": {\"k\": 1}}", "{\"labels\": {\"k\": \"a\\nb\"}}", "{\"idle_timeout_s\": 0}",
      "{\"run_id\": \"../x\"}", "{\"network\": \"host\"}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sm_error e = SM_ERROR_INIT;
    if (server_parse_create(bad[i], strlen(bad[i]), &p, &e) == 0) fail_msg("accepted: %s", bad[i]);
  }
  assert_true(server_sandbox_ref_valid("sandman-default-per_run-0123abcd"));
  assert_true(server_sandbox_ref_valid("55ac9e35c91c"));
  assert_false(server_sandbox_ref_valid("../x"));
  assert_false(server_sandbox_ref_valid("-x"));
  assert_false(server_sandbox_ref_valid(""));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(execute_full),         cmocka_unit_test(execute_command_and_nulls),
      cmocka_unit_test(execute_rejects),      cmocka_unit_test(execute_stdin_cap),
      cmocka_unit_test(base64_variants),      cmocka_unit_test(lease_parsing),
      cmocka_unit_test(names),                cmocka_unit_test(json_depth_is_bounded),
      cmocka_unit_test(keys_and_env_names),  cmocka_unit_test(create_parsing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
