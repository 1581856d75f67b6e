/* Output and error helpers shared by the subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli.h"

static const cli_globals *g_globals;

/* Every line sandman writes to stderr goes through here: text, or one JSON
 * object per line with --log-format json, escaped the same way either way. */
static void write_record(const sm_log_record *rec) {
  char line[8192];
  size_t n = g_globals && g_globals->log_json ? sm_log_format_json(rec, line, sizeof line)
                                               : sm_log_format_text(rec, line, sizeof line);
  line[n] = '\n';
  fwrite(line, 1, n + 1, stderr);
  fflush(stderr);
}

static void on_record(const sm_log_record *rec, void *userdata) {
  (void)userdata;
  write_record(rec);
}

void cli_log_setup(const cli_globals *g) {
  g_globals = g;
  sm_log_set_level(g->log_level);
  sm_log_set_record_handler(on_record, NULL);
}

/* The CLI's own messages: "sandman: error: ..." as text (as they always
 * were), a record with event cli.error / cli.note in JSON. */
static void cli_message(sm_log_level level, const char *event, const char *prefix,
                        const char *fmt, va_list ap) {
  char msg[4096];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (g_globals && g_globals->log_json) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    sm_log_record rec = {level, tv.tv_sec + tv.tv_usec / 1e6, sm_log_request_id(), event, msg,
                         NULL, 0};
    write_record(&rec);
    return;
  }
  char esc[8192];
  sm_log_escape(esc, sizeof esc, msg, strlen(msg), 0);
  /* Messages are our own sentences; only what they quote needs escaping,
   * but a newline that is ours (several lines) stays readable. */
  fprintf(stderr, "%s%s\n", prefix, esc);
}

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_message(SM_LOG_ERROR, "cli.error", "sandman: error: ", fmt, ap);
  va_end(ap);
}

void cli_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_message(SM_LOG_WARN, "cli.warn", "sandman: warning: ", fmt, ap);
  va_end(ap);
}

void cli_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_message(SM_LOG_INFO, "cli.note", "sandman: ", fmt, ap);
  va_end(ap);
}

int cli_fail(const sm_error *err) {
  cli_error("%s", err->message[0] ? err->message : sm_error_default_message(err->code));
  if (err->code == SM_EINVAL || err->code == SM_ECONFIG) return CLI_EXIT_USAGE;
  return CLI_EXIT_FAILURE;
}

int cli_protect_flags(const cli_call *call, sm_string_list *list, int json) {
  int rc = cli_add_list(call, "protect", list, json);
  for (size_t i = 0; rc == 0 && i < list->n; i++) {
    sm_error err = SM_ERROR_INIT;
    if (sm_workspace_protect_check(list->items[i], &err) != 0)
      return cli_usage_error(call->cmd, json, "--protect: %s", err.message);
  }
  return rc;
}

void cli_print_json(json_object *obj) {
  int flags = isatty(STDOUT_FILENO) ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN;
  printf("%s\n", json_object_to_json_string_ext(obj, flags | JSON_C_TO_STRING_NOSLASHESCAPE));
  fflush(stdout);
}

int cli_print_json_owned(json_object *obj) {
  if (obj == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAILURE;
  }
  cli_print_json(obj);
  json_object_put(obj);
  return CLI_EXIT_OK;
}

void cli_engine_options(const cli_globals *g, const sm_config *cfg, sm_engine_options *out) {
  sm_engine_options init = SM_ENGINE_OPTIONS_INIT;
  *out = init;
  out->host = g->host;
  out->host_source = "--host";
  /* --host > DOCKER_HOST > DOCKER_CONTEXT > the configuration's engine
   * host > the docker CLI's current context > the default socket (the
   * library resolves all but the configuration). */
  const char *env = getenv("DOCKER_HOST"), *ctx = getenv("DOCKER_CONTEXT");
  if (out->host == NULL && (env == NULL || *env == '\0') && (ctx == NULL || *ctx == '\0') && cfg &&
      sm_config_engine_host(cfg)) {
    out->host = sm_config_engine_host(cfg);
    out->host_source = sm_config_path(cfg) ? sm_config_path(cfg) : "the configuration";
    if (sm_config_engine_tls_verify(cfg) >= 0) out->tls_verify = sm_config_engine_tls_verify(cfg);
    if (sm_config_engine_cert_path(cfg)) out->cert_path = sm_config_engine_cert_path(cfg);
  }
}

