/* sandman through the library (libsandman): the calls a long-running
 * program makes with sm_run, timed in-process.
 *
 *   smbench exec CALLS RUN_ID              S1: per_run, `true`, output captured
 *   smbench fresh CALLS POOL [SETTLE]      S2: per_tool, POOL warm containers per
 *                                          configuration (0: no pool); SETTLE=1 waits
 *                                          for background work between calls
 *   smbench ws DIR CALLS                   S3/S4: a call with DIR copied in on a fresh
 *                                          per_run sandbox, then the same call again
 *   smbench mk PREFIX COUNT THREADS        S7 set-up: COUNT per_run sandboxes
 *
 * Prints "sample MS" (S3/S4: "s3 MS" and "s4 MS") per call and "wall MS".
 * SANDMAN_INSTANCE and SANDMAN_STATE_DIR choose where sandboxes go. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/ops.h>
#include <sandman/mode.h>
#include <sandman/runner.h>
#include <sandman/run.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void on_log(sm_log_level level, const char *rid, const char *msg, void *ud) {
  (void)ud;
  fprintf(stderr, "smbench: %s%s%s: %s\n", sm_log_level_name(level), rid ? " " : "",
          rid ? rid : "", msg);
}

static const char *const true_argv[] = {"true"};

static int call(sm_runner *r, sm_mode mode, const char *run_id, const char *workspace,
                sm_sync_mode sync, double *ms) {
  sm_run_request req;
  sm_run_request_init(&req);
  req.argv = true_argv;
  req.argc = 1;
  req.settings.mode = mode;
  req.run_id = run_id;
  req.workspace = workspace;
  req.sync = sync;
  sm_run_result res;
  sm_error err = SM_ERROR_INIT;
  double t0 = now_ms();
  int rc = sm_run(r, &req, &res, &err);
  *ms = now_ms() - t0;
  int ok = rc == 0 && res.ok;
  if (!ok)
    fprintf(stderr, "smbench: call failed: %s\n", res.error[0] ? res.error : err.message);
  sm_run_result_dispose(&res);
  return ok ? 0 : -1;
}

static int remove_run(sm_runner *r, const char *run_id) {
  sm_ops_scope scope;
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_scope_from_runner(&scope, r, &err) != 0) return -1;
  sm_ops_rm_options ro = SM_OPS_RM_OPTIONS_INIT;
  ro.run_id = run_id;
  ro.force = 1;
  sm_ops_report rep;
  memset(&rep, 0, sizeof rep);
  int rc = sm_ops_rm(&scope, &ro, &rep, &err);
  if (rc == 0) sm_ops_report_dispose(&rep);
  return rc;
}

typedef struct mk_args {
  sm_runner *r;
  const char *prefix;
  long from, to;
  int failed;
} mk_args;

static void *mk_thread(void *p) {
  mk_args *a = p;
  for (long i = a->from; i < a->to; i++) {
    char run_id[128];
    double ms;
    snprintf(run_id, sizeof run_id, "%s-%ld", a->prefix, i);
    if (call(a->r, SM_MODE_PER_RUN, run_id, NULL, SM_SYNC_DEFAULT, &ms) != 0) a->failed = 1;
  }
  return NULL;
}

static int usage(void) {
  fprintf(stderr, "usage: smbench exec CALLS RUN_ID | fresh CALLS POOL [SETTLE] | ws DIR CALLS |"
                  " mk PREFIX COUNT THREADS\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  sm_log_set_handler(on_log, NULL);
  sm_log_set_level(getenv("SMBENCH_DEBUG") ? SM_LOG_DEBUG : SM_LOG_WARN);
  sm_runner *r = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&r, NULL, &err) != 0) {
    fprintf(stderr, "smbench: %s\n", err.message);
    return 1;
  }
  int failed = 0;
  double ms, t0 = now_ms();
  /* A long-running program: per_tool removals and agent sessions are made
   * in the background (the runner service does the same). */
  if (strcmp(argv[1], "mk") != 0) sm_runner_set_background_removal(r, 1);
  if (strcmp(argv[1], "exec") == 0 && argc >= 4) {
    long n = strtol(argv[2], NULL, 10);
    /* The first call creates the sandbox: not a sample of S1. Then the
     * agent thinks (the sandbox's agent session opens meanwhile). */
    if (call(r, SM_MODE_PER_RUN, argv[3], NULL, SM_SYNC_DEFAULT, &ms) != 0) failed = 1;
    sm_runner_settle(r, 60, NULL);
    t0 = now_ms();
    for (long i = 0; i < n && !failed; i++) {
      if (call(r, SM_MODE_PER_RUN, argv[3], NULL, SM_SYNC_DEFAULT, &ms) != 0) failed = 1;
      printf("sample %.3f\n", ms);
    }
  } else if (strcmp(argv[1], "fresh") == 0 && argc >= 4) {
    long n = strtol(argv[2], NULL, 10);
    long pool = strtol(argv[3], NULL, 10);
    int settle = argc > 4 && strcmp(argv[4], "1") == 0;
    sm_runner_set_background_removal(r, 1);
    if (sm_runner_pool_set_size(r, (unsigned)pool, &err) != 0) {
      fprintf(stderr, "smbench: %s\n", err.message);
      failed = 1;
    }
    if (pool > 0 && !failed) {
      sm_run_request req;
      sm_run_request_init(&req);
      req.settings.mode = SM_MODE_PER_TOOL;
      if (sm_runner_pool_prepare(r, &req, &err) != 0) {
        fprintf(stderr, "smbench: %s\n", err.message);
        failed = 1;
      }
    }
    if (!failed) sm_runner_settle(r, 60, NULL);
    t0 = now_ms();
    for (long i = 0; i < n && !failed; i++) {
      if (call(r, SM_MODE_PER_TOOL, NULL, NULL, SM_SYNC_DEFAULT, &ms) != 0) failed = 1;
      printf("sample %.3f\n", ms);
      fflush(stdout);
      /* An agent thinks between tool calls: the pool refills and the last
       * container goes away meanwhile, as they would in a real run. */
      if (settle) sm_runner_settle(r, 30, NULL);
    }
  } else if (strcmp(argv[1], "ws") == 0 && argc >= 4) {
    long n = strtol(argv[3], NULL, 10);
    for (long i = 0; i < n && !failed; i++) {
      char run_id[64];
      double s3, s4;
      snprintf(run_id, sizeof run_id, "ws-%ld-%ld", (long)getpid(), i);
      if (call(r, SM_MODE_PER_RUN, run_id, NULL, SM_SYNC_DEFAULT, &ms) != 0 ||
          sm_runner_settle(r, 60, NULL) != 0 ||
          call(r, SM_MODE_PER_RUN, run_id, argv[2], SM_SYNC_IN, &s3) != 0 ||
          call(r, SM_MODE_PER_RUN, run_id, argv[2], SM_SYNC_IN, &s4) != 0)
        failed = 1;
      printf("s3 %.3f\ns4 %.3f\n", s3, s4);
      fflush(stdout);
      if (remove_run(r, run_id) != 0) failed = 1;
    }
  } else if (strcmp(argv[1], "mk") == 0 && argc >= 5) {
    long count = strtol(argv[3], NULL, 10);
    long threads = strtol(argv[4], NULL, 10);
    if (threads < 1 || threads > 64 || count < 1) return usage();
    mk_args a[64];
    for (long t = 0; t < threads; t++) {
      a[t] = (mk_args){r, argv[2], count * t / threads, count * (t + 1) / threads, 0};
    }
    pthread_t th[64];
    for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, mk_thread, &a[t]);
    for (long t = 0; t < threads; t++) {
      pthread_join(th[t], NULL);
      failed |= a[t].failed;
    }
  } else {
    sm_runner_free(r);
    return usage();
  }
  printf("wall %.3f\n", now_ms() - t0);
  fflush(stdout);
  sm_runner_free(r);
  return failed ? 1 : 0;
}
