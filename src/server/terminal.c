/* The runner's terminals (terminal.h).
 *
 * Each terminal is a call (sm_call: checked, resolved and audited as any)
 * that sm_run runs on a pseudo-terminal, on a detached thread of its own;
 * its output feeds the screen and every attached client under the
 * terminal's lock, so a client that attaches gets the screen and then
 * exactly what follows. A janitor thread ends terminals nobody has used
 * for the grace time and forgets ended ones as long after.
 *
 * Locks: the table's (ts->mu) before a terminal's (t->mu), never the other
 * way; a WebSocket connection's own lock is taken under t->mu (sends). */
#include "server/terminal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/log.h>
#include <sandman/terminal.h>
#include <sandman/util.h>

#include "server/terminal_screen.h"

#define START_WAIT_MS 300000.0 /* for the sandbox and the program to start */
#define JANITOR_MS 1000
#define ANSWERS_MAX 4096

enum { T_STARTING = 0, T_RUNNING, T_EXITED };

struct server_terminal {
  server_terminals *ts;
  server_terminal *next;      /* under ts->mu */
  int in_table;               /* under ts->mu */
  int counted;                /* under ts->mu: counts in its sandbox's terminals */
  char sandbox_id[SM_ENGINE_ID_MAX]; /* under ts->mu once counted */
  char id[SERVER_TERMINAL_ID_LEN + 1];
  char worker_key[SM_SERVER_KEY_MAX + 1];
  char command[256];
  char *cwd;
  double created_at;
  sm_call *k;
  sm_tty *tty;
  volatile int cancel;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  int refs;
  int state, started, over_cap, expired, exit_code;
  sm_failure_kind failure;
  char error[512];
  server_screen *screen;
  unsigned rows, cols;
  server_ws_conn *clients[SERVER_TERMINAL_CLIENTS_MAX];
  size_t n_clients;
  double last_seen;           /* monotonic ms: a client's last sign */
  double changed_at;          /* monotonic ms: the screen's last change */
  sm_buf answers;             /* the emulator's answers to one output */
};

struct server_terminals {
  sm_server *srv;
  server_terminal_limits lim;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  server_terminal *list;
  size_t n;
  long threads;               /* terminal threads alive */
  int stop;
  pthread_t janitor;
  int has_janitor;
};

/* ---- references ---- */

static void terminal_ref(server_terminal *t) {
  pthread_mutex_lock(&t->mu);
  t->refs++;
  pthread_mutex_unlock(&t->mu);
}

void server_terminal_unref(server_terminal *t) {
  if (t == NULL) return;
  pthread_mutex_lock(&t->mu);
  int last = --t->refs == 0;
  pthread_mutex_unlock(&t->mu);
  if (!last) return;
  server_screen_free(t->screen);
  sm_tty_free(t->tty);
  sm_call_free(t->k);
  free(t->cwd);
  sm_buf_dispose(&t->answers);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}

const char *server_terminal_id(const server_terminal *t) { return t->id; }

/* Under ts->mu: takes t out of the table (the table's reference is the
 * caller's to drop). 1 when it was there. */
static int table_take(server_terminals *ts, server_terminal *t) {
  for (server_terminal **pp = &ts->list; *pp; pp = &(*pp)->next) {
    if (*pp != t) continue;
    *pp = t->next;
    t->in_table = 0;
    ts->n--;
    return 1;
  }
  return 0;
}

/* ---- audit ---- */

static void audit(server_terminal *t, const char *event, const char *message) {
  sm_run_request *q = sm_call_request(t->k);
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = event;
  ev.message = message;
  ev.agent = q->agent;
  ev.user = q->user;
  ev.project = q->project;
  ev.run_id = q->run_id;
  ev.worker = t->worker_key[0] ? t->worker_key : NULL;
  ev.tool = "terminal";
  ev.mode = sm_mode_name(q->settings.mode);
  json_object *d = json_object_new_object();
  json_object_object_add(d, "terminal", json_object_new_string(t->id));
  json_object_object_add(d, "command", json_object_new_string(t->command));
  ev.detail = d;
  sm_server_audit(t->ts->srv, &ev);
  json_object_put(d);
}

