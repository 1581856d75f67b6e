/* Tool calls served over HTTP: from a request body to an sm_run_request
 * (policy, tool templates, environment, workspace, hook, lease), the call
 * itself in the foreground or as a background handle, and the answer with
 * credential values scrubbed. Also the lease and handle routes. */
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

#include "server/core.h"

#define GENERIC_401 "missing or invalid token"
#define LEASE_REFUSED "lease invalid or expired"
#define HANDLE_OUTPUT_MAX (1024 * 1024)
#define DELETE_WAIT_S 30
#define OWNED_HOME_NAMES "HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME XDG_CACHE_HOME"

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

struct sm_call {
  sm_server *srv;
  sm_exec_params p;
  sm_resolved r;
  char **argv;
  size_t argc;
  char **env;
  size_t n_env;
  sm_secret_env secrets;
  char ws[PATH_MAX];
  int has_ws;
  int control;          /* made with the control token */
  char principal[SM_PRINCIPAL_MAX];
  char nonce[SM_HOOK_NONCE_LEN * 2 + 1];
  int hook;
  size_t stdin_off;
  sm_run_request req;
  double t0;
  sm_handle *handle;
  const sm_config *cfg; /* the configuration in force when the call came */
  sm_config_egress egress; /* network allowlist: its lists (borrowed from cfg) */
};
typedef struct sm_call call;

/* ---- small helpers ---- */

static void call_free(call *k) {
  if (k == NULL) return;
  sm_exec_params_dispose(&k->p);
  sm_server_strv_free(k->argv, k->argc);
  sm_server_strv_free(k->env, k->n_env);
  sm_secret_env_dispose(&k->secrets);
  OPENSSL_cleanse(&k->req, sizeof k->req);
  free(k);
}

static ssize_t stdin_read(void *ud, char *buf, size_t len) {
  call *k = ud;
  size_t left = k->p.stdin_len - k->stdin_off;
  if (left == 0) return 0;
  if (len > left) len = left;
  memcpy(buf, k->p.stdin_data + k->stdin_off, len);
  k->stdin_off += len;
  return (ssize_t)len;
}

static int env_has_name(char **env, size_t n, const char *kv) {
  const char *eq = strchr(kv, '=');
  size_t nl = eq ? (size_t)(eq - kv) : strlen(kv);
  for (size_t i = 0; i < n; i++)
    if (env[i] && strncmp(env[i], kv, nl) == 0 && env[i][nl] == '=') return 1;
  return 0;
}

/* Shell and python calls get the workspace hook: a "command" (run by a
 * shell) or the tools named shell and python. */
static int is_hook_tool(const sm_exec_params *p) {
  if (p->command) return 1;
  return p->tool && (strcmp(p->tool, "shell") == 0 || strcmp(p->tool, "python") == 0);
}

/* ---- preparing a call ---- */

/* One answer for every workspace a request may not use (missing, outside
 * the root, not a directory, another worker's): the answer tells nothing
 * about the host's files. The reason goes to the runner's log. */
static int workspace_refused(call *k, sm_answer *a, const char *why) {
  sm_log(SM_LOG_INFO, "workspace '%.200s' refused: %s", k->p.workspace, why);
  sm_answer_error(a, 403, "policy",
                  "workspace '%.200s' is not a directory this call may use below the "
                  "workspaces root",
                  k->p.workspace);
  return -1;
}

/* The workspaces root of the call: the agent's workspace_root, else
 * --workspaces-root. */
