/* The terminals' routes (terminal_route.h, docs/terminals.md):
 *
 *   POST   /v1/terminals               create: {"sandbox_id" | "run_id" | "worker_key", "mode", "project",
 *                                      "agent", "user", "argv" | "command", "env", "cwd",
 *                                      "rows", "cols", "network"}
 *   GET    /v1/terminals[?worker_key=K]  list
 *   GET    /v1/terminals/ID            its state; with a WebSocket handshake: attach
 *   GET    /v1/terminals/ID/screen     visible text and cursor (?format=text,
 *                                      ?scrollback=N, ?wait_ms=W&quiet_ms=Q)
 *   POST   /v1/terminals/ID/input      the body is typed
 *   POST   /v1/terminals/ID/resize     {"rows", "cols"}
 *   DELETE /v1/terminals/ID            kill
 *
 * A terminal is made through execute's own checks (server_call_prepare: the
 * token against the body's worker_key, the tool policy for the tool
 * "terminal", the principal), so a worker token reaches only its own
 * sandboxes; one that names a terminal of another worker gets the answer
 * of a missing one. */
#include "common/cleanup.h"
#include "server/terminal_route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sandman/log.h>
#include <sandman/terminal.h>
#include <sandman/util.h>

#include "server/server_call.h"
#include "server/terminal.h"

#define DEFAULT_ROWS 24
#define DEFAULT_COLS 80
#define DEFAULT_TERM "TERM=xterm-256color"
#define SCREEN_WAIT_MAX_MS 30000
#define SCREEN_QUIET_MAX_MS 5000
#define SCROLLBACK_MAX_LINES 100000
#define KILL_WAIT_S 30.0

typedef enum { OP_CREATE, OP_LIST, OP_GET, OP_SCREEN, OP_INPUT, OP_RESIZE, OP_DELETE } term_op;

struct server_terminal_req {
  sm_server *srv;
  term_op op;
  int control;
  char *token;
  server_terminal *t; /* the terminal of an id route */
  char *list_worker;  /* GET /v1/terminals?worker_key= */
  int text;           /* the screen as text/plain */
  int64_t scrollback, wait_ms, quiet_ms;
  char *body;
  size_t body_len;
  server_stream *stream;
};

int server_terminal_route_match(const char *url) {
  return strcmp(url, "/v1/terminals") == 0 || strncmp(url, "/v1/terminals/", 14) == 0;
}

void server_terminal_req_free(server_terminal_req *r) {
  if (r == NULL) return;
  if (r->token) {
    memset(r->token, 0, strlen(r->token));
    free(r->token);
  }
  server_terminal_unref(r->t);
  free(r->list_worker);
  free(r->body);
  server_stream_unref(r->stream);
  free(r);
}

/* ---- the route and its query ---- */

/* The op of url and method: 0, or 404 (no such route) or 405 (*allow). */
static int route_op(const char *url, const char *method, char *id, const char **allow,
                    term_op *op) {
  int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  int post = strcmp(method, "POST") == 0, del = strcmp(method, "DELETE") == 0;
  if (strcmp(url, "/v1/terminals") == 0) {
    *allow = "GET, POST";
    *op = get ? OP_LIST : OP_CREATE;
    return get || post ? 0 : 405;
  }
  const char *rest = url + 14, *slash = strchr(rest, '/');
  size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
  if (n != SERVER_TERMINAL_ID_LEN || strspn(rest, "0123456789abcdef") < n) return 404;
  memcpy(id, rest, n);
  id[n] = '\0';
  const char *sub = slash ? slash + 1 : "";
  if (*sub == '\0') {
    *allow = "GET, DELETE";
    *op = get ? OP_GET : OP_DELETE;
    return get || del ? 0 : 405;
  }
  if (strcmp(sub, "screen") == 0) return *allow = "GET", *op = OP_SCREEN, get ? 0 : 405;
  if (strcmp(sub, "input") == 0) return *allow = "POST", *op = OP_INPUT, post ? 0 : 405;
  if (strcmp(sub, "resize") == 0) return *allow = "POST", *op = OP_RESIZE, post ? 0 : 405;
  return 404;
}

