/* Prometheus metrics of the runner. Label values come from requests (tool
 * names), so the number of series is capped: past the cap, new tools are
 * counted under tool="_other". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

#define SERIES_MAX 256
#define LABEL_MAX 72

/* From 1 ms: a call over the in-sandbox agent takes about 3 ms, a new
 * container about 100 ms, a build minutes. */
static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                 2.5,   5,      10,    30,   60,    120,  300};
#define N_BUCKETS (sizeof buckets / sizeof buckets[0])

typedef struct call_series {
  char tool[LABEL_MAX], mode[16], outcome[16];
  unsigned long long count;
} call_series;

typedef struct hist_series {
  char tool[LABEL_MAX], mode[16];
  unsigned long long bucket[N_BUCKETS];
  unsigned long long count;
  double sum;
} hist_series;

typedef struct kv_series {
  char a[LABEL_MAX], b[16];
  unsigned long long count;
} kv_series;

struct server_metrics {
  pthread_mutex_t mu;
  call_series calls[SERIES_MAX];
  size_t n_calls;
  hist_series hists[SERIES_MAX];
  size_t n_hists;
  kv_series failures[16];
  size_t n_failures;
  kv_series http[64];
  size_t n_http;
  kv_series leases[8];
  size_t n_leases;
  unsigned long long background;
};

server_metrics *server_metrics_new(void) {
  server_metrics *m = calloc(1, sizeof *m);
  if (m) pthread_mutex_init(&m->mu, NULL);
  return m;
}

void server_metrics_free(server_metrics *m) {
  if (m == NULL) return;
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static void set(char *dst, size_t size, const char *s) {
  snprintf(dst, size, "%s", s ? s : "");
}

/* Caller holds the mutex. */
static kv_series *kv_get(kv_series *arr, size_t *n, size_t max, const char *a, const char *b) {
  for (size_t i = 0; i < *n; i++)
    if (strcmp(arr[i].a, a) == 0 && strcmp(arr[i].b, b ? b : "") == 0) return &arr[i];
  if (*n >= max) return NULL;
  kv_series *s = &arr[(*n)++];
  set(s->a, sizeof s->a, a);
  set(s->b, sizeof s->b, b);
  return s;
}

void server_metrics_call(server_metrics *m, const char *tool, const char *mode, const char *outcome,
                         double seconds) {
  if (m == NULL) return;
  if (tool == NULL || tool[0] == '\0') tool = "none";
  pthread_mutex_lock(&m->mu);
  call_series *c = NULL;
  for (size_t pass = 0; pass < 2 && c == NULL; pass++) {
    const char *t = pass == 0 ? tool : "_other";
    for (size_t i = 0; i < m->n_calls && c == NULL; i++)
      if (strcmp(m->calls[i].tool, t) == 0 && strcmp(m->calls[i].mode, mode) == 0 &&
          strcmp(m->calls[i].outcome, outcome) == 0)
        c = &m->calls[i];
    if (c == NULL && (m->n_calls < SERIES_MAX - 32 || (pass == 1 && m->n_calls < SERIES_MAX))) {
      c = &m->calls[m->n_calls++];
      set(c->tool, sizeof c->tool, t);
      set(c->mode, sizeof c->mode, mode);
      set(c->outcome, sizeof c->outcome, outcome);
    }
  }
  if (c) c->count++;
  hist_series *h = NULL;
  for (size_t pass = 0; pass < 2 && h == NULL; pass++) {
    const char *t = pass == 0 ? tool : "_other";
    for (size_t i = 0; i < m->n_hists && h == NULL; i++)
      if (strcmp(m->hists[i].tool, t) == 0 && strcmp(m->hists[i].mode, mode) == 0)
        h = &m->hists[i];
    if (h == NULL && (m->n_hists < SERIES_MAX - 8 || (pass == 1 && m->n_hists < SERIES_MAX))) {
      h = &m->hists[m->n_hists++];
      set(h->tool, sizeof h->tool, t);
      set(h->mode, sizeof h->mode, mode);
    }
  }
  if (h) {
    for (size_t b = 0; b < N_BUCKETS; b++)
      if (seconds <= buckets[b]) h->bucket[b]++;
    h->count++;
    h->sum += seconds;
  }
  pthread_mutex_unlock(&m->mu);
}

/* One more of the series (a, b) of arr (at most max series). */
static void count(server_metrics *m, kv_series *arr, size_t *n, size_t max, const char *a,
                  const char *b) {
  pthread_mutex_lock(&m->mu);
  kv_series *s = kv_get(arr, n, max, a, b);
  if (s) s->count++;
  pthread_mutex_unlock(&m->mu);
}

void server_metrics_failure(server_metrics *m, const char *kind) {
  if (m && kind) count(m, m->failures, &m->n_failures, 16, kind, NULL);
}

void server_metrics_http(server_metrics *m, const char *route, int status) {
  if (m == NULL) return;
  char code[16];
  snprintf(code, sizeof code, "%d", status);
  count(m, m->http, &m->n_http, 64, route, code);
}

void server_metrics_lease(server_metrics *m, const char *event) {
  if (m) count(m, m->leases, &m->n_leases, 8, event, NULL);
}

void server_metrics_background(server_metrics *m) {
  if (m == NULL) return;
  pthread_mutex_lock(&m->mu);
  m->background++;
  pthread_mutex_unlock(&m->mu);
}

/* Label values are validated names already; escape anyway. */
static void label(common_buf *out, const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == '"') common_buf_printf(out, "\\%c", *s);
    else if (*s == '\n') common_buf_printf(out, "\\n");
    else common_buf_append(out, s, 1);
  }
}

