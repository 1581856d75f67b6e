/* A tool call of the runner: from its parameters to an sm_run_request
 * (token, policy, tool templates, environment, network, workspace, hook,
 * lease), the call itself, and the answer with credential values scrubbed.
 * The routes (execute.c, execute_stream.c, files_route.c) build on it; it calls
 * nothing of theirs. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include <sandman/keep.h>
#include <sandman/log.h>
#include <sandman/util.h>

#include "server/server_call.h"
#include "server/sandbox_owner.h"

#define GENERIC_401 SM_CALL_GENERIC_401
#define LEASE_REFUSED "lease invalid or expired"
#define OWNED_HOME_NAMES "HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME XDG_CACHE_HOME"

typedef struct server_call call;

/* ---- small helpers ---- */

/* The lease's use taken for this call: spent when the credentials were
 * handed to the sandbox, else given back (nothing ran with them: a 503
 * before the tool, a full queue). */
static void settle_lease(call *k, int used) {
  if (!k->lease_pending) return;
  k->lease_pending = 0;
  sm_server *srv = k->srv;
  if (server_lease_settle(srv->leases, k->p.lease_id, used, sm_now(), NULL) != 0 || used) return;
  server_metrics_lease(srv->metrics, "restored");
  server_audit_lease(srv, "lease.restored", k->p.lease_id, k->p.tool, k->p.worker_key,
                     "the call did not run: its use is given back");
  sm_log(SM_LOG_INFO, "lease %.6s...: the call did not run, its use is given back", k->p.lease_id);
}

