/* The swarm service of a sandbox, from the very container config the docker
 * backend creates: every hardening carried or checked, never dropped; keys
 * that a 1.41 service spec cannot say refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "sandbox/spec.h"
#include "sandbox/swarm_spec.h"

/* get(o, "a", "b", NULL): o.a.b, or NULL. */
static json_object *get(json_object *o, ...) {
  va_list ap;
  va_start(ap, o);
  const char *k;
  while (o != NULL && (k = va_arg(ap, const char *)) != NULL) {
    json_object *next = NULL;
    o = json_object_object_get_ex(o, k, &next) ? next : NULL;
  }
  va_end(ap);
  return o;
}

static const char *str(json_object *o) { return o ? json_object_get_string(o) : NULL; }

static json_object *mount_at(json_object *spec, const char *target) {
  json_object *ms = get(spec, "TaskTemplate", "ContainerSpec", "Mounts", NULL);
  for (size_t i = 0; ms && i < json_object_array_length(ms); i++) {
    json_object *m = json_object_array_get_idx(ms, i);
    if (strcmp(str(get(m, "Target", NULL)), target) == 0) return m;
  }
  return NULL;
}

static sm_sandbox_settings settings;
static json_object *labels;

static json_object *container_config(void) {
  static const char *env[] = {"HOME=/workspace"};
  sandbox_container_spec cs = {.settings = &settings,
                               .user = "1000:1000",
                               .uid = 1000,
                               .gid = 1000,
                               .volume = "sandman-x-per_run-0123-ws",
                               .labels = labels,
                               .env = env,
                               .n_env = 1};
  json_object *c = sandbox_container_config_build(&cs);
  assert_non_null(c);
  return c;
}

