/* One host tool call: who may, the arguments, the limits, the operator's
 * approval, then the tool (argv, http or a host MCP server's), the result
 * and its audit rows. Every refusal says why and is recorded with its rule.
 * docs/host-tools.md "A call, step by step". */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/util.h>

#include "broker/audit_rows.h"
#include "broker/broker_core.h"
#include "broker/ids.h"
#include "broker/mcp_catalog.h"
#include "broker/broker_policy.h"
#include "broker/run_argv.h"
#include "broker/run_http.h"
#include "broker/schema.h"
#include "broker/state.h"
#include "common/strv.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

typedef struct call {
  sm_broker *b;
  const sm_route_caller *who;
  const char *name;
  const bk_tool *tool;
  json_object *args;   /* borrowed */
  json_object *masked; /* owned */
  volatile int *cancel;
  bk_outcome *done;
  bk_refusal *why;
  double start;
} call;

/* Records the refusal and returns code with err's message. rule_shown: the
 * caller sees the rule (policy refusals of a tool it can see). */
__attribute__((format(printf, 7, 8))) static int refuse(call *c, int code, int status,
                                                        const char *reason, const char *rule,
                                                        sm_error *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->why->status = status;
  c->why->reason = reason;
  snprintf(c->why->rule, sizeof c->why->rule, "%s", status == 404 ? "" : rule ? rule : "");
  bk_row row = BK_ROW_INIT;
  row.event = "host_tool.refused";
  row.host_tool = c->name;
  row.host_call = c->done->host_call;
  row.reason = reason;
  row.rule = rule;
  row.message = msg;
  row.arguments = c->masked;
  broker_audit(c->b->audit, c->who, &row);
  return sm_error_set(err, code, "%s", msg);
}

/* Policy, schema and what the setting can do: before anything runs. */
static int admit(call *c, sm_error *err) {
  sm_broker *b = c->b;
  char rule[256] = "";
  if (!c->who->active)
    return refuse(c, SM_EPOLICY, 403, "no_active_call",
                  "the route answers only while sandman drives a call in the sandbox", err,
                  "no active call");
  sm_error jerr = SM_ERROR_INIT;
  if (broker_catalog_join_servers(b, &jerr))
    return refuse(c, jerr.code ? jerr.code : SM_ECONFIG, 503, "mcp_servers", "broker.mcp_servers",
                  err, "%s", jerr.message);
  c->tool = broker_catalog_find(&b->catalog, c->name);
  if (!c->tool) snprintf(rule, sizeof rule, "no broker.tools.%.64s", c->name);
  if (!c->tool ||
      !broker_policy_tool(b->conf, c->who->agent, c->who->tool, c->name, rule, sizeof rule))
    return refuse(c, SM_ENOTFOUND, 404, "not_found", rule, err, "no host tool '%.64s'", c->name);
  c->masked = broker_tool_masked_args(c->tool, c->args);
  char why[256];
  if (!c->tool->by_server && broker_schema_check(c->tool->schema, c->args, why, sizeof why))
    return refuse(c, SM_EINVAL, 400, "schema", "input_schema", err, "%s", why);
  json_object *tmpl = NULL, *dash = NULL;
  if (c->tool->kind == BK_ARGV && json_object_object_get_ex(c->tool->def, "argv", &tmpl)) {
    json_object_object_get_ex(c->tool->def, "allow_dash", &dash);
    if (broker_argv_dash_check(tmpl, c->args, dash, why, sizeof why))
      return refuse(c, SM_EINVAL, 400, "schema", "allow_dash", err, "%s", why);
  }
  json_object *creds = NULL;
  pthread_mutex_lock(&b->mu);
  int have_creds = b->credentials != NULL;
  pthread_mutex_unlock(&b->mu);
  if (c->tool->approval && !b->approvals_on)
    return refuse(c, SM_EPOLICY, 403, "approval", "approval: required", err,
                  "host tool '%s' needs an operator: run it through the runner (sandman worker "
                  "start)",
                  c->name);
  if (json_object_object_get_ex(c->tool->def, "credentials", &creds) &&
      json_object_array_length(creds) > 0 && !have_creds)
    return refuse(c, SM_EPOLICY, 403, "credentials", "credentials", err,
                  "host tool '%s' needs the runner's credentials file (sandman worker start "
                  "--credentials-file)",
                  c->name);
  return 0;
}

