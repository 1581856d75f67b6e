/* sandman through its HTTP API (`sandman worker start` on a unix socket):
 * POST /v1/execute from CLIENTS threads, each on one kept-alive connection.
 *
 *   smhttp SOCK TOKEN_FILE CALLS CLIENTS BODY [PAUSE_MS[-PAUSE_MS]]
 *
 * BODY is the request's JSON; "{i}" in it becomes a number counting calls
 * across all clients (distinct run ids for S6). PAUSE_MS: each client
 * waits that long before each call (a range: spread evenly over it, as an
 * agent thinks between tool calls); the pause is not timed. Prints
 * "sample MS" per call, "wall MS", "calls N", "connects N". A call whose
 * answer is not 200 with "ok": true fails the run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/rawhttp.h"

static const char *sock_path, *body_tmpl;
static char auth[4200];
static long calls_per_client;
static long counter;
static double pause_lo, pause_hi; /* ms before each call */

typedef struct worker {
  pthread_t t;
  double *samples;
  long n;
  long connects;
  int failed;
} worker;

/* "ok": true, however the server spaces its JSON. */
static int answer_ok(const char *body) {
  const char *p = body ? strstr(body, "\"ok\"") : NULL;
  if (p == NULL) return 0;
  p += 4;
  while (*p == ' ' || *p == ':') p++;
  return strncmp(p, "true", 4) == 0;
}

static void render(char *out, size_t cap, long i) {
  const char *p = strstr(body_tmpl, "{i}");
  if (p == NULL) {
    snprintf(out, cap, "%s", body_tmpl);
    return;
  }
  snprintf(out, cap, "%.*s%ld%s", (int)(p - body_tmpl), body_tmpl, i, p + 3);
}

static void *client(void *arg) {
  worker *w = arg;
  rh_conn *c = malloc(sizeof *c);
  if (c == NULL || rh_open(c, sock_path) != 0) {
    w->failed = 1;
    free(c);
    return NULL;
  }
  char body[8192];
  for (long k = 0; k < calls_per_client; k++) {
    if (pause_hi > 0) {
      double ms = calls_per_client > 1
                      ? pause_lo + (pause_hi - pause_lo) * (double)k / (double)(calls_per_client - 1)
                      : pause_lo;
      struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000.0 * (time_t)(ms / 1000)) * 1e6)};
      nanosleep(&ts, NULL);
    }
    render(body, sizeof body, __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    rh_answer a;
    double t0 = rh_now_ms();
    int rc = rh_request(c, "POST", "/v1/execute", auth, body, strlen(body), &a);
    w->samples[w->n++] = rh_now_ms() - t0;
    if (rc != 0 || a.status != 200 || !answer_ok(a.body)) {
      if (!w->failed)
        fprintf(stderr, "smhttp: call failed: %d %s\n", rc ? -1 : a.status, rc ? "" : a.body);
      w->failed = 1;
    }
    if (rc == 0) rh_answer_dispose(&a);
  }
  w->connects = c->connects;
  rh_close(c);
  free(c);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: smhttp SOCK TOKEN_FILE CALLS CLIENTS BODY [PAUSE_MS[-PAUSE_MS]]\n");
    return 2;
  }
  sock_path = argv[1];
  FILE *f = fopen(argv[2], "r");
  char token[4096] = "";
  if (f == NULL || fgets(token, sizeof token, f) == NULL) {
    fprintf(stderr, "smhttp: cannot read the token file %s\n", argv[2]);
    return 2;
  }
  fclose(f);
  token[strcspn(token, "\r\n")] = '\0';
  snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
  calls_per_client = strtol(argv[3], NULL, 10);
  long clients = strtol(argv[4], NULL, 10);
  body_tmpl = argv[5];
  if (argc > 6) {
    char *end = NULL;
    pause_lo = pause_hi = strtod(argv[6], &end);
    if (end && *end == '-') pause_hi = strtod(end + 1, NULL);
    if (pause_lo < 0 || pause_hi < pause_lo) return 2;
  }
  if (calls_per_client < 1 || clients < 1 || clients > 256) return 2;
  worker *ws = calloc((size_t)clients, sizeof *ws);
  for (long i = 0; i < clients; i++) ws[i].samples = calloc((size_t)calls_per_client, sizeof(double));
  double t0 = rh_now_ms();
  for (long i = 0; i < clients; i++) pthread_create(&ws[i].t, NULL, client, &ws[i]);
  for (long i = 0; i < clients; i++) pthread_join(ws[i].t, NULL);
  double wall = rh_now_ms() - t0;
  int failed = 0;
  long calls = 0, connects = 0;
  for (long i = 0; i < clients; i++) {
    for (long k = 0; k < ws[i].n; k++) printf("sample %.3f\n", ws[i].samples[k]);
    calls += ws[i].n;
    connects += ws[i].connects;
    failed |= ws[i].failed;
  }
  printf("wall %.3f\ncalls %ld\nconnects %ld\n", wall, calls, connects);
  return failed ? 1 : 0;
}
