/* The code contexts' routes (context_route.h) on a call thread, through the
 * library's code contexts (sandman/code.h).
 *
 * A call is checked and resolved by execute's own code (server_call_prepare:
 * token, the tool policy of the tool "code", principal), so a worker token
 * reaches only its own keyed sandboxes: another worker's context answers
 * as a missing one (its sandbox is another). A request naming a lease is
 * refused: a kernel outlives the call, and credentials never enter it.
 * Runs of one context take turns in arrival order, and one sandbox holds
 * at most --code-queue runs (code_queue.c); each run's output is capped by
 * its max_output (at most --code-max-output) and recorded as a code.run
 * row of the audit trail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include <sandman/code.h>
#include <sandman/log.h>
#include <sandman/util.h>
#include <sandman/env.h>

#include "server/code_queue.h"
#include "server/context_route.h"
#include "server/stream.h"

#define CODE_QUEUE_DEFAULT 16
#define CODE_MAX_OUTPUT_DEFAULT SM_CODE_DEFAULT_MAX_OUTPUT

typedef enum { OP_LIST = 0, OP_CREATE, OP_INFO, OP_DELETE, OP_RUN, OP_INTERRUPT, OP_RESTART } ctx_op;

static const char *const op_names[] = {"list", "create", "info", "delete", "run", "interrupt", "restart"};

struct context_req {
  sm_server *srv;
  char id[17];
  ctx_op op;
  char name[SM_CODE_NAME_MAX + 1];  /* from the path (create: the body's) */
  int control;
  char *token;
  char *body;
  size_t body_len;
  server_execute_params p;          /* the sandbox's keys (GET, DELETE: the query's) */
  json_object *parsed;              /* the POST body (ctx_body's strings point into it) */
  server_stream *stream;
};

/* What a POST body says besides the keys. */
typedef struct ctx_body {
  const char *code, *kernel, *language, *cwd;
  char **env;                       /* "K=V" (owned) */
  size_t n_env;
  double timeout_s;
  int64_t max_output;
  int lease;                        /* it named a lease */
} ctx_body;

/* ---- the path ---- */

/* The op of the path after /v1/contexts, with name (may be NULL). */
static int parse_path(const char *url, const char *method, char *name, const char **allow) {
  const char *rest = url + strlen("/v1/contexts");
  int post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  if (*rest == '\0' || strcmp(rest, "/") == 0) {
    *allow = "GET, POST";
    return get ? OP_LIST : post ? OP_CREATE : -2;
  }
  if (*rest != '/') return -1;
  rest++;
  const char *slash = strchr(rest, '/');
  size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
  if (n == 0 || n > SM_CODE_NAME_MAX) return -1;
  char buf[SM_CODE_NAME_MAX + 1];
  memcpy(buf, rest, n);
  buf[n] = '\0';
  if (!sm_code_name_valid(buf)) return -1;
  if (name) memcpy(name, buf, n + 1);
  if (slash == NULL) {
    *allow = "GET, DELETE";
    return get ? OP_INFO : strcmp(method, "DELETE") == 0 ? OP_DELETE : -2;
  }
  const char *verb = slash + 1;
  *allow = "POST";
  int op = strcmp(verb, "run") == 0         ? OP_RUN
           : strcmp(verb, "interrupt") == 0 ? OP_INTERRUPT
           : strcmp(verb, "restart") == 0   ? OP_RESTART
                                            : -1;
  if (op < 0) return -1;
  return post ? op : -2;
}

int server_context_route_match(const char *url, const char *method, const char **allow) {
  if (strncmp(url, "/v1/contexts", 12) != 0 || (url[12] != '\0' && url[12] != '/')) return -1;
  return parse_path(url, method, NULL, allow);
}

void server_context_req_free(context_req *r) {
  if (r == NULL) return;
  if (r->token) {
    OPENSSL_cleanse(r->token, strlen(r->token));
    free(r->token);
  }
  if (r->body) OPENSSL_cleanse(r->body, r->body_len);
  free(r->body);
  server_execute_params_dispose(&r->p);
  if (r->parsed) json_object_put(r->parsed);
  server_stream_unref(r->stream);
  free(r);
}