/* The call counters and the duration histograms (under m->mu). */
static void render_calls(const server_metrics *m, common_buf *out) {
  common_buf_printf(out,
                    "# HELP sandman_calls_total Tool calls finished, by tool, mode and outcome "
                    "(ok or the failure kind).\n# TYPE sandman_calls_total counter\n");
  for (size_t i = 0; i < m->n_calls; i++) {
    common_buf_printf(out, "sandman_calls_total{tool=\"");
    label(out, m->calls[i].tool);
    common_buf_printf(out, "\",mode=\"%s\",outcome=\"%s\"} %llu\n", m->calls[i].mode,
                      m->calls[i].outcome, m->calls[i].count);
  }
  common_buf_printf(out,
                    "# HELP sandman_call_duration_seconds Duration of tool calls as the runner "
                    "saw them.\n# TYPE sandman_call_duration_seconds histogram\n");
  for (size_t i = 0; i < m->n_hists; i++) {
    const hist_series *h = &m->hists[i];
    for (size_t b = 0; b <= N_BUCKETS; b++) {
      common_buf_printf(out, "sandman_call_duration_seconds_bucket{tool=\"");
      label(out, h->tool);
      if (b < N_BUCKETS)
        common_buf_printf(out, "\",mode=\"%s\",le=\"%g\"} %llu\n", h->mode, buckets[b],
                          h->bucket[b]);
      else common_buf_printf(out, "\",mode=\"%s\",le=\"+Inf\"} %llu\n", h->mode, h->count);
    }
    common_buf_printf(out, "sandman_call_duration_seconds_sum{tool=\"");
    label(out, h->tool);
    common_buf_printf(out, "\",mode=\"%s\"} %.6f\n", h->mode, h->sum);
    common_buf_printf(out, "sandman_call_duration_seconds_count{tool=\"");
    label(out, h->tool);
    common_buf_printf(out, "\",mode=\"%s\"} %llu\n", h->mode, h->count);
  }
}

/* Failures, HTTP requests, leases and background calls (under m->mu). */
static void render_counters(const server_metrics *m, common_buf *out) {
  common_buf_printf(out,
                    "# HELP sandman_failures_total Failed calls and refused requests by failure "
                    "kind.\n# TYPE sandman_failures_total counter\n");
  static const char *const kinds[] = {"tool", "timeout", "policy", "sandbox", "engine"};
  for (size_t k = 0; k < 5; k++) {
    unsigned long long c = 0;
    for (size_t i = 0; i < m->n_failures; i++)
      if (strcmp(m->failures[i].a, kinds[k]) == 0) c = m->failures[i].count;
    common_buf_printf(out, "sandman_failures_total{kind=\"%s\"} %llu\n", kinds[k], c);
  }
  common_buf_printf(out, "# HELP sandman_http_requests_total HTTP requests by route and status.\n"
                         "# TYPE sandman_http_requests_total counter\n");
  for (size_t i = 0; i < m->n_http; i++)
    common_buf_printf(out, "sandman_http_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
                      m->http[i].a, m->http[i].b, m->http[i].count);
  common_buf_printf(out, "# HELP sandman_leases_total Credential lease events (created, consumed, "
                         "refused, restored).\n# TYPE sandman_leases_total counter\n");
  for (size_t i = 0; i < m->n_leases; i++)
    common_buf_printf(out, "sandman_leases_total{event=\"%s\"} %llu\n", m->leases[i].a,
                      m->leases[i].count);
  common_buf_printf(out,
                    "# HELP sandman_background_calls_total Calls that outlived their timeout and "
                    "went to the background.\n# TYPE sandman_background_calls_total counter\n"
                    "sandman_background_calls_total %llu\n",
                    m->background);
}

