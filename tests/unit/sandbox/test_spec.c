/* Names, scope keys, labels and the hardened container spec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "sandbox/capture.h"
#include "sandbox/preamble.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"

static const char *jstr(json_object *o, const char *path) {
  /* "a.b.c" walk; keys here contain no dots except label keys, which are
   * looked up with jlabel instead. */
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  json_object *cur = o;
  for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save))
    if (!json_object_object_get_ex(cur, tok, &cur)) return NULL;
  return json_object_get_string(cur);
}

static json_object *jget(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x)) return NULL;
  if (b == NULL) return x;
  return json_object_object_get_ex(x, b, &y) ? y : NULL;
}

static void test_keyed_names(void **state) {
  (void)state;
  char a[SM_NAME_MAX], b[SM_NAME_MAX], c[SM_NAME_MAX];
  assert_int_equal(sandbox_keyed_name("default", SM_MODE_PER_RUN, "run:p:r1", a, sizeof a, NULL),
                   0);
  assert_int_equal(sandbox_keyed_name("default", SM_MODE_PER_RUN, "run:p:r1", b, sizeof b, NULL),
                   0);
  assert_int_equal(sandbox_keyed_name("default", SM_MODE_PER_RUN, "run:p:r2", c, sizeof c, NULL),
                   0);
  assert_string_equal(a, b);
  assert_string_not_equal(a, c);
  assert_int_equal(strncmp(a, "sandman-default-per_run-", 24), 0);
  assert_int_equal(strlen(a), 24 + 32);
  /* sha256("run:p:r1") starts with these 32 hex digits (128 bits). */
  char hex[65];
  sandbox_sha256_hex("run:p:r1", 8, hex);
  assert_memory_equal(a + 24, hex, 32);
  assert_int_equal(sandbox_keyed_name("x", SM_MODE_PER_WORKER, "worker:w", a, sizeof a, NULL), 0);
  assert_int_equal(strncmp(a, "sandman-x-per_worker-", 21), 0);
}

static void test_scope_keys(void **state) {
  (void)state;
  sm_run_request req;
  sm_run_request_init(&req);
  char key[SM_KEY_MAX];
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "--run-id"));
  req.run_id = "r1";
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "run:default:r1");
  req.project = "proj";
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "run:proj:r1");
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_WORKER, key, sizeof key, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "--worker-id"));
  req.worker_id = "w1";
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_WORKER, key, sizeof key, NULL), 0);
  assert_string_equal(key, "worker:w1");
  /* A configuration scope keys the sandbox instead, with the project. */
  req.scope = SM_SCOPE_SHARED;
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "agent"));
  req.agent = "a";
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "shared:proj:a");
  req.scope = SM_SCOPE_USER;
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_WORKER, key, sizeof key, &err), SM_EINVAL);
  req.user = "u@x";
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_WORKER, key, sizeof key, NULL), 0);
  assert_string_equal(key, "user:proj:u@x");
  req.scope = SM_SCOPE_USER_AGENT;
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "user_agent:proj:u@x:a");
  /* A worker principal is a field of its own in front; control adds none. */
  req.scope = SM_SCOPE_NONE;
  req.principal = "control";
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "run:proj:r1");
  req.principal = "worker:K1";
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "p:worker%3AK1:run:proj:r1");
  req.scope = SM_SCOPE_USER;
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "p:worker%3AK1:user:proj:u@x");
  /* An agent that may use host tools has keyed sandboxes of its own
   * (issue 25): its key names it, whether or not this call has the route;
   * scopes that name the agent already are unchanged. */
  req.principal = NULL;
  req.scope = SM_SCOPE_NONE;
  req.agent_has_host_tools = 1;
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "run:proj:r1:ht:a");
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_WORKER, key, sizeof key, NULL), 0);
  assert_string_equal(key, "worker:w1:ht:a");
  req.scope = SM_SCOPE_USER;
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "user:proj:u@x:ht:a");
  req.scope = SM_SCOPE_SHARED;
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "shared:proj:a");
  req.scope = SM_SCOPE_NONE;
  req.agent_has_host_tools = 0;
  static const sm_host_route any_route = {NULL, NULL};
  req.host_route = &any_route; /* a call with the route is keyed so anyway */
  req.agent = "b:c";
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, key, sizeof key, NULL), 0);
  assert_string_equal(key, "run:proj:r1:ht:b%3Ac");
  req.host_route = NULL;
  req.agent = "a";
  req.principal = "worker:K1";
  req.scope = SM_SCOPE_USER;
  /* Too small a buffer is an error, never a truncated (shared) key. */
  char tiny[12];
  assert_int_equal(sandbox_scope_key(&req, SM_MODE_PER_RUN, tiny, sizeof tiny, &err), SM_EINVAL);
  assert_string_equal(tiny, "");

  req.principal = NULL;
  char p[SM_PRINCIPAL_MAX];
  assert_int_equal(sm_principal_worker("w1", p, sizeof p, NULL), 0);
  assert_string_equal(p, "worker:w1");
  assert_int_equal(sm_principal_worker("", p, sizeof p, NULL), SM_EINVAL);
  /* Operators use every keyed sandbox; a worker only its own. */
  assert_true(sm_principal_may_use(NULL, "worker:w1"));
  assert_true(sm_principal_may_use(SM_PRINCIPAL_CONTROL, "worker:w1"));
  assert_true(sm_principal_may_use(SM_PRINCIPAL_CONTROL, NULL));
  assert_true(sm_principal_may_use("worker:w1", "worker:w1"));
  assert_false(sm_principal_may_use("worker:w1", "worker:w2"));
  assert_false(sm_principal_may_use("worker:w1", "control"));
  assert_false(sm_principal_may_use("worker:w1", NULL));
  assert_false(sm_principal_may_use("worker:w1", "worker:w1x"));
}

