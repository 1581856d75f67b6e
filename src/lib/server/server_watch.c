/* The runner's file events (server_watch.h).
 *
 * A watch's life: its main thread prepares the call as every files route
 * does (server_call_prepare: token, tool policy "files", principal) and runs
 * sm_files_watch with no timeout and the watch's own cancel flag; its
 * writer thread answers the client: an ordinary JSON error when the watch
 * never started (a link on the path: 403), else a 200 NDJSON stream of
 * events and a last "end" event. The writer sets the cancel flag when the
 * client has gone (the stream's watcher sees a hang-up even while no event
 * comes), server_watches_end sets it before a sandbox is put to rest or
 * removed.
 *
 * Locks: the table's (ws->mu) before a watch's (w->mu), never the other
 * way. */
#include "server/server_watch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/files.h>
#include <sandman/log.h>
#include <sandman/util.h>

#include "common/text.h"
#include "server/stream.h"

#define QUEUE_BYTES_MAX ((size_t)4 << 20) /* path bytes held per watch */
#define POLL_MS 200                       /* the writer's look at its client */
#define TOKEN_KEY_MAX (SM_SERVER_KEY_MAX + 2)

typedef struct wev {
  struct wev *next;
  char kind;      /* sm_watch_kind */
  int dir;
  long long dropped; /* an overflow: events the runner's queue dropped; -1: the sandbox's */
  char *path, *to;
} wev;

typedef struct server_watch server_watch;
struct server_watch {
  server_watches *ws;
  server_watch *next; /* under ws->mu */
  server_files_req *r;
  server_files_watch_args args;
  char key[TOKEN_KEY_MAX];             /* whose token: "=control" or the worker key */
  char sandbox_id[SM_ENGINE_ID_MAX];   /* under ws->mu, once ready */
  int ready;                           /* under ws->mu: counts in its sandbox */
  volatile int cancel;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  wev *head, *tail;
  size_t n, bytes;
  int started, done, ended, rc;
  char reason[16]; /* ended from outside: "frozen", "removed", "stopping"... */
  sm_error err;
  server_answer refused; /* a refusal decided before the call (the prepare) */
};

struct server_watches {
  sm_server *srv;
  server_watch_limits lim;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a watch left the table */
  server_watch *list;
  size_t n;
  int stopping;
};

server_watches *server_watches_new(sm_server *srv, const server_watch_limits *lim) {
  server_watches *ws = calloc(1, sizeof *ws);
  if (ws == NULL) return NULL;
  ws->srv = srv;
  ws->lim = *lim;
  if (ws->lim.per_sandbox == 0) ws->lim.per_sandbox = 8;
  if (ws->lim.per_token == 0) ws->lim.per_token = 16;
  if (ws->lim.queue == 0) ws->lim.queue = 4096;
  pthread_mutex_init(&ws->mu, NULL);
  pthread_cond_init(&ws->cv, NULL);
  return ws;
}

void server_watches_free(server_watches *ws) {
  if (ws == NULL) return;
  pthread_mutex_destroy(&ws->mu);
  pthread_cond_destroy(&ws->cv);
  free(ws);
}

/* Two container ids name one container when one begins the other (a
 * short id and a full one), at least 12 digits of it. */
static int same_sandbox(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
  return n >= 12 && strncmp(a, b, n) == 0;
}

/* ---- the queue (the call's thread pushes, the writer takes) ---- */

static void wev_free(wev *e) {
  if (e == NULL) return;
  free(e->path);
  free(e->to);
  free(e);
}

/* Under w->mu. */
static void append(server_watch *w, wev *e) {
  if (w->tail) w->tail->next = e;
  else w->head = e;
  w->tail = e;
  w->n++;
}

/* Under w->mu: events are lost from here (dropped: how many the runner
 * dropped, -1 when the sandbox lost them). One overflow event stands for
 * a run of losses. */
static void overflow(server_watch *w, long long dropped) {
  if (w->tail && w->tail->kind == SM_WATCH_OVERFLOW) {
    if (dropped < 0 || w->tail->dropped < 0) w->tail->dropped = -1;
    else w->tail->dropped += dropped;
    return;
  }
  wev *e = calloc(1, sizeof *e);
  if (e == NULL) return; /* the next push tries again */
  e->kind = SM_WATCH_OVERFLOW;
  e->dropped = dropped;
  append(w, e);
}

