/* Code contexts: each operation is one call of `sandman-agent code send`
 * in the keyed sandbox (a helper call, as the files API makes), whose
 * answer code_wire.c parses; when no driver runs there yet, one call of
 * `sandman-agent code start` first. See sandman/code.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/code.h>
#include <sandman/env.h>

#include "code/code_wire.h"

/* The helper call's own time beyond the cell's: a kernel that must be
 * started again first (at most 60 s in the driver), the interrupt's grace. */
#define CALL_MARGIN_S 90.0
#define OP_TIMEOUT_S 90.0
#define START_STDERR_MAX (16 * 1024)

/* ---- one helper call ---- */

typedef struct code_call {
  code_wire wire;
  int rc;            /* the parser's first error */
  sm_error err;
  const char *text;  /* the request line */
  size_t len, off;
} code_call;

static ssize_t request_read(void *ud, char *buf, size_t len) {
  code_call *c = ud;
  size_t left = c->len - c->off;
  if (len > left) len = left;
  memcpy(buf, c->text + c->off, len);
  c->off += len;
  return (ssize_t)len;
}

static int on_output(void *ud, int stream, const char *data, size_t len) {
  code_call *c = ud;
  if (stream != 1 || c->rc) return 0;
  c->rc = code_wire_feed(&c->wire, data, len, &c->err);
  if (c->rc && c->err.code == 0)
    sm_error_set(&c->err, c->rc, "stopped by the receiver (%s)", sm_error_name(c->rc));
  return c->rc ? -1 : 0;
}

static int failure_code(const sm_run_result *r) {
  switch (r->failure_kind) {
    case SM_FAIL_POLICY: return SM_EPOLICY;
    case SM_FAIL_TIMEOUT: return SM_ETIMEOUT;
    case SM_FAIL_ENGINE: return SM_EUNREACHABLE;
    default: return SM_ESANDBOX;
  }
}

/* The helper request built from base: argv, the request on stdin. */
static sm_run_request helper_request(const sm_run_request *base, const char *const *argv,
                                     double timeout_s) {
  sm_run_request req = *base;
  req.argv = argv;
  req.argc = 2;
  req.helper = 1;
  req.env = NULL;
  req.n_env = 0;
  req.stdin_read = NULL;
  req.stdin_ud = NULL;
  req.on_output = NULL;
  req.on_output_ud = NULL;
  req.stdout_forward_only = 0;
  req.host_route = NULL;
  req.settings.timeout_s = timeout_s;
  if (req.settings.stderr_cap <= 0 || req.settings.stderr_cap > START_STDERR_MAX)
    req.settings.stderr_cap = START_STDERR_MAX;
  if (req.settings.stdout_cap <= 0 || req.settings.stdout_cap > 4096) req.settings.stdout_cap = 4096;
  return req;
}

/* How a helper call that did not run to its end went wrong, or 0. */
static int call_failed(const sm_run_result *r, const char *what, sm_error *err) {
  if (r->failure_kind != SM_FAIL_NONE && r->failure_kind != SM_FAIL_TOOL)
    return sm_error_set(err, failure_code(r), "%s: %s", what, r->error[0] ? r->error : "the call failed");
  if (r->exit_code != 0)
    return sm_error_set(err, SM_ESANDBOX, "%s (exit %d)%s%.*s", what, r->exit_code,
                        r->stderr_len ? ": " : "", (int)(r->stderr_len > 1500 ? 1500 : r->stderr_len),
                        r->stderr_data ? r->stderr_data : "");
  return 0;
}

/* `sandman-agent code start`: the driver running in the sandbox. */
static int start_driver(sm_runner *runner, const sm_run_request *base, sm_error *err) {
  static const char *const argv[] = {"code", "start"};
  sm_run_request req = helper_request(base, argv, OP_TIMEOUT_S);
  sm_run_result r;
  memset(&r, 0, sizeof r);
  int rc = sm_run(runner, &req, &r, err);
  if (rc == 0) rc = call_failed(&r, "starting the code driver in the sandbox", err);
  sm_run_result_dispose(&r);
  return rc;
}

