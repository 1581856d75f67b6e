/* The credentials file, the environment policy and the scrubbing of
 * credential values out of answers. */
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

#include "common/unconst.h"
#include "server/server_internal.h"

#include "support/xalloc.h"

static const char good[] =
    "{\"github\": {\"GH_TOKEN\": \"ghp_secretvalue123\", \"GH_HOST\": \"github.com\"},"
    " \"openai\": {\"OPENAI_API_KEY\": \"sk-abcdef123456\"}}";

static void parse_and_env(void **state) {
  (void)state;
  server_creds *c = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(server_creds_parse(&c, "test", good, strlen(good), &err), 0);
  assert_int_equal(server_creds_count(c), 2);
  assert_true(server_creds_has_service(c, "github"));
  assert_false(server_creds_has_service(c, "gitlab"));
  assert_true(server_creds_is_name(c, "OPENAI_API_KEY"));
  assert_false(server_creds_is_name(c, "PATH"));
  server_lease_params p;
  memset(&p, 0, sizeof p);
  snprintf(p.services[0], sizeof p.services[0], "github");
  snprintf(p.services[1], sizeof p.services[1], "openai");
  p.n_services = 2;
  server_secret_env env;
  assert_int_equal(server_creds_env(c, &p, &env, &err), 0);
  assert_int_equal(env.n, 3);
  assert_string_equal(env.kv[0], "GH_TOKEN=ghp_secretvalue123");
  assert_string_equal(env.kv[2], "OPENAI_API_KEY=sk-abcdef123456");
  server_secret_env_dispose(&env);
  snprintf(p.services[1], sizeof p.services[1], "nope");
  assert_int_equal(server_creds_env(c, &p, &env, &err), SM_EPOLICY);
  server_creds_free(c);
}

static void parse_rejects_without_echoing_values(void **state) {
  (void)state;
  static const char *const bad[] = {
      "[]",
      "{\"svc\": \"ghp_secretvalue123\"}",
      "{\"svc\": {\"1BAD\": \"ghp_secretvalue123\"}}",
      "{\"svc\": {\"SANDMAN_TOKEN\": \"ghp_secretvalue123\"}}",
      "{\"svc\": {\"A\": 12345678}}",
      "{\"bad name\": {\"A\": \"ghp_secretvalue123\"}}",
      "{\"svc\": {\"A\": \"ghp_secretvalue123\"",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    server_creds *c = NULL;
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(server_creds_parse(&c, "f.json", bad[i], strlen(bad[i]), &err), SM_ECONFIG);
    assert_null(c);
    assert_non_null(strstr(err.message, "f.json"));
    assert_null(strstr(err.message, "ghp_secretvalue123"));
  }
}

static void load_requires_private_mode(void **state) {
  (void)state;
  char path[] = "/tmp/sm-creds-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
  close(fd);
  server_creds *c = NULL;
  sm_error err = SM_ERROR_INIT;
  chmod(path, 0644);
  assert_int_equal(server_creds_load(&c, path, &err), SM_ECONFIG);
  assert_non_null(strstr(err.message, "chmod 600"));
  chmod(path, 0640);
  assert_int_equal(server_creds_load(&c, path, &err), SM_ECONFIG);
  chmod(path, 0600);
  assert_int_equal(server_creds_load(&c, path, &err), 0);
  assert_int_equal(server_creds_count(c), 2);
  server_creds_free(c);
  chmod(path, 0400);
  assert_int_equal(server_creds_load(&c, path, &err), 0);
  server_creds_free(c);
  char link[] = "/tmp/sm-creds-link-XXXXXX";
  int lfd = mkstemp(link);
  close(lfd);
  unlink(link);
  assert_int_equal(symlink(path, link), 0);
  assert_int_equal(server_creds_load(&c, link, &err), SM_ECONFIG);
  unlink(link);
  unlink(path);
  assert_int_equal(server_creds_load(&c, path, &err), SM_ECONFIG);
}

