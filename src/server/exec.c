/* The execute route: a request body to a call (call.c) run in the
 * foreground or as a background handle, or handed back to be streamed
 * (exec_stream.c). Also the lease and handle routes. */
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

#include "server/call.h"

#define GENERIC_401 SM_CALL_GENERIC_401
#define HANDLE_OUTPUT_MAX (1024 * 1024)
#define DELETE_WAIT_S 30

typedef struct sm_call call;

struct sm_handle {
  char id[SM_HANDLE_ID_LEN + 1];
  char worker_key[SM_SERVER_KEY_MAX + 1];
  char tool[SM_SERVER_TOOL_MAX + 1];
  char nonce[SM_HOOK_NONCE_LEN * 2 + 1];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  int killed;
  volatile int cancel;
  sm_buf out, err;
  int out_trunc, err_trunc;
  json_object *result; /* the finished call's answer body */
  int result_status;
  double t0;
  int refs;
  sm_secret_env secrets; /* copies, to scrub streamed output */
};

/* ---- background handles ---- */

static void handle_unref(sm_handle *h) {
  pthread_mutex_lock(&h->mu);
  int last = --h->refs == 0;
  pthread_mutex_unlock(&h->mu);
  if (!last) return;
  if (h->result) json_object_put(h->result);
  if (h->out.data) OPENSSL_cleanse(h->out.data, h->out.len);
  if (h->err.data) OPENSSL_cleanse(h->err.data, h->err.len);
  sm_buf_dispose(&h->out);
  sm_buf_dispose(&h->err);
  sm_secret_env_dispose(&h->secrets);
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->cv);
  free(h);
}

static int handle_output(void *ud, int stream, const char *data, size_t len) {
  sm_handle *h = ud;
  pthread_mutex_lock(&h->mu);
  if (stream == 2) {
    if (sm_buf_append_capped(&h->err, data, len) > 0) h->err_trunc = 1;
  } else {
    if (sm_buf_append_capped(&h->out, data, len) > 0) h->out_trunc = 1;
  }
  pthread_mutex_unlock(&h->mu);
  return 0;
}

static int handle_insert(sm_server *srv, sm_handle *h) {
  sm_handle *evict = NULL;
  pthread_mutex_lock(&srv->mu);
  size_t slot = srv->opts.max_handles;
  for (size_t i = 0; i < srv->opts.max_handles && slot == srv->opts.max_handles; i++)
    if (srv->handles[i] == NULL) slot = i;
  if (slot == srv->opts.max_handles) {
    /* Full: forget the finished handle that started first. */
    double oldest = 0;
    for (size_t i = 0; i < srv->opts.max_handles; i++) {
      sm_handle *o = srv->handles[i];
      pthread_mutex_lock(&o->mu);
      int done = o->done;
      pthread_mutex_unlock(&o->mu);
      if (done && (slot == srv->opts.max_handles || o->t0 < oldest)) {
        slot = i;
        oldest = o->t0;
      }
    }
    if (slot < srv->opts.max_handles) evict = srv->handles[slot];
  }
  if (slot < srv->opts.max_handles) {
    srv->handles[slot] = h;
    if (evict == NULL) srv->n_handles++;
  }
  pthread_mutex_unlock(&srv->mu);
  if (evict) handle_unref(evict);
  return slot < srv->opts.max_handles ? 0 : SM_EBUSY;
}

/* Takes the handle out of the table (the table's reference goes to the
 * caller). */
static sm_handle *handle_take(sm_server *srv, sm_handle *h) {
  pthread_mutex_lock(&srv->mu);
  sm_handle *found = NULL;
  for (size_t i = 0; i < srv->opts.max_handles; i++) {
    if (srv->handles[i] == h) {
      srv->handles[i] = NULL;
      srv->n_handles--;
      found = h;
    }
  }
  pthread_mutex_unlock(&srv->mu);
  return found;
}