static void approval_row(call *c, const char *outcome, const char *id, const char *by) {
  bk_row row = BK_ROW_INIT;
  row.event = "host_tool.approval";
  row.host_tool = c->name;
  row.host_call = c->done->host_call;
  row.outcome = outcome;
  row.approval = id;
  row.by = by;
  row.arguments = c->masked;
  row.message = "an operator's approval of a host tool call";
  broker_audit(c->b->audit, c->who, &row);
}

static void on_open(void *ud, const char *id) { approval_row(ud, "requested", id, NULL); }

static int approve(call *c, sm_error *err) {
  char id[33], by[128];
  bk_approval_req req = {c->name, c->who->agent, c->who->sandbox, c->who->call_id,
                         json_object_get(c->masked), c->tool->approval_timeout_s, c->cancel};
  bk_verdict v = broker_approvals_wait(c->b->approvals, &req, on_open, c, id, by);
  static const char *const names[] = {"approved", "denied", "expired", "abandoned"};
  approval_row(c, names[v], id, by[0] ? by : NULL);
  if (v == BK_APPROVED) return 0;
  if (v == BK_EXPIRED)
    return refuse(c, SM_ETIMEOUT, 504, "approval_timeout", "approval_timeout", err,
                  "no operator approved host tool '%s' within %.0fs", c->name,
                  c->tool->approval_timeout_s);
  if (v == BK_DENIED)
    return refuse(c, SM_EPOLICY, 403, "approval_denied", "approval: required", err,
                  "an operator refused host tool '%s'", c->name);
  return refuse(c, SM_ECANCELLED, 503, "cancelled", NULL, err,
                "the call to host tool '%s' ended before an operator answered", c->name);
}

static int add_env(void *ud, const char *name, const char *value) {
  return common_strv_addf(ud, "%s=%s", name, value) ? -1 : 0;
}

static void env_dispose(common_strv *env) {
  for (size_t i = 0; i < env->n; i++) explicit_bzero(env->v[i], strlen(env->v[i]));
  common_strv_dispose(env);
}

/* PATH, the variables the tool's env names (from the host), then its
 * credentials; nothing else of sandman's environment. */
static int build_env(call *c, common_strv *env, sm_error *err) {
  const char *path = getenv("PATH");
  json_object *names = NULL, *creds = NULL;
  if (common_strv_addf(env, "PATH=%s", path && path[0] ? path : DEFAULT_PATH))
    return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  json_object_object_get_ex(c->tool->def, "env", &names);
  for (size_t i = 0; names && i < json_object_array_length(names); i++) {
    const char *n = json_object_get_string(json_object_array_get_idx(names, i));
    const char *v = strcmp(n, "PATH") ? getenv(n) : NULL;
    if (v && common_strv_addf(env, "%s=%s", n, v))
      return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  }
  json_object_object_get_ex(c->tool->def, "credentials", &creds);
  pthread_mutex_lock(&c->b->mu);
  sm_broker_credentials_fn fn = c->b->credentials;
  void *ud = c->b->credentials_ud;
  pthread_mutex_unlock(&c->b->mu);
  for (size_t i = 0; creds && i < json_object_array_length(creds); i++) {
    const char *svc = json_object_get_string(json_object_array_get_idx(creds, i));
    int rc = fn ? fn(ud, svc, add_env, env, err)
                : sm_error_set(err, SM_EPOLICY, "no credentials file is lent to the broker");
    if (rc) return rc;
  }
  return 0;
}