static void owned_names_and_passthrough(void **state) {
  (void)state;
  server_creds *c = NULL;
  assert_int_equal(server_creds_parse(&c, "t", good, strlen(good), NULL), 0);
  assert_true(server_env_owned("SANDMAN_TOKEN", c));
  assert_true(server_env_owned("SANDMAN_ANYTHING", NULL));
  assert_true(server_env_owned("DOCKER_HOST", NULL));
  assert_true(server_env_owned("GH_TOKEN", c));
  assert_false(server_env_owned("GH_TOKEN", NULL));
  assert_false(server_env_owned("LANG", c));
  /* Globs never pass the home contract or the fixed names either. */
  assert_true(server_env_owned("DOCKER_CONFIG", NULL));
  assert_true(server_env_owned("HOME", NULL));
  assert_true(server_env_owned("XDG_DATA_HOME", NULL));
  assert_true(server_env_owned("PATH", NULL));
  /* A credentials file cannot define sandman's, the engine's or the home
   * contract's names (a lease would hand them to a tool). */
  static const char *const bad_files[] = {"{\"s\":{\"DOCKER_HOST\":\"tcp://x\"}}",
                                          "{\"s\":{\"HOME\":\"/etc\"}}",
                                          "{\"s\":{\"SANDMAN_TOKEN\":\"x\"}}"};
  for (size_t i = 0; i < 3; i++) {
    server_creds *bad = NULL;
    sm_error e = SM_ERROR_INIT;
    assert_int_equal(server_creds_parse(&bad, "t", bad_files[i], strlen(bad_files[i]), &e),
                     SM_ECONFIG);
    assert_null(bad);
  }

  setenv("SMTEST_PLAIN", "1", 1);
  setenv("SANDMAN_SMTEST", "2", 1);
  setenv("GH_TOKEN", "ghp_from_env", 1);
  sm_string_list globs;
  memset(&globs, 0, sizeof globs);
  snprintf(globs.items[0], sizeof globs.items[0], "*SMTEST*");
  snprintf(globs.items[1], sizeof globs.items[1], "GH_*");
  globs.n = 2;
  char **out = NULL;
  size_t n = 0;
  assert_int_equal(server_env_passthrough(&globs, c, &out, &n, NULL), 0);
  assert_int_equal(n, 1);
  assert_string_equal(out[0], "SMTEST_PLAIN=1");
  common_strings_free(out, n);
  /* Without credentials, GH_TOKEN is an ordinary variable. */
  assert_int_equal(server_env_passthrough(&globs, NULL, &out, &n, NULL), 0);
  assert_int_equal(n, 2);
  common_strings_free(out, n);
  unsetenv("SMTEST_PLAIN");
  unsetenv("SANDMAN_SMTEST");
  unsetenv("GH_TOKEN");
  server_creds_free(c);
}

static void redaction(void **state) {
  (void)state;
  char *kv[] = {SM_UNCONST("GH_TOKEN=ghp_secretvalue123"), SM_UNCONST("SHORT=abc"),
                SM_UNCONST("X=sk-abcdef123456")};
  server_secret_env s = {kv, 3};
  char *data = xstrdup("token ghp_secretvalue123 and ghp_secretvalue123; abc stays; sk-abcdef123456");
  size_t len = strlen(data);
  server_redact(&data, &len, &s);
  assert_string_equal(data,
                      "token " SM_REDACTED " and " SM_REDACTED "; abc stays; " SM_REDACTED);
  assert_int_equal(len, strlen(data));
  free(data);
  char fixed[40];
  snprintf(fixed, sizeof fixed, "error: sk-abcdef123456 failed");
  server_redact_str(fixed, sizeof fixed, &s);
  assert_string_equal(fixed, "error: " SM_REDACTED " failed");
  char *none = NULL;
  size_t nl = 0;
  server_redact(&none, &nl, &s);
  assert_null(none);
}

/* Output cut at the cap in the middle of a value (issue 25, item 14): the
 * value's first bytes that end the output are masked (marked) too; output
 * that may go on holds them back; shorter values and a full value are as
 * before; output that merely ends like a value's start loses nothing when
 * it was not cut (server_redact). */
