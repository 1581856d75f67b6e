/* The engine's floor: the fewest Engine API calls a client can make for each
 * benchmark scenario, over one kept-alive unix-socket connection per client
 * (raw HTTP/1.1), plus the connection an attached exec start must have to
 * itself (the engine hijacks it and closes it at the end of the stream).
 *
 *   floor exec SOCK CONTAINER CALLS [CLIENTS]   S1/S5: exec create + start + inspect
 *   floor run SOCK IMAGE CALLS                   S2: create + start + wait + remove
 *   floor rm SOCK PARALLEL < "id volume" lines   S7: remove containers (and volumes)
 *
 * Prints "sample MS" per call, then "wall MS", "calls N", "requests N"
 * (engine requests sent, connections excluded) and "connects N". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/rawhttp.h"

#define API "/v1.41"

static const char *sock_path;
static const char *target; /* container (exec) or image (run) */
static long calls_per_client;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct worker {
  pthread_t t;
  double *samples;
  long n;
  long requests, connects;
  int failed;
} worker;

static int exec_once(rh_conn *c) {
  static const char create_body[] =
      "{\"AttachStdin\":false,\"AttachStdout\":true,\"AttachStderr\":true,\"Tty\":false,"
      "\"Cmd\":[\"true\"]}";
  char path[256], id[128];
  rh_answer a;
  snprintf(path, sizeof path, API "/containers/%s/exec", target);
  if (rh_request(c, "POST", path, NULL, create_body, strlen(create_body), &a) != 0) return -1;
  int ok = a.status == 201 && rh_json_string(a.body, "Id", id, sizeof id) == 0;
  rh_answer_dispose(&a);
  if (!ok) return -1;
  char out[4096];
  size_t got = 0;
  snprintf(path, sizeof path, API "/exec/%s/start", id);
  int st = rh_hijack(sock_path, path, "{\"Detach\":false,\"Tty\":false}", out, sizeof out, &got);
  c->requests++;
  if (st != 101 && st != 200) return -1;
  snprintf(path, sizeof path, API "/exec/%s/json", id);
  for (int i = 0; i < 100; i++) {
    if (rh_request(c, "GET", path, NULL, NULL, 0, &a) != 0) return -1;
    long long code = -1;
    int running = a.body && strstr(a.body, "\"Running\":true") != NULL;
    ok = a.status == 200 && rh_json_int(a.body, "ExitCode", &code) == 0 && code == 0;
    rh_answer_dispose(&a);
    if (!running) return ok ? 0 : -1;
  }
  return -1;
}

static int run_once(rh_conn *c) {
  char body[512], path[256], id[128];
  snprintf(body, sizeof body,
           "{\"Image\":\"%s\",\"Cmd\":[\"true\"],\"AttachStdout\":false,\"AttachStderr\":false,"
           "\"HostConfig\":{\"NetworkMode\":\"none\"}}",
           target);
  rh_answer a;
  if (rh_request(c, "POST", API "/containers/create", NULL, body, strlen(body), &a) != 0) return -1;
  int ok = a.status == 201 && rh_json_string(a.body, "Id", id, sizeof id) == 0;
  rh_answer_dispose(&a);
  if (!ok) return -1;
  snprintf(path, sizeof path, API "/containers/%s/start", id);
  if (rh_request(c, "POST", path, NULL, NULL, 0, &a) != 0) return -1;
  ok = a.status == 204;
  rh_answer_dispose(&a);
  long long code = -1;
  if (ok) {
    snprintf(path, sizeof path, API "/containers/%s/wait", id);
    if (rh_request(c, "POST", path, NULL, NULL, 0, &a) != 0) return -1;
    ok = a.status == 200 && rh_json_int(a.body, "StatusCode", &code) == 0 && code == 0;
    rh_answer_dispose(&a);
  }
  snprintf(path, sizeof path, API "/containers/%s?force=1&v=1", id);
  if (rh_request(c, "DELETE", path, NULL, NULL, 0, &a) != 0) return -1;
  ok = ok && a.status == 204;
  rh_answer_dispose(&a);
  return ok ? 0 : -1;
}

static void *exec_worker(void *arg) {
  worker *w = arg;
  rh_conn c;
  if (rh_open(&c, sock_path) != 0) {
    w->failed = 1;
    return NULL;
  }
  for (long i = 0; i < calls_per_client; i++) {
    double t0 = rh_now_ms();
    if (exec_once(&c) != 0) w->failed = 1;
    w->samples[w->n++] = rh_now_ms() - t0;
  }
  w->requests = c.requests;
  w->connects = c.connects;
  rh_close(&c);
  return NULL;
}

typedef struct rm_job {
  char id[128];
  char volume[256];
} rm_job;