typedef struct query_walk {
  server_terminal_req *r;
  char bad[96];
} query_walk;

static enum MHD_Result on_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                              const char *value) {
  query_walk *w = cls;
  server_terminal_req *r = w->r;
  (void)kind;
  const char *v = value ? value : "";
  int rc = 0;
  if (r->op == OP_LIST && strcmp(key, "worker_key") == 0) {
    free(r->list_worker);
    r->list_worker = server_name_valid(v, SM_SERVER_KEY_MAX) ? strdup(v) : NULL;
    rc = r->list_worker ? 0 : -1;
  } else if (r->op == OP_SCREEN && strcmp(key, "format") == 0) {
    rc = strcmp(v, "text") == 0 ? (r->text = 1, 0) : strcmp(v, "json") == 0 ? 0 : -1;
  } else if (r->op == OP_SCREEN && strcmp(key, "scrollback") == 0) {
    rc = sm_parse_int(v, 0, SCROLLBACK_MAX_LINES, &r->scrollback, NULL);
  } else if (r->op == OP_SCREEN && strcmp(key, "wait_ms") == 0) {
    rc = sm_parse_int(v, 0, SCREEN_WAIT_MAX_MS, &r->wait_ms, NULL);
  } else if (r->op == OP_SCREEN && strcmp(key, "quiet_ms") == 0) {
    rc = sm_parse_int(v, 1, SCREEN_QUIET_MAX_MS, &r->quiet_ms, NULL);
  } else {
    snprintf(w->bad, sizeof w->bad, "unknown query parameter '%.40s'", key);
    return MHD_NO;
  }
  if (rc != 0) {
    snprintf(w->bad, sizeof w->bad, "bad query parameter '%.40s'", key);
    return MHD_NO;
  }
  return MHD_YES;
}

/* Who may see what, before anything else is told: a terminal of an id
 * route (missing and another worker's alike: 404), the worker of a list. */
static int check_access(server_terminal_req *r, server_terminals *ts, const char *id,
                        server_answer *a) {
  if (r->op == OP_CREATE) return 0; /* the body's worker_key: server_call_prepare */
  if (r->op == OP_LIST) {
    if (r->control) return 0;
    if (r->list_worker && server_token_ok(r->srv, r->token, r->list_worker)) return 0;
    server_refuse_token(r->srv, "terminals", a);
    return -1;
  }
  r->t = ts ? server_terminal_find(ts, id, r->control, r->token) : NULL;
  if (r->t == NULL) {
    server_answer_error(a, 404, "policy", "no such terminal");
    return -1;
  }
  return 0;
}

server_terminal_req *server_terminal_req_new(sm_server *srv, struct MHD_Connection *conn,
                                             const char *url, const char *method, int control,
                                             const char *token, const char **allow,
                                             server_answer *a) {
  char id[SERVER_TERMINAL_ID_LEN + 1] = "";
  term_op op = OP_LIST;
  int status = route_op(url, method, id, allow, &op);
  if (status == 404) server_answer_error(a, 404, "policy", "no such route");
  if (status == 405) server_answer_error(a, 405, "policy", "method not allowed");
  if (status) return NULL;
  server_terminal_req *r = calloc(1, sizeof *r);
  if (r == NULL || (token && (r->token = strdup(token)) == NULL)) {
    free(r);
    server_answer_error(a, 503, "sandbox", "out of memory");
    return NULL;
  }
  r->srv = srv;
  r->op = op;
  r->control = control;
  r->quiet_ms = 100;
  query_walk w = {r, {0}};
  MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, on_arg, &w);
  if (check_access(r, srv->terminals, id, a) != 0) {
    server_terminal_req_free(r);
    return NULL;
  }
  if (w.bad[0]) {
    server_answer_error(a, 400, "policy", "%s", w.bad);
    server_terminal_req_free(r);
    return NULL;
  }
  if (op == OP_SCREEN) {
    const char *acc = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
    if (acc && strstr(acc, "text/plain") && !strstr(acc, "application/json")) r->text = 1;
  }
  return r;
}

