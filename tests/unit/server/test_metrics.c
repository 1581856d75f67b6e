/* Prometheus rendering of the runner's metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/server_internal.h"

static char *render(server_metrics *m, const server_metrics_gauges *g, common_buf *b) {
  common_buf_init(b, 4 * 1024 * 1024);
  assert_int_equal(server_metrics_render(m, g, b), 0);
  return b->data;
}

static void calls_histograms_failures(void **state) {
  (void)state;
  server_metrics *m = server_metrics_new();
  assert_non_null(m);
  server_metrics_call(m, "shell", "per_run", "ok", 0.2);
  server_metrics_call(m, "shell", "per_run", "ok", 3.0);
  server_metrics_call(m, "shell", "per_run", "timeout", 121);
  server_metrics_call(m, NULL, "per_tool", "tool", 0.01);
  server_metrics_call(m, "agent", "per_run", "ok", 0.003); /* a call over the agent: ~3 ms */
  server_metrics_failure(m, "timeout");
  server_metrics_failure(m, "tool");
  server_metrics_failure(m, "tool");
  server_metrics_http(m, "execute", 200);
  server_metrics_http(m, "execute", 200);
  server_metrics_http(m, "execute", 401);
  server_metrics_lease(m, "created");
  server_metrics_background(m);
  server_metrics_gauges g;
  memset(&g, 0, sizeof g);
  g.sandboxes_known = 1;
  g.sandboxes[SM_MODE_PER_RUN] = 10;
  g.sandboxes[SM_MODE_PER_TOOL] = 2;
  g.sandboxes_by_state[0] = 9;
  g.sandboxes_by_state[1] = 3;
  g.calls_in_flight = 3;
  g.engine_up = 1;
  common_buf b;
  const char *t = render(m, &g, &b);
  static const char *const want[] = {
      "# TYPE sandman_calls_total counter\n",
      "sandman_calls_total{tool=\"shell\",mode=\"per_run\",outcome=\"ok\"} 2\n",
      "sandman_calls_total{tool=\"shell\",mode=\"per_run\",outcome=\"timeout\"} 1\n",
      "sandman_calls_total{tool=\"none\",mode=\"per_tool\",outcome=\"tool\"} 1\n",
      "# TYPE sandman_call_duration_seconds histogram\n",
      "sandman_call_duration_seconds_bucket{tool=\"shell\",mode=\"per_run\",le=\"0.25\"} 1\n",
      /* buckets resolve 1-10 ms calls */
      "sandman_call_duration_seconds_bucket{tool=\"agent\",mode=\"per_run\",le=\"0.001\"} 0\n",
      "sandman_call_duration_seconds_bucket{tool=\"agent\",mode=\"per_run\",le=\"0.0025\"} 0\n",
      "sandman_call_duration_seconds_bucket{tool=\"agent\",mode=\"per_run\",le=\"0.005\"} 1\n",
      "sandman_call_duration_seconds_bucket{tool=\"shell\",mode=\"per_run\",le=\"5\"} 2\n",
      "sandman_call_duration_seconds_bucket{tool=\"shell\",mode=\"per_run\",le=\"120\"} 2\n",
      "sandman_call_duration_seconds_bucket{tool=\"shell\",mode=\"per_run\",le=\"+Inf\"} 3\n",
      "sandman_call_duration_seconds_count{tool=\"shell\",mode=\"per_run\"} 3\n",
      "sandman_call_duration_seconds_sum{tool=\"shell\",mode=\"per_run\"} 124.200000\n",
      "sandman_failures_total{kind=\"tool\"} 2\n",
      "sandman_failures_total{kind=\"timeout\"} 1\n",
      "sandman_failures_total{kind=\"engine\"} 0\n",
      "sandman_http_requests_total{route=\"execute\",code=\"200\"} 2\n",
      "sandman_http_requests_total{route=\"execute\",code=\"401\"} 1\n",
      "sandman_leases_total{event=\"created\"} 1\n",
      "sandman_background_calls_total 1\n",
      "sandman_sandboxes{mode=\"per_run\"} 10\n",
      "sandman_sandboxes{mode=\"per_tool\"} 2\n",
      "sandman_sandboxes{mode=\"per_worker\"} 0\n",
      "sandman_sandboxes_by_state{state=\"running\"} 9\n",
      "sandman_sandboxes_by_state{state=\"frozen\"} 3\n",
      "sandman_sandboxes_by_state{state=\"stopped\"} 0\n",
      "sandman_sandboxes_by_state{state=\"hibernated\"} 0\n",
      "sandman_calls_in_flight 3\n",
      "sandman_engine_up 1\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (strstr(t, want[i]) == NULL) fail_msg("missing: %s\nin:\n%s", want[i], t);
  common_buf_dispose(&b);
  server_metrics_free(m);
}

