/* The execute route: a request body to a call (server_call.c) run in the
 * foreground or as a background handle (handles.c), or handed back to be
 * streamed (execute_stream.c). Also the handle routes. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/crypto.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "server/server_call.h"
#include "server/handles.h"

#define GENERIC_401 SM_CALL_GENERIC_401
#define DELETE_WAIT_S 30

typedef struct server_call call;

/* ---- background calls ---- */

typedef struct bg_arg {
  call *k;
  server_handle *h;
} bg_arg;

/* Background threads alive: the stop waits (cv_idle) until none is. */
static void bg_count(sm_server *srv, int delta) {
  pthread_mutex_lock(&srv->mu);
  srv->bg_running += delta;
  if (delta < 0) pthread_cond_broadcast(&srv->cv_idle);
  pthread_mutex_unlock(&srv->mu);
}

static void *bg_main(void *arg) {
  bg_arg *b = arg;
  call *k = b->k;
  server_handle *h = b->h;
  sm_server *srv = k->srv;
  free(b);
  char rid[40];
  snprintf(rid, sizeof rid, "handle-%.8s", h->id);
  sm_log_set_request_id(rid);
  sm_run_result res;
  server_call_run(k, &res);
  /* The capture cut the output, not the handle's copy of what it kept:
   * the handle says so too (and masks a value cut there: handles.c). */
  int out_cut = res.stdout_truncated, err_cut = res.stderr_truncated;
  server_answer a = {0, NULL};
  server_call_answer(k, &res, &a);
  sm_run_result_dispose(&res);
  pthread_mutex_lock(&h->mu);
  h->out_trunc |= out_cut;
  h->err_trunc |= err_cut;
  h->result = a.body;
  h->result_status = a.status;
  h->done = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  server_call_free(k);
  server_handle_unref(h);
  bg_count(srv, -1);
  return NULL;
}

/* The answer of a call that outlived its timeout: the run object so far. */
static json_object *background_answer(sm_mode mode, server_handle *h, double waited_s) {
  json_object *hj = server_handle_json(h, 0);
  json_object *o = json_object_new_object();
  json_object *v;
  json_object_object_add(o, "ok", json_object_new_boolean(0));
  json_object_object_add(o, "exit_code", NULL);
  json_object_object_get_ex(hj, "stdout", &v);
  json_object_object_add(o, "stdout", json_object_get(v));
  json_object_object_get_ex(hj, "stderr", &v);
  json_object_object_add(o, "stderr", json_object_get(v));
  json_object_object_get_ex(hj, "stdout_truncated", &v);
  json_object_object_add(o, "stdout_truncated", json_object_get(v));
  json_object_object_get_ex(hj, "stderr_truncated", &v);
  json_object_object_add(o, "stderr_truncated", json_object_get(v));
  json_object_object_add(o, "timed_out", json_object_new_boolean(0));
  json_object_object_add(o, "oom_killed", json_object_new_boolean(0));
  json_object_object_add(o, "duration_ms", json_object_new_double(waited_s * 1000.0));
  json_object_object_add(o, "mode",
                         json_object_new_string(sm_mode_name(mode)));
  json_object_object_add(o, "sandbox_id", NULL);
  json_object_object_add(o, "reused", json_object_new_boolean(0));
  json_object_object_add(o, "files_changed", json_object_new_array());
  json_object_object_add(o, "conflicts", json_object_new_array());
  json_object_object_add(o, "failure_kind", NULL);
  json_object_object_add(o, "error", NULL);
  json_object_object_add(o, "handle", json_object_new_string(h->id));
  json_object_object_add(o, "state", json_object_new_string("running"));
  json_object_put(hj);
  return o;
}