/* ---- the call's side ---- */

/* The program's output: the screen, then every client. What the emulator
 * answers goes back as typed when no client is there to answer. */
static int on_output(void *ud, int stream, const char *data, size_t len) {
  server_terminal *t = ud;
  (void)stream;
  pthread_mutex_lock(&t->mu);
  sm_buf_reset(&t->answers);
  server_screen_feed(t->screen, data, len, &t->answers);
  for (size_t i = 0; i < t->n_clients; i++) server_ws_send(t->clients[i], SERVER_WS_BINARY, data, len);
  if (t->n_clients == 0 && t->answers.len > 0) {
    sm_error ignore = SM_ERROR_INIT;
    sm_tty_write(t->tty, t->answers.data, t->answers.len, &ignore);
  }
  t->changed_at = sm_monotonic_ms();
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  return 0;
}

/* The program started in sandbox_id: it counts there, unless the sandbox
 * has its share already, and then it is ended at once. */
static void on_start(void *ud, const char *sandbox_id) {
  server_terminal *t = ud;
  server_terminals *ts = t->ts;
  pthread_mutex_lock(&ts->mu);
  unsigned same = 0;
  for (server_terminal *o = ts->list; o; o = o->next)
    same += o != t && o->counted && strcmp(o->sandbox_id, sandbox_id) == 0;
  int over = same >= ts->lim.per_sandbox;
  if (!over) {
    t->counted = 1;
    snprintf(t->sandbox_id, sizeof t->sandbox_id, "%s", sandbox_id);
  }
  pthread_mutex_unlock(&ts->mu);
  pthread_mutex_lock(&t->mu);
  if (over) {
    t->over_cap = 1;
    t->cancel = 1;
  } else {
    t->state = T_RUNNING;
    t->started = 1;
  }
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void exit_message(server_terminal *t, char *buf, size_t len) {
  snprintf(buf, len, "{\"type\":\"exit\",\"exit_code\":%d}", t->exit_code);
}

/* Under t->mu: the program ended; clients are told and let go. */
static void ended(server_terminal *t, const sm_run_result *res) {
  t->state = T_EXITED;
  t->exit_code = res->exit_code;
  t->failure = res->failure_kind;
  if (res->failure_kind != SM_FAIL_NONE && res->failure_kind != SM_FAIL_TOOL)
    snprintf(t->error, sizeof t->error, "%s", res->error);
  t->last_seen = sm_monotonic_ms();
  char msg[64];
  exit_message(t, msg, sizeof msg);
  for (size_t i = 0; i < t->n_clients; i++) {
    server_ws_send(t->clients[i], SERVER_WS_TEXT, msg, strlen(msg));
    server_ws_close(t->clients[i], SERVER_WS_NORMAL, "the terminal's program ended");
  }
  pthread_cond_broadcast(&t->cv);
}

static void *terminal_main(void *arg) {
  server_terminal *t = arg;
  server_terminals *ts = t->ts;
  sm_run_result res;
  sm_call_run(t->k, &res);
  pthread_mutex_lock(&ts->mu);
  t->counted = 0;
  pthread_mutex_unlock(&ts->mu);
  pthread_mutex_lock(&t->mu);
  ended(t, &res);
  int started = t->started;
  pthread_mutex_unlock(&t->mu);
  if (started) {
    char why[96];
    snprintf(why, sizeof why, "the terminal's program ended with %d", res.exit_code);
    audit(t, "terminal.ended", why);
  }
  sm_log(SM_LOG_INFO, "terminal %.8s...: ended (exit %d%s%s)", t->id, res.exit_code,
         res.error[0] ? ": " : "", res.error);
  sm_run_result_dispose(&res);
  server_terminal_unref(t);
  pthread_mutex_lock(&ts->mu);
  ts->threads--;
  pthread_cond_broadcast(&ts->cv);
  pthread_mutex_unlock(&ts->mu);
  return NULL;
}

/* ---- making one ---- */

static void describe_command(server_terminal *t, const sm_run_request *q) {
  size_t used = 0;
  t->command[0] = '\0';
  for (size_t i = 0; i < q->argc && used + 1 < sizeof t->command; i++)
    used += (size_t)snprintf(t->command + used, sizeof t->command - used, "%s%s", i ? " " : "",
                             q->argv[i]);
}

static server_terminal *terminal_new(server_terminals *ts, sm_call *k, const char *worker_key,
                                     unsigned rows, unsigned cols, char *cwd) {
  server_terminal *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->cwd = cwd;
  sm_error err = SM_ERROR_INIT;
  t->ts = ts;
  t->k = k;
  t->refs = 1;
  t->rows = rows;
  t->cols = cols;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  sm_buf_init(&t->answers, ANSWERS_MAX);
  sm_server_random_hex(t->id, SERVER_TERMINAL_ID_LEN / 2);
  snprintf(t->worker_key, sizeof t->worker_key, "%s", worker_key ? worker_key : "");
  t->created_at = sm_now();
  t->last_seen = t->changed_at = sm_monotonic_ms();
  t->screen = server_screen_new(rows, cols, ts->lim.scrollback);
  if (t->screen == NULL || sm_tty_new(&t->tty, rows, cols, &err) != 0) {
    t->k = NULL; /* the caller's still */
    t->cwd = NULL;
    server_terminal_unref(t);
    return NULL;
  }
  sm_run_request *q = sm_call_request(k);
  describe_command(t, q);
  /* A terminal is a call on its tty with nothing that reaches beyond its
   * sandbox: no host-tool route, no lease, no time limit but its life. */
  q->tty = t->tty;
  q->host_route = NULL;
  q->settings.timeout_s = 0;
  q->on_output = on_output;
  q->on_output_ud = t;
  q->stdout_forward_only = 1;
  q->cancel = &t->cancel;
  q->cwd = t->cwd;
  sm_tty_on_start(t->tty, on_start, t);
  return t;
}

/* The answer of a terminal whose program never ran. */
static void refused(server_terminal *t, sm_answer *a) {
  if (t->over_cap) {
    audit(t, "terminal.refused", "the sandbox has as many terminals as the runner allows");
    sm_answer_error(a, 403, "policy",
                    "the sandbox has %u terminals already (--terminals-per-sandbox)",
                    t->ts->lim.per_sandbox);
    return;
  }
  sm_run_result r;
  memset(&r, 0, sizeof r);
  r.failure_kind = t->failure;
  const char *kind = sm_failure_kind_name(t->failure);
  int status = sm_answer_status_of(&r);
  sm_answer_error(a, status == 200 ? 503 : status, kind ? kind : "sandbox", "%s",
                  t->error[0] ? t->error : "the terminal's program did not start");
}

int server_terminal_create(server_terminals *ts, sm_call *k, const char *worker_key,
                           unsigned rows, unsigned cols, char *cwd, server_terminal **out,
                           sm_answer *a) {
  *out = NULL;
  pthread_mutex_lock(&ts->mu);
  int full = ts->n >= ts->lim.max || ts->stop;
  pthread_mutex_unlock(&ts->mu);
  server_terminal *t = full ? NULL : terminal_new(ts, k, worker_key, rows, cols, cwd);
  if (t == NULL) {
    sm_call_free(k);
    free(cwd);
    if (full) sm_answer_error(a, 503, "sandbox", "the runner has %u terminals already (--max-terminals)", ts->lim.max);
    else sm_answer_error(a, 503, "sandbox", "out of memory");
    return -1;
  }
  pthread_mutex_lock(&ts->mu);
  t->next = ts->list;
  ts->list = t;
  ts->n++;
  t->in_table = 1;
  t->refs += 2; /* the table's and the thread's (and ours) */
  ts->threads++;
  pthread_mutex_unlock(&ts->mu);
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &attr, terminal_main, t) != 0) {
    pthread_mutex_lock(&ts->mu);
    table_take(ts, t);
    ts->threads--;
    t->refs -= 2;
    pthread_mutex_unlock(&ts->mu);
    server_terminal_unref(t);
    pthread_attr_destroy(&attr);
    sm_answer_error(a, 503, "sandbox", "cannot start the terminal's thread");
    return -1;
  }
  pthread_attr_destroy(&attr);
  /* Until the program runs (or the call failed before it did). */
  double until = sm_monotonic_ms() + START_WAIT_MS;
  pthread_mutex_lock(&t->mu);
  while (t->state == T_STARTING && sm_monotonic_ms() < until) {
    struct timespec w;
    clock_gettime(CLOCK_REALTIME, &w);
    w.tv_sec += 1;
    pthread_cond_timedwait(&t->cv, &t->mu, &w);
  }
  int started = t->started;
  if (!started) t->cancel = 1;
  pthread_mutex_unlock(&t->mu);
  if (!started) {
    /* Its thread ends it; the answer says why it never ran. */
    pthread_mutex_lock(&t->mu);
    while (t->state != T_EXITED) pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
    refused(t, a);
    pthread_mutex_lock(&ts->mu);
    int was = table_take(ts, t);
    pthread_mutex_unlock(&ts->mu);
    if (was) server_terminal_unref(t);
    server_terminal_unref(t);
    return -1;
  }
  audit(t, "terminal.created", "a terminal was opened");
  *out = t;
  return 0;
}

