/* The runner's terminals (terminal.h).
 *
 * Each terminal is a call (server_call: checked, resolved and audited as any)
 * running on a pseudo-terminal (terminal_run.h, on a thread of its own);
 * its output goes to every attached client under the terminal's lock, the
 * lock a client is added under with the screen's redraw, so a client that
 * attaches gets the screen and then exactly what follows. A janitor thread
 * ends terminals nobody has used for the grace time and forgets ended ones
 * as long after.
 *
 * Locks: the table's (ts->mu) before a terminal's (terminal_run_lock),
 * never the other way; a WebSocket connection's own lock is taken under
 * the terminal's (sends). */
#include "server/terminal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/log.h>
#include <sandman/terminal.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "terminal/terminal_run.h"

#define START_WAIT_MS 300000.0 /* for the sandbox and the program to start */
#define JANITOR_MS 1000

struct server_terminal {
  server_terminals *ts;
  server_terminal *next; /* under ts->mu */
  int in_table;          /* under ts->mu */
  int counted;           /* under ts->mu: counts in its sandbox's terminals while it runs */
  int over_cap;          /* under ts->mu */
  char sandbox_id[SM_ENGINE_ID_MAX]; /* under ts->mu once counted */
  char id[SERVER_TERMINAL_ID_LEN + 1];
  char worker_key[SM_SERVER_KEY_MAX + 1];
  char command[256];
  char *cwd;
  double created_at;
  int refs; /* atomic */
  server_call *k;
  terminal_run *run;
  /* under the terminal's lock (terminal_run_lock) */
  server_ws_conn *clients[SERVER_TERMINAL_CLIENTS_MAX];
  size_t n_clients;
  int started;
  int expired;      /* the grace time ended it */
  double last_seen; /* monotonic ms: a client's last sign */
};

struct server_terminals {
  sm_server *srv;
  server_terminal_limits lim;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  server_terminal *list;
  size_t n;
  int stop;
  pthread_t janitor;
  int has_janitor;
};

/* ---- references ---- */

static void terminal_ref(server_terminal *t) { __atomic_add_fetch(&t->refs, 1, __ATOMIC_SEQ_CST); }

void server_terminal_unref(server_terminal *t) {
  if (t == NULL || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_SEQ_CST) != 0) return;
  /* Nothing of the terminal runs after this (its thread is waited for). */
  terminal_run_free(t->run);
  server_call_free(t->k);
  free(t->cwd);
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
  sm_run_request *q = server_call_request(t->k);
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
  server_audit(t->ts->srv, &ev);
  json_object_put(d);
}

/* ---- the hooks (on the terminal's thread) ---- */

static void hook_run(void *ud, const sm_run_request *req, sm_run_result *res) {
  server_terminal *t = ud;
  (void)req;
  server_call_run(t->k, res);
}

/* Under the lock: every client gets the output; they answer the
 * program's questions themselves when there are any. */
static int hook_output(void *ud, const char *data, size_t len, const common_buf *answers) {
  server_terminal *t = ud;
  (void)answers;
  for (size_t i = 0; i < t->n_clients; i++)
    server_ws_send(t->clients[i], SERVER_WS_BINARY, data, len);
  return t->n_clients > 0;
}

/* The program started in sandbox_id: it counts there, unless the sandbox
 * has its share already, and then it is ended at once. */
static int hook_started(void *ud, const char *sandbox_id) {
  server_terminal *t = ud;
  server_terminals *ts = t->ts;
  pthread_mutex_lock(&ts->mu);
  unsigned same = 0;
  for (server_terminal *o = ts->list; o; o = o->next)
    same += o != t && o->counted && o->run && strcmp(o->sandbox_id, sandbox_id) == 0 &&
            terminal_run_state(o->run, NULL, NULL, NULL, 0) != TERMINAL_EXITED;
  t->over_cap = same >= ts->lim.per_sandbox;
  if (!t->over_cap) {
    t->counted = 1;
    snprintf(t->sandbox_id, sizeof t->sandbox_id, "%s", sandbox_id);
  }
  int over = t->over_cap;
  pthread_mutex_unlock(&ts->mu);
  return over;
}

