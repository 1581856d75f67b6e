/* sm_run: checks the request, then hands it to mode none (host.c) or to
 * the call driver of the container modes (sandbox_call.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sandman/image.h>
#include <sandman/log.h>
#include <sandman/name.h>

#include "sandbox/sandbox_call.h"
#include "sandbox/host.h"
#include "sandbox/sandbox_result.h"

static int check_request(const sm_run_request *req, sm_error *err) {
  const sm_sandbox_settings *s = &req->settings;
  if (req->argc == 0 || req->argv == NULL || req->argv[0] == NULL || req->argv[0][0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no command to run (give it after --)");
  for (size_t i = 0; i < req->argc; i++)
    if (req->argv[i] == NULL) return sm_error_set(err, SM_EINVAL, "argument %zu is missing", i);
  if ((int)s->mode < SM_MODE_NONE || (int)s->mode > SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL, "unknown mode %d", (int)s->mode);
  if (!(s->timeout_s >= 0) || isinf(s->timeout_s))
    return sm_error_set(err, SM_EINVAL, "the timeout must be a number of seconds >= 0");
  if (s->memory < 0 || s->pids < 0 || s->disk < 0 || s->tmpfs < 0 || s->nofile < 0 ||
      s->stdout_cap < 0 || s->stderr_cap < 0 || !(s->cpu >= 0))
    return sm_error_set(err, SM_EINVAL, "limits must not be negative");
  if (s->mode != SM_MODE_NONE) {
    if (strcmp(s->network, "none") != 0 && strcmp(s->network, "bridge") != 0 &&
        strcmp(s->network, "allowlist") != 0)
      return sm_error_set(err, SM_EINVAL, "network '%s' is not allowed (use none, bridge or allowlist)",
                          s->network);
    if (s->image[0] == '\0') return sm_error_set(err, SM_EINVAL, "no image given");
    if (s->memory > 0 && s->memory < 6 * 1024 * 1024)
      return sm_error_set(err, SM_EINVAL, "memory limit too small: the engine needs at least 6m");
  }
  /* Names reach keys, labels and logs: the one character set, whoever the
   * caller is. */
  const struct {
    const char *what, *value;
  } names[] = {{"project", req->project}, {"run id", req->run_id},
               {"worker id", req->worker_id}, {"agent", req->agent},
               {"user", req->user}, {"tool", req->tool}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int rc;
    if (names[i].value && *names[i].value && (rc = sm_name_check(names[i].what, names[i].value, err)))
      return rc;
  }
  if (req->principal && (strlen(req->principal) > 2 * SM_NAME_LEN_MAX ||
                         !sm_name_valid(strncmp(req->principal, "worker:", 7) == 0
                                            ? req->principal + 7
                                            : req->principal)))
    return sm_error_set(err, SM_EINVAL, "principal must be \"control\" or \"worker:<name>\"");
  if ((int)req->scope < SM_SCOPE_NONE || (int)req->scope > SM_SCOPE_USER_AGENT)
    return sm_error_set(err, SM_EINVAL, "unknown scope %d", (int)req->scope);
  if (req->helper && s->mode != SM_MODE_PER_RUN && s->mode != SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL,
                        "files work in a per_run or per_worker sandbox, not in mode %s",
                        sm_mode_name(s->mode));
  if (req->tty && s->mode != SM_MODE_PER_RUN && s->mode != SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL,
                        "a terminal runs in a per_run or per_worker sandbox, not in mode %s",
                        sm_mode_name(s->mode));
  /* Nothing that reaches beyond the sandbox ever enters a terminal. */
  if (req->tty && req->n_secret_env > 0)
    return sm_error_set(err, SM_EPOLICY, "a terminal never gets leased credentials");
  if (req->tty && req->host_route)
    return sm_error_set(err, SM_EPOLICY, "a terminal never gets the host-tool route");
  if (req->tty && (req->stdin_read || req->helper || req->workspace))
    return sm_error_set(err, SM_EINVAL,
                        "a terminal takes its input from the terminal and copies no workspace");
  if (req->existing && s->mode != SM_MODE_PER_RUN && s->mode != SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL,
                        "only a per_run or per_worker sandbox exists before a call");
  if (req->from_snapshot && s->mode != SM_MODE_PER_RUN && s->mode != SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL,
                        "--from-snapshot makes a per_run or per_worker sandbox, not one of mode %s",
                        sm_mode_name(s->mode));
  if (req->cwd && req->cwd[0] != '/')
    return sm_error_set(err, SM_EINVAL, "the working directory must be an absolute path");
  if (req->sync != SM_SYNC_DEFAULT && req->sync != SM_SYNC_NONE && req->sync != SM_SYNC_IN &&
      req->sync != SM_SYNC_INOUT)
    return sm_error_set(err, SM_EINVAL, "unknown sync mode %d", (int)req->sync);
  return 0;
}