/* ---- the WebSocket handshake ---- */

/* 1 when the comma-separated header value holds token (case-insensitive). */
static int header_has(const char *value, const char *token) {
  size_t n = strlen(token);
  for (const char *p = value; p && *p;) {
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    const char *end = p;
    while (*end && *end != ',') end++;
    const char *e = end;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t')) e--;
    if ((size_t)(e - p) == n && strncasecmp(p, token, n) == 0) return 1;
    p = end;
  }
  return 0;
}

int server_terminal_req_upgrade(server_terminal_req *r, struct MHD_Connection *conn,
                                server_ws_upgrade **u, char accept[SERVER_WS_ACCEPT_LEN + 1],
                                server_answer *a) {
  *u = NULL;
  const char *upgrade = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Upgrade");
  if (r->op != OP_GET || upgrade == NULL || !header_has(upgrade, "websocket")) return 0;
  const char *connection = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connection");
  const char *version = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-WebSocket-Version");
  const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
  if (connection == NULL || !header_has(connection, "upgrade")) {
    server_answer_error(a, 400, "policy", "a WebSocket handshake needs 'Connection: Upgrade'");
    return 1;
  }
  if (version == NULL || strcmp(version, "13") != 0) {
    server_answer_error(a, 426, "policy", "WebSocket version 13 only (Sec-WebSocket-Version: 13)");
    return 1;
  }
  if (server_ws_accept(key, accept) != 0) {
    server_answer_error(a, 400, "policy", "bad Sec-WebSocket-Key");
    return 1;
  }
  server_ws_handler h;
  server_terminal_ws_handler(r->t, &h);
  server_ws_limits lim = {0, 0, 0, 0};
  *u = server_ws_upgrade_new(r->srv->ws, &lim, &h);
  if (*u == NULL) {
    h.discard(h.ud);
    server_answer_error(a, 503, "sandbox", "out of memory");
  }
  return 1;
}

int server_terminal_req_body(server_terminal_req *r, const char *body, size_t len) {
  r->body = malloc(len + 1);
  if (r->body == NULL) return -1;
  if (len) memcpy(r->body, body, len);
  r->body[len] = '\0';
  r->body_len = len;
  return 0;
}

void server_terminal_req_set_stream(server_terminal_req *r, server_stream *s) {
  server_stream_ref(s);
  r->stream = s;
}

/* ---- creating one ---- */

/* Fields of execute a terminal does not take: refused by name rather than
 * ignored, so nothing that reaches beyond the sandbox (a lease, a host
 * workspace) is ever silently dropped either. */
static const char *const refused_fields[] = {"tool",      "lease_id", "workspace",
                                             "stdin_b64", "stream",   "background_on_timeout",
                                             "timeout_s", "sync",     "params"};

/* rows, cols and cwd out of the body; the rest is execute's. */
static int take_own_fields(json_object *o, unsigned *rows, unsigned *cols, char **cwd,
                           server_answer *a) {
  for (size_t i = 0; i < sizeof refused_fields / sizeof refused_fields[0]; i++)
    if (json_object_object_get_ex(o, refused_fields[i], NULL)) {
      server_answer_error(a, 400, "policy", "field '%s' is not taken by a terminal",
                          refused_fields[i]);
      return -1;
    }
  const char *dims[] = {"rows", "cols"};
  unsigned *outs[] = {rows, cols};
  for (int i = 0; i < 2; i++) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, dims[i], &v) || v == NULL) continue;
    int64_t n = json_object_get_int64(v);
    if (!json_object_is_type(v, json_type_int) || n < 1 || n > SM_TTY_DIM_MAX) {
      server_answer_error(a, 400, "policy", "field '%s' must be 1 to %d", dims[i], SM_TTY_DIM_MAX);
      return -1;
    }
    *outs[i] = (unsigned)n;
    json_object_object_del(o, dims[i]);
  }
  json_object *v = NULL;
  if (json_object_object_get_ex(o, "cwd", &v) && v) {
    const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    if (s[0] != '/' || strlen(s) > SM_SERVER_PATH_MAX ||
        memchr(s, '\0', (size_t)json_object_get_string_len(v))) {
      server_answer_error(a, 400, "policy", "field 'cwd' must be an absolute path in the sandbox");
      return -1;
    }
    *cwd = strdup(s);
    json_object_object_del(o, "cwd");
  }
  if (!json_object_object_get_ex(o, "argv", NULL) &&
      !json_object_object_get_ex(o, "command", NULL)) {
    json_object *argv = json_object_new_array();
    json_object_array_add(argv, json_object_new_string("/bin/sh"));
    json_object_object_add(o, "argv", argv);
  }
  return 0;
}