static int on_event(void *ud, const sm_watch_event *ev) {
  server_watch *w = ud;
  size_t pl = strlen(ev->path), tl = ev->to ? strlen(ev->to) : 0;
  pthread_mutex_lock(&w->mu);
  if (ev->kind == SM_WATCH_OVERFLOW) {
    overflow(w, -1);
  } else if (w->n + 1 >= w->ws->lim.queue || w->bytes + pl + tl > QUEUE_BYTES_MAX) {
    /* The last place is the overflow's. */
    overflow(w, 1);
  } else {
    wev *e = calloc(1, sizeof *e);
    if (e) {
      e->kind = (char)ev->kind;
      e->dir = ev->is_dir;
      e->path = strdup(ev->path);
      e->to = ev->to ? strdup(ev->to) : NULL;
    }
    if (e == NULL || e->path == NULL || (ev->to && e->to == NULL)) {
      wev_free(e);
      overflow(w, 1);
    } else {
      w->bytes += pl + tl;
      append(w, e);
    }
  }
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  return 0;
}

/* The watches are in place in sandbox call->sandbox_id: it counts there,
 * unless the sandbox has its share already (then the watch ends, 403). */
static int on_ready(void *ud, const sm_run_result *call) {
  server_watch *w = ud;
  server_watches *ws = w->ws;
  pthread_mutex_lock(&ws->mu);
  unsigned same = 0;
  for (server_watch *o = ws->list; o; o = o->next)
    if (o->ready && same_sandbox(o->sandbox_id, call->sandbox_id)) same++;
  int over = same >= ws->lim.per_sandbox;
  if (!over) {
    snprintf(w->sandbox_id, sizeof w->sandbox_id, "%s", call->sandbox_id);
    w->ready = 1;
  }
  pthread_mutex_unlock(&ws->mu);
  pthread_mutex_lock(&w->mu);
  if (over) {
    server_answer_error(&w->refused, 403, "policy",
                        "the sandbox has %u watches already (--watches-per-sandbox)",
                        ws->lim.per_sandbox);
    pthread_mutex_unlock(&w->mu);
    return SM_EPOLICY;
  }
  w->started = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  return 0;
}

/* ---- the writer ---- */

static int send_json(server_watch *w, json_object *o) {
  size_t n = 0;
  const char *text =
      json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
  int rc = server_stream_write(w->args.stream, text, n);
  if (rc == 0) rc = server_stream_write(w->args.stream, "\n", 1);
  json_object_put(o);
  return rc;
}

static int send_event(server_watch *w, const wev *e) {
  sm_watch_event ev = {(sm_watch_kind)e->kind, e->dir, e->path ? e->path : "", e->to};
  return send_json(w, sm_watch_event_to_json(&ev, e->dropped));
}

static int send_ready(server_watch *w) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "event", json_object_new_string("ready"));
  char canon[SM_FILES_PATH_MAX + 1];
  sm_error ignore = SM_ERROR_INIT;
  if (sm_files_path(w->args.path, canon, sizeof canon, &ignore) != 0) canon[0] = '\0';
  json_object_object_add(o, "path", common_json_text(canon, strlen(canon)));
  json_object_object_add(o, "recursive", json_object_new_boolean(w->args.recursive));
  pthread_mutex_lock(&w->ws->mu);
  json_object_object_add(o, "sandbox_id", json_object_new_string(w->sandbox_id));
  pthread_mutex_unlock(&w->ws->mu);
  return send_json(w, o);
}

/* The last event: why the watch ended (the client that went away gets
 * none). */
static void send_end(server_watch *w) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "event", json_object_new_string("end"));
  const char *reason = w->reason[0] ? w->reason : w->ended ? "deleted" : "error";
  json_object_object_add(o, "reason", json_object_new_string(reason));
  if (!w->reason[0] && !w->ended)
    json_object_object_add(o, "error", json_object_new_string(w->err.message));
  send_json(w, o);
}

/* POLL_MS from now, for pthread_cond_timedwait. */
static struct timespec poll_deadline(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += POLL_MS * 1000000L;
  ts.tv_sec += ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  return ts;
}