void server_context_req_set_stream(context_req *r, server_stream *s) {
  server_stream_ref(s);
  r->stream = s;
}

int server_context_req_body(context_req *r, const char *body, size_t len) {
  r->body = malloc(len + 1);
  if (r->body == NULL) return -1;
  if (len) memcpy(r->body, body, len);
  r->body[len] = '\0';
  r->body_len = len;
  return 0;
}

/* ---- the keys ---- */

static int take(char **slot, const char *v) {
  if (!server_name_valid(v, SM_SERVER_KEY_MAX)) return -1;
  free(*slot);
  *slot = strdup(v);
  return *slot ? 0 : -1;
}

/* One key of the sandbox (query or body): 1 taken, 0 not a key, -1 bad. */
static int key_value(server_execute_params *p, const char *key, const char *v) {
  if (strcmp(key, "run_id") == 0) return take(&p->run_id, v) == 0 ? 1 : -1;
  if (strcmp(key, "worker_key") == 0) return take(&p->worker_key, v) == 0 ? 1 : -1;
  if (strcmp(key, "project") == 0) return take(&p->project, v) == 0 ? 1 : -1;
  if (strcmp(key, "agent") == 0) return take(&p->agent, v) == 0 ? 1 : -1;
  if (strcmp(key, "user") == 0) return take(&p->user, v) == 0 ? 1 : -1;
  if (strcmp(key, "sandbox_id") == 0) {
    if (!server_sandbox_ref_valid(v)) return -1;
    free(p->sandbox_id);
    p->sandbox_id = strdup(v);
    return p->sandbox_id ? 1 : -1;
  }
  if (strcmp(key, "mode") == 0) {
    p->has_mode = 1;
    if (sm_mode_parse(v, &p->mode, NULL) != 0 ||
        (p->mode != SM_MODE_PER_RUN && p->mode != SM_MODE_PER_WORKER))
      return -1;
    return 1;
  }
  return 0;
}

typedef struct query_walk {
  context_req *r;
  char bad[96];
} query_walk;

static enum MHD_Result on_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  query_walk *w = cls;
  (void)kind;
  int rc = key_value(&w->r->p, key, value ? value : "");
  if (rc == 1) return MHD_YES;
  snprintf(w->bad, sizeof w->bad, rc == 0 ? "unknown query parameter '%.40s'" : "bad query parameter '%.40s'", key);
  return MHD_NO;
}

/* The keyed mode and the rest every route needs; 0, or -1 with *a. */
static int finish_keys(context_req *r, server_answer *a) {
  server_execute_params *p = &r->p;
  if (p->run_id == NULL && p->worker_key == NULL && p->sandbox_id == NULL) {
    server_answer_error(
        a, 400, "policy",
        "name the sandbox: 'sandbox_id', 'run_id' (per_run) or 'worker_key' (per_worker)");
    return -1;
  }
  if (!p->has_mode && p->sandbox_id == NULL) {
    p->mode = p->run_id ? SM_MODE_PER_RUN : SM_MODE_PER_WORKER;
    p->has_mode = 1;
  }
  p->tool = strdup("code");
  p->argv = calloc(2, sizeof *p->argv);
  if (p->argv) p->argv[0] = strdup("code");
  p->argc = 1;
  if (!p->tool || !p->argv || !p->argv[0]) {
    server_answer_error(a, 503, "sandbox", "out of memory");
    return -1;
  }
  return 0;
}

