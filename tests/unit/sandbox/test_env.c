/* The scrubbed environment: fixed variables, locale, passthrough globs
 * (never SANDMAN_*, never the fixed names), -e, secrets, the marker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "sandbox/env.h"

static const char *get(const common_strv *env, const char *name) {
  size_t n = strlen(name);
  const char *found = NULL;
  for (size_t i = 0; i < env->n; i++)
    if (strncmp(env->v[i], name, n) == 0 && env->v[i][n] == '=') {
      assert_null(found); /* each name once */
      found = env->v[i] + n + 1;
    }
  return found;
}

static const char *host[] = {"PATH=/host/bin",      "HOME=/root",       "SECRET_X=hunter2",
                             "LANG=de_DE.UTF-8",    "LC_ALL=C",         "FOO_A=1",
                             "FOO_B=2",             "SANDMAN_TOKEN=t",  "BAR=3",
                             "USER=root",           NULL};

static void test_container_env_is_scrubbed(void **state) {
  (void)state;
  common_strv env = {0};
  sandbox_env_spec spec = {.home = "/workspace", .tmpdir = "/tmp", .host_env = host};
  assert_int_equal(sandbox_env_build(&spec, &env, NULL), 0);
  assert_string_equal(get(&env, "HOME"), "/workspace");
  assert_string_equal(get(&env, "TMPDIR"), "/tmp");
  assert_string_equal(get(&env, "XDG_CONFIG_HOME"), "/workspace/.config");
  assert_string_equal(get(&env, "XDG_DATA_HOME"), "/workspace/.local/share");
  assert_string_equal(get(&env, "XDG_STATE_HOME"), "/workspace/.local/state");
  assert_string_equal(get(&env, "XDG_CACHE_HOME"), "/tmp/.cache");
  assert_string_equal(get(&env, "LANG"), "de_DE.UTF-8");
  assert_string_equal(get(&env, "LC_ALL"), "C");
  /* No PATH or USER given: the container's own apply. */
  assert_null(get(&env, "PATH"));
  assert_null(get(&env, "USER"));
  assert_null(get(&env, "SECRET_X"));
  assert_null(get(&env, "FOO_A"));
  assert_null(get(&env, "SANDMAN_TOKEN"));
  common_strv_dispose(&env);
}

static void test_default_lang(void **state) {
  (void)state;
  const char *bare[] = {"X=1", NULL};
  common_strv env = {0};
  sandbox_env_spec spec = {
      .path = "/bin", .user = "me", .home = "/h", .tmpdir = "/t", .host_env = bare};
  assert_int_equal(sandbox_env_build(&spec, &env, NULL), 0);
  assert_string_equal(get(&env, "LANG"), "C.UTF-8");
  assert_string_equal(get(&env, "PATH"), "/bin");
  assert_string_equal(get(&env, "USER"), "me");
  assert_null(get(&env, "X"));
  common_strv_dispose(&env);
}

static void test_passthrough_globs(void **state) {
  (void)state;
  sm_string_list pt;
  memset(&pt, 0, sizeof pt);
  sm_string_list_add(&pt, "FOO_*", NULL);
  sm_string_list_add(&pt, "SANDMAN_*", NULL);
  sm_string_list_add(&pt, "*", NULL); /* still never the fixed names */
  common_strv env = {0};
  sandbox_env_spec spec = {.home = "/workspace",
                           .tmpdir = "/tmp",
                           .host_env = host,
                           .passthrough = &pt};
  assert_int_equal(sandbox_env_build(&spec, &env, NULL), 0);
  assert_string_equal(get(&env, "FOO_A"), "1");
  assert_string_equal(get(&env, "FOO_B"), "2");
  assert_string_equal(get(&env, "BAR"), "3");
  assert_string_equal(get(&env, "SECRET_X"), "hunter2"); /* "*" asked for it */
  assert_null(get(&env, "SANDMAN_TOKEN"));
  assert_string_equal(get(&env, "HOME"), "/workspace");
  assert_null(get(&env, "PATH"));
  assert_null(get(&env, "USER"));
  common_strv_dispose(&env);
}