/* Waits under w->mu for news; the client's absence cancels the watch. */
static void wait_news(server_watch *w) {
  struct timespec ts = poll_deadline();
  pthread_cond_timedwait(&w->cv, &w->mu, &ts);
  if (server_stream_cancelled(w->args.stream)) w->cancel = 1;
}

static void *writer_main(void *arg) {
  server_watch *w = arg;
  server_stream *s = w->args.stream;
  pthread_mutex_lock(&w->mu);
  while (!w->started && !w->done) wait_news(w);
  if (!w->started) {
    /* It never started: an ordinary answer. */
    server_answer a = w->refused;
    w->refused.body = NULL;
    if (a.body == NULL) server_files_answer_error(&a, w->rc ? w->rc : SM_ESANDBOX, &w->err);
    pthread_mutex_unlock(&w->mu);
    server_stream_finish(s, 0, &a);
    if (a.body) json_object_put(a.body);
    return NULL;
  }
  pthread_mutex_unlock(&w->mu);
  int failed =
      server_stream_begin(s, 200, "application/x-ndjson", -1, NULL, NULL, NULL, NULL) != 0 ||
      send_ready(w) != 0;
  pthread_mutex_lock(&w->mu);
  while (!failed) {
    if (w->head == NULL) {
      if (w->done) break;
      wait_news(w);
      continue;
    }
    wev *e = w->head;
    w->head = e->next;
    if (w->head == NULL) w->tail = NULL;
    w->n--;
    w->bytes -= (e->path ? strlen(e->path) : 0) + (e->to ? strlen(e->to) : 0);
    pthread_mutex_unlock(&w->mu);
    failed = send_event(w, e) != 0;
    wev_free(e);
    pthread_mutex_lock(&w->mu);
  }
  if (failed) w->cancel = 1; /* the client is gone */
  while (!w->done) wait_news(w);
  if (!failed && !server_stream_cancelled(s)) send_end(w);
  pthread_mutex_unlock(&w->mu);
  server_stream_finish(s, failed, NULL);
  return NULL;
}

/* ---- the watch's main thread ---- */

static void table_leave(server_watch *w) {
  server_watches *ws = w->ws;
  pthread_mutex_lock(&ws->mu);
  for (server_watch **pp = &ws->list; *pp; pp = &(*pp)->next) {
    if (*pp != w) continue;
    *pp = w->next;
    ws->n--;
    break;
  }
  pthread_cond_broadcast(&ws->cv);
  pthread_mutex_unlock(&ws->mu);
}

static void watch_free(server_watch *w) {
  while (w->head) {
    wev *e = w->head;
    w->head = e->next;
    wev_free(e);
  }
  if (w->refused.body) json_object_put(w->refused.body);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  server_files_req_free(w->r);
  free(w);
}