static void redaction_of_a_value_cut_at_the_end(void **state) {
  (void)state;
  char *kv[] = {SM_UNCONST("GH_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz"), SM_UNCONST("SHORT=abc"),
                SM_UNCONST("B=ghp_abX")};
  server_secret_env s = {kv, 3};
  /* 29 of the 30 bytes: the cut value is not in the answer. */
  char *data = xstrdup("xxxx ghp_abcdefghijklmnopqrstuvwxy");
  size_t len = strlen(data);
  server_redact_cut(&data, &len, &s, 1);
  assert_string_equal(data, "xxxx " SM_REDACTED);
  assert_int_equal(len, strlen(data));
  free(data);
  /* Held back (output so far), the longest start of any value. */
  data = xstrdup("ghp_abcdefghijklmnopqrstuvwxyz then ghp_ab");
  len = strlen(data);
  server_redact_cut(&data, &len, &s, 0);
  assert_string_equal(data, SM_REDACTED " then ");
  assert_int_equal(len, strlen(data));
  free(data);
  /* One byte of a value's start is masked; a short value's is not. */
  data = xstrdup("a g");
  len = strlen(data);
  server_redact_cut(&data, &len, &s, 1);
  assert_string_equal(data, "a " SM_REDACTED);
  free(data);
  data = xstrdup("ends with ab");
  len = strlen(data);
  server_redact_cut(&data, &len, &s, 1);
  assert_string_equal(data, "ends with ab");
  free(data);
  data = xstrdup("whole ghp_abcdefghijklmnopqrstuvwxyz");
  len = strlen(data);
  server_redact_cut(&data, &len, &s, 1);
  assert_string_equal(data, "whole " SM_REDACTED);
  free(data);
  /* Without a cut, server_redact leaves a value's start alone. */
  data = xstrdup("xxxx ghp_abcdefghijklmnopqrstuvwxy");
  len = strlen(data);
  server_redact(&data, &len, &s);
  assert_string_equal(data, "xxxx ghp_abcdefghijklmnopqrstuvwxy");
  free(data);
}

/* Every field of an answer: paths, nested objects, keys, arrays. */
static void redaction_of_every_field(void **state) {
  (void)state;
  char *kv[] = {SM_UNCONST("GH_TOKEN=ghp_secretvalue123")};
  server_secret_env s = {kv, 1};
  const char *text =
      "{\"ok\":true,\"stdout\":\"x\",\"files_changed\":[\"a/ghp_secretvalue123/b\",\"c\"],"
      "\"refused\":[{\"path\":\"ghp_secretvalue123\",\"reason\":\"link to ghp_secretvalue123\"}],"
      "\"replaced\":{\"previous\":\"p\",\"because\":\"ghp_secretvalue123x\"},"
      "\"ghp_secretvalue123\":1,\"exit_code\":3,\"error\":null}";
  json_object *o = json_tokener_parse(text);
  assert_non_null(o);
  server_redact_json(o, &s);
  const char *out = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  assert_null(strstr(out, "ghp_secretvalue123"));
  json_object *v = NULL;
  assert_true(json_object_object_get_ex(o, "files_changed", &v));
  assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)),
                      "a/" SM_REDACTED "/b");
  assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 1)), "c");
  assert_true(json_object_object_get_ex(o, SM_REDACTED, &v));
  assert_true(json_object_object_get_ex(o, "exit_code", &v));
  assert_int_equal(json_object_get_int(v), 3);
  assert_true(json_object_object_get_ex(o, "error", &v));
  assert_null(v);
  json_object_put(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_and_env),
      cmocka_unit_test(parse_rejects_without_echoing_values),
      cmocka_unit_test(load_requires_private_mode),
      cmocka_unit_test(owned_names_and_passthrough),
      cmocka_unit_test(redaction),
      cmocka_unit_test(redaction_of_a_value_cut_at_the_end),
      cmocka_unit_test(redaction_of_every_field),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