static int setup(void **s) {
  (void)s;
  sm_sandbox_settings_defaults(&settings);
  labels = json_object_new_object();
  json_object_object_add(labels, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(labels, "io.sandman.instance", json_object_new_string("ci"));
  return 0;
}

static int teardown(void **s) {
  (void)s;
  json_object_put(labels);
  return 0;
}

static const sandbox_swarm_spec_options opts = {.name = "sandman-ci-per_run-0123",
                                           .network = "sandman-ci-per_run-0123-net"};

static void test_default_sandbox_is_carried_whole(void **s) {
  (void)s;
  json_object *c = container_config(), *spec = NULL;
  sandbox_swarm_checks checks;
  sm_error err = SM_ERROR_INIT;
  const char *cons[] = {"node.labels.sandman.pool==a"};
  sandbox_swarm_spec_options o = opts;
  o.constraints = cons;
  o.n_constraints = 1;
  o.reserve_memory = 64 << 20;
  o.service_labels = labels;
  assert_int_equal(sandbox_swarm_service_spec(c, &o, &spec, &checks, &err), 0);
  json_object *cs = get(spec, "TaskTemplate", "ContainerSpec", NULL);
  assert_string_equal(str(get(spec, "Name", NULL)), "sandman-ci-per_run-0123");
  assert_string_equal(str(get(cs, "Image", NULL)), "sandman/minimal:latest");
  /* The sandbox's own processes run as root (no capabilities); calls name
   * the sandbox's user (label io.sandman.user) on every exec. */
  assert_string_equal(str(get(cs, "User", NULL)), "0:0");
  assert_string_equal(str(get(cs, "Dir", NULL)), "/workspace");
  assert_string_equal(str(get(cs, "Hostname", NULL)), "sandbox");
  assert_true(json_object_get_boolean(get(cs, "Init", NULL)));
  assert_true(json_object_get_boolean(get(cs, "ReadOnly", NULL)));
  assert_string_equal(str(json_object_array_get_idx(get(cs, "CapabilityDrop", NULL), 0)), "ALL");
  assert_string_equal(str(get(json_object_array_get_idx(get(cs, "Ulimits", NULL), 0), "Name", NULL)),
                      "nofile");
  /* The keeper: the config's Entrypoint as the service's Command. */
  assert_string_equal(str(json_object_array_get_idx(get(cs, "Command", NULL), 0)), "/bin/sh");
  assert_string_equal(str(get(cs, "Labels", "io.sandman.instance", NULL)), "ci");
  assert_string_equal(str(get(spec, "Labels", "io.sandman.managed", NULL)), "true");
  /* Limits, one task, never restarted, placed by constraint. */
  json_object *lim = get(spec, "TaskTemplate", "Resources", "Limits", NULL);
  assert_int_equal(json_object_get_int64(get(lim, "Pids", NULL)), 256);
  assert_int_equal(json_object_get_int64(get(lim, "MemoryBytes", NULL)), 512LL << 20);
  assert_int_equal(json_object_get_int64(get(lim, "NanoCPUs", NULL)), 1000000000LL);
  assert_int_equal(json_object_get_int64(get(spec, "TaskTemplate", "Resources", "Reservations",
                                             "MemoryBytes", NULL)),
                   64 << 20);
  assert_string_equal(str(get(spec, "TaskTemplate", "RestartPolicy", "Condition", NULL)), "none");
  assert_int_equal(json_object_get_int(get(spec, "Mode", "Replicated", "Replicas", NULL)), 1);
  assert_string_equal(str(json_object_array_get_idx(
                          get(spec, "TaskTemplate", "Placement", "Constraints", NULL), 0)),
                      "node.labels.sandman.pool==a");
  assert_string_equal(str(get(spec, "EndpointSpec", "Mode", NULL)), "dnsrr");
  /* Network none: its own network, never the node's default bridge. */
  json_object *nets = get(spec, "TaskTemplate", "Networks", NULL);
  assert_int_equal(json_object_array_length(nets), 1);
  assert_string_equal(str(get(json_object_array_get_idx(nets, 0), "Target", NULL)),
                      "sandman-ci-per_run-0123-net");
  /* What 1.41 cannot say is checked on the node. */
  assert_true(checks.no_new_privileges);
  assert_true(checks.ipc_private);
  assert_int_equal(checks.memory_swap, 512LL << 20);
  assert_string_equal(checks.runtime, "");

  /* /workspace: anonymous (removed with the task), same driver options. */
  json_object *ws = mount_at(spec, "/workspace");
  assert_non_null(ws);
  assert_null(get(ws, "Source", NULL));
  assert_string_equal(str(get(ws, "VolumeOptions", "DriverConfig", "Options", "type", NULL)), "tmpfs");
  assert_non_null(strstr(str(get(ws, "VolumeOptions", "DriverConfig", "Options", "o", NULL)),
                         "size=1073741824"));
  /* /tmp and /.sandman: tmpfs volumes with the config's own options; the
   * agent's /.sandman stays executable (a 1.41 tmpfs mount is noexec). */
  json_object *tmp = mount_at(spec, "/tmp");
  assert_non_null(tmp);
  const char *o_tmp = str(get(tmp, "VolumeOptions", "DriverConfig", "Options", "o", NULL));
  assert_non_null(strstr(o_tmp, "nosuid"));
  assert_non_null(strstr(o_tmp, "nodev"));
  assert_non_null(strstr(o_tmp, "mode=1777"));
  assert_null(strstr(o_tmp, "rw"));
  json_object *agent = mount_at(spec, "/.sandman");
  assert_non_null(agent);
  const char *o_agent = str(get(agent, "VolumeOptions", "DriverConfig", "Options", "o", NULL));
  assert_non_null(strstr(o_agent, "exec"));
  assert_null(strstr(o_agent, "noexec"));
  assert_true(json_object_get_boolean(get(agent, "VolumeOptions", "NoCopy", NULL)));
  /* Nothing else is mounted. */
  assert_int_equal(json_object_array_length(get(cs, "Mounts", NULL)), 3);
  json_object_put(spec);
  json_object_put(c);
}

static void test_bridge_runtime_and_unlimited(void **s) {
  (void)s;
  snprintf(settings.network, sizeof settings.network, "bridge");
  snprintf(settings.runtime, sizeof settings.runtime, "runsc");
  settings.pids = 0;
  json_object *c = container_config(), *spec = NULL;
  sandbox_swarm_checks checks;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sandbox_swarm_service_spec(c, &opts, &spec, &checks, &err), 0);
  /* bridge: no network of its own (the node's default bridge). */
  assert_null(get(spec, "TaskTemplate", "Networks", NULL));
  assert_null(get(spec, "TaskTemplate", "Resources", "Limits", "Pids", NULL));
  assert_string_equal(checks.runtime, "runsc");
  json_object *cons = get(spec, "TaskTemplate", "Placement", "Constraints", NULL);
  assert_int_equal(json_object_array_length(cons), 1);
  assert_string_equal(str(json_object_array_get_idx(cons, 0)), "node.labels.sandman.runtime==runsc");
  json_object_put(spec);
  json_object_put(c);
  sm_sandbox_settings_defaults(&settings);
}