/* An image pinned by digest ("name@sha256:...") runs only if the local
 * image has that digest, and the container is created from the image Id so
 * that a tag moved later cannot swap it. sandman never pulls: a missing or
 * different image is refused. */
static int run_pinned(sm_runner *runner, const sm_run_request *req, sm_run_result *out,
                      sm_error *err) {
  sm_engine *e = NULL;
  char id[SM_ENGINE_ID_MAX] = "";
  int rc = sm_runner_engine(runner, &e, err);
  if (rc == 0) rc = sm_image_check_pinned(e, req->settings.image, NULL, id, err);
  if (rc == 0 && id[0] == '\0') rc = sm_error_set(err, SM_EPOLICY, "image '%s' has no usable digest", req->settings.image);
  if (rc) {
    /* A reference that is no pin (SM_EINVAL) is refused like a pin that
     * does not match; the rest by the code's kind (error.h). */
    sandbox_result_fail(out, rc == SM_EINVAL ? SM_FAIL_POLICY : sm_error_failure_kind(rc), err);
    return rc;
  }
  sm_run_request pinned = *req;
  snprintf(pinned.settings.image, sizeof pinned.settings.image, "%s", id);
  return sandbox_run_container(sandbox_runner_ctx(runner), &pinned, out, err);
}

int sm_run(sm_runner *runner, const sm_run_request *req, sm_run_result *out, sm_error *err) {
  if (out == NULL) return sm_error_set(err, SM_EINVAL, "sm_run: no result to fill");
  memset(out, 0, sizeof *out);
  if (runner == NULL || req == NULL) {
    sm_error_set(err, SM_EINVAL, "sm_run: needs a runner and a request");
    sandbox_result_fail(out, SM_FAIL_SANDBOX, err);
    return SM_EINVAL;
  }
  out->mode = req->settings.mode;
  int rc = check_request(req, err);
  if (rc) {
    sandbox_result_fail(out, SM_FAIL_SANDBOX, err);
    return rc;
  }
  const char *mode = sm_mode_name(req->settings.mode);
  sm_log_event(SM_LOG_DEBUG, "call.start",
               SM_LOG_FIELDS(SM_LOG_STR("tool", req->tool), SM_LOG_STR("command", req->argv[0]),
                             SM_LOG_STR("mode", mode), SM_LOG_STR("agent", req->agent),
                             SM_LOG_STR("run_id", req->run_id),
                             SM_LOG_STR("worker_id", req->worker_id)),
               "call %s in mode %s", req->argv[0], mode);
  if (req->settings.mode == SM_MODE_NONE)
    rc = sandbox_run_host(sandbox_runner_ctx(runner), req, out, err);
  else if (strchr(req->settings.image, '@') != NULL) rc = run_pinned(runner, req, out, err);
  else rc = sandbox_run_container(sandbox_runner_ctx(runner), req, out, err);
  const char *kind = sm_failure_kind_name(out->failure_kind);
  sm_log_event(SM_LOG_DEBUG, "call.end",
               SM_LOG_FIELDS(SM_LOG_STR("tool", req->tool), SM_LOG_STR("mode", sm_mode_name(out->mode)),
                             SM_LOG_STR("sandbox", out->sandbox_id[0] ? out->sandbox_id : NULL),
                             SM_LOG_INT("exit_code", out->exit_code),
                             SM_LOG_NUM("duration_ms", out->duration_ms),
                             SM_LOG_BOOL("timed_out", out->timed_out),
                             SM_LOG_BOOL("oom_killed", out->oom_killed),
                             SM_LOG_STR("failure_kind", kind), SM_LOG_BOOL("reused", out->reused)),
               "call %s ended: %s", req->argv[0], kind ? kind : (out->ok ? "ok" : "tool"));
  return rc;
}