/* One request (a JSON line) to the driver, its answer into c->wire. */
static int send_once(code_call *c, sm_runner *runner, const sm_run_request *base, double timeout_s,
                     sm_run_result *call, sm_error *err) {
  static const char *const argv[] = {"code", "send"};
  sm_run_request req = helper_request(base, argv, timeout_s);
  req.stdin_read = request_read;
  req.stdin_ud = c;
  req.on_output = on_output;
  req.on_output_ud = c;
  req.stdout_forward_only = 1;
  c->off = 0;
  memset(call, 0, sizeof *call);
  int rc = sm_run(runner, &req, call, err);
  if (rc != 0) return rc;
  if (c->rc) {
    if (err) *err = c->err;
    return c->rc;
  }
  if ((rc = call_failed(call, "the code driver's relay", err)) != 0) return rc;
  return code_wire_finish(&c->wire, err);
}

/* A stopped sandbox ends its processes, the contexts' kernels and their
 * records (in its /tmp, a new tmpfs when it starts again) with them. */
#define STOPPED_TEXT \
  "the sandbox was stopped (tier stop) since its last call: its code contexts and their state were lost"

/* The call that brought the sandbox back from stopped tells its run so
 * (as the driver does for a kernel that died): a RESTARTED event first. */
static int say_stopped(code_call *c, sm_error *err) {
  static const char line[] = "{\"event\":\"restarted\",\"reason\":\"" STOPPED_TEXT
                             "\",\"state_lost\":true}\n";
  if (c->wire.mode != CODE_WIRE_RUN) return 0;
  return code_wire_feed(&c->wire, line, sizeof line - 1, err);
}

/* Sends request (and starts the driver when none runs). The wire is
 * initialised by the caller; a "fail" answer becomes its error. */
static int code_send(code_call *c, sm_runner *runner, const sm_run_request *base,
                     json_object *request, double timeout_s, sm_run_result *call, sm_error *err) {
  if (base->n_secret_env > 0)
    return sm_error_set(err, SM_EPOLICY,
                        "leased credentials never enter a code context: a kernel outlives the "
                        "call (use execute for a call with a lease)");
  size_t n = 0;
  const char *line = json_object_to_json_string_length(
      request, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
  char *text = malloc(n + 2);
  if (text == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  memcpy(text, line, n);
  text[n] = '\n';
  c->text = text;
  c->len = n + 1;
  sm_run_result local;
  sm_run_result *r = call ? call : &local;
  int rc = send_once(c, runner, base, timeout_s, r, err);
  const char *fail = rc == 0 ? code_wire_fail_code(&c->wire) : NULL;
  int stopped = 0;
  if (fail && strcmp(fail, "no_server") == 0) {
    /* Nothing runs yet (a fresh sandbox, or the driver died): start it and
     * ask once more. */
    code_wire_mode mode = c->wire.mode;
    size_t max = c->wire.max_output;
    sm_code_event_fn fn = c->wire.on_event;
    void *ud = c->wire.ud;
    stopped = strcmp(r->resumed, "stopped") == 0;
    code_wire_dispose(&c->wire);
    code_wire_init(&c->wire, mode, max, fn, ud);
    sm_run_result_dispose(r);
    rc = start_driver(runner, base, err);
    if (rc == 0 && stopped) rc = say_stopped(c, err);
    if (rc == 0) rc = send_once(c, runner, base, timeout_s, r, err);
    if (stopped) snprintf(r->resumed, sizeof r->resumed, "stopped");
  }
  if (rc == 0 && code_wire_fail_code(&c->wire)) {
    rc = code_wire_fail_error(&c->wire, err);
    if (stopped && rc == SM_ENOTFOUND) sm_error_wrap(err, "%s", STOPPED_TEXT);
  }
  free(text);
  c->text = NULL;
  if (r == &local) sm_run_result_dispose(&local);
  return rc;
}

/* ---- requests ---- */

static json_object *request_new(const char *op, const char *name) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "op", json_object_new_string(op));
  if (name) json_object_object_add(o, "context", json_object_new_string(name));
  return o;
}

static int check_name(const char *name, sm_error *err) {
  if (!sm_code_name_valid(name))
    return sm_error_set(err, SM_EINVAL,
                        "a context's name is 1-%d letters, digits, _ . - (not starting with . or -)",
                        SM_CODE_NAME_MAX);
  return 0;
}