static void exit_message(int code, char *buf, size_t len) {
  snprintf(buf, len, "{\"type\":\"exit\",\"exit_code\":%d}", code);
}

/* Under the lock: the program ended; clients are told and let go. */
static void hook_ended(void *ud, const sm_run_result *res) {
  server_terminal *t = ud;
  t->last_seen = sm_monotonic_ms();
  char msg[64];
  exit_message(res->exit_code, msg, sizeof msg);
  for (size_t i = 0; i < t->n_clients; i++) {
    server_ws_send(t->clients[i], SERVER_WS_TEXT, msg, strlen(msg));
    server_ws_close(t->clients[i], SERVER_WS_NORMAL, "the terminal's program ended");
  }
  sm_log(SM_LOG_INFO, "terminal %.8s...: ended (exit %d%s%s)", t->id, res->exit_code,
         res->error[0] ? ": " : "", res->error);
}

/* ---- making one ---- */

static void describe_command(server_terminal *t, const sm_run_request *q) {
  size_t used = 0;
  t->command[0] = '\0';
  for (size_t i = 0; i < q->argc && used + 1 < sizeof t->command; i++)
    used += (size_t)snprintf(t->command + used, sizeof t->command - used, "%s%s", i ? " " : "",
                             q->argv[i]);
}

/* The answer of a terminal whose program never ran. */
static void refused(server_terminal *t, server_answer *a) {
  pthread_mutex_lock(&t->ts->mu);
  int over = t->over_cap;
  pthread_mutex_unlock(&t->ts->mu);
  if (over) {
    audit(t, "terminal.refused", "the sandbox has as many terminals as the runner allows");
    server_answer_error(a, 403, "policy",
                        "the sandbox has %u terminals already (--terminals-per-sandbox)",
                        t->ts->lim.per_sandbox);
    return;
  }
  sm_run_result r;
  memset(&r, 0, sizeof r);
  char error[512];
  terminal_run_state(t->run, NULL, &r.failure_kind, error, sizeof error);
  const char *kind = sm_failure_kind_name(r.failure_kind);
  int status = server_answer_status_of(&r);
  server_answer_error(a, status == 200 ? 503 : status, kind ? kind : "sandbox", "%s",
                      error[0] ? error : "the terminal's program did not start");
}

/* Into the table, if there is room. */
static int table_add(server_terminals *ts, server_terminal *t) {
  pthread_mutex_lock(&ts->mu);
  int ok = ts->n < ts->lim.max && !ts->stop;
  if (ok) {
    t->next = ts->list;
    ts->list = t;
    ts->n++;
    t->in_table = 1;
  }
  pthread_mutex_unlock(&ts->mu);
  return ok;
}