static int workspace_root(call *k, char root[PATH_MAX], sm_answer *a) {
  sm_server *srv = k->srv;
  if (k->r.workspace_root[0]) {
    char joined[PATH_MAX * 2];
    if (k->r.workspace_root[0] == '/')
      snprintf(joined, sizeof joined, "%s", k->r.workspace_root);
    else if (srv->ws_root[0])
      snprintf(joined, sizeof joined, "%s/%s", srv->ws_root, k->r.workspace_root);
    else {
      sm_answer_error(a, 403, "policy",
                      "the agent's workspace_root is relative and this runner has no "
                      "--workspaces-root");
      return -1;
    }
    /* The operator's own setting: its errors may be told. */
    if (realpath(joined, root) == NULL) {
      sm_answer_error(a, 403, "policy", "the agent's workspace_root %s: %s",
                      k->r.workspace_root, strerror(errno));
      return -1;
    }
  } else if (srv->ws_root[0]) {
    snprintf(root, PATH_MAX, "%s", srv->ws_root);
  } else {
    sm_answer_error(a, 403, "policy",
                    "this runner serves no workspaces: start it with --workspaces-root DIR");
    return -1;
  }
  return 0;
}

/* A path names the same directory for every caller (relative to the root);
 * a worker token may use only what lies below <root>/<worker_key>/. Worker
 * keys hold no '/' and never start with '.': that is a child of the root. */
static int resolve_workspace(call *k, sm_answer *a) {
  char root[PATH_MAX], limit[PATH_MAX];
  if (workspace_root(k, root, a) != 0) return -1;
  if (k->control) {
    snprintf(limit, sizeof limit, "%s", root);
  } else {
    char mine[PATH_MAX * 2];
    snprintf(mine, sizeof mine, "%s/%s", root, k->p.worker_key);
    if (realpath(mine, limit) == NULL)
      return workspace_refused(k, a, "the worker has no directory under the root");
  }
  char cand[PATH_MAX * 2];
  if (k->p.workspace[0] == '/') snprintf(cand, sizeof cand, "%s", k->p.workspace);
  else snprintf(cand, sizeof cand, "%s/%s", root, k->p.workspace);
  if (realpath(cand, k->ws) == NULL) return workspace_refused(k, a, strerror(errno));
  size_t ll = strlen(limit);
  if (strncmp(k->ws, limit, ll) != 0 || k->ws[ll] != '/')
    return workspace_refused(k, a, k->control ? "it does not resolve below the root"
                                              : "it does not resolve below the worker's "
                                                "directory");
  struct stat st;
  if (stat(k->ws, &st) != 0 || !S_ISDIR(st.st_mode))
    return workspace_refused(k, a, "not a directory");
  k->has_ws = 1;
  return 0;
}

static int build_argv(call *k, sm_answer *a) {
  sm_exec_params *p = &k->p;
  if (p->argv) {
    k->argv = p->argv;
    k->argc = p->argc;
    p->argv = NULL;
    p->argc = 0;
    return 0;
  }
  sm_error err = SM_ERROR_INIT;
  if (p->tool) {
    json_object *params = p->params ? json_object_get(p->params) : json_object_new_object();
    if (p->command && !json_object_object_get_ex(params, "command", NULL))
      json_object_object_add(params, "command", json_object_new_string(p->command));
    int rc = sm_config_tool_argv(k->cfg, p->tool, params, &k->argv, &k->argc, &err);
    json_object_put(params);
    if (rc == 0) return 0;
    if (rc != SM_ENOTFOUND || p->command == NULL) {
      sm_answer_error(a, 400, "policy", "%s", err.message);
      return -1;
    }
  }
  if (p->command == NULL) {
    sm_answer_error(a, 400, "policy", "missing 'argv' or 'command'");
    return -1;
  }
  k->argv = calloc(4, sizeof *k->argv);
  if (k->argv) {
    k->argv[0] = strdup("sh");
    k->argv[1] = strdup("-c");
    k->argv[2] = p->command;
    p->command = NULL;
    k->argc = 3;
  }
  if (k->argv == NULL || !k->argv[0] || !k->argv[1]) {
    sm_answer_error(a, 503, "sandbox", "out of memory");
    return -1;
  }
  return 0;
}