context_req *server_context_req_new(sm_server *srv, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *id, int control,
                                    const char *token, server_answer *a) {
  context_req *r = calloc(1, sizeof *r);
  const char *allow = NULL;
  if (r == NULL || (token && (r->token = strdup(token)) == NULL)) {
    free(r);
    server_answer_error(a, 503, "sandbox", "out of memory");
    return NULL;
  }
  r->srv = srv;
  snprintf(r->id, sizeof r->id, "%s", id);
  r->control = control;
  r->op = (ctx_op)parse_path(url, method, r->name, &allow);
  if (r->op == OP_RUN || r->op == OP_INTERRUPT || r->op == OP_RESTART || r->op == OP_CREATE)
    return r; /* the body names the sandbox */
  query_walk w = {r, {0}};
  MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, on_arg, &w);
  /* Who may ask comes first: a worker token learns nothing else. */
  if (!control &&
      (r->p.worker_key == NULL || token == NULL || !server_token_ok(srv, token, r->p.worker_key))) {
    server_refuse_token(srv, "contexts", a);
    server_context_req_free(r);
    return NULL;
  }
  if (w.bad[0]) {
    server_answer_error(a, 400, "policy", "%s", w.bad);
    server_context_req_free(r);
    return NULL;
  }
  if (finish_keys(r, a) != 0) {
    server_context_req_free(r);
    return NULL;
  }
  return r;
}

/* ---- a POST's body ---- */

static void body_dispose(ctx_body *b) {
  for (size_t i = 0; i < b->n_env; i++) free(b->env[i]);
  free(b->env);
  memset(b, 0, sizeof *b);
}

/* The body's "env" object: "K=V" strings under the runner's rule for a
 * request's variables (no SANDMAN_*, DOCKER_*, HOME or XDG directories). */
static int body_env(json_object *v, ctx_body *b, server_answer *a) {
  if (!json_object_is_type(v, json_type_object) || json_object_object_length(v) > SM_CODE_ENV_MAX) {
    server_answer_error(a, 400, "policy", "field 'env' is an object of at most %d strings",
                        SM_CODE_ENV_MAX);
    return -1;
  }
  b->env = calloc((size_t)json_object_object_length(v) + 1, sizeof *b->env);
  if (b->env == NULL) {
    server_answer_error(a, 503, "sandbox", "out of memory");
    return -1;
  }
  json_object_object_foreach(v, key, val) {
    sm_env_name_class cls = sm_env_name_classify(key, strlen(key));
    if (cls != SM_ENV_NAME_OK && cls != SM_ENV_NAME_FIXED) {
      server_answer_error(a, 400, "policy", "env %.100s: %s", key, sm_env_name_refusal(cls));
      return -1;
    }
    if (!json_object_is_type(val, json_type_string)) {
      server_answer_error(a, 400, "policy", "env %.100s: the value is a string", key);
      return -1;
    }
    size_t n = strlen(key) + (size_t)json_object_get_string_len(val) + 2;
    char *kv = malloc(n);
    if (kv == NULL) {
      server_answer_error(a, 503, "sandbox", "out of memory");
      return -1;
    }
    snprintf(kv, n, "%s=%s", key, json_object_get_string(val));
    b->env[b->n_env++] = kv;
  }
  return 0;
}

static int body_string(json_object *v, const char *key, const char **out, server_answer *a) {
  if (!json_object_is_type(v, json_type_string)) {
    server_answer_error(a, 400, "policy", "field '%s' is a string", key);
    return -1;
  }
  *out = json_object_get_string(v);
  return 0;
}

static int body_number(json_object *v, const char *key, double min, double max, double *out,
                       server_answer *a) {
  double d = json_object_get_double(v);
  if ((!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) ||
      !(d >= min && d <= max)) {
    server_answer_error(a, 400, "policy", "field '%s' is a number from %g to %g", key, min, max);
    return -1;
  }
  *out = d;
  return 0;
}