int server_terminal_create(server_terminals *ts, server_call *k, const char *worker_key,
                           unsigned rows, unsigned cols, char *cwd, server_terminal **out,
                           server_answer *a) {
  *out = NULL;
  server_terminal *t = calloc(1, sizeof *t);
  if (t == NULL) {
    server_call_free(k);
    free(cwd);
    server_answer_error(a, 503, "sandbox", "out of memory");
    return -1;
  }
  t->ts = ts;
  t->k = k;
  t->cwd = cwd;
  t->refs = 2; /* the table's and ours */
  server_random_hex(t->id, SERVER_TERMINAL_ID_LEN / 2);
  snprintf(t->worker_key, sizeof t->worker_key, "%s", worker_key ? worker_key : "");
  t->created_at = sm_now();
  t->last_seen = sm_monotonic_ms();
  sm_run_request *q = server_call_request(k);
  describe_command(t, q);
  q->cwd = t->cwd;
  if (!table_add(ts, t)) {
    t->refs = 1;
    server_terminal_unref(t);
    server_answer_error(a, 503, "sandbox", "the runner has %u terminals already (--max-terminals)",
                        ts->lim.max);
    return -1;
  }
  terminal_run_hooks hooks = {hook_run, hook_output, hook_started, hook_ended, t};
  sm_error err = SM_ERROR_INIT;
  terminal_run *run = terminal_run_start(q, rows, cols, ts->lim.scrollback, &hooks, &err);
  /* Seen by the table's readers from now on (they skip it before). */
  pthread_mutex_lock(&ts->mu);
  t->run = run;
  pthread_mutex_unlock(&ts->mu);
  int started = t->run && terminal_run_wait_started(t->run, START_WAIT_MS);
  if (t->run && !started) {
    /* Its thread ends it; the answer says why it never ran. */
    terminal_run_cancel(t->run);
    terminal_run_wait_ended(t->run, START_WAIT_MS);
    refused(t, a);
  } else if (!started) {
    server_answer_error(a, 503, "sandbox", "%s", err.message);
  }
  if (!started) {
    pthread_mutex_lock(&ts->mu);
    int was = table_take(ts, t);
    pthread_mutex_unlock(&ts->mu);
    if (was) server_terminal_unref(t);
    server_terminal_unref(t);
    return -1;
  }
  terminal_run_lock(t->run);
  t->started = 1;
  terminal_run_unlock(t->run);
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
    if (t->run && strcmp(t->id, id) == 0) found = t;
  if (found) terminal_ref(found);
  pthread_mutex_unlock(&ts->mu);
  if (found == NULL || control) return found;
  /* A worker reaches its own terminals; anything else is as missing. */
  if (found->worker_key[0] == '\0' || token == NULL ||
      !server_token_ok(ts->srv, token, found->worker_key)) {
    server_terminal_unref(found);
    return NULL;
  }
  return found;
}

static const char *state_name(terminal_state s) {
  return s == TERMINAL_EXITED ? "exited" : s == TERMINAL_RUNNING ? "running" : "starting";
}

/* Its state, size and clients: one snapshot under its lock. */
static void add_state(server_terminal *t, json_object *o) {
  char error[512] = "";
  int code = 0;
  sm_failure_kind failure;
  terminal_state st = terminal_run_state(t->run, &code, &failure, error, sizeof error);
  unsigned rows, cols;
  terminal_run_size(t->run, &rows, &cols);
  terminal_run_lock(t->run);
  size_t clients = t->n_clients;
  terminal_run_unlock(t->run);
  json_object_object_add(o, "state", json_object_new_string(state_name(st)));
  json_object_object_add(o, "exit_code", st == TERMINAL_EXITED ? json_object_new_int(code) : NULL);
  json_object_object_add(o, "rows", json_object_new_int((int)rows));
  json_object_object_add(o, "cols", json_object_new_int((int)cols));
  json_object_object_add(o, "clients", json_object_new_int((int)clients));
  json_object_object_add(o, "error", error[0] ? json_object_new_string(error) : NULL);
}

json_object *server_terminal_json(server_terminal *t) {
  sm_run_request *q = server_call_request(t->k);
  json_object *o = json_object_new_object();
  pthread_mutex_lock(&t->ts->mu);
  char sandbox[SM_ENGINE_ID_MAX];
  snprintf(sandbox, sizeof sandbox, "%s", t->sandbox_id);
  pthread_mutex_unlock(&t->ts->mu);
  json_object_object_add(o, "id", json_object_new_string(t->id));
  add_state(t, o);
  json_object_object_add(o, "command", json_object_new_string(t->command));
  json_object_object_add(o, "mode", json_object_new_string(sm_mode_name(q->settings.mode)));
  json_object_object_add(o, "run_id", q->run_id ? json_object_new_string(q->run_id) : NULL);
  json_object_object_add(o, "worker_key",
                         t->worker_key[0] ? json_object_new_string(t->worker_key) : NULL);
  json_object_object_add(o, "project", q->project ? json_object_new_string(q->project) : NULL);
  json_object_object_add(o, "agent", q->agent ? json_object_new_string(q->agent) : NULL);
  json_object_object_add(o, "sandbox_id", sandbox[0] ? json_object_new_string(sandbox) : NULL);
  char when[40];
  sm_format_time(t->created_at, when, sizeof when);
  json_object_object_add(o, "created_at", json_object_new_string(when));
  return o;
}