/* With a new reference, or NULL. */
static sm_handle *handle_find(sm_server *srv, const char *id) {
  sm_handle *found = NULL;
  pthread_mutex_lock(&srv->mu);
  for (size_t i = 0; i < srv->opts.max_handles && !found; i++) {
    sm_handle *h = srv->handles[i];
    if (h && strlen(id) == SM_HANDLE_ID_LEN && CRYPTO_memcmp(h->id, id, SM_HANDLE_ID_LEN) == 0) {
      pthread_mutex_lock(&h->mu);
      h->refs++;
      pthread_mutex_unlock(&h->mu);
      found = h;
    }
  }
  pthread_mutex_unlock(&srv->mu);
  return found;
}

typedef struct bg_arg {
  call *k;
  sm_handle *h;
} bg_arg;

static void *bg_main(void *arg) {
  bg_arg *b = arg;
  call *k = b->k;
  sm_handle *h = b->h;
  sm_server *srv = k->srv;
  free(b);
  char rid[40];
  snprintf(rid, sizeof rid, "handle-%.8s", h->id);
  sm_log_set_request_id(rid);
  sm_run_result res;
  sm_call_run(k, &res);
  sm_answer a = {0, NULL};
  sm_call_answer(k, &res, &a);
  sm_run_result_dispose(&res);
  pthread_mutex_lock(&h->mu);
  h->result = a.body;
  h->result_status = a.status;
  h->done = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  sm_call_free(k);
  handle_unref(h);
  pthread_mutex_lock(&srv->mu);
  srv->bg_running--;
  pthread_cond_broadcast(&srv->cv_idle);
  pthread_mutex_unlock(&srv->mu);
  return NULL;
}

static json_object *handle_json(sm_handle *h, int removed) {
  json_object *o = json_object_new_object();
  pthread_mutex_lock(&h->mu);
  char *out = malloc(h->out.len + 1), *err = malloc(h->err.len + 1);
  size_t ol = h->out.len, el = h->err.len;
  if (out) memcpy(out, h->out.data ? h->out.data : "", ol + 1);
  if (err) memcpy(err, h->err.data ? h->err.data : "", el + 1);
  int done = h->done, killed = h->killed, ot = h->out_trunc, et = h->err_trunc;
  json_object *result = h->result ? json_object_get(h->result) : NULL;
  pthread_mutex_unlock(&h->mu);
  if (err && h->nonce[0]) sm_hook_strip(h->nonce, err, &el);
  sm_server_redact(&out, &ol, &h->secrets);
  sm_server_redact(&err, &el, &h->secrets);
  json_object_object_add(o, "handle", json_object_new_string(h->id));
  json_object_object_add(o, "state", json_object_new_string(killed ? "killed"
                                                             : done ? "finished"
                                                                    : "running"));
  json_object_object_add(o, "tool", h->tool[0] ? json_object_new_string(h->tool) : NULL);
  json_object_object_add(o, "elapsed_ms",
                         json_object_new_double((double)(long long)(sm_monotonic_ms() - h->t0)));
  json_object_object_add(o, "stdout", json_object_new_string_len(out ? out : "", (int)(out ? ol : 0)));
  json_object_object_add(o, "stderr", json_object_new_string_len(err ? err : "", (int)(err ? el : 0)));
  json_object_object_add(o, "stdout_truncated", json_object_new_boolean(ot));
  json_object_object_add(o, "stderr_truncated", json_object_new_boolean(et));
  json_object_object_add(o, "result", result);
  if (removed) json_object_object_add(o, "removed", json_object_new_boolean(1));
  free(out);
  free(err);
  return o;
}

/* The answer of a call that outlived its timeout: the run object so far. */
static json_object *background_answer(sm_mode mode, sm_handle *h, double waited_s) {
  json_object *hj = handle_json(h, 0);
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
                         json_object_new_string(sm_server_mode_name(mode)));
  json_object_object_add(o, "sandbox_id", NULL);
  json_object_object_add(o, "reused", json_object_new_boolean(0));
  json_object_object_add(o, "files_changed", json_object_new_array());
  json_object_object_add(o, "failure_kind", NULL);
  json_object_object_add(o, "error", NULL);
  json_object_object_add(o, "handle", json_object_new_string(h->id));
  json_object_object_add(o, "state", json_object_new_string("running"));
  json_object_put(hj);
  return o;
}