static void render_pool(const server_metrics_gauges *g, common_buf *out) {
  const sm_pool_stats *p = &g->pool;
  common_buf_printf(out,
                    "# HELP sandman_pool_size Ready per_tool containers the warm pool keeps per "
                    "configuration (0: off).\n# TYPE sandman_pool_size gauge\n"
                    "sandman_pool_size %u\n"
                    "# HELP sandman_pool_configurations Configurations with a warm pool.\n"
                    "# TYPE sandman_pool_configurations gauge\n"
                    "sandman_pool_configurations %u\n"
                    "# HELP sandman_pool_ready Warm pool containers ready now, all "
                    "configurations.\n# TYPE sandman_pool_ready gauge\nsandman_pool_ready %u\n"
                    "# HELP sandman_pool_creating Warm pool containers being created now.\n"
                    "# TYPE sandman_pool_creating gauge\nsandman_pool_creating %u\n"
                    "# HELP sandman_pool_removals_pending Used or drained containers waiting "
                    "for removal.\n# TYPE sandman_pool_removals_pending gauge\n"
                    "sandman_pool_removals_pending %u\n"
                    "# HELP sandman_pool_taken_total per_tool calls that got a ready "
                    "container.\n# TYPE sandman_pool_taken_total counter\n"
                    "sandman_pool_taken_total %lu\n"
                    "# HELP sandman_pool_missed_total per_tool calls that found their pool "
                    "empty.\n# TYPE sandman_pool_missed_total counter\n"
                    "sandman_pool_missed_total %lu\n"
                    "# HELP sandman_pool_created_total Warm pool containers created.\n"
                    "# TYPE sandman_pool_created_total counter\nsandman_pool_created_total %lu\n"
                    "# HELP sandman_pool_removed_total Containers removed by the pool's "
                    "background work.\n# TYPE sandman_pool_removed_total counter\n"
                    "sandman_pool_removed_total %lu\n"
                    "# HELP sandman_pool_failed_total Warm pool containers that could not be "
                    "created.\n# TYPE sandman_pool_failed_total counter\n"
                    "sandman_pool_failed_total %lu\n",
                    p->size, p->configurations, p->ready, p->creating, p->removals_pending,
                    p->taken, p->missed, p->created, p->removed, p->failed);
  common_buf_printf(out,
                    "# HELP sandman_pool_max Ready containers the warm pool keeps at most per "
                    "configuration while calls come in bursts.\n# TYPE sandman_pool_max gauge\n"
                    "sandman_pool_max %u\n"
                    "# HELP sandman_pool_wanted Ready containers the warm pool wants now, all "
                    "configurations (grown by bursts of calls).\n# TYPE sandman_pool_wanted gauge\n"
                    "sandman_pool_wanted %u\n"
                    "# HELP sandman_pool_parallel Warm pool containers made at once at most.\n"
                    "# TYPE sandman_pool_parallel gauge\nsandman_pool_parallel %u\n",
                    p->max_size, p->wanted, p->parallel);
  common_buf_printf(out,
                    "# HELP sandman_agent_sessions_preparing Agent sessions being opened in "
                    "the background (pool containers, keyed sandboxes after a first call).\n"
                    "# TYPE sandman_agent_sessions_preparing gauge\n"
                    "sandman_agent_sessions_preparing %u\n"
                    "# HELP sandman_agent_sessions_opened_total In-sandbox agent sessions "
                    "started.\n# TYPE sandman_agent_sessions_opened_total counter\n"
                    "sandman_agent_sessions_opened_total %lu\n"
                    "# HELP sandman_agent_calls_total Tool calls made through an in-sandbox "
                    "agent instead of an engine exec.\n# TYPE sandman_agent_calls_total counter\n"
                    "sandman_agent_calls_total %lu\n"
                    "# HELP sandman_agent_fallbacks_total Calls that wanted an agent and used "
                    "the engine's exec.\n# TYPE sandman_agent_fallbacks_total counter\n"
                    "sandman_agent_fallbacks_total %lu\n",
                    p->agents_preparing, g->agent.sessions_opened, g->agent.calls,
                    g->agent.fallbacks);
}