/* Runs the watch's call; its end is told to the writer. */
static void run_call(server_watch *w) {
  sm_server *srv = w->ws->srv;
  server_answer a = {0, NULL};
  int rc = 0, ended = 0;
  sm_error err = SM_ERROR_INIT;
  server_call *k = NULL;
  if (srv->opts.runner == NULL) server_answer_error(&a, 503, "engine", "this runner has no engine");
  else k = server_call_prepare(srv, w->args.p, w->args.control, w->args.token, &a);
  if (k) {
    sm_run_request *base = server_call_request(k);
    base->cancel = &w->cancel;
    base->settings.timeout_s = 0; /* a watch lasts until it is ended */
    sm_files_watch_opts o = {w->args.recursive, on_ready, on_event, w};
    sm_run_result call;
    memset(&call, 0, sizeof call);
    rc = sm_files_watch(srv->opts.runner, base, w->args.path, &o, &ended, &call, &err);
    if (rc) sm_log(SM_LOG_INFO, "%s", err.message);
    sm_run_result_dispose(&call);
    server_call_free(k);
  }
  pthread_mutex_lock(&w->mu);
  if (a.body && w->refused.body == NULL) w->refused = a;
  else if (a.body) json_object_put(a.body);
  w->rc = rc;
  w->err = err;
  w->ended = ended;
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void *watch_main(void *arg) {
  server_watch *w = arg;
  sm_log_set_request_id(w->args.id);
  pthread_t writer;
  int has_writer = pthread_create(&writer, NULL, writer_main, w) == 0;
  if (!has_writer) {
    server_answer a = {0, NULL};
    server_answer_error(&a, 503, "sandbox", "the runner could not start a thread");
    server_stream_finish(w->args.stream, 0, &a);
    if (a.body) json_object_put(a.body);
  } else {
    if (server_stream_watch(w->args.stream) != 0)
      sm_log(SM_LOG_WARN, "watch: cannot watch the connection; a hang-up is seen at the next event");
    run_call(w);
    pthread_join(writer, NULL);
  }
  table_leave(w);
  watch_free(w);
  return NULL;
}

static void token_key(const server_files_watch_args *a, char *out, size_t len) {
  if (a->control) snprintf(out, len, "=control");
  else snprintf(out, len, "%s", a->p->worker_key ? a->p->worker_key : "");
}

int server_watches_start(server_watches *ws, server_files_req *r, server_answer *a) {
  server_watch *w = calloc(1, sizeof *w);
  if (w == NULL) {
    server_files_req_free(r);
    server_answer_error(a, 503, "sandbox", "out of memory");
    return -1;
  }
  w->ws = ws;
  w->r = r;
  server_files_req_watch_args(r, &w->args);
  token_key(&w->args, w->key, sizeof w->key);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  pthread_mutex_lock(&ws->mu);
  unsigned mine = 0;
  for (server_watch *o = ws->list; o; o = o->next) mine += strcmp(o->key, w->key) == 0;
  int refused = 1;
  if (ws->stopping) server_answer_error(a, 503, "sandbox", "the runner is stopping");
  else if (ws->n >= SERVER_WATCHES_MAX)
    server_answer_error(a, 503, "sandbox", "the runner has %d watches already", SERVER_WATCHES_MAX);
  else if (mine >= ws->lim.per_token)
    server_answer_error(a, 403, "policy", "this token has %u watches already (--watches-per-token)",
                        ws->lim.per_token);
  else
    refused = 0;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (!refused) {
    w->next = ws->list;
    ws->list = w;
    ws->n++;
    if (pthread_create(&t, &attr, watch_main, w) != 0) {
      ws->list = w->next;
      ws->n--;
      server_answer_error(a, 503, "sandbox", "the runner could not start a thread");
      refused = 1;
    }
  }
  pthread_attr_destroy(&attr);
  pthread_mutex_unlock(&ws->mu);
  if (refused) {
    watch_free(w);
    return -1;
  }
  return 0;
}

/* Under ws->mu: cancels the watches that match (all when sandbox_id is
 * NULL); the number of them. */
static size_t cancel_matching(server_watches *ws, const char *sandbox_id, const char *reason) {
  size_t n = 0;
  for (server_watch *w = ws->list; w; w = w->next) {
    if (sandbox_id && !(w->ready && same_sandbox(w->sandbox_id, sandbox_id))) continue;
    pthread_mutex_lock(&w->mu);
    if (!w->reason[0]) snprintf(w->reason, sizeof w->reason, "%s", reason);
    w->cancel = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    n++;
  }
  return n;
}

void server_watches_end(server_watches *ws, const char *sandbox_id, const char *reason,
                        double wait_ms) {
  if (ws == NULL || sandbox_id == NULL || sandbox_id[0] == '\0') return;
  double deadline = sm_monotonic_ms() + wait_ms;
  pthread_mutex_lock(&ws->mu);
  size_t n = cancel_matching(ws, sandbox_id, reason);
  if (n) sm_log(SM_LOG_INFO, "sandbox %.12s %s: %zu watch(es) ended", sandbox_id, reason, n);
  while (n > 0 && sm_monotonic_ms() < deadline) {
    struct timespec ts = poll_deadline();
    pthread_cond_timedwait(&ws->cv, &ws->mu, &ts);
    n = 0;
    for (server_watch *w = ws->list; w; w = w->next)
      n += w->ready && same_sandbox(w->sandbox_id, sandbox_id);
  }
  pthread_mutex_unlock(&ws->mu);
}

void server_watches_stop(server_watches *ws) {
  if (ws == NULL) return;
  pthread_mutex_lock(&ws->mu);
  ws->stopping = 1;
  cancel_matching(ws, NULL, "runner_stopping");
  while (ws->n > 0) pthread_cond_wait(&ws->cv, &ws->mu);
  pthread_mutex_unlock(&ws->mu);
}