static void run_background(call *k, sm_answer *a) {
  sm_server *srv = k->srv;
  sm_handle *h = calloc(1, sizeof *h);
  if (h == NULL) {
    sm_answer_error(a, 503, "sandbox", "out of memory");
    sm_call_free(k);
    return;
  }
  sm_server_random_hex(h->id, SM_HANDLE_ID_LEN / 2);
  snprintf(h->worker_key, sizeof h->worker_key, "%s", k->p.worker_key ? k->p.worker_key : "");
  snprintf(h->tool, sizeof h->tool, "%s", k->p.tool ? k->p.tool : "");
  snprintf(h->nonce, sizeof h->nonce, "%s", k->hook ? k->nonce : "");
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  size_t cap_out = (size_t)k->req.settings.stdout_cap, cap_err = (size_t)k->req.settings.stderr_cap;
  if (cap_out == 0 || cap_out > HANDLE_OUTPUT_MAX) cap_out = HANDLE_OUTPUT_MAX;
  if (cap_err == 0 || cap_err > HANDLE_OUTPUT_MAX) cap_err = HANDLE_OUTPUT_MAX;
  sm_buf_init(&h->out, cap_out);
  sm_buf_init(&h->err, cap_err + 64); /* room for the hook's start marker */
  h->t0 = sm_monotonic_ms();
  h->refs = 2; /* the table and the call's thread */
  for (size_t i = 0; i < k->secrets.n; i++) {
    if (h->secrets.kv == NULL) h->secrets.kv = calloc(k->secrets.n + 1, sizeof *h->secrets.kv);
    char *dup = h->secrets.kv ? strdup(k->secrets.kv[i]) : NULL;
    if (dup) h->secrets.kv[h->secrets.n++] = dup;
  }
  k->handle = h;
  sm_mode mode = k->req.settings.mode;
  double wait_s = k->req.settings.timeout_s;
  if (k->req.settings.timeout_s < srv->opts.background_max_s)
    k->req.settings.timeout_s = srv->opts.background_max_s;
  k->req.on_output = handle_output;
  k->req.on_output_ud = h;
  k->req.cancel = &h->cancel;
  if (handle_insert(srv, h) != 0) {
    h->refs = 1;
    handle_unref(h);
    sm_call_free(k);
    sm_answer_error(a, 503, "sandbox", "too many background calls are running");
    return;
  }
  bg_arg *b = malloc(sizeof *b);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  pthread_mutex_lock(&srv->mu);
  srv->bg_running++;
  pthread_mutex_unlock(&srv->mu);
  if (b) {
    b->k = k;
    b->h = h;
  }
  if (b == NULL || pthread_create(&th, &attr, bg_main, b) != 0) {
    free(b);
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&srv->mu);
    srv->bg_running--;
    pthread_mutex_unlock(&srv->mu);
    if (handle_take(srv, h)) handle_unref(h);
    handle_unref(h);
    sm_call_free(k);
    sm_answer_error(a, 503, "sandbox", "cannot start a thread for the call");
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
    if (handle_take(srv, h)) handle_unref(h);
    a->body = result;
    a->status = status;
  } else {
    sm_metrics_background(srv->metrics);
    sm_log(SM_LOG_INFO, "call still running after %.1f s: now background handle %.8s...",
           wait_s, h->id);
    /* k belongs to the call's thread now and may be gone already. */
    a->body = background_answer(mode, h, wait_s);
    a->status = 200;
  }
  handle_unref(h);
}

/* ---- routes ---- */