/* TERM for the terminal unless the request gave one. */
static int add_term(server_execute_params *p) {
  for (size_t i = 0; i < p->n_env; i++)
    if (strncmp(p->env[i], "TERM=", 5) == 0) return 0;
  char **env = realloc(p->env, (p->n_env + 2) * sizeof *env);
  if (env == NULL) return -1;
  p->env = env;
  if ((env[p->n_env] = strdup(DEFAULT_TERM)) == NULL) return -1;
  env[++p->n_env] = NULL;
  return 0;
}

static int parse_create(server_terminal_req *r, server_execute_params *p, unsigned *rows,
                        unsigned *cols, char **cwd, server_answer *a) {
  json_object *o = NULL;
  sm_error err = SM_ERROR_INIT;
  if (server_json_object(r->body, r->body_len, &o, &err) != 0) {
    server_answer_error(a, 400, "policy", "%s", err.message);
    return -1;
  }
  int rc = take_own_fields(o, rows, cols, cwd, a);
  if (rc == 0) {
    const char *js = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    rc = server_parse_execute(js, strlen(js), 0, p, &err);
    if (rc != 0) server_answer_error(a, 400, "policy", "%s", err.message);
  }
  json_object_put(o);
  if (rc != 0) return -1;
  if ((p->tool = strdup("terminal")) == NULL || add_term(p) != 0) {
    server_answer_error(a, 503, "sandbox", "out of memory");
    return -1;
  }
  /* A sandbox named by its id brings its own mode (server_call_prepare). */
  if (!p->has_mode && !p->sandbox_id) {
    p->mode = p->run_id ? SM_MODE_PER_RUN : SM_MODE_PER_WORKER;
    p->has_mode = 1;
  }
  if (p->has_mode && p->mode != SM_MODE_PER_RUN && p->mode != SM_MODE_PER_WORKER) {
    server_answer_error(a, 400, "policy", "a terminal runs in a per_run or per_worker sandbox");
    return -1;
  }
  return 0;
}

static void do_create(server_terminal_req *r, server_answer *a) {
  sm_server *srv = r->srv;
  if (!server_body_token_ok(srv, r->body, r->body_len, r->control, r->token)) {
    server_refuse_token(srv, "terminals", a);
    return;
  }
  if (srv->opts.runner == NULL && srv->opts.run == NULL) {
    server_answer_error(a, 503, "engine", "this runner has no engine");
    return;
  }
  server_execute_params p;
  memset(&p, 0, sizeof p);
  unsigned rows = DEFAULT_ROWS, cols = DEFAULT_COLS;
  cleanup_free char *cwd = NULL;
  if (parse_create(r, &p, &rows, &cols, &cwd, a) != 0) {
    server_execute_params_dispose(&p);
    return;
  }
  char worker[SM_SERVER_KEY_MAX + 1];
  snprintf(worker, sizeof worker, "%s", p.worker_key ? p.worker_key : "");
  server_call *k = server_call_prepare(srv, &p, r->control, r->token, a);
  if (k == NULL) return;
  server_terminal *t = NULL;
  /* cwd is the terminal's (taken whatever happens). */
  if (server_terminal_create(srv->terminals, k, worker, rows, cols, steal_pointer(&cwd), &t, a) !=
      0)
    return;
  a->status = 201;
  a->body = server_terminal_json(t);
  server_terminal_unref(t);
}

