/* The egress proxy's added latency per connection: a small HTTPS request
 * (a new TCP connection, a TLS handshake, GET /, a 40-byte answer) from a
 * sandbox through sandman's egress proxy (network mode allowlist) versus
 * the same request from a container on an open bridge network, to the same
 * server on this machine. Rounds alternate between the two so that drift
 * of a shared machine hits both alike. Prints one JSON object.
 *
 *   egress_bench [ROUNDS [PER_ROUND]]     (default 10 x 50)
 *
 * Needs SANDMAN_BIN (to build the test image) and SANDMAN_SOURCE_DIR. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/egress_world.h"

static const char client_py[] =
    "printf '%%s' \"$CA_PEM\" > /tmp/ca.pem; python3 -c \"\n"
    "import http.client, os, ssl, sys, time, urllib.parse\n"
    "ctx = ssl.create_default_context(cafile='/tmp/ca.pem')\n"
    "proxy = os.environ.get('HTTPS_PROXY')\n"
    "via = urllib.parse.urlsplit(proxy) if proxy else None\n"
    "out = []\n"
    "for i in range(%d):\n"
    "    t0 = time.perf_counter()\n"
    "    if proxy:\n"
    "        c = http.client.HTTPSConnection(via.hostname, via.port, context=ctx, timeout=30)\n"
    "        c.set_tunnel('allowed.test', 443)\n"
    "    else:\n"
    "        c = http.client.HTTPSConnection('allowed.test', 443, context=ctx, timeout=30)\n"
    "    c.request('GET', '/')\n"
    "    r = c.getresponse(); r.read(); c.close()\n"
    "    assert r.status == 200, r.status\n"
    "    out.append((time.perf_counter() - t0) * 1000)\n"
    "print(' '.join('%%.3f' %% x for x in out))\n"
    "\"";

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const double *sorted, size_t n, double q) {
  double k = (double)(n - 1) * q;
  size_t lo = (size_t)k, hi = lo + 1 < n ? lo + 1 : lo;
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (k - (double)lo);
}

static int sample(ew_world *w, const char *cid, int n, double *out, size_t *len) {
  char script[4096];
  snprintf(script, sizeof script, client_py, n);
  ew_capture c;
  if (ew_sh(w, cid, script, &c) != 0) {
    fprintf(stderr, "egress_bench: client failed: %s\n", c.out);
    return -1;
  }
  char *p = c.out, *end;
  for (int i = 0; i < n; i++) {
    double v = strtod(p, &end);
    if (end == p) return -1;
    out[(*len)++] = v;
    p = end;
  }
  return 0;
}

static void report(const char *name, double *s, size_t n, int last) {
  qsort(s, n, sizeof *s, cmp);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += s[i];
  printf("    \"%s\": {\"n\": %zu, \"median_ms\": %.3f, \"p99_ms\": %.3f, \"mean_ms\": %.3f, \"min_ms\": %.3f}%s\n",
         name, n, pct(s, n, 0.5), pct(s, n, 0.99), sum / (double)n, s[0], last ? "" : ",");
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 10, per = argc > 2 ? atoi(argv[2]) : 50;
  if (rounds < 1 || per < 1) return 2;
  sm_engine_options eo = SM_ENGINE_OPTIONS_INIT;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_new(&e, &eo, &err) != 0 || sm_engine_negotiate(e, &err) != 0) {
    fprintf(stderr, "egress_bench: %s\n", err.message);
    return 1;
  }
  char instance[64];
  snprintf(instance, sizeof instance, "bench-egress-%d", (int)getpid());
  ew_world w;
  sm_egress_proxy_options po = SM_EGRESS_PROXY_OPTIONS_INIT;
  int rc = 1;
  double *direct = calloc((size_t)rounds * per, sizeof(double)), *proxied = calloc((size_t)rounds * per, sizeof(double));
  size_t nd = 0, np = 0;
  char server[SM_ENGINE_ID_MAX], via[SM_ENGINE_ID_MAX], open_c[SM_ENGINE_ID_MAX], ip[64], ip32[80];
  /* An open bridge network: the direct client's, and the proxy's way out. */
  if (ew_setup(&w, e, instance, 0) != 0) goto out;
  po.instance = instance;
  po.network = w.network;
  sm_egress_net net;
  if (ew_start_server(&w, "server", "allowed.test", server) != 0 ||
      ew_ip_on(&w, server, w.network, ip, sizeof ip) != 0)
    goto out;
  if (sm_egress_prepare(e, &po, &net, &err) != 0) {
    fprintf(stderr, "egress_bench: %s\n", err.message);
    goto out;
  }
  char vars[SM_EGRESS_ENV_COUNT][128];
  const char *env[SM_EGRESS_ENV_COUNT];
  size_t nv = sm_egress_env(&net, vars, SM_EGRESS_ENV_COUNT);
  for (size_t i = 0; i < nv; i++) env[i] = vars[i];
  if (ew_start_client(&w, "via-proxy", SM_EGRESS_SANDBOX_NETWORK, env, nv, NULL, via) != 0 ||
      ew_start_client(&w, "direct", w.network, NULL, 0, NULL, open_c) != 0)
    goto out;
  snprintf(ip32, sizeof ip32, "%s/32", ip);
  const char *allow[] = {"allowed.test:443", ip32};
  sm_egress_level lv[1] = {{"defaults", allow, 2, NULL, 0}};
  sm_egress_policy pol = {"bench-via-proxy", "bench", "bench", NULL, NULL, lv, 1};
  if (sm_egress_set_policy(e, &po, &net, via, &pol, &err) != 0) {
    fprintf(stderr, "egress_bench: %s\n", err.message);
    goto out;
  }
  /* Warm-up (discarded): the server's first handshakes, DNS caches. */
  double warm[10];
  size_t nw = 0;
  if (sample(&w, open_c, 5, warm, &nw) != 0 || (nw = 0, sample(&w, via, 5, warm, &nw)) != 0) goto out;
  for (int r = 0; r < rounds; r++) {
    fprintf(stderr, "egress_bench: round %d/%d\n", r + 1, rounds);
    int first_direct = r % 2 == 0;
    if (sample(&w, first_direct ? open_c : via, per, first_direct ? direct : proxied, first_direct ? &nd : &np) != 0 ||
        sample(&w, first_direct ? via : open_c, per, first_direct ? proxied : direct, first_direct ? &np : &nd) != 0)
      goto out;
  }
  printf("{\n  \"what\": \"a small HTTPS request on a new connection, %d rounds of %d alternating\",\n", rounds, per);
  printf("  \"results\": {\n");
  report("open_bridge", direct, nd, 0);
  report("through_proxy", proxied, np, 1);
  printf("  },\n");
  printf("  \"added_ms\": {\"median\": %.3f, \"p99\": %.3f}\n}\n", pct(proxied, np, 0.5) - pct(direct, nd, 0.5),
         pct(proxied, np, 0.99) - pct(direct, nd, 0.99));
  rc = 0;
out:
  ew_teardown(&w);
  sm_egress_teardown(e, &po, &err);
  free(direct);
  free(proxied);
  sm_engine_free(e);
  return rc;
}