/* The control token, or a worker token that matches the body's worker_key. */
static int worker_token_ok(sm_server *srv, const char *body, size_t len, int control,
                           const char *token) {
  if (control) return 1;
  char key[SM_SERVER_KEY_MAX + 1];
  if (sm_server_json_worker_key(body, len, key) != 0) return 0;
  return sm_server_token_ok(srv, token, key);
}

void sm_exec_execute(sm_server *srv, const char *body, size_t len, int control,
                     const char *token, int accept_stream, sm_call **streamed, sm_answer *a) {
  *streamed = NULL;
  sm_error err = SM_ERROR_INIT;
  /* A worker token is checked against the body's worker_key before anything
   * else about the body is told: an unauthenticated caller learns nothing. */
  if (!worker_token_ok(srv, body, len, control, token)) {
    sm_server_refuse_token(srv, "execute", a);
    return;
  }
  sm_exec_params p;
  if (sm_server_parse_execute(body, len, srv->opts.max_body, &p, &err) != 0) {
    sm_answer_error(a, 400, "policy", "%s", err.message);
    return;
  }
  int stream = p.stream || accept_stream;
  if (stream && p.background_on_timeout) {
    sm_answer_error(a, 400, "policy", "a streamed call cannot go to the background: give "
                    "either 'stream' or 'background_on_timeout'");
    sm_exec_params_dispose(&p);
    return;
  }
  call *k = sm_call_prepare(srv, &p, control, token, a);
  if (k == NULL) return;
  if (stream) {
    *streamed = k; /* the caller streams it (sm_exec_streamed) */
    return;
  }
  if (k->p.background_on_timeout) {
    run_background(k, a); /* owns k */
    return;
  }
  sm_run_result res;
  sm_call_run(k, &res);
  sm_call_answer(k, &res, a);
  sm_run_result_dispose(&res);
  sm_call_free(k);
}

void sm_exec_lease(sm_server *srv, const char *body, size_t len, int control,
                   const char *token, sm_answer *a) {
  sm_lease_params p;
  sm_error err = SM_ERROR_INIT;
  if (!worker_token_ok(srv, body, len, control, token)) {
    sm_server_refuse_token(srv, "leases", a);
    return;
  }
  if (sm_server_parse_lease(body, len, &p, &err) != 0) {
    sm_answer_error(a, 400, "policy", "%s", err.message);
    return;
  }
  /* A worker's token makes leases for its own worker only. */
  if (!control && !sm_server_token_ok(srv, token, p.worker_key)) {
    sm_server_refuse_token(srv, "leases", a);
    return;
  }
  if (srv->creds == NULL) {
    sm_answer_error(a, 400, "policy",
                    "this runner has no credentials (start it with --credentials-file FILE)");
    return;
  }
  /* A worker leases only what the configuration grants its key, and learns
   * nothing about the other services: the same answer whether they exist. */
  for (size_t i = 0; !control && i < p.n_services; i++) {
    if (!sm_config_worker_may_lease(sm_server_config(srv), p.worker_key, p.services[i])) {
      sm_metrics_lease(srv->metrics, "refused");
      sm_server_audit_lease(srv, "lease.refused", NULL, p.tool, p.worker_key,
                            "a service the configuration does not grant this worker");
      sm_answer_error(a, 403, "policy",
                      "service '%s' is not one worker '%s' may lease (the configuration's "
                      "workers.<key>.services)",
                      p.services[i], p.worker_key);
      return;
    }
  }
  for (size_t i = 0; i < p.n_services; i++) {
    if (!sm_creds_has_service(srv->creds, p.services[i])) {
      sm_answer_error(a, 400, "policy", "unknown service '%s'", p.services[i]);
      return;
    }
  }
  char id[SM_LEASE_ID_LEN + 1];
  double expires = 0;
  if (sm_lease_create(srv->leases, &p, sm_now(), id, &expires, &err) != 0) {
    sm_answer_error(a, 503, "sandbox", "%s", err.message);
    return;
  }
  char when[40];
  sm_format_time(expires, when, sizeof when);
  sm_metrics_lease(srv->metrics, "created");
  sm_server_audit_lease(srv, "lease.created", id, p.tool, p.worker_key, NULL);
  sm_log(SM_LOG_INFO, "lease %.6s... created for tool %s: %zu service(s), %d use(s), %.0f s", id,
         p.tool, p.n_services, p.max_uses, p.ttl_s);
  a->status = 200;
  a->body = json_object_new_object();
  json_object_object_add(a->body, "lease_id", json_object_new_string(id));
  json_object_object_add(a->body, "expires_at", json_object_new_string(when));
  json_object_object_add(a->body, "max_uses", json_object_new_int(p.max_uses));
  OPENSSL_cleanse(id, sizeof id);
}