/* ---- reading and using one ---- */

server_terminal *server_terminal_find(server_terminals *ts, const char *id, int control,
                                      const char *token) {
  server_terminal *found = NULL;
  pthread_mutex_lock(&ts->mu);
  for (server_terminal *t = ts->list; t; t = t->next)
    if (strcmp(t->id, id) == 0) found = t;
  if (found) terminal_ref(found);
  pthread_mutex_unlock(&ts->mu);
  if (found == NULL || control) return found;
  /* A worker reaches its own terminals; anything else is as missing. */
  if (found->worker_key[0] == '\0' || token == NULL ||
      !sm_server_token_ok(ts->srv, token, found->worker_key)) {
    server_terminal_unref(found);
    return NULL;
  }
  return found;
}

static const char *state_name(int state) {
  return state == T_EXITED ? "exited" : state == T_RUNNING ? "running" : "starting";
}

json_object *server_terminal_json(server_terminal *t) {
  sm_run_request *q = sm_call_request(t->k);
  json_object *o = json_object_new_object();
  pthread_mutex_lock(&t->ts->mu);
  char sandbox[SM_ENGINE_ID_MAX];
  snprintf(sandbox, sizeof sandbox, "%s", t->sandbox_id);
  pthread_mutex_unlock(&t->ts->mu);
  pthread_mutex_lock(&t->mu);
  json_object_object_add(o, "id", json_object_new_string(t->id));
  json_object_object_add(o, "state", json_object_new_string(state_name(t->state)));
  json_object_object_add(o, "exit_code", t->state == T_EXITED ? json_object_new_int(t->exit_code) : NULL);
  json_object_object_add(o, "rows", json_object_new_int((int)t->rows));
  json_object_object_add(o, "cols", json_object_new_int((int)t->cols));
  json_object_object_add(o, "clients", json_object_new_int((int)t->n_clients));
  json_object_object_add(o, "error", t->error[0] ? json_object_new_string(t->error) : NULL);
  pthread_mutex_unlock(&t->mu);
  json_object_object_add(o, "command", json_object_new_string(t->command));
  json_object_object_add(o, "mode", json_object_new_string(sm_mode_name(q->settings.mode)));
  json_object_object_add(o, "run_id", q->run_id ? json_object_new_string(q->run_id) : NULL);
  json_object_object_add(o, "worker_key", t->worker_key[0] ? json_object_new_string(t->worker_key) : NULL);
  json_object_object_add(o, "project", q->project ? json_object_new_string(q->project) : NULL);
  json_object_object_add(o, "agent", q->agent ? json_object_new_string(q->agent) : NULL);
  json_object_object_add(o, "sandbox_id", sandbox[0] ? json_object_new_string(sandbox) : NULL);
  char when[40];
  sm_format_time(t->created_at, when, sizeof when);
  json_object_object_add(o, "created_at", json_object_new_string(when));
  return o;
}