/* Every pair here once gave (or could give) one key: each must give two. */
static void test_keys_are_injective(void **state) {
  (void)state;
  struct {
    sm_mode mode;
    sm_scope scope;
    const char *principal, *project, *run, *worker, *agent, *user;
  } pairs[][2] = {
      /* project a:b run c vs project a run b:c (the example) */
      {{SM_MODE_PER_RUN, 0, NULL, "a:b", "c", NULL, NULL, NULL},
       {SM_MODE_PER_RUN, 0, NULL, "a", "b:c", NULL, NULL, NULL}},
      /* an escape sequence typed as a name vs the character it stands for */
      {{SM_MODE_PER_RUN, 0, NULL, "a%3Ab", "c", NULL, NULL, NULL},
       {SM_MODE_PER_RUN, 0, NULL, "a:b", "c", NULL, NULL, NULL}},
      /* the default project spelled out vs left out is one sandbox on purpose;
       * but "default:x" vs project default run x are not */
      {{SM_MODE_PER_RUN, 0, NULL, "default:x", "y", NULL, NULL, NULL},
       {SM_MODE_PER_RUN, 0, NULL, "default", "x:y", NULL, NULL, NULL}},
      /* user u:agent:a vs user u with agent a */
      {{SM_MODE_PER_RUN, SM_SCOPE_USER, NULL, "p", NULL, NULL, NULL, "u:agent:a"},
       {SM_MODE_PER_RUN, SM_SCOPE_USER_AGENT, NULL, "p", NULL, NULL, "a", "u"}},
      /* the same user in two projects (scopes include the project) */
      {{SM_MODE_PER_RUN, SM_SCOPE_USER, NULL, "p1", NULL, NULL, NULL, "u"},
       {SM_MODE_PER_RUN, SM_SCOPE_USER, NULL, "p2", NULL, NULL, NULL, "u"}},
      {{SM_MODE_PER_WORKER, SM_SCOPE_SHARED, NULL, "p1", NULL, "w", "a", NULL},
       {SM_MODE_PER_WORKER, SM_SCOPE_SHARED, NULL, "p2", NULL, "w", "a", NULL}},
      /* a worker called "x:y" vs ... and principals */
      {{SM_MODE_PER_WORKER, 0, NULL, NULL, NULL, "run:p:r", NULL, NULL},
       {SM_MODE_PER_RUN, 0, NULL, "p", "r", NULL, NULL, NULL}},
      {{SM_MODE_PER_RUN, 0, "worker:K1", "p", "r", NULL, NULL, NULL},
       {SM_MODE_PER_RUN, 0, "worker:K2", "p", "r", NULL, NULL, NULL}},
      {{SM_MODE_PER_RUN, 0, "worker:K1", "p", "r", NULL, NULL, NULL},
       {SM_MODE_PER_RUN, 0, NULL, "p", "r", NULL, NULL, NULL}},
      /* a principal forged into the project */
      {{SM_MODE_PER_RUN, 0, "worker:K1", "p", "r", NULL, NULL, NULL},
       {SM_MODE_PER_RUN, 0, NULL, "p:worker%3AK1:run:p", "r", NULL, NULL, NULL}},
      {{SM_MODE_PER_RUN, 0, "worker:a:b", "c", "r", NULL, NULL, NULL},
       {SM_MODE_PER_RUN, 0, "worker:a", "b:c", "r", NULL, NULL, NULL}},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    char keys[2][SM_KEY_MAX], names[2][SM_NAME_MAX];
    for (int j = 0; j < 2; j++) {
      sm_run_request req;
      sm_run_request_init(&req);
      req.scope = pairs[i][j].scope;
      req.principal = pairs[i][j].principal;
      req.project = pairs[i][j].project;
      req.run_id = pairs[i][j].run;
      req.worker_id = pairs[i][j].worker;
      req.agent = pairs[i][j].agent;
      req.user = pairs[i][j].user;
      assert_int_equal(sandbox_scope_key(&req, pairs[i][j].mode, keys[j], SM_KEY_MAX, NULL), 0);
      assert_int_equal(sandbox_keyed_name("i", pairs[i][j].mode, keys[j], names[j], SM_NAME_MAX,
                                          NULL),
                       0);
    }
    if (strcmp(keys[0], keys[1]) == 0) fail_msg("pair %zu: one key '%s'", i, keys[0]);
    if (strcmp(names[0], names[1]) == 0 && pairs[i][0].mode == pairs[i][1].mode)
      fail_msg("pair %zu: one name '%s'", i, names[0]);
  }
}