static int build_env(call *k, sm_answer *a) {
  sm_error err = SM_ERROR_INIT;
  char **pass = NULL;
  size_t n_pass = 0;
  if (sm_server_env_passthrough(&k->r.settings.env_passthrough, k->srv->creds, &pass, &n_pass,
                                &err) != 0) {
    sm_answer_error(a, 503, "sandbox", "%s", err.message);
    return -1;
  }
  /* The runner applied the globs itself (owned names dropped): sm_run must
   * not apply them again from its own environment. */
  k->r.settings.env_passthrough.n = 0;
  size_t total = n_pass + k->p.n_env;
  k->env = calloc(total + 1, sizeof *k->env);
  if (k->env == NULL) {
    sm_server_strv_free(pass, n_pass);
    sm_answer_error(a, 503, "sandbox", "out of memory");
    return -1;
  }
  /* Request values win over passthrough; leased credentials over both. */
  for (size_t i = 0; i < n_pass; i++) {
    if (env_has_name(k->p.env, k->p.n_env, pass[i]) ||
        env_has_name(k->secrets.kv, k->secrets.n, pass[i])) {
      free(pass[i]);
      continue;
    }
    k->env[k->n_env++] = pass[i];
  }
  free(pass);
  for (size_t i = 0; i < k->p.n_env; i++) {
    if (env_has_name(k->secrets.kv, k->secrets.n, k->p.env[i])) continue;
    k->env[k->n_env++] = k->p.env[i];
    k->p.env[i] = NULL;
  }
  return 0;
}

static int wrap_hook(call *k, sm_answer *a, int *hook_failed, sm_run_result *res) {
  char *content = NULL;
  size_t len = 0;
  sm_error err = SM_ERROR_INIT;
  if (sm_hook_load(k->ws, &content, &len, &err) != 0) {
    /* The hook is the agent's own: its failure is the call's, a tool
     * failure, not a refusal of the request. */
    *hook_failed = 1;
    res->ok = 0;
    res->exit_code = 1;
    res->failure_kind = SM_FAIL_TOOL;
    res->mode = k->r.settings.mode;
    snprintf(res->error, sizeof res->error, "%s", err.message);
    return 0;
  }
  if (content == NULL) return 0;
  sm_buf owned;
  sm_buf_init(&owned, 64 * 1024);
  sm_buf_printf(&owned, "%s", OWNED_HOME_NAMES);
  for (size_t i = 0; i < k->secrets.n; i++) {
    const char *eq = strchr(k->secrets.kv[i], '=');
    if (eq) sm_buf_printf(&owned, " %.*s", (int)(eq - k->secrets.kv[i]), k->secrets.kv[i]);
  }
  sm_server_random_hex(k->nonce, SM_HOOK_NONCE_LEN);
  char **wrapped = NULL;
  size_t wn = 0;
  int rc = sm_hook_wrap((const char *const *)k->argv, k->argc, content, k->nonce,
                        owned.data ? owned.data : OWNED_HOME_NAMES, &wrapped, &wn, &err);
  free(content);
  sm_buf_dispose(&owned);
  if (rc != 0) {
    sm_answer_error(a, 503, "sandbox", "%s", err.message);
    return -1;
  }
  sm_server_strv_free(k->argv, k->argc);
  k->argv = wrapped;
  k->argc = wn;
  k->hook = 1;
  return 0;
}

/* A request's "network" may narrow the resolved one (bridge > allowlist >
 * none), never widen it: a worker token cannot buy itself a way out. */
static int network_rank(const char *n) {
  return strcmp(n, "bridge") == 0 ? 2 : strcmp(n, "allowlist") == 0 ? 1 : 0;
}

static int narrow_network(call *k, sm_answer *a) {
  sm_sandbox_settings *s = &k->r.settings;
  if (network_rank(k->p.network) > network_rank(s->network)) {
    sm_answer_error(a, 403, "policy", "network %s is wider than this call's network %s", k->p.network,
                    s->network);
    return -1;
  }
  snprintf(s->network, sizeof s->network, "%s", k->p.network);
  if (strcmp(s->network, "allowlist") != 0) s->egress_owner[0] = '\0';
  else if (s->egress_owner[0] == '\0') snprintf(s->egress_owner, sizeof s->egress_owner, "defaults");
  return 0;
}