/* Feeds one change of the config and expects a refusal naming it. */
static void expect_refused(const char *hc_key, json_object *value, const char *named) {
  json_object *c = container_config(), *spec = NULL;
  sandbox_swarm_checks checks;
  sm_error err = SM_ERROR_INIT;
  json_object *hc = get(c, "HostConfig", NULL);
  json_object_object_add(hc_key ? hc : c, hc_key ? hc_key : "Volumes", value);
  assert_int_equal(sandbox_swarm_service_spec(c, &opts, &spec, &checks, &err), SM_EUNSUPPORTED);
  assert_null(spec);
  if (strstr(err.message, named) == NULL) fail_msg("'%s' not in: %s", named, err.message);
  json_object_put(c);
}

static void test_refusals(void **s) {
  (void)s;
  /* A key nobody taught the translation: refused, not dropped. */
  expect_refused("OomScoreAdj", json_object_new_int(500), "HostConfig.OomScoreAdj");
  expect_refused(NULL, json_object_new_object(), "Volumes");
  expect_refused("SecurityOpt",
                 json_tokener_parse("[\"no-new-privileges\",\"seccomp=/etc/profile.json\"]"),
                 "seccomp=/etc/profile.json");
  expect_refused("Binds", json_tokener_parse("[\"/var/run/docker.sock:/s\"]"), "HostConfig.Binds");
  expect_refused("Privileged", json_object_new_boolean(1), "HostConfig.Privileged");
  expect_refused("StorageOpt", json_tokener_parse("{\"size\":\"1G\"}"), "HostConfig.StorageOpt");
  expect_refused("NetworkMode", json_object_new_string("sandman-egress-ci-1"), "NetworkMode");
  expect_refused("IpcMode", json_object_new_string("host"), "IpcMode");
  expect_refused("RestartPolicy", json_tokener_parse("{\"Name\":\"always\"}"), "RestartPolicy");
  expect_refused("Mounts",
                 json_tokener_parse("[{\"Type\":\"bind\",\"Source\":\"/\",\"Target\":\"/h\"}]"),
                 "bind");
  /* Network none with no network of its own to give it. */
  json_object *c = container_config(), *spec = NULL;
  sandbox_swarm_checks checks;
  sm_error err = SM_ERROR_INIT;
  sandbox_swarm_spec_options o = opts;
  o.network = NULL;
  assert_int_equal(sandbox_swarm_service_spec(c, &o, &spec, &checks, &err), SM_EUNSUPPORTED);
  assert_non_null(strstr(err.message, "network none"));
  json_object_put(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_sandbox_is_carried_whole),
      cmocka_unit_test(test_bridge_runtime_and_unlimited),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