static rm_job *jobs;
static size_t n_jobs, next_job;
static long rm_failed;

static void *rm_worker(void *arg) {
  worker *w = arg;
  rh_conn c;
  if (rh_open(&c, sock_path) != 0) {
    w->failed = 1;
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&out_mu);
    size_t i = next_job < n_jobs ? next_job++ : (size_t)-1;
    pthread_mutex_unlock(&out_mu);
    if (i == (size_t)-1) break;
    char path[512];
    rh_answer a;
    snprintf(path, sizeof path, API "/containers/%s?force=1&v=1", jobs[i].id);
    if (rh_request(&c, "DELETE", path, NULL, NULL, 0, &a) != 0 || (a.status != 204 && a.status != 404))
      __atomic_add_fetch(&rm_failed, 1, __ATOMIC_RELAXED);
    rh_answer_dispose(&a);
    if (jobs[i].volume[0]) {
      snprintf(path, sizeof path, API "/volumes/%s?force=1", jobs[i].volume);
      if (rh_request(&c, "DELETE", path, NULL, NULL, 0, &a) != 0 ||
          (a.status != 204 && a.status != 404))
        __atomic_add_fetch(&rm_failed, 1, __ATOMIC_RELAXED);
      rh_answer_dispose(&a);
    }
  }
  w->requests = c.requests;
  w->connects = c.connects;
  rh_close(&c);
  return NULL;
}

static int usage(void) {
  fprintf(stderr,
          "usage: floor exec SOCK CONTAINER CALLS [CLIENTS]\n"
          "       floor run SOCK IMAGE CALLS\n"
          "       floor rm SOCK PARALLEL < lines of 'id [volume]'\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 4) return usage();
  sock_path = argv[2];
  long clients = 1;
  worker *ws = NULL;
  double t0 = rh_now_ms();
  int failed = 0;
  long requests = 0, connects = 0, calls = 0;
  if (strcmp(argv[1], "exec") == 0 || strcmp(argv[1], "run") == 0) {
    if (argc < 5) return usage();
    target = argv[3];
    calls_per_client = strtol(argv[4], NULL, 10);
    if (argc > 5) clients = strtol(argv[5], NULL, 10);
    if (calls_per_client < 1 || clients < 1 || clients > 256) return usage();
    ws = calloc((size_t)clients, sizeof *ws);
    for (long i = 0; i < clients; i++) ws[i].samples = calloc((size_t)calls_per_client, sizeof(double));
    t0 = rh_now_ms();
    if (strcmp(argv[1], "exec") == 0) {
      for (long i = 0; i < clients; i++) pthread_create(&ws[i].t, NULL, exec_worker, &ws[i]);
      for (long i = 0; i < clients; i++) pthread_join(ws[i].t, NULL);
    } else {
      rh_conn c;
      if (rh_open(&c, sock_path) != 0) return 1;
      for (long i = 0; i < calls_per_client; i++) {
        double s = rh_now_ms();
        if (run_once(&c) != 0) ws[0].failed = 1;
        ws[0].samples[ws[0].n++] = rh_now_ms() - s;
      }
      ws[0].requests = c.requests;
      ws[0].connects = c.connects;
      rh_close(&c);
    }
  } else if (strcmp(argv[1], "rm") == 0) {
    clients = strtol(argv[3], NULL, 10);
    if (clients < 1 || clients > 256) return usage();
    size_t cap = 256;
    jobs = calloc(cap, sizeof *jobs);
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
      if (n_jobs == cap) jobs = realloc(jobs, (cap *= 2) * sizeof *jobs);
      rm_job *j = &jobs[n_jobs];
      memset(j, 0, sizeof *j);
      if (sscanf(line, "%127s %255s", j->id, j->volume) >= 1) n_jobs++;
    }
    ws = calloc((size_t)clients, sizeof *ws);
    t0 = rh_now_ms();
    for (long i = 0; i < clients; i++) pthread_create(&ws[i].t, NULL, rm_worker, &ws[i]);
    for (long i = 0; i < clients; i++) pthread_join(ws[i].t, NULL);
    calls = (long)n_jobs;
    if (rm_failed) failed = 1;
  } else {
    return usage();
  }
  double wall = rh_now_ms() - t0;
  for (long i = 0; i < clients; i++) {
    for (long k = 0; k < ws[i].n; k++) printf("sample %.3f\n", ws[i].samples[k]);
    calls += ws[i].n;
    requests += ws[i].requests;
    connects += ws[i].connects;
    failed |= ws[i].failed;
  }
  printf("wall %.3f\ncalls %ld\nrequests %ld\nconnects %ld\n", wall, calls, requests, connects);
  if (failed) fprintf(stderr, "floor: some calls failed\n");
  return failed ? 1 : 0;
}