static void run_background(call *k, server_answer *a) {
  sm_server *srv = k->srv;
  server_handle *h = server_handle_new(k->p.worker_key, k->p.tool, k->hook ? k->nonce : NULL,
                                       (size_t)k->req.settings.stdout_cap,
                                       (size_t)k->req.settings.stderr_cap, &k->secrets);
  if (h == NULL) {
    server_answer_error(a, 503, "sandbox", "out of memory");
    server_call_free(k);
    return;
  }
  k->handle = h;
  snprintf(h->sandbox_id, sizeof h->sandbox_id, "%s", k->sandbox_id);
  sm_mode mode = k->req.settings.mode;
  double wait_s = k->req.settings.timeout_s;
  if (k->req.settings.timeout_s < srv->opts.background_max_s)
    k->req.settings.timeout_s = srv->opts.background_max_s;
  k->req.on_output = server_handle_output;
  k->req.on_output_ud = h;
  k->req.cancel = &h->cancel;
  if (server_handles_insert(srv, h) != 0) {
    h->refs = 1;
    server_handle_unref(h);
    server_call_free(k);
    server_answer_error(a, 503, "sandbox", "too many background calls are running");
    return;
  }
  bg_arg *b = malloc(sizeof *b);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  bg_count(srv, 1);
  if (b) {
    b->k = k;
    b->h = h;
  }
  if (b == NULL || pthread_create(&th, &attr, bg_main, b) != 0) {
    free(b);
    pthread_attr_destroy(&attr);
    bg_count(srv, -1);
    if (server_handles_take(srv, h)) server_handle_unref(h);
    server_handle_unref(h);
    server_call_free(k);
    server_answer_error(a, 503, "sandbox", "cannot start a thread for the call");
    return;
  }
  pthread_attr_destroy(&attr);
  /* Wait for the call up to its own timeout. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double deadline = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + wait_s;
  ts.tv_sec = (time_t)deadline;
  ts.tv_nsec = (long)((deadline - (double)ts.tv_sec) * 1e9);
  pthread_mutex_lock(&h->mu);
  h->refs++;
  while (!h->done) {
    if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT) break;
  }
  int done = h->done;
  json_object *result = done ? json_object_get(h->result) : NULL;
  int status = h->result_status;
  pthread_mutex_unlock(&h->mu);
  if (done) {
    /* Finished in time: an ordinary answer, no handle. */
    if (server_handles_take(srv, h)) server_handle_unref(h);
    a->body = result;
    a->status = status;
  } else {
    server_metrics_background(srv->metrics);
    sm_log(SM_LOG_INFO, "call still running after %.1f s: now background handle %.8s...",
           wait_s, h->id);
    /* k belongs to the call's thread now and may be gone already. */
    a->body = background_answer(mode, h, wait_s);
    a->status = 200;
  }
  server_handle_unref(h);
}

/* ---- routes ---- */

void server_execute_route(sm_server *srv, const char *body, size_t len, int control,
                          const char *token, int accept_stream, server_call **streamed,
                          server_answer *a) {
  *streamed = NULL;
  sm_error err = SM_ERROR_INIT;
  /* A worker token is checked against the body's worker_key before anything
   * else about the body is told: an unauthenticated caller learns nothing. */
  if (!server_body_token_ok(srv, body, len, control, token)) {
    server_refuse_token(srv, "execute", a);
    return;
  }
  server_execute_params p;
  if (server_parse_execute(body, len, srv->opts.max_body, &p, &err) != 0) {
    server_answer_error(a, 400, "policy", "%s", err.message);
    return;
  }
  int stream = p.stream || accept_stream;
  if (stream && p.background_on_timeout) {
    server_answer_error(a, 400, "policy",
                        "a streamed call cannot go to the background: give "
                        "either 'stream' or 'background_on_timeout'");
    server_execute_params_dispose(&p);
    return;
  }
  call *k = server_call_prepare(srv, &p, control, token, a);
  if (k == NULL) return;
  if (stream) {
    *streamed = k; /* the caller streams it (server_execute_streamed) */
    return;
  }
  if (k->p.background_on_timeout) {
    run_background(k, a); /* owns k */
    return;
  }
  sm_run_result res;
  server_call_run(k, &res);
  server_call_answer(k, &res, a);
  sm_run_result_dispose(&res);
  server_call_free(k);
}

/* Finds the handle and checks the token against its worker: 0 with a
 * reference in *out, or an answer. Unknown handles are 404 for the control
 * token only, so a worker token learns nothing about others' handles. */
static int handle_access(sm_server *srv, const char *id, int control, const char *token,
                         server_handle **out, server_answer *a) {
  server_handle *h = server_handles_find(srv, id);
  if (h == NULL) {
    if (control) server_answer_error(a, 404, "policy", "no such handle");
    else server_refuse_token(srv, "handles", a);
    return -1;
  }
  if (!control && (h->worker_key[0] == '\0' || !server_token_ok(srv, token, h->worker_key))) {
    server_handle_unref(h);
    server_refuse_token(srv, "handles", a);
    return -1;
  }
  *out = h;
  return 0;
}

void server_handle_route_get(sm_server *srv, const char *id, int control, const char *token,
                             server_answer *a) {
  server_handle *h = NULL;
  if (handle_access(srv, id, control, token, &h, a) != 0) return;
  a->status = 200;
  a->body = server_handle_json(h, 0);
  server_handle_unref(h);
}

void server_handle_route_delete(sm_server *srv, const char *id, int control, const char *token,
                                server_answer *a) {
  server_handle *h = NULL;
  if (handle_access(srv, id, control, token, &h, a) != 0) return;
  pthread_mutex_lock(&h->mu);
  if (!h->done) {
    h->cancel = 1;
    h->killed = 1;
    sm_log(SM_LOG_INFO, "handle %.8s...: killing the call", h->id);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += DELETE_WAIT_S;
    while (!h->done)
      if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&h->mu);
  if (server_handles_take(srv, h)) server_handle_unref(h);
  a->status = 200;
  a->body = server_handle_json(h, 1);
  server_handle_unref(h);
}
