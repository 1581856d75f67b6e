/* What sandman writes into a sandbox's relay (the policy file, read back
 * by the proxy's own parser) and what it takes out of the proxy's log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "egress/egress_internal.h"
#include "egress/egress_policy.h"

static void test_policy_round_trip(void **state) {
  (void)state;
  const char *dallow[] = {"pypi.org", "*.pythonhosted.org", "10.20.0.0/16"};
  const char *ddeny[] = {"*.evil.example"};
  const char *aallow[] = {"pypi.org:443"};
  sm_egress_level levels[2] = {{"defaults", dallow, 3, ddeny, 1}, {"agents.coder", aallow, 1, NULL, 0}};
  sm_egress_policy p = {"sandman-x-per_run-01", "coder", "demo", "r1", NULL, levels, 2};
  eg_block_in blocks[1] = {{"172.17.0.1/32", "engine host"}};
  common_buf text;
  common_buf_init(&text, EG_POLICY_MAX_BYTES);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(egress_policy_text(&text, &p, blocks, 1, &err), 0);
  eg_policy pol;
  char why[EG_WHY_MAX];
  if (egress_policy_parse(text.data, text.len, &pol, why, sizeof why) != 0)
    fail_msg("%s\n%s", why, text.data);
  assert_string_equal(pol.sandbox, "sandman-x-per_run-01");
  assert_string_equal(pol.worker, "");
  assert_int_equal(pol.n_levels, 2);
  assert_int_equal(pol.n_allow, 4);
  assert_int_equal(pol.n_deny, 1);
  assert_int_equal(pol.n_blocks, 1);
  eg_dest d;
  assert_int_equal(egress_authority_parse("pypi.org:443", 12, -1, &d, why, sizeof why), 0);
  assert_int_equal(egress_policy_decide(&pol, &d, why, sizeof why), 1);
  assert_string_equal(why, "agents.coder.egress.allow: pypi.org:443 matches pypi.org:443");
  egress_policy_dispose(&pol);

  /* Cut anywhere, the proxy refuses it (no end line). */
  for (size_t cut = 0; cut < text.len; cut += 7) {
    if (egress_policy_parse(text.data, cut, &pol, why, sizeof why) == 0)
      fail_msg("cut at %zu accepted", cut);
  }
  common_buf_dispose(&text);

  /* Names that could break a line, and bad patterns, are refused. */
  sm_egress_policy bad = p;
  bad.agent = "co der";
  common_buf_init(&text, EG_POLICY_MAX_BYTES);
  assert_int_equal(egress_policy_text(&text, &bad, NULL, 0, &err), SM_EINVAL);
  common_buf_dispose(&text);
  const char *badallow[] = {"pypi.org\nallow *"};
  sm_egress_level bl[1] = {{"defaults", badallow, 1, NULL, 0}};
  bad = p;
  bad.levels = bl;
  bad.n_levels = 1;
  common_buf_init(&text, EG_POLICY_MAX_BYTES);
  assert_int_equal(egress_policy_text(&text, &bad, NULL, 0, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "defaults.egress.allow"));
  common_buf_dispose(&text);

  /* A policy of an older format (an internal network's range) is refused. */
  const char *v1 = "sandman-egress-policy 1\nsubnet 172.30.0.0/16\nlevel defaults\nallow *\nend\n";
  assert_int_equal(egress_policy_parse(v1, strlen(v1), &pol, why, sizeof why), -1);
  assert_int_equal(sm_egress_pattern_check("*.pythonhosted.org:443", &err), 0);
  assert_int_equal(sm_egress_pattern_check("a.*.b", &err), SM_EINVAL);
}

static void test_log_time(void **state) {
  (void)state;
  long long s = 0;
  long ns = 0;
  const char *t = "2026-11-23T20:41:25.819057454Z";
  assert_int_equal(egress_parse_log_time(t, strlen(t), &s, &ns), 0);
  assert_int_equal(s, 1795466485LL);
  assert_int_equal(ns, 819057454L);
  t = "1970-01-01T00:00:00Z";
  assert_int_equal(egress_parse_log_time(t, strlen(t), &s, &ns), 0);
  assert_int_equal(s, 0);
  assert_int_equal(ns, 0);
  t = "2024-02-29T12:00:00.5Z";
  assert_int_equal(egress_parse_log_time(t, strlen(t), &s, &ns), 0);
  assert_int_equal(s, 1709208000LL);
  assert_int_equal(ns, 500000000L);
  t = "2026-11-23 20:41:25Z";
  assert_int_equal(egress_parse_log_time(t, strlen(t), &s, &ns), -1);
  t = "2026-13-23T20:41:25Z";
  assert_int_equal(egress_parse_log_time(t, strlen(t), &s, &ns), -1);
}

static int count(void *ud, json_object *ev) {
  (*(int *)ud)++;
  json_object *u = NULL, *v = NULL;
  assert_true(json_object_object_get_ex(ev, "unmapped", &u) && json_object_object_get_ex(u, "method", &v));
  return 0;
}

static void test_collect_line(void **state) {
  (void)state;
  char dir[] = "/tmp/sandman-egress-unit-XXXXXX", file[128];
  assert_non_null(mkdtemp(dir));
  snprintf(file, sizeof file, "%s/a.jsonl", dir);
  sm_audit_options o = SM_AUDIT_OPTIONS_INIT;
  o.file = file;
  sm_audit *a = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_open(&a, &o, &err), 0);
  const char *denied =
      "{\"event\":\"egress.denied\",\"time\":1795466485.819,\"sandbox\":\"sb\",\"agent\":\"coder\",\"src_ip\":\"172.30.0.5\","
      "\"method\":\"CONNECT\",\"dst_host\":\"denied.test\",\"dst_port\":443,\"status\":403,"
      "\"rule\":\"defaults.egress.allow does not include denied.test:443\",\"duration_ms\":1}";
  assert_int_equal(egress_collect_line(a, denied, strlen(denied), &err), 1);
  const char *ready = "{\"event\":\"proxy.ready\",\"time\":1.0,\"port\":3128}";
  assert_int_equal(egress_collect_line(a, ready, strlen(ready), &err), 0);
  assert_int_equal(egress_collect_line(a, "not json", 8, &err), 0);
  assert_int_equal(egress_collect_line(a, "{\"event\":\"call.allowed\"}", 24, &err),
                   0); /* not the proxy's to say */
  sm_audit_close(a);
  int n = 0;
  assert_int_equal(sm_audit_read(file, 0, NULL, count, &n, NULL, &err), 0);
  assert_int_equal(n, 1);
  unlink(file);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_policy_round_trip),
      cmocka_unit_test(test_log_time),
      cmocka_unit_test(test_collect_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