json_object *server_terminals_list(server_terminals *ts, const char *worker_key) {
  server_terminal *snap[SERVER_TERMINAL_MAX_DEFAULT * 16];
  size_t n = 0;
  pthread_mutex_lock(&ts->mu);
  for (server_terminal *t = ts->list; t && n < sizeof snap / sizeof snap[0]; t = t->next) {
    if (worker_key && strcmp(t->worker_key, worker_key) != 0) continue;
    terminal_ref(t);
    snap[n++] = t;
  }
  pthread_mutex_unlock(&ts->mu);
  json_object *arr = json_object_new_array();
  for (size_t i = 0; i < n; i++) {
    json_object_array_add(arr, server_terminal_json(snap[i]));
    server_terminal_unref(snap[i]);
  }
  json_object *o = json_object_new_object();
  json_object_object_add(o, "terminals", arr);
  return o;
}

int server_terminal_input(server_terminal *t, const void *data, size_t len, sm_error *err) {
  pthread_mutex_lock(&t->mu);
  int exited = t->state == T_EXITED;
  t->last_seen = sm_monotonic_ms();
  pthread_mutex_unlock(&t->mu);
  if (exited) return sm_error_set(err, SM_ECONFLICT, "the terminal's program has ended");
  return sm_tty_write(t->tty, data, len, err);
}