static void shape_proc(const bk_proc_result *r, size_t cap, sm_mcp_result *out) {
  /* Always a text block, empty too: a client shows content, not structured. */
  sm_mcp_result_text(out, r->out, r->out_len);
  if (r->out_truncated) {
    char note[96];
    int n = snprintf(note, sizeof note, "[output truncated at %zu bytes]", cap);
    sm_mcp_result_text(out, note, (size_t)n);
  }
  if (r->exit_code != 0 && r->err_len && !r->out_len) {
    json_object_put(out->content); /* the empty block goes: stderr says why */
    out->content = NULL;
    sm_mcp_result_text(out, r->errout, r->err_len);
  }
  json_object *s = json_object_new_object();
  json_object_object_add(s, "exit_code", json_object_new_int(r->exit_code));
  json_object_object_add(s, "stderr", json_object_new_string_len(r->errout, (int)r->err_len));
  json_object_object_add(s, "stdout_truncated", json_object_new_boolean(r->out_truncated));
  json_object_object_add(s, "stderr_truncated", json_object_new_boolean(r->err_truncated));
  sm_mcp_result_structured(out, s);
  out->is_error = r->exit_code != 0;
}

static int run_argv(call *c, sm_mcp_result *out, int *exit_code, sm_error *err) {
  json_object *tmpl = NULL, *cwd = NULL;
  json_object_object_get_ex(c->tool->def, "argv", &tmpl);
  json_object_object_get_ex(c->tool->def, "cwd", &cwd);
  common_strv argv = {0}, env = {0};
  int rc = broker_argv_build(tmpl, c->args, &argv, err);
  if (rc == 0) rc = build_env(c, &env, err);
  bk_proc_result r;
  bk_proc_opts o = {argv.v, env.v, cwd ? json_object_get_string(cwd) : NULL, c->tool->timeout_s,
                    c->tool->max_output, c->cancel};
  if (rc == 0) rc = broker_proc_run(&o, &r, err);
  env_dispose(&env);
  common_strv_dispose(&argv);
  if (rc) return rc;
  *exit_code = r.exit_code;
  if (r.timed_out)
    rc = sm_error_set(err, SM_ETIMEOUT, "host tool '%s' ran past its timeout of %.0fs and was killed",
                      c->name, c->tool->timeout_s);
  else if (r.cancelled)
    rc = sm_error_set(err, SM_ECANCELLED, "the call to host tool '%s' was cancelled", c->name);
  else
    shape_proc(&r, c->tool->max_output, out);
  broker_proc_result_dispose(&r);
  return rc;
}

static int run_tool(call *c, sm_mcp_result *out, int *exit_code, sm_error *err) {
  json_object *x = NULL, *srv = NULL, *tool = NULL;
  if (c->tool->kind == BK_ARGV) return run_argv(c, out, exit_code, err);
  if (c->tool->kind == BK_HTTP) {
    json_object_object_get_ex(c->tool->def, "http", &x);
    return broker_http_call(x, c->args, c->tool->timeout_s, c->tool->max_output, c->cancel, out,
                            err);
  }
  json_object_object_get_ex(c->tool->def, "mcp", &x);
  json_object_object_get_ex(x, "server", &srv);
  json_object_object_get_ex(x, "tool", &tool);
  if (!c->b->mcp) return sm_error_set(err, SM_EUNSUPPORTED, "no host MCP server is running");
  int rc =
      broker_mcp_servers_call(c->b->mcp, json_object_get_string(srv), json_object_get_string(tool),
                              c->args, c->tool->timeout_s, c->cancel, out, err);
  if (rc == 0) broker_mcp_result_cap(out, c->tool->max_output);
  return rc;
}

