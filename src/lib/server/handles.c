/* The background handles' table and their JSON view (handles.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "server/handles.h"

server_handle *server_handle_new(const char *worker_key, const char *tool, const char *nonce,
                                 size_t cap_out, size_t cap_err, const server_secret_env *secrets) {
  server_handle *h = calloc(1, sizeof *h);
  if (h == NULL) return NULL;
  server_random_hex(h->id, SM_HANDLE_ID_LEN / 2);
  snprintf(h->worker_key, sizeof h->worker_key, "%s", worker_key ? worker_key : "");
  snprintf(h->tool, sizeof h->tool, "%s", tool ? tool : "");
  snprintf(h->nonce, sizeof h->nonce, "%s", nonce ? nonce : "");
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  if (cap_out == 0 || cap_out > SM_HANDLE_OUTPUT_MAX) cap_out = SM_HANDLE_OUTPUT_MAX;
  if (cap_err == 0 || cap_err > SM_HANDLE_OUTPUT_MAX) cap_err = SM_HANDLE_OUTPUT_MAX;
  common_buf_init(&h->out, cap_out);
  common_buf_init(&h->err, cap_err + 64); /* room for the hook's start marker */
  h->t0 = sm_monotonic_ms();
  h->refs = 2; /* the table and the call's thread */
  for (size_t i = 0; i < secrets->n; i++) {
    if (h->secrets.kv == NULL) h->secrets.kv = calloc(secrets->n + 1, sizeof *h->secrets.kv);
    char *dup = h->secrets.kv ? strdup(secrets->kv[i]) : NULL;
    if (dup) h->secrets.kv[h->secrets.n++] = dup;
  }
  return h;
}

/* The output gathered and the secrets' copies, wiped before they go. */
static void wipe_output(server_handle *h) {
  if (h->out.data) OPENSSL_cleanse(h->out.data, h->out.len);
  if (h->err.data) OPENSSL_cleanse(h->err.data, h->err.len);
  common_buf_dispose(&h->out);
  common_buf_dispose(&h->err);
  server_secret_env_dispose(&h->secrets);
}

void server_handle_unref(server_handle *h) {
  pthread_mutex_lock(&h->mu);
  int last = --h->refs == 0;
  pthread_mutex_unlock(&h->mu);
  if (!last) return;
  if (h->result) json_object_put(h->result);
  wipe_output(h);
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->cv);
  free(h);
}

int server_handle_output(void *ud, int stream, const char *data, size_t len) {
  server_handle *h = ud;
  pthread_mutex_lock(&h->mu);
  if (stream == 2) {
    if (common_buf_append_capped(&h->err, data, len) > 0) h->err_trunc = 1;
  } else {
    if (common_buf_append_capped(&h->out, data, len) > 0) h->out_trunc = 1;
  }
  pthread_mutex_unlock(&h->mu);
  return 0;
}

int server_handles_insert(sm_server *srv, server_handle *h) {
  server_handle *evict = NULL;
  pthread_mutex_lock(&srv->mu);
  size_t slot = srv->opts.max_handles;
  for (size_t i = 0; i < srv->opts.max_handles && slot == srv->opts.max_handles; i++)
    if (srv->handles[i] == NULL) slot = i;
  if (slot == srv->opts.max_handles) {
    /* Full: forget the finished handle that started first. */
    double oldest = 0;
    for (size_t i = 0; i < srv->opts.max_handles; i++) {
      server_handle *o = srv->handles[i];
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
  if (evict) server_handle_unref(evict);
  return slot < srv->opts.max_handles ? 0 : SM_EBUSY;
}

/* Takes the handle out of the table (the table's reference goes to the
 * caller). */
server_handle *server_handles_take(sm_server *srv, server_handle *h) {
  pthread_mutex_lock(&srv->mu);
  server_handle *found = NULL;
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
server_handle *server_handles_find(sm_server *srv, const char *id) {
  server_handle *found = NULL;
  pthread_mutex_lock(&srv->mu);
  for (size_t i = 0; i < srv->opts.max_handles && !found; i++) {
    server_handle *h = srv->handles[i];
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

json_object *server_handle_json(server_handle *h, int removed) {
  json_object *o = json_object_new_object();
  pthread_mutex_lock(&h->mu);
  char *out = malloc(h->out.len + 1), *err = malloc(h->err.len + 1);
  size_t ol = h->out.len, el = h->err.len;
  if (out) memcpy(out, h->out.data ? h->out.data : "", ol + 1);
  if (err) memcpy(err, h->err.data ? h->err.data : "", el + 1);
  int done = h->done, killed = h->killed, ot = h->out_trunc, et = h->err_trunc;
  json_object *result = h->result ? json_object_get(h->result) : NULL;
  pthread_mutex_unlock(&h->mu);
  if (err && h->nonce[0]) server_hook_strip(h->nonce, err, &el);
  /* Output cut at its cap, or so far (more may come): a value whose start
   * ends it is masked too (marked when cut, held back while running). */
  if (ot || !done) server_redact_cut(&out, &ol, &h->secrets, ot);
  else server_redact(&out, &ol, &h->secrets);
  if (et || !done) server_redact_cut(&err, &el, &h->secrets, et);
  else server_redact(&err, &el, &h->secrets);
  json_object_object_add(o, "handle", json_object_new_string(h->id));
  json_object_object_add(o, "state", json_object_new_string(killed ? "killed"
                                                             : done ? "finished"
                                                                    : "running"));
  json_object_object_add(o, "tool", h->tool[0] ? json_object_new_string(h->tool) : NULL);
  /* The sandbox it runs in: the one it named, else the result's. */
  json_object *sid = NULL;
  if (h->sandbox_id[0]) sid = json_object_new_string(h->sandbox_id);
  else if (result && json_object_object_get_ex(result, "sandbox_id", &sid)) sid = json_object_get(sid);
  json_object_object_add(o, "sandbox_id", sid);
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

size_t server_handles_running(sm_server *srv, size_t *total) {
  size_t running = 0, n = 0;
  pthread_mutex_lock(&srv->mu);
  for (size_t i = 0; i < srv->opts.max_handles && srv->handles; i++) {
    server_handle *h = srv->handles[i];
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

void server_handles_kill_all(sm_server *srv) {
  pthread_mutex_lock(&srv->mu);
  long n = srv->bg_running;
  for (size_t i = 0; i < srv->opts.max_handles && srv->handles; i++) {
    server_handle *h = srv->handles[i];
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

void server_handles_free(sm_server *srv) {
  for (size_t i = 0; srv->handles && i < srv->opts.max_handles; i++) {
    if (srv->handles[i]) server_handle_unref(srv->handles[i]);
    srv->handles[i] = NULL;
  }
  srv->n_handles = 0;
}
