/* Allocation failure in the parsers of what comes from outside (libgit2's
 * strict-alloc, curl's torture): each parse below runs again and again
 * with its 1st, 2nd, ... allocation failing (tests/support/alloc_fail.h),
 * until a run makes no allocation that was set to fail. Every run must end
 * without a crash, with the error said, and without a leak (LeakSanitizer
 * checks that in the sanitizer tree); the undisturbed run must succeed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "agent/frame.h"
#include "agent/json_mini.h"
#include "egress/egress_policy.h"
#include "server/server_internal.h"
#include "support/alloc_fail.h"
#include "support/files.h"
#include "workspace/ws.h"

/* What the last run of an op said, when it failed; runs that failed
 * without a word. */
static char said[SM_ERROR_MESSAGE_MAX];
static int unsaid;

static int said_err(int rc, const char *message) {
  snprintf(said, sizeof said, "%s", rc && message ? message : "");
  if (rc && (message == NULL || message[0] == '\0')) {
    print_message("failed (%d) without a word, allocation %ld failing\n", rc, af_count());
    unsaid++;
  }
  return rc;
}

/* Runs op under af_torture: the undisturbed run returns 0 and allocates. */
static void torture(int (*op)(void *), void *ud) {
  long allocs = 0;
  unsaid = 0;
  int rc = af_torture(op, ud, &allocs);
  if (rc != 0) fail_msg("the undisturbed run failed (%d): %s", rc, said);
  assert_true(allocs > 0);     /* else this tortured nothing */
  assert_int_equal(unsaid, 0); /* every failure said why */
}

/* ---- the configuration ---- */

static int load_config(void *ud) {
  const char *text = ud;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_config_load_string(&cfg, "full.yaml", text, strlen(text), &err);
  if (rc == 0) {
    sm_resolved r;
    rc = sm_config_resolve(cfg, NULL, "shell", "u1", NULL, &r, &err);
  }
  sm_config_free(cfg);
  return said_err(rc, err.message);
}

static void config_load(void **state) {
  (void)state;
  const char *src = getenv("SANDMAN_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/config/ok_full.yaml", src ? src : ".");
  char *text = tf_read(path, NULL);
  assert_non_null(text);
  torture(load_config, text);
  free(text);
}

/* ---- an egress policy file ---- */

static const char policy_text[] =
    "sandman-egress-policy 2\nsandbox s1\nagent coder\nproject demo\nrun r1\nworker -\n"
    "block 172.17.0.1/32 engine host\nlevel defaults\nallow pypi.org\n"
    "allow *.pythonhosted.org\nallow 10.20.0.0/16\ndeny *.evil.pythonhosted.org\n"
    "level agents.coder\nallow pypi.org:443\ndeny 10.20.9.0/24\nend\n";

static int parse_policy(void *ud) {
  (void)ud;
  eg_policy p;
  char why[EG_WHY_MAX] = "";
  int rc = egress_policy_parse(policy_text, sizeof policy_text - 1, &p, why, sizeof why);
  if (rc == 0) egress_policy_dispose(&p);
  return said_err(rc, why);
}

static void egress_policy(void **state) {
  (void)state;
  torture(parse_policy, NULL);
}

/* ---- a workspace listing and a manifest ---- */

static const char listing_text[] =
    "4096|1700000000|1700000000|1700000000.000000001 +0000|41ed|./src\n"
    "12|1700000001|1700000002|1700000002.123456789 +0000|81a4|./src/a.c\n"
    "7|1700000003|1700000003|1700000003.000000000 +0000|a1ff|./link\n"
    "0|1700000004|1700000004|1700000004.5 +0000|81a4|./empty\n";

static int parse_listing(void *ud) {
  (void)ud;
  ws_manifest m;
  workspace_manifest_init(&m);
  sm_error err = SM_ERROR_INIT;
  int rc = workspace_probe_parse(listing_text, sizeof listing_text - 1, 1000, 4096, &m, &err);
  if (rc == 0 && m.n != 4) rc = sm_error_set(&err, -1001, "%zu entries", m.n);
  workspace_manifest_dispose(&m);
  return said_err(rc, err.message);
}

/* What a manifest records: no link without its target. */
static const char files_text[] =
    "4096|1700000000|1700000000|1700000000.000000001 +0000|41ed|./src\n"
    "12|1700000001|1700000002|1700000002.123456789 +0000|81a4|./src/a.c\n";