json_object *server_terminals_list(server_terminals *ts, const char *worker_key) {
  server_terminal **snap = calloc(ts->lim.max + 1, sizeof *snap);
  size_t n = 0;
  pthread_mutex_lock(&ts->mu);
  for (server_terminal *t = ts->list; snap && t && n < ts->lim.max; t = t->next) {
    if (t->run == NULL || (worker_key && strcmp(t->worker_key, worker_key) != 0)) continue;
    terminal_ref(t);
    snap[n++] = t;
  }
  pthread_mutex_unlock(&ts->mu);
  json_object *arr = json_object_new_array();
  for (size_t i = 0; i < n; i++) {
    json_object_array_add(arr, server_terminal_json(snap[i]));
    server_terminal_unref(snap[i]);
  }
  free(snap);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "terminals", arr);
  return o;
}

/* A client's sign of life (the grace time counts from the last). */
static void seen(server_terminal *t) {
  terminal_run_lock(t->run);
  t->last_seen = sm_monotonic_ms();
  terminal_run_unlock(t->run);
}

int server_terminal_input(server_terminal *t, const void *data, size_t len, sm_error *err) {
  seen(t);
  return terminal_run_input(t->run, data, len, err);
}

int server_terminal_resize(server_terminal *t, unsigned rows, unsigned cols, sm_error *err) {
  int rc = terminal_run_resize(t->run, rows, cols, err);
  if (rc) return rc;
  char msg[96];
  snprintf(msg, sizeof msg, "{\"type\":\"resize\",\"rows\":%u,\"cols\":%u}", rows, cols);
  terminal_run_lock(t->run);
  t->last_seen = sm_monotonic_ms();
  for (size_t i = 0; i < t->n_clients; i++)
    server_ws_send(t->clients[i], SERVER_WS_TEXT, msg, strlen(msg));
  terminal_run_unlock(t->run);
  return 0;
}

json_object *server_terminal_screen_json(server_terminal *t, size_t scrollback) {
  seen(t);
  json_object *o = terminal_run_screen_json(t->run, scrollback);
  json_object_object_add(o, "id", json_object_new_string(t->id));
  int code = 0;
  terminal_state st = terminal_run_state(t->run, &code, NULL, NULL, 0);
  json_object_object_add(o, "state", json_object_new_string(state_name(st)));
  json_object_object_add(o, "exit_code", st == TERMINAL_EXITED ? json_object_new_int(code) : NULL);
  return o;
}

int server_terminal_screen_text(server_terminal *t, common_buf *out) {
  seen(t);
  return terminal_run_screen_text(t->run, out);
}

void server_terminal_settle(server_terminal *t, int quiet_ms, int wait_ms) {
  terminal_run_settle(t->run, quiet_ms, wait_ms, 0);
}

json_object *server_terminal_kill(server_terminals *ts, server_terminal *t, double wait_s) {
  terminal_run_cancel(t->run);
  terminal_run_wait_ended(t->run, wait_s * 1000.0);
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
    if (t->run == NULL) {
      pp = &t->next;
      continue;
    }
    terminal_run_lock(t->run);
    int idle = t->n_clients == 0 && now - t->last_seen >= grace;
    int ended = terminal_run_state_locked(t->run, NULL) == TERMINAL_EXITED;
    int expire = idle && !ended && !t->expired;
    if (expire) t->expired = 1;
    int gone = ended && (t->expired || idle);
    terminal_run_unlock(t->run);
    if (expire) {
      sm_log(SM_LOG_INFO, "terminal %.8s...: no client for %.0f s: ended", t->id, ts->lim.grace_s);
      terminal_run_cancel(t->run);
    }
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
  if (ts->lim.max > SERVER_TERMINAL_MAX_LIMIT) ts->lim.max = SERVER_TERMINAL_MAX_LIMIT;
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
  server_terminal *all = ts->list;
  ts->list = NULL;
  ts->n = 0;
  pthread_cond_broadcast(&ts->cv);
  pthread_mutex_unlock(&ts->mu);
  if (ts->has_janitor) pthread_join(ts->janitor, NULL);
  ts->has_janitor = 0;
  /* Each program is ended and waited for as its last reference goes;
   * clients still attached hold theirs until their connections close. */
  for (server_terminal *t = all; t; t = t->next)
    if (t->run) terminal_run_cancel(t->run);
  while (all) {
    server_terminal *next = all->next;
    all->in_table = 0;
    if (all->run) terminal_run_wait_ended(all->run, 60000.0);
    server_terminal_unref(all);
    all = next;
  }
}