/* One field of the body; 0, or -1 with *a. */
static int body_field(context_req *r, ctx_body *b, const char *key, json_object *v,
                      server_answer *a) {
  if (v != NULL && json_object_is_type(v, json_type_string)) {
    int k = key_value(&r->p, key, json_object_get_string(v));
    if (k == 1) return 0;
    if (k < 0) {
      server_answer_error(a, 400, "policy", "bad field '%s'", key);
      return -1;
    }
  }
  double d = 0;
  if (strcmp(key, "lease_id") == 0) return b->lease = 1, 0;
  if (strcmp(key, "name") == 0 && r->op == OP_CREATE) {
    const char *s = NULL;
    if (body_string(v, key, &s, a) != 0) return -1;
    if (!sm_code_name_valid(s)) {
      server_answer_error(a, 400, "policy",
                          "field 'name': 1-%d letters, digits, _ . - (not starting "
                          "with . or -)",
                          SM_CODE_NAME_MAX);
      return -1;
    }
    snprintf(r->name, sizeof r->name, "%s", s);
    return 0;
  }
  int creates = r->op == OP_CREATE || r->op == OP_RUN;
  if (strcmp(key, "code") == 0 && r->op == OP_RUN) return body_string(v, key, &b->code, a);
  if (strcmp(key, "kernel") == 0 && creates) return body_string(v, key, &b->kernel, a);
  if (strcmp(key, "language") == 0 && creates) return body_string(v, key, &b->language, a);
  if (strcmp(key, "cwd") == 0 && creates) return body_string(v, key, &b->cwd, a);
  if (strcmp(key, "env") == 0 && creates) return body_env(v, b, a);
  if (strcmp(key, "timeout_s") == 0 && r->op == OP_RUN)
    return body_number(v, key, 0.001, 86400, &b->timeout_s, a);
  if (strcmp(key, "max_output") == 0 && r->op == OP_RUN) {
    if (body_number(v, key, 1, (double)SM_CODE_MAX_OUTPUT_LIMIT, &d, a) != 0) return -1;
    b->max_output = (int64_t)d;
    return 0;
  }
  if (strcmp(key, "run_id") == 0 || strcmp(key, "worker_key") == 0 || strcmp(key, "mode") == 0 ||
      strcmp(key, "project") == 0 || strcmp(key, "agent") == 0 || strcmp(key, "user") == 0 ||
      strcmp(key, "sandbox_id") == 0) {
    server_answer_error(a, 400, "policy", "field '%s' is a name", key);
    return -1;
  }
  server_answer_error(a, 400, "policy", "unknown field '%.40s' for %s", key, op_names[r->op]);
  return -1;
}

static int parse_body(context_req *r, ctx_body *b, server_answer *a) {
  json_object *o = NULL;
  sm_error err = SM_ERROR_INIT;
  if (server_json_object(r->body ? r->body : "{}", r->body ? r->body_len : 2, &o, &err) != 0) {
    server_answer_error(a, 400, "policy", "%s", err.message);
    return -1;
  }
  r->parsed = o; /* the body's strings stay valid as long as the request */
  int rc = 0;
  json_object_object_foreach(o, key, v) {
    if ((rc = body_field(r, b, key, v, a)) != 0) break;
  }
  if (rc == 0 && r->op == OP_CREATE && r->name[0] == '\0') {
    server_answer_error(a, 400, "policy", "missing field 'name'");
    rc = -1;
  } else if (rc == 0 && r->op == OP_RUN && b->code == NULL) {
    server_answer_error(a, 400, "policy", "missing field 'code'");
    rc = -1;
  }
  if (rc == 0) rc = finish_keys(r, a);
  return rc;
}

/* ---- audit ---- */

static void audit_code(sm_server *srv, const char *event, const sm_run_request *q, const char *context,
                       const char *what, const char *value, const char *sandbox, double ms,
                       json_object *more) {
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = event;
  ev.agent = q->agent;
  ev.user = q->user;
  ev.project = q->project;
  ev.run_id = q->run_id;
  ev.worker = q->worker_id;
  ev.tool = "code";
  ev.mode = sm_mode_name(q->settings.mode);
  ev.sandbox = sandbox && sandbox[0] ? sandbox : NULL;
  ev.duration_ms = ms;
  json_object *d = more ? more : json_object_new_object();
  json_object_object_add(d, "context", json_object_new_string(context));
  if (what) json_object_object_add(d, what, json_object_new_string(value ? value : ""));
  ev.detail = d;
  server_audit(srv, &ev);
  json_object_put(d);
}

/* ---- a run ---- */