/* ---- the others ---- */

static void do_screen(server_terminal_req *r, server_answer *a) {
  if (r->wait_ms > 0) server_terminal_settle(r->t, (int)r->quiet_ms, (int)r->wait_ms);
  if (!r->text) {
    a->status = 200;
    a->body = server_terminal_screen_json(r->t, (size_t)r->scrollback);
    return;
  }
  cleanup_buf common_buf text;
  common_buf_init(&text, (size_t)64 << 20);
  if (server_terminal_screen_text(r->t, &text) != 0 || common_buf_append(&text, "\n", 1) != 0) {
    server_answer_error(a, 503, "sandbox", "out of memory");
    return;
  }
  if (server_stream_begin(r->stream, 200, "text/plain; charset=utf-8", (int64_t)text.len, NULL,
                          NULL, NULL, NULL) == 0)
    server_stream_write(r->stream, text.data, text.len);
}

static void do_input(server_terminal_req *r, server_answer *a) {
  sm_error err = SM_ERROR_INIT;
  if (r->body_len > SM_TTY_INPUT_MAX) {
    server_answer_error(a, 413, "policy", "at most %zu bytes of input at once", SM_TTY_INPUT_MAX);
    return;
  }
  int rc = server_terminal_input(r->t, r->body, r->body_len, &err);
  if (rc) {
    server_answer_error_code(a, rc, err.message);
    return;
  }
  a->status = 200;
  a->body = json_object_new_object();
  json_object_object_add(a->body, "bytes", json_object_new_int64((int64_t)r->body_len));
}

static void do_resize(server_terminal_req *r, server_answer *a) {
  cleanup_json json_object *o = NULL;
  json_object *rows = NULL, *cols = NULL;
  sm_error err = SM_ERROR_INIT;
  if (server_json_object(r->body, r->body_len, &o, &err) != 0 ||
      !json_object_object_get_ex(o, "rows", &rows) ||
      !json_object_object_get_ex(o, "cols", &cols) || !json_object_is_type(rows, json_type_int) ||
      !json_object_is_type(cols, json_type_int) || json_object_get_int64(rows) < 1 ||
      json_object_get_int64(cols) < 1 || json_object_get_int64(rows) > SM_TTY_DIM_MAX ||
      json_object_get_int64(cols) > SM_TTY_DIM_MAX) {
    server_answer_error(a, 400, "policy", "give {\"rows\": 1..%d, \"cols\": 1..%d}", SM_TTY_DIM_MAX,
                        SM_TTY_DIM_MAX);
    return;
  }
  unsigned nr = (unsigned)json_object_get_int64(rows), nc = (unsigned)json_object_get_int64(cols);
  int rc = server_terminal_resize(r->t, nr, nc, &err);
  if (rc) {
    server_answer_error_code(a, rc, err.message);
    return;
  }
  a->status = 200;
  a->body = server_terminal_json(r->t);
}

void server_terminal_job(void *arg) {
  server_terminal_req *r = arg;
  server_answer a = {0, NULL};
  switch (r->op) {
  case OP_CREATE:
    do_create(r, &a);
    break;
  case OP_LIST:
    a.status = 200;
    a.body = server_terminals_list(r->srv->terminals, r->list_worker);
    break;
  case OP_GET:
    a.status = 200;
    a.body = server_terminal_json(r->t);
    break;
  case OP_SCREEN:
    do_screen(r, &a);
    break;
  case OP_INPUT:
    do_input(r, &a);
    break;
  case OP_RESIZE:
    do_resize(r, &a);
    break;
  case OP_DELETE:
    sm_log(SM_LOG_INFO, "terminal %.8s...: killed by request", server_terminal_id(r->t));
    a.status = 200;
    a.body = server_terminal_kill(r->srv->terminals, r->t, KILL_WAIT_S);
    break;
  }
  server_stream_finish(r->stream, 0, server_stream_begun(r->stream) ? NULL : &a);
  if (a.body) json_object_put(a.body);
  server_terminal_req_free(r);
}