static void render_http(const server_metrics_gauges *g, common_buf *out) {
  static const char *const why[SM_GATE_DROP_N] = {"head_timeout", "head_too_large",
                                                  "evicted", "overloaded", "client_closed"};
  common_buf_printf(out,
                    "# HELP sandman_http_connections Connections by state: waiting for their "
                    "request head, or open (served).\n# TYPE sandman_http_connections gauge\n"
                    "sandman_http_connections{state=\"waiting\"} %ld\n"
                    "sandman_http_connections{state=\"open\"} %ld\n"
                    "# HELP sandman_http_connections_dropped_total Connections closed before "
                    "being served, by reason.\n"
                    "# TYPE sandman_http_connections_dropped_total counter\n",
                    g->http.pending, g->http.open);
  for (int i = 0; i < SM_GATE_DROP_N; i++)
    common_buf_printf(out, "sandman_http_connections_dropped_total{reason=\"%s\"} %lu\n", why[i],
                      g->http.dropped[i]);
}

int server_metrics_render(server_metrics *m, const server_metrics_gauges *g, common_buf *out) {
  pthread_mutex_lock(&m->mu);
  render_calls(m, out);
  render_counters(m, out);
  pthread_mutex_unlock(&m->mu);

  if (g->sandboxes_known) {
    common_buf_printf(out, "# HELP sandman_sandboxes Live sandboxes of this instance by mode.\n"
                           "# TYPE sandman_sandboxes gauge\n");
    for (int i = 1; i < 4; i++)
      common_buf_printf(out, "sandman_sandboxes{mode=\"%s\"} %ld\n", sm_mode_name((sm_mode)i),
                        g->sandboxes[i]);
    common_buf_printf(out,
                      "# HELP sandman_sandboxes_by_state Live sandboxes of this instance by state "
                      "of rest.\n# TYPE sandman_sandboxes_by_state gauge\n");
    for (int i = 0; i < 4; i++)
      common_buf_printf(out, "sandman_sandboxes_by_state{state=\"%s\"} %ld\n",
                        server_sandbox_states[i], g->sandboxes_by_state[i]);
  }
  if (g->pool_known) render_pool(g, out);
  if (g->http_known) render_http(g, out);
  int rc = common_buf_printf(out,
                             "# HELP sandman_calls_in_flight Calls running now.\n"
                             "# TYPE sandman_calls_in_flight gauge\nsandman_calls_in_flight %ld\n"
                             "# HELP sandman_queue_depth Calls waiting for a call thread.\n"
                             "# TYPE sandman_queue_depth gauge\nsandman_queue_depth %ld\n"
                             "# HELP sandman_leases_live Leases not yet used up or expired.\n"
                             "# TYPE sandman_leases_live gauge\nsandman_leases_live %ld\n"
                             "# HELP sandman_handles Background handles by state.\n"
                             "# TYPE sandman_handles gauge\n"
                             "sandman_handles{state=\"running\"} %ld\n"
                             "sandman_handles{state=\"finished\"} %ld\n"
                             "# HELP sandman_engine_up Whether the engine answered the last "
                             "health check.\n# TYPE sandman_engine_up gauge\nsandman_engine_up %d\n"
                             "# HELP sandman_draining Whether the runner is stopping.\n"
                             "# TYPE sandman_draining gauge\nsandman_draining %d\n",
                             g->calls_in_flight, g->queue_depth, g->leases_live, g->handles_running,
                             g->handles_total - g->handles_running, g->engine_up ? 1 : 0,
                             g->draining ? 1 : 0);
  return rc;
}