static json_object *ms_json(double ms) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f", ms);
  return json_object_new_double_s(ms, buf);
}

typedef struct run_out {
  server_stream *s;
  int begun;
  int failed;        /* the client is gone */
  double t0, waited_ms;
} run_out;

static int write_line(run_out *o, json_object *ev) {
  size_t n = 0;
  const char *text = json_object_to_json_string_length(
      ev, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
  if (!o->begun) {
    o->begun = 1;
    if (server_stream_begin(o->s, 200, "application/x-ndjson", -1, NULL, NULL, NULL, NULL) != 0)
      return -1;
  }
  if (server_stream_write(o->s, text, n) != 0 || server_stream_write(o->s, "\n", 1) != 0) return -1;
  return 0;
}

static int on_event(void *ud, const sm_code_event *ev) {
  run_out *o = ud;
  if (o->failed) return 0;
  json_object *j = sm_code_event_to_json(ev);
  if (j == NULL) return SM_ENOMEM;
  if (ev->type == SM_CODE_EV_END) {
    json_object_object_add(j, "queued_ms", ms_json(o->waited_ms));
    json_object_object_add(j, "total_ms", ms_json(sm_monotonic_ms() - o->t0));
  }
  if (write_line(o, j) != 0) o->failed = 1;
  json_object_put(j);
  return 0;
}

/* The sandbox's name in the run queue: what keys a keyed sandbox. */
static void sandbox_key(const sm_run_request *q, char *out, size_t len) {
  snprintf(out, len, "%s|%s|%s|%s|%s|%s|%s", q->principal ? q->principal : "control",
           sm_mode_name(q->settings.mode), q->project ? q->project : "", q->agent ? q->agent : "",
           q->user ? q->user : "", q->run_id ? q->run_id : "", q->worker_id ? q->worker_id : "");
}

static size_t max_output(const sm_server *srv, const ctx_body *b) {
  size_t cap = srv->opts.code_max_output ? srv->opts.code_max_output : CODE_MAX_OUTPUT_DEFAULT;
  if (b->max_output > 0 && (size_t)b->max_output < cap) return (size_t)b->max_output;
  return cap;
}

static void do_run(context_req *r, sm_run_request *q, const ctx_body *b, server_answer *a) {
  sm_server *srv = r->srv;
  run_out o = {r->stream, 0, 0, sm_monotonic_ms(), 0};
  char key[1024];
  sandbox_key(q, key, sizeof key);
  code_ticket *t = NULL;
  size_t limit = srv->opts.code_queue ? srv->opts.code_queue : CODE_QUEUE_DEFAULT;
  sm_error qerr = SM_ERROR_INIT;
  int rc = server_code_queue_enter(srv->code_queue, key, r->name, limit, q->cancel, &t,
                                   &o.waited_ms, &qerr);
  if (rc == SM_EBUSY) {
    server_answer_error(a, 429, "policy",
                        "this sandbox already has %zu code runs waiting or running "
                        "(--code-queue): try again when one has ended",
                        limit);
    audit_code(srv, "code.refused", q, r->name, "reason", "queue full", NULL, -1, NULL);
    return;
  }
  if (rc != 0) {
    server_answer_error_code(a, rc, qerr.message);
    return;
  }
  sm_code_context_opts co = {b->kernel, b->language, b->cwd, (const char *const *)b->env,
                             b->n_env, srv->opts.code_max_contexts};
  sm_code_run_opts ro = SM_CODE_RUN_OPTS_INIT;
  ro.timeout_s = b->timeout_s;
  ro.max_output = max_output(srv, b);
  ro.ensure = strcmp(r->name, SM_CODE_DEFAULT_CONTEXT) == 0;
  ro.create = &co;
  ro.on_event = on_event;
  ro.ud = &o;
  sm_code_run_end end;
  sm_run_result call;
  sm_error err = SM_ERROR_INIT;
  rc = sm_code_run(srv->opts.runner, q, r->name, b->code, &ro, &end, &call, &err);
  server_code_queue_leave(srv->code_queue, t);
  double ms = sm_monotonic_ms() - o.t0;
  json_object *more = json_object_new_object();
  json_object_object_add(more, "queued_ms", ms_json(o.waited_ms));
  if (rc == 0) {
    json_object_object_add(more, "execution_count", end.execution_count >= 0
                                                        ? json_object_new_int64(end.execution_count)
                                                        : NULL);
    json_object_object_add(more, "truncated", json_object_new_boolean(end.truncated));
    json_object_object_add(more, "state_lost", json_object_new_boolean(end.restarted));
  } else {
    json_object_object_add(more, "error", json_object_new_string(err.message));
  }
  audit_code(srv, "code.run", q, r->name, "status", rc == 0 ? end.status : "failed",
             call.sandbox_id, ms, more);
  server_metrics_call(srv->metrics, "code", sm_mode_name(q->settings.mode),
                      rc == 0 ? "ok" : sm_failure_kind_name(sm_error_failure_kind(rc)),
                      ms / 1000.0);
  sm_run_result_dispose(&call);
  if (rc == 0) return;
  sm_log(SM_LOG_INFO, "code run in %s: %s", r->name, err.message);
  if (!o.begun) {
    server_answer_error_code(a, rc, err.message);
    if (rc == SM_EBUSY) a->status = 429;
    return;
  }
  /* Events went already: the failure is the last line. */
  json_object *f = json_object_new_object();
  json_object_object_add(f, "event", json_object_new_string("fail"));
  json_object_object_add(f, "error", json_object_new_string(err.message));
  json_object_object_add(f, "failure_kind", json_object_new_string(sm_failure_kind_name(sm_error_failure_kind(rc))));
  write_line(&o, f);
  json_object_put(f);
}

/* ---- the other operations: one JSON answer ---- */

static void context_answer(server_answer *a, int status, const sm_code_context *c,
                           const sm_run_result *call) {
  a->status = status;
  a->body = sm_code_context_to_json(c);
  json_object_object_add(a->body, "sandbox_id", call->sandbox_id[0]
                                                    ? json_object_new_string(call->sandbox_id)
                                                    : NULL);
}

/* A context's queued runs: those waiting in the runner's turns besides the
 * driver's own count. */
static void add_runner_queue(sm_server *srv, const sm_run_request *q, sm_code_context *c) {
  char key[1024];
  sandbox_key(q, key, sizeof key);
  c->queued += (int64_t)server_code_queue_waiting(srv->code_queue, key, c->name);
}

static int do_op(context_req *r, sm_run_request *q, const ctx_body *b, server_answer *a,
                 sm_run_result *call, sm_error *err) {
  sm_runner *runner = r->srv->opts.runner;
  sm_code_context c;
  int rc = 0, interrupted = 0;
  if (r->op == OP_LIST) {
    sm_code_context_list l;
    if ((rc = sm_code_list(runner, q, &l, call, err)) != 0) return rc;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < l.n; i++) {
      add_runner_queue(r->srv, q, &l.v[i]);
      json_object_array_add(arr, sm_code_context_to_json(&l.v[i]));
    }
    sm_code_context_list_dispose(&l);
    a->status = 200;
    a->body = json_object_new_object();
    json_object_object_add(a->body, "contexts", arr);
    return 0;
  }
  if (r->op == OP_CREATE) {
    sm_code_context_opts co = {b->kernel, b->language, b->cwd, (const char *const *)b->env,
                               b->n_env, r->srv->opts.code_max_contexts};
    if ((rc = sm_code_create(runner, q, r->name, &co, &c, call, err)) == 0) context_answer(a, 201, &c, call);
  } else if (r->op == OP_INFO) {
    if ((rc = sm_code_info(runner, q, r->name, &c, call, err)) == 0) {
      add_runner_queue(r->srv, q, &c);
      context_answer(a, 200, &c, call);
    }
  } else if (r->op == OP_RESTART) {
    if ((rc = sm_code_restart(runner, q, r->name, &c, call, err)) == 0) context_answer(a, 200, &c, call);
  } else if (r->op == OP_INTERRUPT) {
    if ((rc = sm_code_interrupt(runner, q, r->name, &interrupted, call, err)) == 0) {
      a->status = 200;
      a->body = json_object_new_object();
      json_object_object_add(a->body, "context", json_object_new_string(r->name));
      json_object_object_add(a->body, "interrupted", json_object_new_boolean(interrupted));
    }
  } else if ((rc = sm_code_delete(runner, q, r->name, call, err)) == 0) {
    a->status = 200;
    a->body = json_object_new_object();
    json_object_object_add(a->body, "context", json_object_new_string(r->name));
    json_object_object_add(a->body, "deleted", json_object_new_boolean(1));
  }
  return rc;
}

