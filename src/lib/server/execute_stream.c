/* Streamed execute: the call's output as chunked NDJSON events while it
 * runs ({"event":"stdout"|"stderr","data"} lines), then {"event":"result"}.
 *
 * Leased credential values are masked in the events as in the final
 * answer: each stream holds back its last (longest value - 1) bytes until
 * more output or the end shows they do not start a value, so a value cut
 * by a chunk boundary is masked too. A UTF-8 sequence cut by a boundary is
 * held back the same way. A client that disconnects cancels the call
 * (stream.c's watcher sees the hang-up even while the call is silent).
 * Also the execute route's job on its call thread (server_execute_job),
 * which answers through the stream either way. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <sandman/log.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/text.h"
#include "server/stream.h"

#define EVENT_CHUNK (64 * 1024) /* data of one event at most */
#define PENDING_MAX (64 * 1024 * 1024) /* one piece of output and what is held back */

typedef struct out_state {
  server_stream *s;
  const server_secret_env *secrets;
  size_t hold;           /* bytes kept back for masking */
  common_buf pend[2];    /* stdout, stderr */
  pthread_mutex_t mu;    /* on_output may come from two threads */
} out_state;

static int send_event(out_state *o, const char *name, const char *data, size_t len) {
  cleanup_json json_object *ev = json_object_new_object();
  json_object_object_add(ev, "event", json_object_new_string(name));
  if (common_utf8_valid(data, len)) {
    json_object_object_add(ev, "data", json_object_new_string_len(data, (int)len));
  } else {
    cleanup_free char *b64 = malloc(4 * ((len + 2) / 3) + 1);
    if (b64 == NULL) return -1;
    int n = EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)data, (int)len);
    json_object_object_add(ev, "data_b64", json_object_new_string_len(b64, n));
  }
  size_t n = 0;
  const char *text = json_object_to_json_string_length(
      ev, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
  int rc = server_stream_write(o->s, text, n);
  if (rc == 0) rc = server_stream_write(o->s, "\n", 1);
  return rc;
}

/* Where a chunk may end so that no UTF-8 sequence is cut: at most 3 bytes
 * back from end. */
static size_t utf8_cut(const char *p, size_t end) {
  for (size_t back = 1; back <= 3 && back <= end; back++) {
    unsigned char c = (unsigned char)p[end - back];
    if ((c & 0xC0) == 0x80) continue; /* a continuation byte */
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? end - back : end;
  }
  return end;
}

/* Sends what may go of stream i's pending bytes (all of them at the end;
 * cut: the output was cut at its cap, and a value's start that ends it is
 * masked too). */
static void flush(out_state *o, int i, int all, int cut) {
  common_buf *b = &o->pend[i];
  if (b->data == NULL) return;
  if (all && cut) server_redact_cut(&b->data, &b->len, o->secrets, 1);
  else server_redact(&b->data, &b->len, o->secrets);
  /* redact may have moved the data: what is sure is len + 1 bytes. */
  b->alloc = b->len + 1;
  size_t end = all ? b->len : (b->len > o->hold ? b->len - o->hold : 0);
  if (!all) end = utf8_cut(b->data, end);
  const char *name = i == 0 ? "stdout" : "stderr";
  for (size_t off = 0; off < end;) {
    size_t n = end - off > EVENT_CHUNK ? EVENT_CHUNK : end - off;
    if (off + n < end && utf8_cut(b->data + off, n) > 0) n = utf8_cut(b->data + off, n);
    if (send_event(o, name, b->data + off, n) != 0) break;
    off += n;
  }
  memmove(b->data, b->data + end, b->len - end);
  b->len -= end;
  b->data[b->len] = '\0';
}

static int on_output(void *ud, int stream, const char *data, size_t len) {
  out_state *o = ud;
  int i = stream == 2 ? 1 : 0;
  pthread_mutex_lock(&o->mu);
  if (common_buf_append(&o->pend[i], data, len) == 0) flush(o, i, 0, 0);
  pthread_mutex_unlock(&o->mu);
  return 0;
}

void server_execute_streamed(server_call *k, server_stream *s) {
  out_state o;
  memset(&o, 0, sizeof o);
  o.s = s;
  o.secrets = server_call_secrets(k);
  for (size_t i = 0; i < o.secrets->n; i++) {
    const char *eq = strchr(o.secrets->kv[i], '=');
    size_t vl = eq ? strlen(eq + 1) : 0;
    if (vl >= SM_REDACT_MIN_LEN && vl - 1 > o.hold) o.hold = vl - 1;
  }
  /* Each pending buffer holds one piece of output plus what is held back. */
  common_buf_init(&o.pend[0], PENDING_MAX);
  common_buf_init(&o.pend[1], PENDING_MAX);
  pthread_mutex_init(&o.mu, NULL);
  sm_run_request *q = server_call_request(k);
  q->on_output = on_output;
  q->on_output_ud = &o;
  q->cancel = server_stream_cancel_flag(s);
  if (server_stream_watch(s) != 0)
    sm_log(SM_LOG_WARN, "streamed call: cannot watch the connection; a hang-up is seen at the "
           "next output only");
  server_stream_begin(s, 200, "application/x-ndjson", -1, NULL, NULL, NULL, NULL);
  sm_run_result res;
  server_call_run(k, &res);
  pthread_mutex_lock(&o.mu);
  flush(&o, 0, 1, res.stdout_truncated);
  flush(&o, 1, 1, res.stderr_truncated);
  pthread_mutex_unlock(&o.mu);
  server_answer ans = {0, NULL};
  server_call_answer(k, &res, &ans);
  sm_run_result_dispose(&res);
  json_object *ev = json_object_new_object();
  json_object_object_add(ev, "event", json_object_new_string("result"));
  json_object_object_add(ev, "status", json_object_new_int(ans.status));
  json_object_object_add(ev, "result", ans.body);
  size_t n = 0;
  const char *text = json_object_to_json_string_length(
      ev, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
  int rc = server_stream_write(s, text, n);
  if (rc == 0) rc = server_stream_write(s, "\n", 1);
  json_object_put(ev);
  if (server_stream_cancelled(s))
    sm_log(SM_LOG_INFO, "streamed call: the client went away; the call was cancelled");
  server_stream_finish(s, rc != 0, NULL);
  for (int i = 0; i < 2; i++) {
    if (o.pend[i].data) OPENSSL_cleanse(o.pend[i].data, o.pend[i].alloc);
    common_buf_dispose(&o.pend[i]);
  }
  pthread_mutex_destroy(&o.mu);
  server_call_free(k);
}

void server_execute_job(sm_server *srv, server_stream *s, const char *body, size_t len, int control,
                        const char *token, int accept_stream) {
  server_stream_ref(s);
  pthread_mutex_lock(&srv->mu);
  srv->calls_in_flight++;
  pthread_mutex_unlock(&srv->mu);
  server_answer a = {0, NULL};
  server_call *streamed = NULL;
  server_execute_route(srv, body, len, control, token, accept_stream, &streamed, &a);
  if (streamed) server_execute_streamed(streamed, s); /* the request may be gone once it begins */
  pthread_mutex_lock(&srv->mu);
  srv->calls_in_flight--;
  pthread_mutex_unlock(&srv->mu);
  if (!server_stream_begun(s)) server_stream_finish(s, 0, &a);
  if (a.body) json_object_put(a.body);
  server_stream_unref(s);
}