/* Checks, resolves and builds everything; 0 and k ready, or -1 with *a
 * filled. A hook that cannot be used is reported through *early (a result
 * of the call, not an HTTP error). */
static int prepare(call *k, int control, const char *token, sm_answer *a, int *early,
                   sm_run_result *early_res) {
  sm_server *srv = k->srv;
  sm_exec_params *p = &k->p;
  if (!control && !sm_server_token_ok(srv, token, p->worker_key)) {
    sm_answer_error(a, 401, "policy", GENERIC_401);
    return -1;
  }
  /* Whose keyed sandbox the call may use: a worker's own (the control token
   * naming a worker_key acts for that worker), or any for the control token. */
  k->control = control;
  if (p->worker_key) {
    if (sm_principal_worker(p->worker_key, k->principal, sizeof k->principal, NULL) != 0) {
      sm_answer_error(a, 400, "policy", "field 'worker_key' is too long");
      return -1;
    }
  } else {
    snprintf(k->principal, sizeof k->principal, "%s", SM_PRINCIPAL_CONTROL);
  }
  sm_config_flags flags;
  if (srv->have_flags) flags = srv->flags;
  else memset(&flags, 0, sizeof flags);
  if (p->has_mode) flags.mode = sm_server_mode_name(p->mode);
  sm_error err = SM_ERROR_INIT;
  k->cfg = sm_server_config(srv);
  if (sm_config_resolve(k->cfg, p->agent, p->tool, p->user, &flags, &k->r, &err) !=
      0) {
    sm_answer_error(a, 400, "policy", "%s", err.message);
    return -1;
  }
  if (!k->r.allowed) {
    sm_log_event(SM_LOG_INFO, "call.refused",
                 SM_LOG_FIELDS(SM_LOG_STR("tool", p->tool), SM_LOG_STR("agent", p->agent),
                               SM_LOG_STR("rule", k->r.rule[0] ? k->r.rule : NULL)),
                 "tool %s refused by the configuration", p->tool ? p->tool : "(none)");
    sm_answer_error(a, 403, "policy", "tool %s refused by %s", p->tool ? p->tool : "(none)",
                    k->r.rule[0] ? k->r.rule : "the configuration");
    return -1;
  }
  /* A request may pick any container mode, but not leave the sandbox on a
   * runner whose own mode is sandboxed: mode none runs on the host. */
  if (p->has_mode && p->mode == SM_MODE_NONE && srv->opts.mode != SM_MODE_NONE) {
    sm_answer_error(a, 403, "policy",
                    "mode none is not allowed on this runner (its mode is %s): calls may not "
                    "run on the host",
                    sm_server_mode_name(srv->opts.mode));
    return -1;
  }
  if (p->has_mode && p->mode == SM_MODE_PER_WORKER && p->worker_key == NULL) {
    sm_answer_error(a, 400, "policy", "mode per_worker needs 'worker_key'");
    return -1;
  }
  if (p->has_mode && p->mode == SM_MODE_PER_RUN && p->run_id == NULL) {
    sm_answer_error(a, 400, "policy", "mode per_run needs 'run_id'");
    return -1;
  }
  /* Selective sandboxing decides where an agent runtime runs a tool; what
   * reaches the runner runs in the runner's sandboxes, never on its host
   * (unless the runner's own mode is none). */
  if (!k->r.sandboxed && srv->opts.mode != SM_MODE_NONE) {
    /* The resolver said mode none (host) for it: the runner's own mode (or
     * the container mode the request asked for) applies instead. */
    k->r.settings.mode = p->has_mode ? p->mode : srv->opts.mode;
    sm_log(SM_LOG_DEBUG, "tool %s is not sandboxed by the configuration (%s): the runner "
           "sandboxes it anyway (mode %s)", p->tool ? p->tool : "(none)", k->r.sandbox_rule,
           sm_server_mode_name(k->r.settings.mode));
  }
  if (p->network && narrow_network(k, a) != 0) return -1;
  int hook_tool = is_hook_tool(p);
  if (build_argv(k, a) != 0) return -1;
  if (p->workspace && resolve_workspace(k, a) != 0) return -1;
  if (p->lease_id) {
    sm_lease_params lp;
    if (srv->creds == NULL ||
        sm_lease_consume(srv->leases, p->lease_id, p->tool, p->worker_key, sm_now(), &lp) !=
            0) {
      sm_metrics_lease(srv->metrics, "refused");
      sm_log_event(SM_LOG_WARN, "lease.refused", SM_LOG_FIELDS(SM_LOG_STR("tool", p->tool)),
                   "lease refused for tool %s", p->tool ? p->tool : "(none)");
      sm_answer_error(a, 403, "policy", LEASE_REFUSED);
      return -1;
    }
    if (sm_creds_env(srv->creds, &lp, &k->secrets, &err) != 0) {
      OPENSSL_cleanse(&lp, sizeof lp);
      sm_answer_error(a, 403, "policy", LEASE_REFUSED);
      return -1;
    }
    sm_metrics_lease(srv->metrics, "consumed");
    sm_log(SM_LOG_INFO, "lease consumed: %zu credential variable(s) for this exec only",
           k->secrets.n);
    OPENSSL_cleanse(&lp, sizeof lp);
  }
  if (build_env(k, a) != 0) return -1;
  if (k->has_ws && hook_tool) {
    if (wrap_hook(k, a, early, early_res) != 0) return -1;
    if (*early) return 0;
  }

  sm_run_request *q = &k->req;
  sm_run_request_init(q);
  q->argv = (const char *const *)k->argv;
  q->argc = k->argc;
  q->env = (const char *const *)k->env;
  q->n_env = k->n_env;
  q->secret_env = (const char *const *)k->secrets.kv;
  q->n_secret_env = k->secrets.n;
  if (p->has_stdin) {
    q->stdin_read = stdin_read;
    q->stdin_ud = k;
  }
  q->project = p->project ? p->project : srv->project;
  q->project_environment = srv->project_environment;
  q->agent = p->agent;
  q->tool = p->tool;
  q->user = p->user;
  q->run_id = p->run_id;
  q->worker_id = p->worker_key;
  q->scope = k->r.scope_kind;
  q->principal = k->principal;
  q->workspace = k->has_ws ? k->ws : NULL;
  q->sync = p->has_sync ? p->sync : SM_SYNC_DEFAULT;
  q->settings = k->r.settings;
  sm_config_egress_get(k->cfg, p->agent, &k->egress);
  q->egress = k->egress.levels;
  q->n_egress = k->egress.n_levels;
  if (p->timeout_s > 0) q->settings.timeout_s = p->timeout_s;
  return 0;
}