/* Splits a key at ':' and undoes the escapes: a key built from fields gives
 * exactly those fields back, so no two field lists share a key. */
static size_t key_decode(const char *key, char fields[8][512]) {
  size_t n = 0, len = 0;
  fields[0][0] = '\0';
  for (const char *p = key;; p++) {
    if (*p == ':' || *p == '\0') {
      fields[n][len] = '\0';
      n++;
      len = 0;
      if (*p == '\0' || n == 8) return n;
      continue;
    }
    if (*p == '%') {
      unsigned v = 0;
      assert_true(sscanf(p + 1, "%2x", &v) == 1);
      fields[n][len++] = (char)v;
      p += 2;
    } else {
      fields[n][len++] = *p;
    }
  }
}

static void test_key_encoding_round_trips(void **state) {
  (void)state;
  /* Fields from every byte value: printable, separators, escapes, controls. */
  unsigned seed = 12345;
  for (int round = 0; round < 2000; round++) {
    char f[3][64];
    for (int k = 0; k < 3; k++) {
      size_t len = (seed = seed * 1103515245u + 12345u) % 20;
      for (size_t i = 0; i < len; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned char c = (unsigned char)(seed >> 16);
        f[k][i] = c ? (char)c : ':';
      }
      f[k][len] = '\0';
    }
    char key[SM_KEY_MAX];
    size_t used = 0;
    for (int k = 0; k < 3; k++)
      assert_int_equal(sandbox_key_append(key, sizeof key, &used, f[k], NULL), 0);
    assert_int_equal(used, strlen(key));
    for (const char *p = key; *p; p++)
      assert_true((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                  strchr("_.@+=-:%", *p) != NULL);
    char back[8][512];
    assert_int_equal(key_decode(key, back), 3);
    for (int k = 0; k < 3; k++) assert_string_equal(back[k], f[k]);
  }
}

static void test_name_check(void **state) {
  (void)state;
  const char *good[] = {"a", "run-1", "gh:12345", "user@example.com", "a+b=c", "A_b.c",
                        "9", "_x", ":x", "@x"};
  const char *bad[] = {"", "-x", ".x", "a b", "a\nb", "$(id)", "a/b", "a%b", "a\\b", "a;b",
                       "a\tb", "\xc3\xa9", "a*"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    if (!sm_name_valid(good[i])) fail_msg("'%s' should be valid", good[i]);
    assert_int_equal(sm_name_check("run id", good[i], NULL), 0);
  }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (sm_name_valid(bad[i])) fail_msg("'%s' should be refused", bad[i]);
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(sm_name_check("run id", bad[i], &err), SM_EINVAL);
    assert_non_null(strstr(err.message, "run id"));
    /* The message never carries the raw control characters. */
    for (const char *p = err.message; *p; p++) assert_true(*p >= 0x20 && *p < 0x7f);
  }
  assert_false(sm_name_valid(NULL));
  char longest[SM_NAME_LEN_MAX + 2];
  memset(longest, 'x', sizeof longest);
  longest[SM_NAME_LEN_MAX] = '\0';
  assert_true(sm_name_valid(longest));
  longest[SM_NAME_LEN_MAX] = 'x';
  longest[SM_NAME_LEN_MAX + 1] = '\0';
  assert_false(sm_name_valid(longest));
}