static void test_explicit_overrides(void **state) {
  (void)state;
  const char *explicit_env[] = {"HOME=/elsewhere", "NEW=a=b", "SECRET_X", "MISSING", "EMPTY="};
  const char *secret[] = {"TOKEN=s3cr3t"};
  common_strv env = {0};
  sandbox_env_spec spec = {.home = "/workspace",
                           .tmpdir = "/tmp",
                           .host_env = host,
                           .explicit_env = explicit_env,
                           .n_explicit = 5,
                           .secret_env = secret,
                           .n_secret = 1,
                           .marker = "SANDMAN_CALL=abc"};
  assert_int_equal(sandbox_env_build(&spec, &env, NULL), 0);
  assert_string_equal(get(&env, "HOME"), "/elsewhere");
  assert_string_equal(get(&env, "NEW"), "a=b");
  assert_string_equal(get(&env, "SECRET_X"), "hunter2"); /* -e NAME: the host's value */
  assert_null(get(&env, "MISSING"));
  assert_string_equal(get(&env, "EMPTY"), "");
  assert_string_equal(get(&env, "TOKEN"), "s3cr3t");
  assert_string_equal(get(&env, "SANDMAN_CALL"), "abc");
  /* The marker always comes last and wins. */
  assert_string_equal(env.v[env.n - 1], "SANDMAN_CALL=abc");
  common_strv_dispose(&env);
}

static void test_bad_entries(void **state) {
  (void)state;
  const char *bad[] = {"=x"};
  common_strv env = {0};
  sm_error err = SM_ERROR_INIT;
  sandbox_env_spec spec = {.home = "/w", .tmpdir = "/t", .explicit_env = bad, .n_explicit = 1};
  assert_int_equal(sandbox_env_build(&spec, &env, &err), SM_EINVAL);
  common_strv_dispose(&env);
  const char *badsecret[] = {"NOVALUE"};
  sandbox_env_spec spec2 = {.home = "/w", .tmpdir = "/t", .secret_env = badsecret, .n_secret = 1};
  assert_int_equal(sandbox_env_build(&spec2, &env, &err), SM_EINVAL);
  /* The message never echoes a credential. */
  assert_null(strstr(err.message, "NOVALUE"));
  common_strv_dispose(&env);
}

static void test_size_caps(void **state) {
  (void)state;
  static char big[300 * 1024];
  memset(big, 'v', sizeof big - 1);
  memcpy(big, "BIG=", 4);
  big[sizeof big - 1] = '\0';
  const char *e[] = {big};
  common_strv env = {0};
  sm_error err = SM_ERROR_INIT;
  sandbox_env_spec spec = {.home = "/w", .tmpdir = "/t", .explicit_env = e, .n_explicit = 1};
  assert_int_equal(sandbox_env_build(&spec, &env, &err), SM_EINVAL);
  common_strv_dispose(&env);
}

/* One rule for every way a name reaches a tool (sm_env_name_classify):
 * sandman's and the engine's names never, the home contract and the fixed
 * names only by -e, never from a glob. */