/* ---- running and answering ---- */

static int do_run(sm_server *srv, const sm_run_request *req, sm_run_result *res,
                  sm_error *err) {
  if (srv->opts.run) return srv->opts.run(srv->opts.run_userdata, req, res, err);
  if (srv->opts.runner == NULL)
    return sm_error_set(err, SM_EUNSUPPORTED, "this runner cannot run tool calls");
  return sm_run(srv->opts.runner, req, res, err);
}

static void run_call(call *k, sm_run_result *res) {
  sm_error err = SM_ERROR_INIT;
  memset(res, 0, sizeof *res);
  int rc = do_run(k->srv, &k->req, res, &err);
  if (rc != 0) {
    res->ok = 0;
    if (res->failure_kind == SM_FAIL_NONE) {
      res->failure_kind = rc == SM_EPOLICY ? SM_FAIL_POLICY
                          : (rc == SM_EUNREACHABLE || rc == SM_EENGINE || rc == SM_ETLS)
                              ? SM_FAIL_ENGINE
                              : SM_FAIL_SANDBOX;
      res->exit_code = 125;
    }
    if (res->error[0] == '\0')
      snprintf(res->error, sizeof res->error, "%s",
               err.message[0] ? err.message : sm_error_default_message(rc));
  }
  if (k->hook) sm_hook_finish(k->nonce, res);
}

