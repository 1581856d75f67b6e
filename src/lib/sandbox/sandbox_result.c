/* The result of one call: its JSON form (the contract's `run --json`
 * object), failure kinds, and disposal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/mode.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>

#include "common/text.h"
#include "sandbox/sandbox_result.h"

void sm_run_result_dispose(sm_run_result *r) {
  if (r == NULL) return;
  free(r->stdout_data);
  free(r->stderr_data);
  for (size_t i = 0; i < r->n_files_changed; i++) free(r->files_changed[i]);
  free(r->files_changed);
  for (size_t i = 0; i < r->n_conflicts; i++) free(r->conflicts[i]);
  free(r->conflicts);
  for (size_t i = 0; i < r->n_refused; i++) free(r->refused[i].path);
  free(r->refused);
  r->refused = NULL;
  r->n_refused = 0;
  r->stdout_data = r->stderr_data = NULL;
  r->files_changed = r->conflicts = NULL;
  r->n_files_changed = r->n_conflicts = 0;
  r->stdout_len = r->stderr_len = 0;
}

json_object *sm_run_result_to_json(const sm_run_result *r) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "ok", json_object_new_boolean(r->ok));
  json_object_object_add(o, "exit_code", json_object_new_int(r->exit_code));
  json_object_object_add(o, "stdout", common_json_text(r->stdout_data, r->stdout_len));
  json_object_object_add(o, "stderr", common_json_text(r->stderr_data, r->stderr_len));
  json_object_object_add(o, "stdout_truncated", json_object_new_boolean(r->stdout_truncated));
  json_object_object_add(o, "stderr_truncated", json_object_new_boolean(r->stderr_truncated));
  json_object_object_add(o, "timed_out", json_object_new_boolean(r->timed_out));
  json_object_object_add(o, "oom_killed", json_object_new_boolean(r->oom_killed));
  /* One decimal, printed as such (not 41.700000000000003). */
  double ms = (double)(long long)(r->duration_ms * 10.0 + 0.5) / 10.0;
  char msbuf[64];
  snprintf(msbuf, sizeof msbuf, "%.1f", ms);
  json_object_object_add(o, "duration_ms", json_object_new_double_s(ms, msbuf));
  json_object_object_add(o, "mode", json_object_new_string(sm_mode_name(r->mode)));
  json_object_object_add(o, "sandbox_id", json_object_new_string(r->sandbox_id));
  json_object_object_add(o, "reused", json_object_new_boolean(r->reused));
  json_object *files = json_object_new_array();
  for (size_t i = 0; i < r->n_files_changed; i++)
    json_object_array_add(files,
                          common_json_text(r->files_changed[i], strlen(r->files_changed[i])));
  json_object_object_add(o, "files_changed", files);
  json_object *conflicts = json_object_new_array();
  for (size_t i = 0; i < r->n_conflicts; i++)
    json_object_array_add(conflicts, common_json_text(r->conflicts[i], strlen(r->conflicts[i])));
  json_object_object_add(o, "conflicts", conflicts);
  json_object *refused = json_object_new_array();
  for (size_t i = 0; i < r->n_refused; i++) {
    json_object *x = json_object_new_object();
    json_object_object_add(x, "path",
                           common_json_text(r->refused[i].path, strlen(r->refused[i].path)));
    json_object_object_add(x, "reason", json_object_new_string(r->refused[i].reason));
    json_object_array_add(refused, x);
  }
  json_object_object_add(o, "refused", refused);
  if (r->replaced_previous[0]) {
    json_object *x = json_object_new_object();
    json_object_object_add(x, "previous", json_object_new_string(r->replaced_previous));
    json_object_object_add(x, "because",
                           common_json_text(r->replaced_because, strlen(r->replaced_because)));
    json_object_object_add(x, "workspace", r->replaced_workspace
                                               ? json_object_new_string(r->replaced_workspace)
                                               : NULL);
    json_object_object_add(o, "replaced", x);
  }
  if (r->resumed[0]) json_object_object_add(o, "resumed", json_object_new_string(r->resumed));
  const char *kind = sm_failure_kind_name(r->failure_kind);
  json_object_object_add(o, "failure_kind", kind ? json_object_new_string(kind) : NULL);
  json_object_object_add(o, "error",
                         r->error[0] ? common_json_text(r->error, strlen(r->error)) : NULL);
  return o;
}

int sandbox_result_add_refusals(sm_run_result *r, const sm_workspace_refusal *v, size_t n,
                                sm_error *err) {
  if (n == 0) return 0;
  sm_run_refusal *a = realloc(r->refused, (r->n_refused + n) * sizeof *a);
  if (a == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory keeping the copy out's refusals");
  r->refused = a;
  for (size_t i = 0; i < n; i++) {
    char *p = strdup(v[i].path);
    if (p == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory keeping the copy out's refusals");
    a[r->n_refused].path = p;
    a[r->n_refused].reason = v[i].reason;
    r->n_refused++;
  }
  return 0;
}

void sandbox_result_sync_failed(sm_run_result *r, const sm_error *err) {
  char tool[160];
  if (r->timed_out || r->error[0])
    snprintf(tool, sizeof tool, "%.150s", r->error[0] ? r->error : "it timed out");
  else
    snprintf(tool, sizeof tool, "it exited with %d", r->exit_code);
  char msg[SM_ERROR_MESSAGE_MAX];
  snprintf(msg, sizeof msg, "%s", err && err->message[0] ? err->message : "the copy out failed");
  r->ok = 0;
  r->failure_kind = SM_FAIL_SANDBOX;
  snprintf(r->error, sizeof r->error,
           "%.*s; nothing of the workspace was changed on the host (the tool ran: %s)",
           (int)(sizeof r->error - 220), msg, tool);
}

void sandbox_result_fail(sm_run_result *r, sm_failure_kind kind, const sm_error *err) {
  r->ok = 0;
  r->failure_kind = kind;
  r->exit_code = 125;
  const char *msg = err && err->message[0] ? err->message
                                           : sm_error_default_message(err ? err->code : SM_EIO);
  snprintf(r->error, sizeof r->error, "%s", msg);
}

void sandbox_result_apply_outcome(sm_run_result *out, const sandbox_exec_outcome *oc,
                                  const sm_sandbox_settings *s) {
  out->exit_code = oc->exit_code;
  out->timed_out = oc->timed_out;
  out->oom_killed = oc->oom_killed;
  out->duration_ms = oc->duration_ms;
  out->ok = !oc->timed_out && !oc->cancelled && oc->exit_code == 0;
  if (oc->timed_out) {
    out->failure_kind = SM_FAIL_TIMEOUT;
    snprintf(out->error, sizeof out->error, "the tool ran longer than %gs and was killed",
             s->timeout_s);
  } else if (oc->cancelled) {
    out->failure_kind = SM_FAIL_SANDBOX;
    snprintf(out->error, sizeof out->error, "the call was cancelled and the tool killed");
  } else if (oc->exit_code != 0) {
    out->failure_kind = SM_FAIL_TOOL;
    if (oc->oom_killed)
      snprintf(out->error, sizeof out->error, "the tool ran out of memory (limit %lld bytes)",
               (long long)s->memory);
  }
}