/* The create fields of opts into the request o. */
static int add_create(json_object *o, const sm_code_context_opts *opts, sm_error *err) {
  unsigned max = SM_CODE_DEFAULT_MAX_CONTEXTS;
  if (opts) {
    if (opts->kernel) json_object_object_add(o, "kernel", json_object_new_string(opts->kernel));
    if (opts->language)
      json_object_object_add(o, "language", json_object_new_string(opts->language));
    if (opts->cwd) {
      if (opts->cwd[0] != '/')
        return sm_error_set(err, SM_EINVAL, "a context's working directory is an absolute path");
      json_object_object_add(o, "cwd", json_object_new_string(opts->cwd));
    }
    if (opts->n_env > SM_CODE_ENV_MAX)
      return sm_error_set(err, SM_EINVAL, "a context takes at most %d variables", SM_CODE_ENV_MAX);
    json_object *env = json_object_new_object();
    for (size_t i = 0; i < opts->n_env; i++) {
      const char *kv = opts->env[i], *eq = strchr(kv, '=');
      size_t nl = eq ? (size_t)(eq - kv) : strlen(kv);
      sm_env_name_class cls = sm_env_name_classify(kv, nl);
      if (eq == NULL || cls == SM_ENV_NAME_INVALID || cls == SM_ENV_NAME_BLOCKED) {
        json_object_put(env);
        return sm_error_set(err, SM_EINVAL, "context variable '%.*s': %s", (int)(nl > 100 ? 100 : nl),
                            kv, eq ? sm_env_name_refusal(cls) : "takes NAME=VALUE");
      }
      char key[256];
      snprintf(key, sizeof key, "%.*s", (int)nl, kv);
      json_object_object_add(env, key, json_object_new_string(eq + 1));
    }
    json_object_object_add(o, "env", env);
    if (opts->max_contexts) max = opts->max_contexts;
  }
  json_object_object_add(o, "max_contexts", json_object_new_int64(max));
  return 0;
}

/* An operation answered by one line (create, info, restart, list,
 * interrupt, delete): *answer is the caller's. */
static int one_op(sm_runner *runner, const sm_run_request *base, json_object *request,
                  json_object **answer, sm_run_result *call, sm_error *err) {
  code_call c;
  memset(&c, 0, sizeof c);
  code_wire_init(&c.wire, CODE_WIRE_ONE, 0, NULL, NULL);
  int rc = code_send(&c, runner, base, request, OP_TIMEOUT_S, call, err);
  if (rc == 0 && answer) *answer = json_object_get(c.wire.answer);
  code_wire_dispose(&c.wire);
  json_object_put(request);
  return rc;
}

/* The answer must be the event `want`. */
static int expect(json_object *answer, const char *want, sm_error *err) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(answer, "event", &v) || strcmp(json_object_get_string(v), want) != 0)
    return sm_error_set(err, SM_EPROTOCOL, "the sandbox's code driver answered out of turn");
  return 0;
}

static int context_op(sm_runner *runner, const sm_run_request *base, json_object *request,
                      sm_code_context *out, sm_run_result *call, sm_error *err) {
  json_object *a = NULL;
  int rc = one_op(runner, base, request, &a, call, err);
  if (rc == 0) rc = expect(a, "context", err);
  sm_code_context local;
  if (rc == 0) rc = code_context_from_json(a, out ? out : &local, err);
  json_object_put(a);
  return rc;
}