static const char *outcome_of(const sm_run_result *res) {
  if (res->failure_kind != SM_FAIL_NONE) {
    const char *n = sm_failure_kind_name(res->failure_kind);
    return n ? n : "tool";
  }
  return res->ok ? "ok" : "tool";
}

/* Scrubs, records metrics and builds the answer. */
static void answer_result(call *k, sm_run_result *res, sm_answer *a) {
  sm_server *srv = k->srv;
  sm_server_redact(&res->stdout_data, &res->stdout_len, &k->secrets);
  sm_server_redact(&res->stderr_data, &res->stderr_len, &k->secrets);
  sm_server_redact_str(res->error, sizeof res->error, &k->secrets);
  /* The copy out's refused paths and a replacement's reason quote what the
   * tool chose: a name made of the value is the value. */
  for (size_t i = 0; i < res->n_refused; i++) {
    size_t len = strlen(res->refused[i].path);
    sm_server_redact(&res->refused[i].path, &len, &k->secrets);
  }
  sm_server_redact_str(res->replaced_because, sizeof res->replaced_because, &k->secrets);
  const char *outcome = outcome_of(res);
  double secs = (sm_monotonic_ms() - k->t0) / 1000.0;
  sm_metrics_call(srv->metrics, k->p.tool, sm_server_mode_name(res->mode), outcome, secs);
  if (strcmp(outcome, "ok") != 0) sm_metrics_failure(srv->metrics, outcome);
  sm_log_event(res->failure_kind == SM_FAIL_SANDBOX || res->failure_kind == SM_FAIL_ENGINE
                   ? SM_LOG_WARN
                   : SM_LOG_INFO,
               "call.result",
               SM_LOG_FIELDS(SM_LOG_STR("tool", k->p.tool), SM_LOG_STR("agent", k->p.agent),
                             SM_LOG_STR("mode", sm_server_mode_name(res->mode)),
                             SM_LOG_STR("sandbox", res->sandbox_id[0] ? res->sandbox_id : NULL),
                             SM_LOG_STR("outcome", outcome), SM_LOG_INT("exit_code", res->exit_code),
                             SM_LOG_NUM("duration_ms", secs * 1000.0),
                             SM_LOG_BOOL("timed_out", res->timed_out),
                             SM_LOG_BOOL("oom_killed", res->oom_killed),
                             SM_LOG_STR("error", res->error[0] ? res->error : NULL)),
               "call tool=%s mode=%s -> %s, exit %d in %.0f ms", k->p.tool ? k->p.tool : "-",
               sm_server_mode_name(res->mode), outcome, res->exit_code, secs * 1000.0);
  a->body = sm_run_result_to_json(res);
  /* An isolation that cannot be had is refused, never weakened: a sandbox
   * that could not be made or used (nothing ran) is 503 like the engine. */
  a->status = res->failure_kind == SM_FAIL_POLICY                      ? 403
              : res->failure_kind == SM_FAIL_ENGINE                    ? 503
              : res->failure_kind == SM_FAIL_SANDBOX && !res->started ? 503
                                                                       : 200;
}

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
  run_call(k, &res);
  sm_answer a = {0, NULL};
  answer_result(k, &res, &a);
  sm_run_result_dispose(&res);
  pthread_mutex_lock(&h->mu);
  h->result = a.body;
  h->result_status = a.status;
  h->done = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  call_free(k);
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
    call_free(k);
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
    call_free(k);
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
    call_free(k);
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

/* ---- calls for the other routes (files, streamed execute, MCP) ---- */