static void test_name_policy(void **state) {
  (void)state;
  static const struct {
    const char *name;
    sm_env_name_class want;
  } table[] = {
      {"FOO", SM_ENV_NAME_OK},           {"LANG", SM_ENV_NAME_OK},
      {"DOCKER", SM_ENV_NAME_OK},        {"SANDMAN", SM_ENV_NAME_OK},
      {"MY_DOCKER_HOST", SM_ENV_NAME_OK}, {"HOMER", SM_ENV_NAME_OK},
      {"XDG_RUNTIME_DIR", SM_ENV_NAME_OK},
      {"SANDMAN_TOKEN", SM_ENV_NAME_BLOCKED}, {"SANDMAN_", SM_ENV_NAME_BLOCKED},
      {"DOCKER_HOST", SM_ENV_NAME_BLOCKED},   {"DOCKER_TLS_VERIFY", SM_ENV_NAME_BLOCKED},
      {"DOCKER_CERT_PATH", SM_ENV_NAME_BLOCKED}, {"DOCKER_CONFIG", SM_ENV_NAME_BLOCKED},
      {"DOCKER_AUTH_CONFIG", SM_ENV_NAME_BLOCKED}, {"DOCKER_CONTEXT", SM_ENV_NAME_BLOCKED},
      {"HOME", SM_ENV_NAME_HOME},             {"XDG_CONFIG_HOME", SM_ENV_NAME_HOME},
      {"XDG_DATA_HOME", SM_ENV_NAME_HOME},    {"XDG_STATE_HOME", SM_ENV_NAME_HOME},
      {"XDG_CACHE_HOME", SM_ENV_NAME_HOME},
      {"PATH", SM_ENV_NAME_FIXED},            {"USER", SM_ENV_NAME_FIXED},
      {"TMPDIR", SM_ENV_NAME_FIXED},
      {"", SM_ENV_NAME_INVALID},              {"A=B", SM_ENV_NAME_INVALID},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    sm_env_name_class got = sm_env_name_classify(table[i].name, strlen(table[i].name));
    if (got != table[i].want) fail_msg("%s: %d, want %d", table[i].name, got, table[i].want);
  }
  assert_int_equal(sm_env_name_classify("A\0B", 3), SM_ENV_NAME_INVALID);
  char longname[300];
  memset(longname, 'A', sizeof longname);
  assert_int_equal(sm_env_name_classify(longname, 256), SM_ENV_NAME_INVALID);
  assert_int_equal(sm_env_name_classify(longname, 255), SM_ENV_NAME_OK);
  /* A prefix of a longer name, as the library passes "NAME=VALUE" entries. */
  assert_int_equal(sm_env_name_classify("HOME=/x", 4), SM_ENV_NAME_HOME);
  assert_non_null(strstr(sm_env_name_refusal(SM_ENV_NAME_BLOCKED), "DOCKER_"));

  /* The library refuses blocked names by -e and as credentials, and a glob
   * skips every name but ordinary ones. */
  const char *hostenv[] = {"DOCKER_HOST=unix:///var/run/docker.sock", "DOCKER_CONFIG=/c",
                           "SANDMAN_TOKEN=t", "HOME=/root", "XDG_CONFIG_HOME=/root/.config",
                           "PATH=/host", "OK_1=1", NULL};
  sm_string_list pt;
  memset(&pt, 0, sizeof pt);
  sm_string_list_add(&pt, "*", NULL);
  common_strv env = {0};
  sandbox_env_spec spec = {.home = "/workspace",
                           .tmpdir = "/tmp",
                           .host_env = hostenv,
                           .passthrough = &pt};
  assert_int_equal(sandbox_env_build(&spec, &env, NULL), 0);
  assert_string_equal(get(&env, "OK_1"), "1");
  assert_null(get(&env, "DOCKER_HOST"));
  assert_null(get(&env, "DOCKER_CONFIG"));
  assert_null(get(&env, "SANDMAN_TOKEN"));
  assert_null(get(&env, "PATH"));
  assert_string_equal(get(&env, "HOME"), "/workspace");
  assert_string_equal(get(&env, "XDG_CONFIG_HOME"), "/workspace/.config");
  common_strv_dispose(&env);
  sm_error err = SM_ERROR_INIT;
  const char *const bad_explicit[][1] = {{"DOCKER_HOST=tcp://x:2375"}, {"DOCKER_HOST"},
                                         {"SANDMAN_X=1"}};
  for (size_t i = 0; i < 3; i++) {
    sandbox_env_spec e = {.home = "/w",
                          .tmpdir = "/t",
                          .host_env = hostenv,
                          .explicit_env = bad_explicit[i],
                          .n_explicit = 1};
    assert_int_equal(sandbox_env_build(&e, &env, &err), SM_EINVAL);
    assert_non_null(strstr(err.message, bad_explicit[i][0][0] == 'D' ? "DOCKER_" : "SANDMAN_"));
    common_strv_dispose(&env);
  }
  const char *const bad_secret[][1] = {{"DOCKER_HOST=x"}, {"HOME=/etc"}, {"SANDMAN_T=x"}};
  for (size_t i = 0; i < 3; i++) {
    sandbox_env_spec e = {.home = "/w", .tmpdir = "/t", .secret_env = bad_secret[i], .n_secret = 1};
    assert_int_equal(sandbox_env_build(&e, &env, &err), SM_EINVAL);
    common_strv_dispose(&env);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_container_env_is_scrubbed),
      cmocka_unit_test(test_name_policy),
      cmocka_unit_test(test_default_lang),
      cmocka_unit_test(test_passthrough_globs),
      cmocka_unit_test(test_explicit_overrides),
      cmocka_unit_test(test_bad_entries),
      cmocka_unit_test(test_size_caps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
