/* What the host-tool route costs a call, through the library: in one
 * per_run sandbox (agent sessions on), N calls of `true` without the route,
 * the first call with it (the relay starts), then N calls with it (the relay
 * is there), then N calls of `sandman-tools list` (one round trip to a
 * handler that answers at once). Prints the median of each.
 *
 *   cc -O2 -Iinclude $(pkg-config --cflags json-c) -o /tmp/route_bench \
 *     bench/route/route_bench.c -Lbuild -lsandman -Wl,-rpath,$PWD/build $(pkg-config --libs json-c)
 *   SANDMAN_INSTANCE=route-bench /tmp/route_bench 50
 * (then `sandman sandbox rm --run-id route-bench` with that instance). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/hostroute.h>
#include <sandman/mode.h>
#include <sandman/runner.h>
#include <sandman/run.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static int answer(void *ud, const sm_route_caller *who, const char *req, size_t len, char **resp,
                  size_t *resp_len, sm_error *err) {
  (void)ud, (void)who, (void)req, (void)len, (void)err;
  static const char text[] = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{\"tools\": []}";
  *resp = strdup(text);
  *resp_len = sizeof text - 1;
  return *resp ? 0 : -1;
}

static const sm_host_route route = {answer, NULL};

static double one(sm_runner *r, const char *script, int with_route) {
  const char *argv[] = {"sh", "-c", script};
  sm_run_request req;
  sm_run_request_init(&req);
  req.settings.mode = SM_MODE_PER_RUN;
  req.run_id = "route-bench";
  req.argv = argv;
  req.argc = 3;
  req.host_route = with_route ? &route : NULL;
  sm_run_result res;
  sm_error err = SM_ERROR_INIT;
  double t0 = now_ms();
  int rc = sm_run(r, &req, &res, &err);
  double ms = now_ms() - t0;
  if (rc != 0 || !res.ok) {
    fprintf(stderr, "call failed: %s %s\n", err.message, res.error);
    exit(1);
  }
  sm_run_result_dispose(&res);
  return ms;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(int with_route, const char *script, sm_runner *r, int n) {
  double *v = calloc((size_t)n, sizeof *v);
  for (int i = 0; i < n; i++) v[i] = one(r, script, with_route);
  qsort(v, (size_t)n, sizeof *v, cmp);
  double m = v[n / 2];
  free(v);
  return m;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 30;
  if (n < 1) n = 1;
  sm_runner *r = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&r, NULL, &err) != 0) {
    fprintf(stderr, "runner: %s\n", err.message);
    return 1;
  }
  one(r, "true", 0); /* the sandbox */
  one(r, "true", 0); /* its agent session */
  printf("call without the route (median of %d): %.2f ms\n", n, median(0, "true", r, n));
  printf("first call with the route (the relay starts): %.2f ms\n", one(r, "true", 1));
  printf("call with the route (median of %d): %.2f ms\n", n, median(1, "true", r, n));
  printf("call running sandman-tools list (median of %d): %.2f ms\n", n,
         median(1, "sandman-tools list >/dev/null", r, n));
  sm_runner_free(r);
  return 0;
}