int server_terminal_resize(server_terminal *t, unsigned rows, unsigned cols, sm_error *err) {
  int rc = sm_tty_resize(t->tty, rows, cols, err);
  if (rc) return rc;
  char msg[96];
  snprintf(msg, sizeof msg, "{\"type\":\"resize\",\"rows\":%u,\"cols\":%u}", rows, cols);
  pthread_mutex_lock(&t->mu);
  t->rows = rows;
  t->cols = cols;
  t->last_seen = sm_monotonic_ms();
  server_screen_resize(t->screen, rows, cols);
  for (size_t i = 0; i < t->n_clients; i++) server_ws_send(t->clients[i], SERVER_WS_TEXT, msg, strlen(msg));
  pthread_mutex_unlock(&t->mu);
  return 0;
}

json_object *server_terminal_screen_json(server_terminal *t, size_t scrollback) {
  pthread_mutex_lock(&t->mu);
  t->last_seen = sm_monotonic_ms();
  json_object *o = server_screen_json(t->screen, scrollback);
  json_object_object_add(o, "id", json_object_new_string(t->id));
  json_object_object_add(o, "state", json_object_new_string(state_name(t->state)));
  json_object_object_add(o, "exit_code", t->state == T_EXITED ? json_object_new_int(t->exit_code) : NULL);
  pthread_mutex_unlock(&t->mu);
  return o;
}

int server_terminal_screen_text(server_terminal *t, sm_buf *out) {
  pthread_mutex_lock(&t->mu);
  t->last_seen = sm_monotonic_ms();
  int rc = server_screen_text(t->screen, out);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void server_terminal_settle(server_terminal *t, int quiet_ms, int wait_ms) {
  double until = sm_monotonic_ms() + wait_ms;
  pthread_mutex_lock(&t->mu);
  for (;;) {
    double now = sm_monotonic_ms();
    double quiet_until = t->changed_at + quiet_ms;
    if (now >= until || (now >= quiet_until) || t->state == T_EXITED) break;
    double next = quiet_until < until ? quiet_until : until;
    struct timespec w;
    clock_gettime(CLOCK_REALTIME, &w);
    long long ns = w.tv_nsec + (long long)((next - now) * 1e6);
    w.tv_sec += ns / 1000000000;
    w.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&t->cv, &t->mu, &w);
  }
  pthread_mutex_unlock(&t->mu);
}

json_object *server_terminal_kill(server_terminals *ts, server_terminal *t, double wait_s) {
  double until = sm_monotonic_ms() + wait_s * 1000.0;
  pthread_mutex_lock(&t->mu);
  t->cancel = 1;
  while (t->state != T_EXITED && sm_monotonic_ms() < until) {
    struct timespec w;
    clock_gettime(CLOCK_REALTIME, &w);
    w.tv_sec += 1;
    pthread_cond_timedwait(&t->cv, &t->mu, &w);
  }
  pthread_mutex_unlock(&t->mu);
  pthread_mutex_lock(&ts->mu);
  int was = table_take(ts, t);
  pthread_mutex_unlock(&ts->mu);
  json_object *o = server_terminal_json(t);
  if (was) server_terminal_unref(t);
  return o;
}

