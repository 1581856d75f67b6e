/* Output and error helpers shared by the subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("sandman: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void cli_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("sandman: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int cli_fail(const sm_error *err) {
  cli_error("%s", err->message[0] ? err->message : sm_error_default_message(err->code));
  if (err->code == SM_EINVAL || err->code == SM_ECONFIG) return CLI_EXIT_USAGE;
  return CLI_EXIT_FAILURE;
}

void cli_print_json(json_object *obj) {
  int flags = isatty(STDOUT_FILENO) ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN;
  printf("%s\n", json_object_to_json_string_ext(obj, flags | JSON_C_TO_STRING_NOSLASHESCAPE));
  fflush(stdout);
}

void cli_engine_options(const cli_globals *g, const sm_config *cfg, sm_engine_options *out) {
  sm_engine_options init = SM_ENGINE_OPTIONS_INIT;
  *out = init;
  out->host = g->host;
  const char *env = getenv("DOCKER_HOST");
  if (out->host == NULL && (env == NULL || *env == '\0') && cfg && sm_config_engine_host(cfg)) {
    out->host = sm_config_engine_host(cfg);
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
  return CLI_EXIT_OK;
}

int cli_runner_new(const cli_globals *g, sm_config *cfg, sm_runner **out) {
  sm_error err = SM_ERROR_INIT;
  sm_runner_options ro = SM_RUNNER_OPTIONS_INIT;
  cli_engine_options(g, cfg, &ro.engine);
  *out = NULL;
  if (sm_runner_new(out, &ro, &err) != 0) {
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  return CLI_EXIT_OK;
}