sm_call *sm_call_prepare(sm_server *srv, sm_exec_params *p, int control, const char *token,
                         sm_answer *a) {
  call *k = calloc(1, sizeof *k);
  if (k == NULL) {
    sm_exec_params_dispose(p);
    sm_answer_error(a, 503, "sandbox", "out of memory");
    return NULL;
  }
  k->srv = srv;
  k->t0 = sm_monotonic_ms();
  k->p = *p;
  memset(p, 0, sizeof *p);
  int early = 0;
  sm_run_result early_res;
  memset(&early_res, 0, sizeof early_res);
  if (prepare(k, control, token, a, &early, &early_res) != 0) {
    call_free(k);
    return NULL;
  }
  if (early) { /* a workspace hook that cannot be used: its answer */
    answer_result(k, &early_res, a);
    sm_run_result_dispose(&early_res);
    call_free(k);
    return NULL;
  }
  return k;
}

sm_run_request *sm_call_request(sm_call *k) { return &k->req; }
const sm_exec_params *sm_call_params(const sm_call *k) { return &k->p; }
const sm_secret_env *sm_call_secrets(const sm_call *k) { return &k->secrets; }
void sm_call_run(sm_call *k, sm_run_result *res) { run_call(k, res); }
void sm_call_answer(sm_call *k, sm_run_result *res, sm_answer *a) { answer_result(k, res, a); }
void sm_call_free(sm_call *k) { call_free(k); }

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
                     const char *token, int accept_stream, sm_stream *stream, sm_answer *a) {
  call *k = calloc(1, sizeof *k);
  if (k == NULL) {
    sm_answer_error(a, 503, "sandbox", "out of memory");
    return;
  }
  k->srv = srv;
  k->t0 = sm_monotonic_ms();
  sm_error err = SM_ERROR_INIT;
  /* A worker token is checked against the body's worker_key before anything
   * else about the body is told: an unauthenticated caller learns nothing. */
  if (!worker_token_ok(srv, body, len, control, token)) {
    sm_answer_error(a, 401, "policy", GENERIC_401);
    call_free(k);
    return;
  }
  if (sm_server_parse_execute(body, len, srv->opts.max_body, &k->p, &err) != 0) {
    sm_answer_error(a, 400, "policy", "%s", err.message);
    call_free(k);
    return;
  }
  if ((k->p.stream || accept_stream) && k->p.background_on_timeout) {
    sm_answer_error(a, 400, "policy", "a streamed call cannot go to the background: give "
                    "either 'stream' or 'background_on_timeout'");
    call_free(k);
    return;
  }
  int early = 0;
  sm_run_result early_res;
  memset(&early_res, 0, sizeof early_res);
  if (prepare(k, control, token, a, &early, &early_res) != 0) {
    call_free(k);
    return;
  }
  if (early) {
    answer_result(k, &early_res, a);
    sm_run_result_dispose(&early_res);
    call_free(k);
    return;
  }
  if (k->p.stream || accept_stream) {
    sm_exec_streamed(k, stream, a); /* owns k */
    return;
  }
  if (k->p.background_on_timeout) {
    run_background(k, a); /* owns k */
    return;
  }
  sm_run_result res;
  run_call(k, &res);
  answer_result(k, &res, a);
  sm_run_result_dispose(&res);
  call_free(k);
}

void sm_exec_lease(sm_server *srv, const char *body, size_t len, int control,
                   const char *token, sm_answer *a) {
  sm_lease_params p;
  sm_error err = SM_ERROR_INIT;
  if (!worker_token_ok(srv, body, len, control, token)) {
    sm_answer_error(a, 401, "policy", GENERIC_401);
    return;
  }
  if (sm_server_parse_lease(body, len, &p, &err) != 0) {
    sm_answer_error(a, 400, "policy", "%s", err.message);
    return;
  }
  /* A worker's token makes leases for its own worker only. */
  if (!control && !sm_server_token_ok(srv, token, p.worker_key)) {
    sm_answer_error(a, 401, "policy", GENERIC_401);
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
    else sm_answer_error(a, 401, "policy", GENERIC_401);
    return -1;
  }
  if (!control && (h->worker_key[0] == '\0' || !sm_server_token_ok(srv, token, h->worker_key))) {
    handle_unref(h);
    sm_answer_error(a, 401, "policy", GENERIC_401);
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