/* ---- the table's life ---- */

/* Under ts->mu: what the grace time ends. Ended terminals whose time is
 * up are moved to *drop (their table references). */
static void janitor_round(server_terminals *ts, server_terminal **drop) {
  double now = sm_monotonic_ms(), grace = ts->lim.grace_s * 1000.0;
  server_terminal **pp = &ts->list;
  while (*pp) {
    server_terminal *t = *pp;
    pthread_mutex_lock(&t->mu);
    int idle = t->n_clients == 0 && now - t->last_seen >= grace;
    if (idle && t->state != T_EXITED && !t->expired) {
      t->expired = 1;
      t->cancel = 1;
      sm_log(SM_LOG_INFO, "terminal %.8s...: no client for %.0f s: ended", t->id, ts->lim.grace_s);
    }
    int gone = t->state == T_EXITED && (t->expired || idle);
    pthread_mutex_unlock(&t->mu);
    if (gone) {
      *pp = t->next;
      t->in_table = 0;
      ts->n--;
      t->next = *drop;
      *drop = t;
      continue;
    }
    pp = &t->next;
  }
}

static void *janitor_main(void *arg) {
  server_terminals *ts = arg;
  pthread_mutex_lock(&ts->mu);
  while (!ts->stop) {
    server_terminal *drop = NULL;
    janitor_round(ts, &drop);
    pthread_mutex_unlock(&ts->mu);
    while (drop) {
      server_terminal *next = drop->next;
      server_terminal_unref(drop);
      drop = next;
    }
    pthread_mutex_lock(&ts->mu);
    if (ts->stop) break;
    struct timespec w;
    clock_gettime(CLOCK_REALTIME, &w);
    w.tv_sec += JANITOR_MS / 1000;
    pthread_cond_timedwait(&ts->cv, &ts->mu, &w);
  }
  pthread_mutex_unlock(&ts->mu);
  return NULL;
}

server_terminals *server_terminals_new(sm_server *srv, const server_terminal_limits *limits) {
  server_terminals *ts = calloc(1, sizeof *ts);
  if (ts == NULL) return NULL;
  ts->srv = srv;
  if (limits) ts->lim = *limits;
  if (ts->lim.grace_s <= 0) ts->lim.grace_s = SERVER_TERMINAL_GRACE_DEFAULT;
  if (ts->lim.per_sandbox == 0) ts->lim.per_sandbox = SERVER_TERMINAL_PER_SANDBOX_DEFAULT;
  if (ts->lim.max == 0) ts->lim.max = SERVER_TERMINAL_MAX_DEFAULT;
  if (ts->lim.max > SERVER_TERMINAL_MAX_DEFAULT * 16) ts->lim.max = SERVER_TERMINAL_MAX_DEFAULT * 16;
  if (ts->lim.scrollback == 0) ts->lim.scrollback = SERVER_TERMINAL_SCROLLBACK_DEFAULT;
  pthread_mutex_init(&ts->mu, NULL);
  pthread_cond_init(&ts->cv, NULL);
  if (pthread_create(&ts->janitor, NULL, janitor_main, ts) == 0) ts->has_janitor = 1;
  return ts;
}

void server_terminals_stop(server_terminals *ts) {
  if (ts == NULL) return;
  pthread_mutex_lock(&ts->mu);
  ts->stop = 1;
  for (server_terminal *t = ts->list; t; t = t->next) t->cancel = 1;
  pthread_cond_broadcast(&ts->cv);
  while (ts->threads > 0) pthread_cond_wait(&ts->cv, &ts->mu);
  pthread_mutex_unlock(&ts->mu);
  if (ts->has_janitor) pthread_join(ts->janitor, NULL);
  ts->has_janitor = 0;
}

void server_terminals_free(server_terminals *ts) {
  if (ts == NULL) return;
  server_terminals_stop(ts);
  while (ts->list) {
    server_terminal *t = ts->list;
    ts->list = t->next;
    server_terminal_unref(t);
  }
  pthread_mutex_destroy(&ts->mu);
  pthread_cond_destroy(&ts->cv);
  free(ts);
}

/* ---- a WebSocket client ---- */