void server_terminals_free(server_terminals *ts) {
  if (ts == NULL) return;
  server_terminals_stop(ts);
  pthread_mutex_destroy(&ts->mu);
  pthread_cond_destroy(&ts->cv);
  free(ts);
}

/* ---- a WebSocket client ---- */

static void ws_open(void *ud, server_ws_conn *c) {
  server_terminal *t = ud;
  cleanup_buf common_buf redraw;
  common_buf_init(&redraw, (size_t)64 << 20);
  char hello[160];
  unsigned rows, cols;
  terminal_run_size(t->run, &rows, &cols);
  terminal_run_lock(t->run);
  if (t->n_clients >= SERVER_TERMINAL_CLIENTS_MAX) {
    terminal_run_unlock(t->run);
    server_ws_close(c, SERVER_WS_POLICY, "too many clients on this terminal");
    return;
  }
  server_ws_conn_ref(c);
  t->clients[t->n_clients++] = c;
  t->last_seen = sm_monotonic_ms();
  int code = 0;
  terminal_state st = terminal_run_state_locked(t->run, &code);
  snprintf(hello, sizeof hello,
           "{\"type\":\"attached\",\"id\":\"%s\",\"rows\":%u,\"cols\":%u,\"state\":\"%s\"}", t->id,
           rows, cols, state_name(st));
  server_ws_send(c, SERVER_WS_TEXT, hello, strlen(hello));
  /* The screen as it is, then (under the same lock) what follows. */
  if (terminal_run_redraw_locked(t->run, &redraw) == 0 && redraw.len)
    server_ws_send(c, SERVER_WS_BINARY, redraw.data, redraw.len);
  if (st == TERMINAL_EXITED) {
    char msg[64];
    exit_message(code, msg, sizeof msg);
    server_ws_send(c, SERVER_WS_TEXT, msg, strlen(msg));
    server_ws_close(c, SERVER_WS_NORMAL, "the terminal's program ended");
  }
  terminal_run_unlock(t->run);
  audit(t, "terminal.attached", "a client attached to the terminal");
}

/* {"type": "resize", "rows": R, "cols": C}; other types are ignored. */
static int ws_control(server_terminal *t, const unsigned char *data, size_t len) {
  json_object *o = NULL;
  sm_error err = SM_ERROR_INIT;
  if (server_json_object((const char *)data, len, &o, &err) != 0) return SERVER_WS_POLICY;
  json_object *type = NULL, *r = NULL, *c = NULL;
  int rc = 0;
  if (json_object_object_get_ex(o, "type", &type) && json_object_is_type(type, json_type_string) &&
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
  terminal_run_lock(t->run);
  for (size_t i = 0; i < t->n_clients; i++) {
    if (t->clients[i] != c) continue;
    t->clients[i] = t->clients[--t->n_clients];
    was = 1;
    break;
  }
  t->last_seen = sm_monotonic_ms();
  terminal_run_unlock(t->run);
  if (was) server_ws_conn_unref(c);
  server_terminal_unref(t);
}

static void ws_discard(void *ud) { server_terminal_unref(ud); }

void server_terminal_ws_handler(server_terminal *t, server_ws_handler *out) {
  terminal_ref(t);
  *out = (server_ws_handler){.on_open = ws_open,
                             .on_message = ws_message,
                             .on_close = ws_close,
                             .discard = ws_discard,
                             .ud = t};
}