static void test_instance_names(void **state) {
  (void)state;
  assert_true(sandbox_instance_valid("default"));
  assert_true(sandbox_instance_valid("it-test_run.sh"));
  assert_false(sandbox_instance_valid(""));
  assert_false(sandbox_instance_valid("-x"));
  assert_false(sandbox_instance_valid("a/b"));
  assert_false(sandbox_instance_valid("a b"));
  assert_false(sandbox_instance_valid(NULL));
}

static void test_labels(void **state) {
  (void)state;
  sandbox_label_info li = {"inst",    "per_tool", "proj",
                           NULL,      NULL,       "agent1",
                           "tool:x",  "abc",      "2026-01-01T00:00:00Z",
                           "host:42", "vol-ws",   NULL,
                           NULL,      NULL};
  json_object *l = sandbox_labels_build(&li);
  const char *want[][2] = {{"io.sandman.managed", "true"},  {"io.sandman.instance", "inst"},
                           {"io.sandman.mode", "per_tool"}, {"io.sandman.project", "proj"},
                           {"io.sandman.run", ""},          {"io.sandman.worker", ""},
                           {"io.sandman.agent", "agent1"},  {"io.sandman.scope-key", "tool:x"},
                           {"io.sandman.config-hash", "abc"},
                           {"io.sandman.created", "2026-01-01T00:00:00Z"},
                           {"io.sandman.owner", "host:42"}, {"io.sandman.volume", "vol-ws"}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(l, want[i][0], &v));
    assert_string_equal(json_object_get_string(v), want[i][1]);
  }
  assert_int_equal(json_object_object_length(l), 12);
  json_object_put(l);
  li.owner = NULL;
  li.volume = NULL;
  l = sandbox_labels_build(&li);
  assert_int_equal(json_object_object_length(l), 10);
  json_object_put(l);
  /* A keyed sandbox carries the principal of the call that made it. */
  li.principal = "worker:w1";
  l = sandbox_labels_build(&li);
  json_object *v = NULL;
  assert_true(json_object_object_get_ex(l, "io.sandman.principal", &v));
  assert_string_equal(json_object_get_string(v), "worker:w1");
  json_object_put(l);
  /* A lease container names the sandbox whose /workspace it shares. */
  li.lease = "sandman-i-per_run-abc";
  l = sandbox_labels_build(&li);
  assert_true(json_object_object_get_ex(l, "io.sandman.lease", &v));
  assert_string_equal(json_object_get_string(v), "sandman-i-per_run-abc");
  json_object_put(l);
}

static void test_container_user(void **state) {
  (void)state;
  sm_sandbox_settings s;
  sm_sandbox_settings_defaults(&s);
  char u[64];
  int uid, gid;
  sandbox_container_user(&s, "", u, sizeof u, &uid, &gid);
  assert_string_equal(u, "1000:1000");
  assert_int_equal(uid, 1000);
  sandbox_container_user(&s, "root", u, sizeof u, &uid, &gid);
  assert_string_equal(u, "1000:1000");
  sandbox_container_user(&s, "0:0", u, sizeof u, &uid, &gid);
  assert_string_equal(u, "1000:1000");
  sandbox_container_user(&s, "1234", u, sizeof u, &uid, &gid);
  assert_string_equal(u, "1234");
  assert_int_equal(uid, 1234);
  assert_int_equal(gid, 1234);
  sandbox_container_user(&s, "app", u, sizeof u, &uid, &gid);
  assert_string_equal(u, "app");
  assert_int_equal(uid, -1);
  snprintf(s.user, sizeof s.user, "5:6");
  sandbox_container_user(&s, "app", u, sizeof u, &uid, &gid);
  assert_int_equal(uid, 5);
  assert_int_equal(gid, 6);
}