int cli_load_resolve(const cli_globals *g, const char *agent, const char *tool, const char *user,
                     const sm_config_flags *flags, sm_config **cfg, sm_resolved *res) {
  sm_error err = SM_ERROR_INIT;
  *cfg = NULL;
  if (sm_config_load(cfg, g->config_path, &err) != 0) return cli_fail(&err);
  if (sm_config_resolve(*cfg, agent, tool, user, flags, res, &err) != 0) {
    sm_config_free(*cfg);
    *cfg = NULL;
    return cli_fail(&err);
  }
  /* An agent without an entry gets the defaults, as it may; a name one
   * typo away from a configured one is most likely that one. */
  const char *near = agent && !res->agent_known ? sm_config_agent_nearest(*cfg, agent) : NULL;
  if (near)
    cli_warn("agent '%s' has no entry in the configuration, so the defaults apply; did you mean "
             "'%s'?", agent, near);
  return CLI_EXIT_OK;
}

int cli_runner_new(const cli_globals *g, sm_config *cfg, const char *backend, sm_runner **out) {
  sm_error err = SM_ERROR_INIT;
  sm_runner_options ro = SM_RUNNER_OPTIONS_INIT;
  cli_engine_options(g, cfg, &ro.engine);
  /* --sandbox-backend > engine.backend > docker. */
  ro.backend = backend ? backend : sm_config_engine_backend(cfg);
  sm_config_swarm(cfg, &ro.swarm);
  sm_egress_proxy_options eo; /* network allowlist: the configuration's proxy */
  sm_config_egress_proxy(cfg, &eo);
  ro.egress = &eo;
  *out = NULL;
  if (sm_runner_new(out, &ro, &err) != 0) return cli_fail(&err);
  return CLI_EXIT_OK;
}

/* The value of the flag prefix + name. */
static const char *prefixed(const cli_call *call, const char *prefix, const char *name) {
  char full[64];
  snprintf(full, sizeof full, "%s%s", prefix, name);
  return cli_str(call, full);
}

void cli_sandbox_flags(const cli_call *call, const char *prefix, sm_config_flags *flags) {
  flags->mode = prefixed(call, prefix, "mode");
  flags->image = prefixed(call, prefix, "image");
  flags->network = prefixed(call, prefix, "network");
  flags->cpu = prefixed(call, prefix, "cpu");
  flags->memory = prefixed(call, prefix, "mem");
  flags->pids = prefixed(call, prefix, "pids");
  flags->disk = prefixed(call, prefix, "disk");
  flags->runtime = prefixed(call, prefix, "runtime");
  flags->timeout = prefixed(call, prefix, "timeout");
  flags->project_environment = cli_str(call, "project-environment");
}

int cli_workspace_flags(const cli_call *call, int json, const char **workspace,
                        const char **sync) {
  *workspace = cli_str(call, "workspace");
  *sync = cli_str(call, "sync");
  if (*sync && !*workspace) return cli_usage_error(call->cmd, json, "--sync: needs --workspace");
  struct stat st;
  if (*workspace && (stat(*workspace, &st) != 0 || !S_ISDIR(st.st_mode)))
    return cli_usage_error(call->cmd, json, "--workspace: %s is not a directory", *workspace);
  return 0;
}

int cli_add_list(const cli_call *call, const char *flag, sm_string_list *list, int json) {
  const char **v = NULL;
  sm_error err = SM_ERROR_INIT;
  size_t n = cli_list(call, flag, &v);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    if (sm_string_list_add(list, v[i], &err) != 0)
      rc = cli_usage_error(call->cmd, json, "--%s: %s", flag, err.message);
  free(v);
  return rc;
}

int cli_audit_file(const sm_config *cfg, char *buf, size_t len, sm_error *err) {
  sm_config_audit ca;
  sm_config_audit_get(cfg, &ca);
  if (ca.file != NULL) {
    int w = snprintf(buf, len, "%s", ca.file);
    if (w < 0 || (size_t)w >= len) return sm_error_set(err, SM_EINVAL, "audit.file too long");
    return 0;
  }
  return sm_audit_default_file(buf, len, err);
}

int cli_audit_open(const sm_config *cfg, int on_by_default, sm_audit **out) {
  *out = NULL;
  sm_config_audit ca;
  sm_config_audit_get(cfg, &ca);
  int on = ca.enabled >= 0 ? ca.enabled : on_by_default;
  if (!on) return CLI_EXIT_OK;
  char file[4096];
  sm_error err = SM_ERROR_INIT;
  if (cli_audit_file(cfg, file, sizeof file, &err) != 0) return cli_fail(&err);
  sm_audit_options o = SM_AUDIT_OPTIONS_INIT;
  o.file = file;
  o.to_stderr = ca.to_stderr > 0;
  o.max_bytes = ca.max_bytes;
  o.keep = ca.keep;
  if (sm_audit_open(out, &o, &err) != 0) {
    sm_error_wrap(&err, "opening the audit trail");
    return cli_fail(&err);
  }
  return CLI_EXIT_OK;
}