int sm_code_create(sm_runner *runner, const sm_run_request *base, const char *name,
                   const sm_code_context_opts *opts, sm_code_context *out, sm_run_result *call,
                   sm_error *err) {
  int bad_name = check_name(name, err);
  if (bad_name != 0) return bad_name;
  json_object *q = request_new("create", name);
  if (q == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  int rc = add_create(q, opts, err);
  if (rc != 0) {
    json_object_put(q);
    return rc;
  }
  return context_op(runner, base, q, out, call, err);
}

int sm_code_info(sm_runner *runner, const sm_run_request *base, const char *name,
                 sm_code_context *out, sm_run_result *call, sm_error *err) {
  int bad_name = check_name(name, err);
  if (bad_name != 0) return bad_name;
  json_object *q = request_new("info", name);
  if (q == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  return context_op(runner, base, q, out, call, err);
}

int sm_code_restart(sm_runner *runner, const sm_run_request *base, const char *name,
                    sm_code_context *out, sm_run_result *call, sm_error *err) {
  int bad_name = check_name(name, err);
  if (bad_name != 0) return bad_name;
  json_object *q = request_new("restart", name);
  if (q == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  return context_op(runner, base, q, out, call, err);
}

int sm_code_interrupt(sm_runner *runner, const sm_run_request *base, const char *name,
                      int *interrupted, sm_run_result *call, sm_error *err) {
  int bad_name = check_name(name, err);
  if (bad_name != 0) return bad_name;
  json_object *q = request_new("interrupt", name), *a = NULL;
  if (q == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  int rc = one_op(runner, base, q, &a, call, err);
  if (rc == 0) rc = expect(a, "ok", err);
  json_object *v = NULL;
  if (rc == 0 && interrupted)
    *interrupted = json_object_object_get_ex(a, "interrupted", &v) && json_object_get_boolean(v);
  json_object_put(a);
  return rc;
}

int sm_code_delete(sm_runner *runner, const sm_run_request *base, const char *name,
                   sm_run_result *call, sm_error *err) {
  int bad_name = check_name(name, err);
  if (bad_name != 0) return bad_name;
  json_object *q = request_new("delete", name), *a = NULL;
  if (q == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  int rc = one_op(runner, base, q, &a, call, err);
  if (rc == 0) rc = expect(a, "ok", err);
  json_object_put(a);
  return rc;
}

void sm_code_context_list_dispose(sm_code_context_list *l) {
  if (l == NULL) return;
  free(l->v);
  l->v = NULL;
  l->n = 0;
}

int sm_code_list(sm_runner *runner, const sm_run_request *base, sm_code_context_list *out,
                 sm_run_result *call, sm_error *err) {
  memset(out, 0, sizeof *out);
  json_object *q = request_new("list", NULL), *a = NULL, *arr = NULL;
  if (q == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  int rc = one_op(runner, base, q, &a, call, err);
  if (rc == 0) rc = expect(a, "list", err);
  if (rc == 0 && (!json_object_object_get_ex(a, "contexts", &arr) ||
                  !json_object_is_type(arr, json_type_array) ||
                  json_object_array_length(arr) > 1024))
    rc = sm_error_set(err, SM_EPROTOCOL, "the sandbox's code driver sent a bad list");
  size_t n = rc == 0 ? json_object_array_length(arr) : 0;
  if (n > 0 && (out->v = calloc(n, sizeof *out->v)) == NULL)
    rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = code_context_from_json(json_object_array_get_idx(arr, i), &out->v[i], err);
    if (rc == 0) out->n++;
  }
  if (rc != 0) sm_code_context_list_dispose(out);
  json_object_put(a);
  return rc;
}

/* ---- a run ---- */

int sm_code_run(sm_runner *runner, const sm_run_request *base, const char *name,
                const char *code, const sm_code_run_opts *opts, sm_code_run_end *out,
                sm_run_result *call, sm_error *err) {
  sm_code_run_opts none = SM_CODE_RUN_OPTS_INIT;
  if (opts == NULL) opts = &none;
  memset(out, 0, sizeof *out);
  out->execution_count = -1;
  int ensure = opts->ensure;
  if (name == NULL) {
    name = SM_CODE_DEFAULT_CONTEXT;
    ensure = 1;
  }
  int bad_name = check_name(name, err);
  if (bad_name != 0) return bad_name;
  if (code == NULL || strlen(code) > SM_CODE_CODE_MAX)
    return sm_error_set(err, SM_EINVAL, "the code of a run is at most %zu bytes",
                        (size_t)SM_CODE_CODE_MAX);
  double timeout = opts->timeout_s > 0 ? opts->timeout_s : base->settings.timeout_s;
  size_t max = opts->max_output ? opts->max_output : SM_CODE_DEFAULT_MAX_OUTPUT;
  if (max > SM_CODE_MAX_OUTPUT_LIMIT) max = SM_CODE_MAX_OUTPUT_LIMIT;
  json_object *q = request_new("run", name);
  if (q == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  json_object_object_add(q, "code", json_object_new_string(code));
  json_object_object_add(q, "timeout_s", json_object_new_double(timeout));
  json_object_object_add(q, "max_output", json_object_new_int64((int64_t)max));
  int rc = 0;
  if (ensure) {
    json_object_object_add(q, "ensure", json_object_new_boolean(1));
    rc = add_create(q, opts->create, err);
  }
  code_call c;
  memset(&c, 0, sizeof c);
  code_wire_init(&c.wire, CODE_WIRE_RUN, max, opts->on_event, opts->ud);
  if (rc == 0)
    rc = code_send(&c, runner, base, q, timeout > 0 ? timeout + CALL_MARGIN_S : 0, call, err);
  if (rc == 0) *out = c.wire.end;
  else out->restarted = c.wire.end.restarted;
  code_wire_dispose(&c.wire);
  json_object_put(q);
  return rc;
}