static void test_container_spec_is_hardened(void **state) {
  (void)state;
  sm_sandbox_settings s;
  sm_sandbox_settings_defaults(&s);
  json_object *labels = json_object_new_object();
  json_object_object_add(labels, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(labels, "io.sandman.volume", json_object_new_string("v-ws"));
  const char *env[] = {"HOME=/workspace"};
  sandbox_container_spec cs = {&s, "1000:1000", 1000, 1000, "v-ws", labels, env, 1, 0, NULL, 0, 0};
  json_object *c = sandbox_container_config_build(&cs);
  assert_non_null(c);
  assert_string_equal(jstr(c, "Image"), "sandman/minimal:latest");
  /* The container's own processes run as root (no capabilities): the
   * sandbox's user cannot touch them; calls run as that user. */
  assert_string_equal(jstr(c, "User"), "0:0");
  assert_string_equal(jstr(c, "WorkingDir"), "/workspace");
  assert_string_equal(jstr(c, "HostConfig.NetworkMode"), "none");
  assert_true(json_object_get_boolean(jget(c, "HostConfig", "ReadonlyRootfs")));
  assert_true(json_object_get_boolean(jget(c, "HostConfig", "Init")));
  assert_string_equal(json_object_get_string(json_object_array_get_idx(jget(c, "HostConfig", "CapDrop"), 0)), "ALL");
  assert_string_equal(json_object_get_string(json_object_array_get_idx(jget(c, "HostConfig", "SecurityOpt"), 0)), "no-new-privileges");
  assert_int_equal(json_object_get_int64(jget(c, "HostConfig", "PidsLimit")), 256);
  assert_int_equal(json_object_get_int64(jget(c, "HostConfig", "Memory")), 512LL << 20);
  assert_int_equal(json_object_get_int64(jget(c, "HostConfig", "MemorySwap")), 512LL << 20);
  assert_int_equal(json_object_get_int64(jget(c, "HostConfig", "NanoCpus")), 1000000000LL);
  assert_non_null(strstr(json_object_get_string(jget(jget(c, "HostConfig", "Tmpfs"), "/tmp", NULL)), "size=67108864"));
  json_object *ul = json_object_array_get_idx(jget(c, "HostConfig", "Ulimits"), 0);
  assert_string_equal(jstr(ul, "Name"), "nofile");
  assert_int_equal(json_object_get_int64(jget(ul, "Soft", NULL)), 1024);
  assert_null(jget(c, "HostConfig", "Runtime"));
  /* The sandbox's own volume is its only mount: no bind (the engine's
   * socket above all) ever goes in. */
  assert_int_equal(json_object_array_length(jget(c, "HostConfig", "Mounts")), 1);
  assert_null(jget(c, "HostConfig", "Binds"));
  assert_null(jget(c, "HostConfig", "VolumesFrom"));
  json_object *m = json_object_array_get_idx(jget(c, "HostConfig", "Mounts"), 0);
  assert_string_equal(jstr(m, "Type"), "volume");
  assert_string_equal(jstr(m, "Source"), "v-ws");
  assert_string_equal(jstr(m, "Target"), "/workspace");
  assert_string_equal(jstr(m, "VolumeOptions.DriverConfig.Options.type"), "tmpfs");
  assert_string_equal(jstr(m, "VolumeOptions.DriverConfig.Options.o"),
                      "size=1073741824,nosuid,nodev,uid=1000,gid=1000,mode=0755");
  /* The volume carries the labels, minus the container-only one. */
  json_object *vl = jget(jget(m, "VolumeOptions", NULL), "Labels", NULL);
  json_object *tmp = NULL;
  assert_true(json_object_object_get_ex(vl, "io.sandman.managed", &tmp));
  assert_false(json_object_object_get_ex(vl, "io.sandman.volume", &tmp));
  assert_true(json_object_object_get_ex(jget(c, "Labels", NULL), "io.sandman.volume", &tmp));
  /* The agent's place: a root-owned tmpfs, gone with a stop. */
  assert_non_null(strstr(json_object_get_string(jget(jget(c, "HostConfig", "Tmpfs"), "/.sandman", NULL)), "mode=0755"));
  json_object_put(c);

  /* A keyed sandbox's: an anonymous volume of its own, nothing copied
   * into it from the image, and no tmpfs over it; still no bind. */
  cs.agent_volume = 1;
  c = sandbox_container_config_build(&cs);
  assert_null(jget(jget(c, "HostConfig", "Tmpfs"), "/.sandman", NULL));
  assert_non_null(jget(jget(c, "HostConfig", "Tmpfs"), "/tmp", NULL));
  assert_int_equal(json_object_array_length(jget(c, "HostConfig", "Mounts")), 2);
  m = json_object_array_get_idx(jget(c, "HostConfig", "Mounts"), 1);
  assert_string_equal(jstr(m, "Type"), "volume");
  assert_null(jget(m, "Source", NULL));
  assert_string_equal(jstr(m, "Target"), "/.sandman");
  assert_true(json_object_get_boolean(jget(jget(m, "VolumeOptions", NULL), "NoCopy", NULL)));
  assert_null(jget(c, "HostConfig", "Binds"));
  json_object_put(c);
  cs.agent_volume = 0;
  /* Found again from the engine's inspect of such a container. */
  json_object *insp = json_tokener_parse(
      "{\"Mounts\":[{\"Type\":\"volume\",\"Destination\":\"/workspace\"},"
      "{\"Type\":\"volume\",\"Name\":\"0a1b\",\"Destination\":\"/.sandman\"}]}");
  assert_true(sandbox_agent_volume_kept(insp));
  json_object_put(insp);
  insp = json_tokener_parse("{\"Mounts\":[{\"Type\":\"tmpfs\",\"Destination\":\"/.sandman\"}]}");
  assert_false(sandbox_agent_volume_kept(insp));
  json_object_put(insp);
  assert_false(sandbox_agent_volume_kept(NULL));

  snprintf(s.runtime, sizeof s.runtime, "runsc");
  s.pids = 0;
  s.memory = 0;
  s.cpu = 0;
  s.read_only_root = 0;
  s.drop_all_caps = 0;
  c = sandbox_container_config_build(&cs);
  assert_string_equal(jstr(c, "HostConfig.Runtime"), "runsc");
  assert_null(jget(c, "HostConfig", "PidsLimit"));
  assert_null(jget(c, "HostConfig", "Memory"));
  assert_null(jget(c, "HostConfig", "NanoCpus"));
  assert_null(jget(c, "HostConfig", "CapDrop"));
  assert_false(json_object_get_boolean(jget(c, "HostConfig", "ReadonlyRootfs")));
  json_object_put(c);

  /* gVisor: --pids is the tool's RLIMIT_NPROC (gVisor's kernel counts it);
   * the host's cgroup leaves room for gVisor's own threads. */
  sm_sandbox_settings_defaults(&s);
  s.pids = 64;
  cs.gvisor = 1;
  c = sandbox_container_config_build(&cs);
  assert_int_equal(json_object_get_int64(jget(c, "HostConfig", "PidsLimit")),
                   SM_GVISOR_PIDS_BASE + SM_GVISOR_PIDS_PER_TASK * 64);
  json_object *uls = jget(c, "HostConfig", "Ulimits");
  assert_int_equal(json_object_array_length(uls), 2);
  ul = json_object_array_get_idx(uls, 1);
  assert_string_equal(jstr(ul, "Name"), "nproc");
  assert_int_equal(json_object_get_int64(jget(ul, "Soft", NULL)), 64);
  assert_int_equal(json_object_get_int64(jget(ul, "Hard", NULL)), 64);
  json_object_put(c);
  cs.gvisor = 0;
  c = sandbox_container_config_build(&cs);
  assert_int_equal(json_object_get_int64(jget(c, "HostConfig", "PidsLimit")), 64);
  assert_int_equal(json_object_array_length(jget(c, "HostConfig", "Ulimits")), 1);
  json_object_put(c);
  assert_int_equal(sandbox_host_pids_limit(4194304, 1), 4194304);
  assert_int_equal(sandbox_host_pids_limit(0, 1), 0);
  json_object_put(labels);
}

/* A leased call's own container (lease_box.h): hardened as any sandbox,
 * on the sandbox's volume, its keeper ends at the deadline and the engine
 * removes it when it stops; a sandbox's own container stays until removed. */
static void test_lease_container_spec(void **state) {
  (void)state;
  sm_sandbox_settings s;
  sm_sandbox_settings_defaults(&s);
  json_object *labels = json_object_new_object();
  const char *env[] = {"HOME=/workspace"};
  sandbox_container_spec cs = {&s, "1000:1000", 1000, 1000, "sb-ws", labels, env, 1, 0, NULL, 0, 0};
  json_object *c = sandbox_container_config_build(&cs);
  assert_null(jget(c, "HostConfig", "AutoRemove"));
  json_object *ep = jget(c, "Entrypoint", NULL);
  assert_int_equal(json_object_array_length(ep), 4);
  assert_string_equal(json_object_get_string(json_object_array_get_idx(ep, 3)), "sandman-sandbox");
  json_object_put(c);
  cs.lease_deadline_s = 720;
  c = sandbox_container_config_build(&cs);
  assert_true(json_object_get_boolean(jget(c, "HostConfig", "AutoRemove")));
  ep = jget(c, "Entrypoint", NULL);
  assert_int_equal(json_object_array_length(ep), 5);
  assert_non_null(strstr(json_object_get_string(json_object_array_get_idx(ep, 2)), "sleep \"$1\""));
  assert_string_equal(json_object_get_string(json_object_array_get_idx(ep, 3)), "sandman-lease");
  assert_string_equal(json_object_get_string(json_object_array_get_idx(ep, 4)), "720");
  assert_string_equal(jstr(c, "User"), "0:0");
  assert_string_equal(json_object_get_string(json_object_array_get_idx(jget(c, "HostConfig", "CapDrop"), 0)), "ALL");
  json_object *m = json_object_array_get_idx(jget(c, "HostConfig", "Mounts"), 0);
  assert_string_equal(jstr(m, "Source"), "sb-ws");
  assert_string_equal(jstr(m, "Target"), "/workspace");
  json_object_put(c);
  json_object_put(labels);
}

/* The call's preamble: stripped from the tool's output and parsed; output
 * before it is the runtime's. */
static void feed(sandbox_call_watch *w, int stream, const char *s) {
  assert_int_equal(sandbox_call_watch_output(w, stream, s, strlen(s)), 0);
}

static int started_n;
static char started_pid[64];
static void started_at(void *ud, const char *pid, const char *start) {
  (*(int *)ud)++;
  snprintf(started_pid, sizeof started_pid, "%s %s", pid, start);
}

static void test_call_preamble(void **state) {
  (void)state;
  sandbox_capture cap;
  sandbox_call_watch w;
  char text[256];
  /* In pieces, then the tool's own output passes through untouched. */
  sandbox_capture_init(&cap, 1024, 1024, NULL, NULL);
  sandbox_call_watch_init(&w, "tok1", &cap);
  /* The host-tool route is told the call's first process once, from the
   * wrapper's line (not from a line the tool prints after it). */
  w.on_start = started_at;
  w.on_start_ud = &started_n;
  started_n = 0;
  feed(&w, 1, "sandman-ca");
  assert_int_equal(started_n, 0);
  feed(&w, 1, "ll tok1 42 51234 7\nhello\n");
  assert_int_equal(started_n, 1);
  assert_string_equal(started_pid, "42 51234");
  feed(&w, 2, "err\n");
  feed(&w, 1, "sandman-call tok1 1 1 1\n"); /* the tool may print one too */
  assert_int_equal(w.state, SM_CALL_WATCH_STARTED);
  assert_string_equal(w.pid, "42");
  assert_string_equal(w.start, "51234");
  assert_int_equal(w.oom_before, 7);
  assert_string_equal(cap.out.data, "hello\nsandman-call tok1 1 1 1\n");
  assert_string_equal(cap.err.data, "err\n");
  assert_int_equal(started_n, 1);
  assert_false(sandbox_call_watch_runtime_text(&w, text, sizeof text));
  sandbox_call_watch_dispose(&w);
  sandbox_capture_dispose(&cap);

  /* No oom counter (gVisor): "-". */
  sandbox_capture_init(&cap, 1024, 1024, NULL, NULL);
  sandbox_call_watch_init(&w, "t", &cap);
  feed(&w, 1, "sandman-call t 3 248 -\n");
  assert_int_equal(w.state, SM_CALL_WATCH_STARTED);
  assert_int_equal(w.oom_before, -1);
  sandbox_call_watch_dispose(&w);
  sandbox_capture_dispose(&cap);

  /* The runtime's message instead: none of it is the tool's. */
  const char *runtime[] = {
      "OCI runtime exec failed: exec failed: unable to start container process: "
      "read init-p: connection reset by peer: unknown\r\n",
      "sandman-call other 1 2 3\n",  /* another call's token */
      "sandman-call tok1 x 2 3\n",   /* not a pid */
      "sandman-callX\n",
  };
  for (size_t i = 0; i < sizeof runtime / sizeof runtime[0]; i++) {
    sandbox_capture_init(&cap, 1024, 1024, NULL, NULL);
    sandbox_call_watch_init(&w, "tok1", &cap);
    feed(&w, 1, runtime[i]);
    feed(&w, 1, "more\n");
    assert_int_equal(w.state, SM_CALL_WATCH_RUNTIME);
    assert_int_equal(cap.out.len, 0);
    assert_true(sandbox_call_watch_runtime_text(&w, text, sizeof text));
    for (const char *p = text; *p; p++) assert_true(*p >= 0x20 && *p < 0x7f);
    sandbox_call_watch_dispose(&w);
    sandbox_capture_dispose(&cap);
  }
  /* stderr before the preamble: the runtime's when none comes... */
  sandbox_capture_init(&cap, 1024, 1024, NULL, NULL);
  sandbox_call_watch_init(&w, "tok1", &cap);
  feed(&w, 2, "waiting on pid 4: EOF\n");
  assert_int_equal(w.state, SM_CALL_WATCH_WAITING);
  assert_true(sandbox_call_watch_runtime_text(&w, text, sizeof text));
  assert_string_equal(text, "waiting on pid 4: EOF");
  assert_int_equal(cap.err.len, 0);
  sandbox_call_watch_dispose(&w);
  sandbox_capture_dispose(&cap);
  /* ...the tool's when the preamble follows (it overtook it on the wire). */
  sandbox_capture_init(&cap, 1024, 1024, NULL, NULL);
  sandbox_call_watch_init(&w, "tok1", &cap);
  feed(&w, 2, "err\n");
  feed(&w, 1, "sandman-call tok1 7 9 0\nout\n");
  feed(&w, 2, "more\n");
  assert_string_equal(cap.err.data, "err\nmore\n");
  assert_string_equal(cap.out.data, "out\n");
  assert_false(sandbox_call_watch_runtime_text(&w, text, sizeof text));
  sandbox_call_watch_dispose(&w);
  sandbox_capture_dispose(&cap);
  /* A line that never ends is cut off, not buffered without bound. */
  sandbox_capture_init(&cap, 1024, 1024, NULL, NULL);
  sandbox_call_watch_init(&w, "tok1", &cap);
  feed(&w, 1, "sandman-call tok1 ");
  for (int i = 0; i < 100; i++) feed(&w, 1, "1234567890");
  assert_int_equal(w.state, SM_CALL_WATCH_RUNTIME);
  sandbox_call_watch_dispose(&w);
  sandbox_capture_dispose(&cap);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keyed_names),
      cmocka_unit_test(test_scope_keys),
      cmocka_unit_test(test_keys_are_injective),
      cmocka_unit_test(test_key_encoding_round_trips),
      cmocka_unit_test(test_name_check),
      cmocka_unit_test(test_instance_names),
      cmocka_unit_test(test_labels),
      cmocka_unit_test(test_container_user),
      cmocka_unit_test(test_container_spec_is_hardened),
      cmocka_unit_test(test_lease_container_spec),
      cmocka_unit_test(test_call_preamble),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
