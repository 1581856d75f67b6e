/* Shared by the C integration tests: a real engine is required. Outside CI
 * a missing engine skips the test; in CI (CI=true) it fails it. */
#ifndef SANDMAN_TESTS_ITEST_H
#define SANDMAN_TESTS_ITEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/sandman.h>

static inline int itest_in_ci(void) {
  const char *ci = getenv("CI");
  return ci != NULL && (strcmp(ci, "true") == 0 || strcmp(ci, "1") == 0);
}

/* A negotiated engine client, or skip (fail in CI). Caller frees it. */
static inline sm_engine *itest_engine(void) {
  sm_engine_options opts = SM_ENGINE_OPTIONS_INIT;
  sm_engine *engine = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_new(&engine, &opts, &err) == 0 && sm_engine_negotiate(engine, &err) == 0)
    return engine;
  sm_engine_free(engine);
  if (itest_in_ci()) fail_msg("CI=true and no engine answers: %s", err.message);
  print_message("no engine answers (%s): skipped\n", err.message);
  skip();
  return NULL;
}

/* This test's instance: SANDMAN_INSTANCE (ctest's launcher,
 * tests/integration/launch.sh, sets it), else <prefix>-<name> with the
 * prefix SANDMAN_TEST_PREFIX (default "it"): two runs at once keep apart by
 * giving different prefixes. The string is static or the environment's. */
static inline const char *itest_instance(const char *name) {
  static char buf[160];
  const char *i = getenv("SANDMAN_INSTANCE");
  if (i && *i) return i;
  const char *p = getenv("SANDMAN_TEST_PREFIX");
  snprintf(buf, sizeof buf, "%s-%s", p && *p ? p : "it", name);
  return buf;
}

/* Removes every container and volume labelled with this instance. */
static inline void itest_remove_instance(sm_engine *engine, const char *instance) {
  char l1[200];
  snprintf(l1, sizeof l1, "io.sandman.instance=%s", instance);
  const char *labels[] = {l1};
  json_object *list = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_list(engine, 1, labels, 1, &list, &err) == 0) {
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      json_object *id = NULL;
      json_object_object_get_ex(json_object_array_get_idx(list, i), "Id", &id);
      sm_engine_container_remove(engine, json_object_get_string(id), 1, 1, &err);
    }
    json_object_put(list);
  }
  list = NULL;
  if (sm_engine_volume_list(engine, labels, 1, &list, &err) == 0) {
    for (size_t i = 0; list && i < json_object_array_length(list); i++) {
      json_object *name = NULL;
      json_object_object_get_ex(json_object_array_get_idx(list, i), "Name", &name);
      sm_engine_volume_remove(engine, json_object_get_string(name), 1, &err);
    }
    json_object_put(list);
  }
}

/* The image the tests use: built by scripts/setup.sh. */
#define ITEST_IMAGE "sandman/minimal:latest"

/* The ExecConfig of cmd (NULL-terminated): output attached, stdin when
 * attach_stdin, no TTY. Caller puts it. */
static inline json_object *itest_exec_config(const char *const *cmd, int attach_stdin) {
  json_object *cfg = json_object_new_object();
  json_object *argv = json_object_new_array();
  for (size_t i = 0; cmd[i]; i++) json_object_array_add(argv, json_object_new_string(cmd[i]));
  json_object_object_add(cfg, "Cmd", argv);
  json_object_object_add(cfg, "AttachStdin", json_object_new_boolean(attach_stdin));
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  json_object_object_add(cfg, "Tty", json_object_new_boolean(0));
  return cfg;
}

/* For tests that compare the two ways a call runs: an instance of this
 * process's own ("<instance>-<pid>", set in the environment), an engine,
 * and a runner with the in-sandbox agent and one without (engine execs). */
static inline sm_engine *itest_two_runners(const char *instance, sm_runner **with_agent,
                                           sm_runner **without_agent) {
  char inst[160];
  snprintf(inst, sizeof inst, "%s-%ld", instance, (long)getpid());
  setenv("SANDMAN_INSTANCE", inst, 1);
  sm_engine *engine = itest_engine();
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(with_agent, &o, &err) != 0) fail_msg("runner: %s", err.message);
  if (sm_runner_new(without_agent, &o, &err) != 0) fail_msg("runner: %s", err.message);
  sm_runner_set_agent(*with_agent, 1);
  sm_runner_set_agent(*without_agent, 0);
  return engine;
}

/* A group of tests on the two runners of itest_two_runners: the statics
 * engine, with_agent and without_agent, instance() (itest_instance(name)),
 * and cmocka's setup() and teardown(), which remove the instance's
 * sandboxes. */
#define ITEST_TWO_RUNNERS_GROUP(name)                                      \
  static sm_engine *engine;                                                \
  static sm_runner *with_agent;                                            \
  static sm_runner *without_agent;                                         \
  static const char *instance(void) { return itest_instance(name); }      \
  static int setup(void **state) {                                         \
    (void)state;                                                           \
    engine = itest_two_runners(instance(), &with_agent, &without_agent);   \
    return 0;                                                              \
  }                                                                        \
  static int teardown(void **state) {                                      \
    (void)state;                                                           \
    sm_runner_free(with_agent);                                            \
    sm_runner_free(without_agent);                                         \
    if (engine) itest_remove_instance(engine, instance());                 \
    sm_engine_free(engine);                                                \
    return 0;                                                              \
  }

#endif