static void run_other(context_req *r, sm_run_request *q, const ctx_body *b, server_answer *a) {
  sm_run_result call;
  memset(&call, 0, sizeof call);
  sm_error err = SM_ERROR_INIT;
  double t0 = sm_monotonic_ms();
  int rc = do_op(r, q, b, a, &call, &err);
  if (rc != 0) {
    server_answer_error_code(a, rc, err.message);
    if (rc == SM_EBUSY) a->status = 429;
  }
  if (rc == 0 && r->op != OP_LIST && r->op != OP_INFO)
    audit_code(r->srv, "code.context", q, r->op == OP_CREATE ? r->name : r->name, "action",
               op_names[r->op], call.sandbox_id, sm_monotonic_ms() - t0, NULL);
  server_metrics_call(r->srv->metrics, "code", sm_mode_name(q->settings.mode),
                      rc == 0 ? "ok" : sm_failure_kind_name(sm_error_failure_kind(rc)),
                      (sm_monotonic_ms() - t0) / 1000.0);
  sm_run_result_dispose(&call);
}

/* ---- the job ---- */

/* A POST's token and body; 0, or -1 with *a. */
static int check_post(context_req *r, ctx_body *b, server_answer *a) {
  const char *body = r->body ? r->body : "";
  size_t len = r->body ? r->body_len : 0;
  if (!server_body_token_ok(r->srv, body, len, r->control, r->token)) {
    server_refuse_token(r->srv, "contexts", a);
    return -1;
  }
  return parse_body(r, b, a);
}