/* Finds the handle and checks the token against its worker: 0 with a
 * reference in *out, or an answer. Unknown handles are 404 for the control
 * token only, so a worker token learns nothing about others' handles. */
static int handle_access(sm_server *srv, const char *id, int control, const char *token,
                         sm_handle **out, sm_answer *a) {
  sm_handle *h = handle_find(srv, id);
  if (h == NULL) {
    if (control) sm_answer_error(a, 404, "policy", "no such handle");
    else sm_server_refuse_token(srv, "handles", a);
    return -1;
  }
  if (!control && (h->worker_key[0] == '\0' || !sm_server_token_ok(srv, token, h->worker_key))) {
    handle_unref(h);
    sm_server_refuse_token(srv, "handles", a);
    return -1;
  }
  *out = h;
  return 0;
}

void sm_exec_handle_get(sm_server *srv, const char *id, int control, const char *token,
                        sm_answer *a) {
  sm_handle *h = NULL;
  if (handle_access(srv, id, control, token, &h, a) != 0) return;
  a->status = 200;
  a->body = handle_json(h, 0);
  handle_unref(h);
}

void sm_exec_handle_delete(sm_server *srv, const char *id, int control, const char *token,
                           sm_answer *a) {
  sm_handle *h = NULL;
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
  if (handle_take(srv, h)) handle_unref(h);
  a->status = 200;
  a->body = handle_json(h, 1);
  handle_unref(h);
}

size_t sm_exec_handles_running(sm_server *srv, size_t *total) {
  size_t running = 0, n = 0;
  pthread_mutex_lock(&srv->mu);
  for (size_t i = 0; i < srv->opts.max_handles && srv->handles; i++) {
    sm_handle *h = srv->handles[i];
    if (h == NULL) continue;
    n++;
    pthread_mutex_lock(&h->mu);
    running += h->done ? 0 : 1;
    pthread_mutex_unlock(&h->mu);
  }
  pthread_mutex_unlock(&srv->mu);
  if (total) *total = n;
  return running;
}

void sm_exec_kill_all(sm_server *srv) {
  pthread_mutex_lock(&srv->mu);
  long n = srv->bg_running;
  for (size_t i = 0; i < srv->opts.max_handles && srv->handles; i++) {
    sm_handle *h = srv->handles[i];
    if (h == NULL) continue;
    pthread_mutex_lock(&h->mu);
    if (!h->done) {
      h->cancel = 1;
      h->killed = 1;
    }
    pthread_mutex_unlock(&h->mu);
  }
  if (n > 0) sm_log(SM_LOG_INFO, "stopping: killing %ld background call(s)", n);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 60;
  while (srv->bg_running > 0)
    if (pthread_cond_timedwait(&srv->cv_idle, &srv->mu, &ts) == ETIMEDOUT) break;
  if (srv->bg_running > 0)
    sm_log(SM_LOG_WARN, "stopping: %ld background call(s) did not end in time",
           srv->bg_running);
  pthread_mutex_unlock(&srv->mu);
}

void sm_exec_free_handles(sm_server *srv) {
  for (size_t i = 0; srv->handles && i < srv->opts.max_handles; i++) {
    if (srv->handles[i]) handle_unref(srv->handles[i]);
    srv->handles[i] = NULL;
  }
  srv->n_handles = 0;
}