static void ws_open(void *ud, server_ws_conn *c) {
  server_terminal *t = ud;
  sm_buf redraw;
  sm_buf_init(&redraw, (size_t)64 << 20);
  char hello[160];
  pthread_mutex_lock(&t->mu);
  if (t->n_clients >= SERVER_TERMINAL_CLIENTS_MAX) {
    pthread_mutex_unlock(&t->mu);
    sm_buf_dispose(&redraw);
    server_ws_close(c, SERVER_WS_POLICY, "too many clients on this terminal");
    return;
  }
  server_ws_conn_ref(c);
  t->clients[t->n_clients++] = c;
  t->last_seen = sm_monotonic_ms();
  snprintf(hello, sizeof hello, "{\"type\":\"attached\",\"id\":\"%s\",\"rows\":%u,\"cols\":%u,\"state\":\"%s\"}",
           t->id, t->rows, t->cols, state_name(t->state));
  server_ws_send(c, SERVER_WS_TEXT, hello, strlen(hello));
  /* The screen as it is, then (under the same lock) what follows. */
  if (server_screen_redraw(t->screen, &redraw) == 0 && redraw.len)
    server_ws_send(c, SERVER_WS_BINARY, redraw.data, redraw.len);
  if (t->state == T_EXITED) {
    char msg[64];
    exit_message(t, msg, sizeof msg);
    server_ws_send(c, SERVER_WS_TEXT, msg, strlen(msg));
    server_ws_close(c, SERVER_WS_NORMAL, "the terminal's program ended");
  }
  pthread_mutex_unlock(&t->mu);
  sm_buf_dispose(&redraw);
  audit(t, "terminal.attached", "a client attached to the terminal");
}

/* {"type": "resize", "rows": R, "cols": C}; other types are ignored. */
static int ws_control(server_terminal *t, const unsigned char *data, size_t len) {
  json_object *o = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_server_json_object((const char *)data, len, &o, &err) != 0) return SERVER_WS_POLICY;
  json_object *type = NULL, *r = NULL, *c = NULL;
  int rc = 0;
  if (json_object_object_get_ex(o, "type", &type) &&
      strcmp(json_object_get_string(type), "resize") == 0) {
    if (!json_object_object_get_ex(o, "rows", &r) || !json_object_object_get_ex(o, "cols", &c) ||
        !json_object_is_type(r, json_type_int) || !json_object_is_type(c, json_type_int) ||
        json_object_get_int64(r) < 1 || json_object_get_int64(c) < 1 ||
        json_object_get_int64(r) > SM_TTY_DIM_MAX || json_object_get_int64(c) > SM_TTY_DIM_MAX ||
        server_terminal_resize(t, (unsigned)json_object_get_int64(r),
                               (unsigned)json_object_get_int64(c), &err) != 0)
      rc = SERVER_WS_POLICY;
  }
  json_object_put(o);
  return rc;
}

static int ws_message(void *ud, server_ws_conn *c, int opcode, const unsigned char *data,
                      size_t len) {
  server_terminal *t = ud;
  (void)c;
  if (opcode == SERVER_WS_TEXT) return ws_control(t, data, len);
  sm_error err = SM_ERROR_INIT;
  int rc = server_terminal_input(t, data, len, &err);
  return rc == SM_EBUSY ? SERVER_WS_POLICY : 0;
}

static void ws_close(void *ud, server_ws_conn *c, int code) {
  server_terminal *t = ud;
  (void)code;
  int was = 0;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < t->n_clients; i++) {
    if (t->clients[i] != c) continue;
    t->clients[i] = t->clients[--t->n_clients];
    was = 1;
    break;
  }
  t->last_seen = sm_monotonic_ms();
  pthread_mutex_unlock(&t->mu);
  if (was) server_ws_conn_unref(c);
  server_terminal_unref(t);
}

static void ws_discard(void *ud) { server_terminal_unref(ud); }

void server_terminal_ws_handler(server_terminal *t, server_ws_handler *out) {
  terminal_ref(t);
  *out = (server_ws_handler){.on_open = ws_open, .on_message = ws_message, .on_close = ws_close,
                             .discard = ws_discard, .ud = t};
}