/* Runs the admitted call and records how it ended. */
static int execute(call *c, sm_mcp_result *out, sm_error *err) {
  bk_row row = BK_ROW_INIT;
  char rule[256];
  broker_policy_tool(c->b->conf, c->who->agent, c->who->tool, c->name, rule, sizeof rule);
  row.event = "host_tool.allowed";
  row.host_tool = c->name;
  row.host_call = c->done->host_call;
  row.rule = rule;
  row.arguments = c->masked;
  row.message = "host tool call allowed";
  broker_audit(c->b->audit, c->who, &row);
  int exit_code = -1;
  double t0 = sm_now();
  int rc = run_tool(c, out, &exit_code, err);
  row = (bk_row)BK_ROW_INIT;
  row.event = "host_tool.call";
  row.host_tool = c->name;
  row.host_call = c->done->host_call;
  row.exit_code = exit_code;
  row.duration_ms = (sm_now() - t0) * 1000.0;
  row.outcome = rc == SM_ETIMEOUT ? "timeout" : rc == SM_ECANCELLED ? "cancelled" : rc ? "failed"
                : out->is_error ? "error" : "ok";
  row.message = rc ? err->message : "host tool call ended";
  broker_audit(c->b->audit, c->who, &row);
  if (rc == SM_ETIMEOUT) c->why->status = 504, c->why->reason = "timeout";
  else if (rc == SM_ECANCELLED) c->why->status = 503, c->why->reason = "cancelled";
  else if (rc) c->why->status = 502, c->why->reason = "tool_failed";
  return rc;
}

static int limited(call *c, sm_mcp_result *out, sm_error *err) {
  const char *which = NULL;
  const char *box = c->who->container_id && c->who->container_id[0] ? c->who->container_id : "-";
  if (broker_limits_enter(c->b->limits, box, c->name, c->tool->concurrency, c->tool->rate, sm_now(),
                          &which))
    return refuse(c, SM_EBUSY, 429, which,
                  strcmp(which, "rate") == 0 ? "rate" : "concurrency", err,
                  strcmp(which, "rate") == 0
                      ? "host tool '%s': more than %d calls in a minute from this sandbox"
                      : "host tool '%s': %d calls already in flight from this sandbox",
                  c->name, strcmp(which, "rate") == 0 ? c->tool->rate : c->tool->concurrency);
  int rc = c->tool->approval ? approve(c, err) : 0;
  if (rc == 0) rc = execute(c, out, err);
  broker_limits_leave(c->b->limits, box, c->name);
  return rc;
}

int broker_call(sm_broker *b, const sm_route_caller *who, const char *name, json_object *args,
                volatile int *cancel, sm_mcp_result *out, bk_outcome *done, bk_refusal *why,
                sm_error *err) {
  bk_outcome d0;
  bk_refusal w0;
  json_object *empty = NULL;
  call c = {b, who, name ? name : "", NULL, args, NULL, cancel, done ? done : &d0, why ? why : &w0,
            sm_now()};
  memset(c.why, 0, sizeof *c.why);
  memset(c.done, 0, sizeof *c.done);
  broker_random_id(c.done->host_call, sizeof c.done->host_call, "ht-", 12);
  if (!args) c.args = empty = json_object_new_object();
  pthread_mutex_lock(&b->mu);
  b->in_flight++;
  pthread_mutex_unlock(&b->mu);
  int rc = admit(&c, err);
  if (rc == 0) rc = limited(&c, out, err);
  c.done->duration_ms = (sm_now() - c.start) * 1000.0;
  json_object_put(c.masked);
  json_object_put(empty);
  pthread_mutex_lock(&b->mu);
  if (--b->in_flight == 0) pthread_cond_broadcast(&b->idle);
  pthread_mutex_unlock(&b->mu);
  return rc;
}

int sm_broker_call(sm_broker *b, const sm_route_caller *who, const char *name, json_object *args,
                   volatile int *cancel, sm_mcp_result *out, sm_error *err) {
  if (!b || !who) return sm_error_set(err, SM_EINVAL, "broker: no broker or caller");
  return broker_call(b, who, name, args, cancel, out, NULL, NULL, err);
}