void server_context_job(void *arg) {
  context_req *r = arg;
  sm_server *srv = r->srv;
  server_stream *s = r->stream;
  sm_log_set_request_id(r->id);
  server_answer a = {0, NULL};
  ctx_body b;
  memset(&b, 0, sizeof b);
  int post = r->op == OP_CREATE || r->op == OP_RUN || r->op == OP_INTERRUPT || r->op == OP_RESTART;
  if (srv->opts.runner == NULL) {
    server_answer_error(&a, 503, "engine", "this runner has no engine");
  } else if (!post || check_post(r, &b, &a) == 0) {
    if (b.lease) {
      /* Before the lease is touched: it stays unused. */
      server_audit_call(srv, "code.refused", &r->p, sm_mode_name(r->p.mode), NULL,
                        "a code context never gets leased credentials");
      server_answer_error(&a, 403, "policy",
                          "leased credentials never enter a code context: a "
                          "kernel outlives the call (use execute with the lease)");
    } else {
      server_call *k = server_call_prepare(srv, &r->p, r->control, r->token, &a);
      if (k) {
        sm_run_request *q = server_call_request(k);
        q->cancel = server_stream_cancel_flag(s);
        if (r->op == OP_RUN && server_stream_watch(s) != 0)
          sm_log(SM_LOG_WARN, "code run: cannot watch the connection; a hang-up is seen at the "
                 "next output only");
        if (r->op == OP_RUN) do_run(r, q, &b, &a);
        else run_other(r, q, &b, &a);
        server_call_free(k);
      }
    }
  }
  server_stream_finish(s, 0, server_stream_begun(s) ? NULL : &a);
  if (a.body) json_object_put(a.body);
  body_dispose(&b);
  server_context_req_free(r);
}