static void call_free(call *k) {
  if (k == NULL) return;
  free(k->made);
  settle_lease(k, 0);
  server_execute_params_dispose(&k->p);
  common_strings_free(k->argv, k->argc);
  common_strings_free(k->env, k->n_env);
  server_secret_env_dispose(&k->secrets);
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
static int is_hook_tool(const server_execute_params *p) {
  if (p->command) return 1;
  return p->tool && (strcmp(p->tool, "shell") == 0 || strcmp(p->tool, "python") == 0);
}

/* ---- preparing a call ---- */

/* One answer for every workspace a request may not use (missing, outside
 * the root, not a directory, another worker's): the answer tells nothing
 * about the host's files. The reason goes to the runner's log. */
static int workspace_refused(call *k, sm_error *err, const char *why) {
  sm_log(SM_LOG_INFO, "workspace '%.200s' refused: %s", k->p.workspace, why);
  return sm_error_set(err, SM_EPOLICY,
                      "workspace '%.200s' is not a directory this call may use below the "
                      "workspaces root",
                      k->p.workspace);
}

/* The workspaces root of the call: the agent's workspace_root, else
 * --workspaces-root. */
static int workspace_root(call *k, char root[PATH_MAX], sm_error *err) {
  sm_server *srv = k->srv;
  if (k->r.workspace_root[0]) {
    char joined[PATH_MAX * 2];
    if (k->r.workspace_root[0] == '/')
      snprintf(joined, sizeof joined, "%s", k->r.workspace_root);
    else if (srv->ws_root[0])
      snprintf(joined, sizeof joined, "%s/%s", srv->ws_root, k->r.workspace_root);
    else
      return sm_error_set(err, SM_EPOLICY,
                          "the agent's workspace_root is relative and this runner has no "
                          "--workspaces-root");
    /* The operator's own setting: its errors may be told. */
    if (realpath(joined, root) == NULL)
      return sm_error_set_errno(err, SM_EPOLICY, errno, "the agent's workspace_root %s",
                                k->r.workspace_root);
  } else if (srv->ws_root[0]) {
    snprintf(root, PATH_MAX, "%s", srv->ws_root);
  } else {
    return sm_error_set(err, SM_EPOLICY,
                        "this runner serves no workspaces: start it with --workspaces-root DIR");
  }
  return 0;
}

/* A path names the same directory for every caller (relative to the root);
 * a worker token may use only what lies below <root>/<worker_key>/. Worker
 * keys hold no '/' and never start with '.': that is a child of the root. */
static int resolve_workspace(call *k, sm_error *err) {
  char root[PATH_MAX], limit[PATH_MAX];
  int rc = workspace_root(k, root, err);
  if (rc != 0) return rc;
  if (k->control) {
    snprintf(limit, sizeof limit, "%s", root);
  } else {
    char mine[PATH_MAX * 2];
    snprintf(mine, sizeof mine, "%s/%s", root, k->p.worker_key);
    if (realpath(mine, limit) == NULL)
      return workspace_refused(k, err, "the worker has no directory under the root");
  }
  char cand[PATH_MAX * 2];
  if (k->p.workspace[0] == '/') snprintf(cand, sizeof cand, "%s", k->p.workspace);
  else snprintf(cand, sizeof cand, "%s/%s", root, k->p.workspace);
  if (realpath(cand, k->ws) == NULL) return workspace_refused(k, err, strerror(errno));
  size_t ll = strlen(limit);
  if (strncmp(k->ws, limit, ll) != 0 || k->ws[ll] != '/')
    return workspace_refused(k, err, k->control ? "it does not resolve below the root"
                                              : "it does not resolve below the worker's "
                                                "directory");
  struct stat st;
  if (stat(k->ws, &st) != 0 || !S_ISDIR(st.st_mode))
    return workspace_refused(k, err, "not a directory");
  k->has_ws = 1;
  return 0;
}

static int build_argv(call *k, sm_error *err) {
  server_execute_params *p = &k->p;
  if (p->argv) {
    k->argv = p->argv;
    k->argc = p->argc;
    p->argv = NULL;
    p->argc = 0;
    return 0;
  }
  if (p->tool) {
    sm_error tool_err = SM_ERROR_INIT;
    json_object *params = p->params ? json_object_get(p->params) : json_object_new_object();
    if (p->command && !json_object_object_get_ex(params, "command", NULL))
      json_object_object_add(params, "command", json_object_new_string(p->command));
    int rc = sm_config_tool_argv(k->cfg, p->tool, params, &k->argv, &k->argc, &tool_err);
    json_object_put(params);
    if (rc == 0) return 0;
    /* A tool template the request cannot fill is a bad request. */
    if (rc != SM_ENOTFOUND || p->command == NULL)
      return sm_error_set(err, SM_EINVAL, "%s", tool_err.message);
  }
  if (p->command == NULL) return sm_error_set(err, SM_EINVAL, "missing 'argv' or 'command'");
  k->argv = calloc(4, sizeof *k->argv);
  if (k->argv) {
    k->argv[0] = strdup("sh");
    k->argv[1] = strdup("-c");
    k->argv[2] = p->command;
    p->command = NULL;
    k->argc = 3;
  }
  if (k->argv == NULL || !k->argv[0] || !k->argv[1])
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  return 0;
}

static int build_env(call *k, sm_error *err) {
  char **pass = NULL;
  size_t n_pass = 0;
  int rc =
      server_env_passthrough(&k->r.settings.env_passthrough, k->srv->creds, &pass, &n_pass, err);
  if (rc != 0) return rc;
  /* The runner applied the globs itself (owned names dropped): sm_run must
   * not apply them again from its own environment. */
  k->r.settings.env_passthrough.n = 0;
  size_t total = n_pass + k->p.n_env;
  k->env = calloc(total + 1, sizeof *k->env);
  if (k->env == NULL) {
    common_strings_free(pass, n_pass);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
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

static int wrap_hook(call *k, sm_error *err, int *hook_failed, sm_run_result *res) {
  char *content = NULL;
  size_t len = 0;
  sm_error load_err = SM_ERROR_INIT;
  if (server_hook_load(k->ws, &content, &len, &load_err) != 0) {
    /* The hook is the agent's own: its failure is the call's, a tool
     * failure, not a refusal of the request. */
    *hook_failed = 1;
    res->ok = 0;
    res->exit_code = 1;
    res->failure_kind = SM_FAIL_TOOL;
    res->mode = k->r.settings.mode;
    snprintf(res->error, sizeof res->error, "%s", load_err.message);
    return 0;
  }
  if (content == NULL) return 0;
  common_buf owned;
  common_buf_init(&owned, 64 * 1024);
  common_buf_printf(&owned, "%s", OWNED_HOME_NAMES);
  for (size_t i = 0; i < k->secrets.n; i++) {
    const char *eq = strchr(k->secrets.kv[i], '=');
    if (eq) common_buf_printf(&owned, " %.*s", (int)(eq - k->secrets.kv[i]), k->secrets.kv[i]);
  }
  server_random_hex(k->nonce, SM_HOOK_NONCE_LEN);
  char **wrapped = NULL;
  size_t wn = 0;
  int rc = server_hook_wrap((const char *const *)k->argv, k->argc, content, k->nonce,
                            owned.data ? owned.data : OWNED_HOME_NAMES, &wrapped, &wn, err);
  free(content);
  common_buf_dispose(&owned);
  if (rc != 0) return rc;
  common_strings_free(k->argv, k->argc);
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

static int narrow_network(call *k, sm_error *err) {
  sm_sandbox_settings *s = &k->r.settings;
  if (network_rank(k->p.network) > network_rank(s->network)) {
    server_audit_call(k->srv, "call.refused", &k->p, NULL, NULL,
                      "a network wider than the configuration's");
    return sm_error_set(err, SM_EPOLICY, "network %s is wider than this call's network %s",
                        k->p.network, s->network);
  }
  snprintf(s->network, sizeof s->network, "%s", k->p.network);
  if (strcmp(s->network, "allowlist") != 0) s->egress_owner[0] = '\0';
  else if (s->egress_owner[0] == '\0') snprintf(s->egress_owner, sizeof s->egress_owner, "defaults");
  return 0;
}

/* Resolves the call through the configuration and checks what the
 * request asks against it and the runner's mode; 0, or a code with *err
 * filled. */
static int resolve_call(call *k, sm_error *err) {
  sm_server *srv = k->srv;
  server_execute_params *p = &k->p;
  sm_config_flags flags;
  if (srv->have_flags) flags = srv->flags;
  else memset(&flags, 0, sizeof flags);
  if (p->has_mode) flags.mode = sm_mode_name(p->mode);
  sm_error cfg_err = SM_ERROR_INIT;
  k->cfg = sm_server_config(srv);
  /* What the request names that the configuration cannot resolve is a
   * bad request, whatever the resolver's code. */
  if (sm_config_resolve(k->cfg, p->agent, p->tool, p->user, &flags, &k->r, &cfg_err) != 0)
    return sm_error_set(err, SM_EINVAL, "%s", cfg_err.message);
  if (!k->r.allowed) {
    sm_log_event(SM_LOG_INFO, "call.refused",
                 SM_LOG_FIELDS(SM_LOG_STR("tool", p->tool), SM_LOG_STR("agent", p->agent),
                               SM_LOG_STR("rule", k->r.rule[0] ? k->r.rule : NULL)),
                 "tool %s refused by the configuration", p->tool ? p->tool : "(none)");
    server_audit_call(srv, "call.refused", p, NULL, k->r.rule,
                      "refused by the configuration's tool policy");
    return sm_error_set(err, SM_EPOLICY, "tool %s refused by %s", p->tool ? p->tool : "(none)",
                        k->r.rule[0] ? k->r.rule : "the configuration");
  }
  /* A request may pick any container mode, but not leave the sandbox on a
   * runner whose own mode is sandboxed: mode none runs on the host. */
  if (p->has_mode && p->mode == SM_MODE_NONE && srv->opts.mode != SM_MODE_NONE) {
    server_audit_call(srv, "call.refused", p, "none", NULL,
                      "mode none (the host) on a sandboxed runner");
    return sm_error_set(err, SM_EPOLICY,
                        "mode none is not allowed on this runner (its mode is %s): calls may "
                        "not run on the host",
                        sm_mode_name(srv->opts.mode));
  }
  if (p->has_mode && p->mode == SM_MODE_PER_WORKER && p->worker_key == NULL)
    return sm_error_set(err, SM_EINVAL, "mode per_worker needs 'worker_key'");
  if (p->has_mode && p->mode == SM_MODE_PER_RUN && p->run_id == NULL)
    return sm_error_set(err, SM_EINVAL, "mode per_run needs 'run_id'");
  /* Selective sandboxing decides where an agent runtime runs a tool; what
   * reaches the runner runs in the runner's sandboxes, never on its host
   * (unless the runner's own mode is none). */
  if (!k->r.sandboxed && srv->opts.mode != SM_MODE_NONE) {
    /* The resolver said mode none (host) for it: the runner's own mode (or
     * the container mode the request asked for) applies instead. */
    k->r.settings.mode = p->has_mode ? p->mode : srv->opts.mode;
    sm_log(SM_LOG_DEBUG, "tool %s is not sandboxed by the configuration (%s): the runner "
           "sandboxes it anyway (mode %s)", p->tool ? p->tool : "(none)", k->r.sandbox_rule,
           sm_mode_name(k->r.settings.mode));
  }
  return 0;
}

/* Takes one use of the request's lease: its credentials for this call
 * only; 0, or SM_EPOLICY with *err filled (one answer whatever was
 * wrong). */
static int take_lease(call *k, sm_error *err) {
  sm_server *srv = k->srv;
  server_execute_params *p = &k->p;
  sm_error creds_err = SM_ERROR_INIT;
  server_lease_params lp;
  if (srv->creds == NULL ||
      server_lease_consume(srv->leases, p->lease_id, p->tool, p->worker_key, sm_now(), &lp,
                           NULL) != 0) { /* the answer names no reason: LEASE_REFUSED */
    server_metrics_lease(srv->metrics, "refused");
    sm_log_event(SM_LOG_WARN, "lease.refused", SM_LOG_FIELDS(SM_LOG_STR("tool", p->tool)),
                 "lease refused for tool %s", p->tool ? p->tool : "(none)");
    server_audit_lease(srv, "lease.refused", p->lease_id, p->tool, p->worker_key, LEASE_REFUSED);
    return sm_error_set(err, SM_EPOLICY, LEASE_REFUSED);
  }
  k->lease_pending = 1; /* settled when the call ran, or given back (call_free) */
  if (server_creds_env(srv->creds, &lp, &k->secrets, &creds_err) != 0) {
    OPENSSL_cleanse(&lp, sizeof lp);
    return sm_error_set(err, SM_EPOLICY, LEASE_REFUSED);
  }
  server_metrics_lease(srv->metrics, "consumed");
  server_audit_lease(srv, "lease.used", p->lease_id, p->tool, p->worker_key,
                     "credentials for this call only");
  sm_log(SM_LOG_INFO, "lease consumed: %zu credential variable(s) for this exec only",
         k->secrets.n);
  OPENSSL_cleanse(&lp, sizeof lp);
  return 0;
}

double server_idle_timeout(const sm_resolved *r) {
  for (size_t i = 0; i < r->n_sources; i++)
    if (strcmp(r->sources[i].name, "idle_timeout") == 0 &&
        r->sources[i].source != SM_SOURCE_BUILT_IN)
      return r->settings.idle_timeout_s;
  return SM_SERVER_IDLE_DEFAULT_S;
}

/* "sandbox_id": the sandbox the call runs in, found with the owner rules
 * (sandbox_owner.c); its keys replace the call's. Keys that would name
 * another sandbox are refused, never silently ignored. */
static int named_sandbox(call *k, sm_error *err) {
  server_execute_params *p = &k->p;
  if (p->run_id || p->has_mode || p->project)
    return sm_error_set(err, SM_EINVAL, "'sandbox_id' names the sandbox: give no 'run_id', "
                                        "'mode' or 'project' with it");
  sm_ops_sandbox sb;
  int rc = server_sandbox_find(k->srv, p->sandbox_id, p->worker_key, 1, &sb, err);
  if (rc) return rc;
  /* A per_worker sandbox's worker is its key; a run's, its run id. */
  p->has_mode = 1;
  p->mode = strcmp(sb.mode, "per_worker") == 0 ? SM_MODE_PER_WORKER : SM_MODE_PER_RUN;
  if (p->mode == SM_MODE_PER_RUN) p->run_id = strdup(sb.run_id[0] ? sb.run_id : sb.name);
  if (p->mode == SM_MODE_PER_WORKER && p->worker_key == NULL) p->worker_key = strdup(sb.worker_id);
  p->project = strdup(sb.project[0] ? sb.project : "default");
  if ((p->mode == SM_MODE_PER_RUN && !p->run_id) || !p->project ||
      (p->mode == SM_MODE_PER_WORKER && !p->worker_key))
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  snprintf(k->sandbox, sizeof k->sandbox, "%s", sb.name);
  snprintf(k->sandbox_id, sizeof k->sandbox_id, "%s", sb.id);
  k->made = malloc(sizeof *k->made);
  if (k->made == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  *k->made = sb;
  return 0;
}

/* A sandbox named by its id is used as it was made: what its labels say
 * of it (its image, resources, network, runtime) is the call's settings,
 * so its egress, and a leased call's own container beside it, are the
 * sandbox's. */
static void made_settings(const sm_ops_sandbox *m, sm_sandbox_settings *s) {
  if (m->image[0]) snprintf(s->image, sizeof s->image, "%s", m->image);
  if (m->network[0]) snprintf(s->network, sizeof s->network, "%s", m->network);
  if (m->network[0]) snprintf(s->runtime, sizeof s->runtime, "%s", m->runtime);
  if (m->cpu >= 0) s->cpu = m->cpu;
  if (m->memory >= 0) s->memory = m->memory;
  if (m->pids >= 0) s->pids = m->pids;
  if (m->disk >= 0) s->disk = m->disk;
}

/* The call's sm_run_request, from the resolution and what was built. */
static void fill_request(call *k) {
  sm_server *srv = k->srv;
  server_execute_params *p = &k->p;
  sm_run_request *q = &k->req;
  sm_call_names names = {p->project ? p->project : srv->project, srv->project_environment,
                         p->agent, p->tool, p->user, p->run_id, p->worker_key};
  sm_run_request_from_config(q, &k->egress, k->cfg, &k->r, &names);
  /* The runner's own project and environment when it has none. */
  q->project = names.project;
  q->project_environment = names.project_environment;
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
  q->principal = k->principal;
  q->workspace = k->has_ws ? k->ws : NULL;
  q->sync = p->has_sync ? p->sync : SM_SYNC_DEFAULT;
  if (p->timeout_s > 0) q->settings.timeout_s = p->timeout_s;
  q->settings.idle_timeout_s = server_idle_timeout(&k->r);
  q->replace = p->replace;
  q->from_snapshot = p->from_snapshot;
  if (k->sandbox[0]) {
    q->sandbox = k->sandbox;
    made_settings(k->made, &q->settings);
  }
  if (server_host_route(srv, p->agent, p->tool, &k->route, &q->agent_has_host_tools))
    q->host_route = &k->route;
  server_audit_call(srv, "call.allowed", p, sm_mode_name(q->settings.mode), k->r.rule, NULL);
}

/* "from_snapshot": the call's keyed sandbox is made from a snapshot its
 * principal may use (a worker's own; the control token's any). Another's
 * is answered exactly as a missing one (404), before anything is made. */
static int from_snapshot(call *k, sm_error *err) {
  server_execute_params *p = &k->p;
  if (p->sandbox_id)
    return sm_error_set(err, SM_EINVAL, "'from_snapshot' makes a new sandbox: give a 'run_id' "
                                        "(or a 'worker_key' with mode per_worker), not "
                                        "'sandbox_id'");
  sm_mode mode = k->r.settings.mode;
  if (mode != SM_MODE_PER_RUN && mode != SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL,
                        "'from_snapshot' makes a per_run or per_worker sandbox, not one of mode %s",
                        sm_mode_name(mode));
  if (k->srv->opts.runner == NULL) return 0;
  const char *owner = strcmp(k->principal, SM_PRINCIPAL_CONTROL) ? k->principal : NULL;
  sm_snapshot snap;
  sm_error e = SM_ERROR_INIT;
  int rc = sm_snapshot_get(k->srv->opts.runner, p->from_snapshot, owner, &snap, &e);
  if (rc == SM_ENOTFOUND) return sm_error_set(err, rc, "no such snapshot: %s", p->from_snapshot);
  if (rc) return sm_error_set(err, rc, "%s", e.message);
  return 0;
}

/* Checks, resolves and builds everything; 0 and k ready, or a code with
 * *err filled (the route answers it). A hook that cannot be used is
 * reported through *early (a result of the call, not an HTTP error). */
static int prepare(call *k, int control, const char *token, sm_error *err, int *early,
                   sm_run_result *early_res) {
  server_execute_params *p = &k->p;
  int rc;
  if (!control && !server_token_ok(k->srv, token, p->worker_key)) {
    server_audit_token(k->srv, "execute", NULL, GENERIC_401);
    return sm_error_set(err, SM_EAUTH, GENERIC_401);
  }
  /* Whose keyed sandbox the call may use: a worker's own (the control token
   * naming a worker_key acts for that worker), or any for the control token. */
  k->control = control;
  if (p->sandbox_id && (rc = named_sandbox(k, err)) != 0) return rc;
  if (server_auth_principal(p->worker_key, k->principal, sizeof k->principal) != 0)
    return sm_error_set(err, SM_EINVAL, "field 'worker_key' is too long");
  if ((rc = resolve_call(k, err)) != 0) return rc;
  if (p->network && (rc = narrow_network(k, err)) != 0) return rc;
  int hook_tool = is_hook_tool(p);
  if ((rc = build_argv(k, err)) != 0) return rc;
  if (p->workspace && (rc = resolve_workspace(k, err)) != 0) return rc;
  if (p->lease_id && (rc = take_lease(k, err)) != 0) return rc;
  if ((rc = build_env(k, err)) != 0) return rc;
  if (k->has_ws && hook_tool) {
    if ((rc = wrap_hook(k, err, early, early_res)) != 0) return rc;
    if (*early) return 0;
  }
  if (p->from_snapshot && (rc = from_snapshot(k, err)) != 0) return rc;
  fill_request(k);
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
  settle_lease(k, res->credentials_passed);
  if (rc != 0) {
    res->ok = 0;
    if (res->failure_kind == SM_FAIL_NONE) {
      res->failure_kind = sm_error_failure_kind(rc);
      res->exit_code = 125;
    }
    if (res->error[0] == '\0')
      snprintf(res->error, sizeof res->error, "%s",
               err.message[0] ? err.message : sm_error_default_message(rc));
  }
  if (k->hook) server_hook_finish(k->nonce, res);
}

static const char *outcome_of(const sm_run_result *res) {
  if (res->failure_kind != SM_FAIL_NONE) {
    const char *n = sm_failure_kind_name(res->failure_kind);
    return n ? n : "tool";
  }
  return res->ok ? "ok" : "tool";
}

/* Scrubs, records metrics and builds the answer. */
static void answer_result(call *k, sm_run_result *res, server_answer *a) {
  sm_server *srv = k->srv;
  /* A value cut by the output cap is masked too. */
  if (res->stdout_truncated) server_redact_cut(&res->stdout_data, &res->stdout_len, &k->secrets, 1);
  else server_redact(&res->stdout_data, &res->stdout_len, &k->secrets);
  if (res->stderr_truncated) server_redact_cut(&res->stderr_data, &res->stderr_len, &k->secrets, 1);
  else server_redact(&res->stderr_data, &res->stderr_len, &k->secrets);
  server_redact_str(res->error, sizeof res->error, &k->secrets);
  const char *outcome = outcome_of(res);
  double secs = (sm_monotonic_ms() - k->t0) / 1000.0;
  server_metrics_call(srv->metrics, k->p.tool, sm_mode_name(res->mode), outcome, secs);
  if (strcmp(outcome, "ok") != 0) server_metrics_failure(srv->metrics, outcome);
  sm_log_event(res->failure_kind == SM_FAIL_SANDBOX || res->failure_kind == SM_FAIL_ENGINE
                   ? SM_LOG_WARN
                   : SM_LOG_INFO,
               "call.result",
               SM_LOG_FIELDS(SM_LOG_STR("tool", k->p.tool), SM_LOG_STR("agent", k->p.agent),
                             SM_LOG_STR("mode", sm_mode_name(res->mode)),
                             SM_LOG_STR("sandbox", res->sandbox_id[0] ? res->sandbox_id : NULL),
                             SM_LOG_STR("outcome", outcome), SM_LOG_INT("exit_code", res->exit_code),
                             SM_LOG_NUM("duration_ms", secs * 1000.0),
                             SM_LOG_BOOL("timed_out", res->timed_out),
                             SM_LOG_BOOL("oom_killed", res->oom_killed),
                             SM_LOG_STR("error", res->error[0] ? res->error : NULL)),
               "call tool=%s mode=%s -> %s, exit %d in %.0f ms", k->p.tool ? k->p.tool : "-",
               sm_mode_name(res->mode), outcome, res->exit_code, secs * 1000.0);
  a->body = sm_run_result_to_json(res);
  /* Every string of the answer, whatever field a later change adds
   * (files_changed: a tool may name a file after the value). */
  server_redact_json(a->body, &k->secrets);
  a->status = server_answer_status_of(res);
}

/* ---- the interface (server_core.h) ---- */

server_call *server_call_prepare(sm_server *srv, server_execute_params *p, int control,
                                 const char *token, server_answer *a) {
  call *k = calloc(1, sizeof *k);
  if (k == NULL) {
    server_execute_params_dispose(p);
    server_answer_error(a, 503, "sandbox", "out of memory");
    return NULL;
  }
  k->srv = srv;
  k->t0 = sm_monotonic_ms();
  k->p = *p;
  memset(p, 0, sizeof *p);
  int early = 0;
  sm_run_result early_res;
  memset(&early_res, 0, sizeof early_res);
  sm_error err = SM_ERROR_INIT;
  if (prepare(k, control, token, &err, &early, &early_res) != 0) {
    server_answer_from_error(a, &err); /* the route's one conversion */
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

sm_run_request *server_call_request(server_call *k) { return &k->req; }
const server_secret_env *server_call_secrets(const server_call *k) { return &k->secrets; }
void server_call_run(server_call *k, sm_run_result *res) { run_call(k, res); }
void server_call_answer(server_call *k, sm_run_result *res, server_answer *a) {
  answer_result(k, res, a);
}
void server_call_free(server_call *k) { call_free(k); }