static void no_sandbox_gauge_when_unknown(void **state) {
  (void)state;
  server_metrics *m = server_metrics_new();
  assert_non_null(m);
  server_metrics_gauges g;
  memset(&g, 0, sizeof g);
  common_buf b;
  const char *t = render(m, &g, &b);
  assert_null(strstr(t, "sandman_sandboxes{"));
  assert_non_null(strstr(t, "sandman_engine_up 0\n"));
  common_buf_dispose(&b);
  server_metrics_free(m);
}

static void pool_gauges(void **state) {
  (void)state;
  server_metrics *m = server_metrics_new();
  assert_non_null(m);
  server_metrics_gauges g;
  memset(&g, 0, sizeof g);
  common_buf b;
  const char *t = render(m, &g, &b);
  assert_null(strstr(t, "sandman_pool_"));
  common_buf_dispose(&b);
  g.pool_known = 1;
  g.pool.size = 3;
  g.pool.configurations = 2;
  g.pool.ready = 5;
  g.pool.creating = 1;
  g.pool.removals_pending = 4;
  g.pool.taken = 7;
  g.pool.missed = 2;
  g.pool.created = 12;
  g.pool.removed = 9;
  g.pool.failed = 1;
  t = render(m, &g, &b);
  static const char *const want[] = {
      "# TYPE sandman_pool_size gauge\nsandman_pool_size 3\n",
      "# TYPE sandman_pool_configurations gauge\nsandman_pool_configurations 2\n",
      "# TYPE sandman_pool_ready gauge\nsandman_pool_ready 5\n",
      "# TYPE sandman_pool_creating gauge\nsandman_pool_creating 1\n",
      "# TYPE sandman_pool_removals_pending gauge\nsandman_pool_removals_pending 4\n",
      "# TYPE sandman_pool_taken_total counter\nsandman_pool_taken_total 7\n",
      "# TYPE sandman_pool_missed_total counter\nsandman_pool_missed_total 2\n",
      "# TYPE sandman_pool_created_total counter\nsandman_pool_created_total 12\n",
      "# TYPE sandman_pool_removed_total counter\nsandman_pool_removed_total 9\n",
      "# TYPE sandman_pool_failed_total counter\nsandman_pool_failed_total 1\n",
      "sandman_engine_up 0\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (strstr(t, want[i]) == NULL) fail_msg("missing: %s\nin:\n%s", want[i], t);
  common_buf_dispose(&b);
  server_metrics_free(m);
}

static void series_are_capped(void **state) {
  (void)state;
  server_metrics *m = server_metrics_new();
  assert_non_null(m);
  char tool[32];
  for (int i = 0; i < 1000; i++) {
    snprintf(tool, sizeof tool, "tool%d", i);
    server_metrics_call(m, tool, "per_tool", "ok", 0.1);
  }
  server_metrics_gauges g;
  memset(&g, 0, sizeof g);
  common_buf b;
  const char *t = render(m, &g, &b);
  assert_non_null(strstr(t, "tool=\"_other\""));
  size_t lines = 0;
  for (const char *p = t; (p = strstr(p, "sandman_calls_total{")) != NULL; p++) lines++;
  assert_true(lines <= 256);
  /* Every call is counted somewhere. */
  unsigned long long total = 0;
  for (const char *p = t; (p = strstr(p, "sandman_calls_total{")) != NULL; p++) {
    const char *sp = strchr(p, '}');
    total += strtoull(sp + 2, NULL, 10);
  }
  assert_int_equal(total, 1000);
  common_buf_dispose(&b);
  server_metrics_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(calls_histograms_failures),
      cmocka_unit_test(no_sandbox_gauge_when_unknown),
      cmocka_unit_test(pool_gauges),
      cmocka_unit_test(series_are_capped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