static int manifest_round_trip(void *ud) {
  const char *path = ud;
  ws_manifest m, held, back, back_held;
  workspace_manifest_init(&m);
  workspace_manifest_init(&held);
  workspace_manifest_init(&back);
  workspace_manifest_init(&back_held);
  sm_error err = SM_ERROR_INIT;
  int rc = workspace_probe_parse(files_text, sizeof files_text - 1, 1000, 4096, &m, &err);
  /* It takes no sm_error: its callers say "out of memory" (workspace_in.c, workspace_out.c). */
  if (rc == 0 && (rc = workspace_manifest_set_target(&m, "c0ffee", "/workspace")) != 0)
    sm_error_set(&err, rc, "out of memory");
  if (rc == 0) rc = workspace_manifest_save(&m, &held, path, &err);
  if (rc == 0) rc = workspace_manifest_load(&back, &back_held, path, 1000, &err);
  if (rc == 0 && back.n != m.n) rc = sm_error_set(&err, -1001, "%zu entries back", back.n);
  workspace_manifest_dispose(&m);
  workspace_manifest_dispose(&held);
  workspace_manifest_dispose(&back);
  workspace_manifest_dispose(&back_held);
  return said_err(rc, err.message);
}

static void workspace_listing(void **state) {
  (void)state;
  torture(parse_listing, NULL);
  char dir[4096], path[4200];
  assert_int_equal(tf_temp_dir(dir, sizeof dir, "sandman-test-alloc"), 0);
  snprintf(path, sizeof path, "%s/manifest", dir);
  torture(manifest_round_trip, path);
  tf_rm_rf(dir);
}

static int make_protect(void *ud) {
  (void)ud;
  sm_string_list globs;
  sm_workspace_protect_defaults(&globs);
  ws_protect *p = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = workspace_protect_new(&p, &globs, &err);
  workspace_protect_free(p);
  return said_err(rc, err.message);
}

static void workspace_protect(void **state) {
  (void)state;
  torture(make_protect, NULL);
}

/* ---- the runner's request bodies ---- */

static const char execute_body[] =
    "{\"argv\":[\"sh\",\"-c\",\"echo hi\"],\"env\":{\"A\":\"1\",\"B\":\"two\"},"
    "\"stdin_b64\":\"aGVsbG8=\",\"mode\":\"per_run\",\"run_id\":\"r1\"}";

static int parse_execute(void *ud) {
  (void)ud;
  server_execute_params p;
  sm_error err = SM_ERROR_INIT;
  int rc = server_parse_execute(execute_body, sizeof execute_body - 1, 4096, &p, &err);
  if (rc == 0) server_execute_params_dispose(&p);
  return said_err(rc, err.message);
}

static void execute_request(void **state) {
  (void)state;
  torture(parse_execute, NULL);
}

/* ---- the agent's frames and sandman-tools' JSON ---- */

static int count_frame(void *ud, int type, uint32_t id, const unsigned char *p, uint32_t len) {
  (void)type;
  (void)id;
  (void)p;
  (void)len;
  (*(int *)ud)++;
  return 0;
}

static int read_frames(void *ud) {
  (void)ud;
  unsigned char stream[64];
  size_t n = 0;
  agent_frame_header(stream, SM_FRAME_HELLO, 0, 15);
  memcpy(stream + 9, "sandman-agent 1", 15);
  n = 24;
  agent_frame_header(stream + n, SM_FRAME_STDOUT, 7, 5);
  memcpy(stream + n + 9, "hello", 5);
  n += 14;
  int frames = 0;
  agent_frame_reader r;
  agent_frame_reader_init(&r, SM_FRAME_DATA_MAX, count_frame, &frames);
  int rc = 0;
  /* A byte at a time: the reader has to keep what it has in its buffer. */
  for (size_t i = 0; i < n && rc == 0; i++) rc = agent_frame_reader_feed(&r, stream + i, 1);
  agent_frame_reader_dispose(&r);
  return rc == 0 && frames != 2 ? -1001 : rc;
}

static int parse_json(void *ud) {
  (void)ud;
  static const char doc[] =
      "{\"tool\":\"x\",\"args\":{\"a\":[1,2,{\"b\":\"c\\u00e9\"}],\"d\":null}}";
  jm_node *n = agent_json_parse(doc, sizeof doc - 1);
  int rc = n ? 0 : SM_ENOMEM;
  agent_json_free(n);
  return rc;
}

static void agent_frames_and_json(void **state) {
  (void)state;
  torture(read_frames, NULL);
  torture(parse_json, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_load),       cmocka_unit_test(egress_policy),
      cmocka_unit_test(workspace_listing), cmocka_unit_test(workspace_protect),
      cmocka_unit_test(execute_request),   cmocka_unit_test(agent_frames_and_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
