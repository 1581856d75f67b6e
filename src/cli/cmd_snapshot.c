/* sandman sandbox snapshot | fork | rollback | diff and sandman snapshot
 * list | inspect | rm (sandman/keep.h, docs/state.md). A sandbox is named
 * as for `sandbox pause` (SANDBOX, --run-id or --worker-id); the operator
 * reaches every principal's snapshots of the instance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/keep.h>
#include <sandman/util.h>

#include "cli.h"
#include "cmd_keep.h"

#define FORK_MAX 64

static void print_size(int64_t bytes, char *out, size_t len) {
  if (bytes >= 1 << 20) snprintf(out, len, "%.1f MB", (double)bytes / (1 << 20));
  else if (bytes >= 1 << 10) snprintf(out, len, "%.1f kB", (double)bytes / (1 << 10));
  else snprintf(out, len, "%lld B", (long long)bytes);
}

int cmd_sandbox_snapshot(const cli_call *call) {
  int json = cli_has(call, "json");
  sm_snapshot_options o = SM_SNAPSHOT_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  o.name = cli_str(call, "name");
  o.no_wait = cli_has(call, "no-wait");
  o.memory = cli_has(call, "memory");
  if (cli_str(call, "wait") && sm_parse_duration(cli_str(call, "wait"), &o.wait_s, &err) != 0)
    return cli_usage_error(call->cmd, json, "--wait: %s", err.message);
  keep_session s;
  int rc = keep_session_open(call, &s);
  if (rc) return rc;
  char name[SM_NAME_MAX];
  rc = keep_target(call, s.runner, "snapshot", name, json);
  if (rc == CLI_EXIT_OK) {
    sm_snapshot snap;
    if (sm_sandbox_snapshot(s.runner, name, &o, &snap, &err) != 0) rc = keep_exit(&err);
    else if (json) rc = cli_print_json_owned(sm_snapshot_to_json(&snap, sm_now()));
    else
      printf("snapshot %s of %s: %lld files%s in %.0f ms\n", snap.name, name, (long long)snap.files,
             snap.memory ? " and its memory" : "", snap.duration_ms);
  }
  keep_session_close(&s);
  return rc;
}

int cmd_snapshot_list(const cli_call *call) {
  int json = cli_has(call, "json");
  keep_session s;
  int rc = keep_session_open(call, &s);
  if (rc) return rc;
  sm_snapshot_list l = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_snapshots_list(s.runner, NULL, &l, &err) != 0) {
    keep_session_close(&s);
    return cli_fail(&err);
  }
  double now = sm_now();
  if (json) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; a && i < l.n; i++) json_object_array_add(a, sm_snapshot_to_json(&l.items[i], now));
    rc = cli_print_json_owned(a);
  } else {
    printf("%-30s %-40s %8s %10s %10s %8s\n", "NAME", "SOURCE", "FILES", "WORKSPACE", "LAYER", "AGE");
    for (size_t i = 0; i < l.n; i++) {
      char ws[32], layer[32];
      print_size(l.items[i].workspace_bytes, ws, sizeof ws);
      print_size(l.items[i].layer_bytes, layer, sizeof layer);
      printf("%-30s %-40s %8lld %10s %10s %7.0fs\n", l.items[i].name, l.items[i].source,
             (long long)l.items[i].files, ws, layer, now - l.items[i].created_at);
    }
  }
  sm_snapshot_list_dispose(&l);
  keep_session_close(&s);
  return rc;
}

int cmd_snapshot_inspect(const cli_call *call) {
  keep_session s;
  int rc = keep_session_open(call, &s);
  if (rc) return rc;
  sm_snapshot snap;
  sm_error err = SM_ERROR_INIT;
  if (sm_snapshot_get(s.runner, call->args[0], NULL, &snap, &err) != 0) rc = keep_exit(&err);
  else rc = cli_print_json_owned(sm_snapshot_to_json(&snap, sm_now()));
  keep_session_close(&s);
  return rc;
}

int cmd_snapshot_rm(const cli_call *call) {
  int json = cli_has(call, "json");
  keep_session s;
  int rc = keep_session_open(call, &s);
  if (rc) return rc;
  json_object *removed = json_object_new_array(), *failed = json_object_new_array();
  for (int i = 0; i < call->n_args; i++) {
    sm_error err = SM_ERROR_INIT;
    if (sm_snapshot_remove(s.runner, call->args[i], NULL, &err) == 0) {
      if (json) json_object_array_add(removed, json_object_new_string(call->args[i]));
      else printf("%s\n", call->args[i]);
      continue;
    }
    rc = keep_exit(&err);
    json_object *f = json_object_new_object();
    json_object_object_add(f, "name", json_object_new_string(call->args[i]));
    json_object_object_add(f, "error", json_object_new_string(err.message));
    json_object_array_add(failed, f);
  }
  if (json) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "removed", removed);
    json_object_object_add(o, "failed", failed);
    cli_print_json_owned(o);
  } else {
    json_object_put(removed);
    json_object_put(failed);
  }
  keep_session_close(&s);
  return rc;
}

int cmd_snapshot_reap(const cli_call *call) {
  int json = cli_has(call, "json"), dry = cli_has(call, "dry-run");
  double age = 0;
  sm_error err = SM_ERROR_INIT;
  if (cli_str(call, "older-than") && sm_parse_duration(cli_str(call, "older-than"), &age, &err) != 0)
    return cli_usage_error(call->cmd, json, "--older-than: %s", err.message);
  size_t keep = cli_str(call, "keep") ? (size_t)strtoul(cli_str(call, "keep"), NULL, 10) : 0;
  keep_session s;
  int rc = keep_session_open(call, &s);
  if (rc) return rc;
  sm_snapshot_list removed = {0, NULL};
  if (sm_snapshot_reap(s.runner, age, keep, dry, &removed, &err) != 0) {
    rc = cli_fail(&err);
  } else if (json) {
    json_object *a = json_object_new_array();
    double now = sm_now();
    for (size_t i = 0; a && i < removed.n; i++)
      json_object_array_add(a, sm_snapshot_to_json(&removed.items[i], now));
    rc = cli_print_json_owned(a);
  } else {
    for (size_t i = 0; i < removed.n; i++)
      printf("%s%s\n", dry ? "would remove " : "", removed.items[i].name);
  }
  sm_snapshot_list_dispose(&removed);
  keep_session_close(&s);
  return rc;
}

/* Run ids <prefix>-<8 hex>, one per fork. */
static int fork_ids(const cli_call *call, const char *prefix, size_t n, char ids[][SM_NAME_MAX],
                    int json) {
  for (size_t i = 0; i < n; i++) {
    char hex[9];
    sm_error err = SM_ERROR_INIT;
    if (sm_random_hex(hex, 4, &err) != 0) return cli_fail(&err);
    if (snprintf(ids[i], SM_NAME_MAX, "%s-%s", prefix, hex) >= SM_NAME_MAX)
      return cli_usage_error(call->cmd, json, "--prefix is too long");
  }
  return CLI_EXIT_OK;
}

static int print_forks(const sm_fork_item *items, size_t n, int json) {
  int rc = CLI_EXIT_OK;
  json_object *a = json ? json_object_new_array() : NULL;
  for (size_t i = 0; i < n; i++) {
    if (items[i].error[0]) {
      cli_error("fork %s: %s", items[i].run_id, items[i].error);
      rc = CLI_EXIT_FAILURE;
    }
    if (!json) {
      if (!items[i].error[0]) printf("%s\n", items[i].run_id);
      continue;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "run_id", json_object_new_string(items[i].run_id));
    json_object_object_add(o, "name", items[i].name[0] ? json_object_new_string(items[i].name) : NULL);
    json_object_object_add(o, "id", items[i].id[0] ? json_object_new_string(items[i].id) : NULL);
    json_object_object_add(o, "duration_ms", json_object_new_double(items[i].duration_ms));
    json_object_object_add(o, "error", items[i].error[0] ? json_object_new_string(items[i].error) : NULL);
    json_object_array_add(a, o);
  }
  if (json) cli_print_json_owned(a);
  return rc;
}

int cmd_sandbox_fork(const cli_call *call) {
  int json = cli_has(call, "json");
  const char *snapshot = cli_str(call, "from-snapshot");
  const char *count = cli_str(call, "count");
  size_t n = count ? (size_t)strtoul(count, NULL, 10) : 1;
  if (snapshot == NULL) return cli_usage_error(call->cmd, json, "--from-snapshot NAME is required");
  if (n < 1 || n > FORK_MAX) return cli_usage_error(call->cmd, json, "--count: 1 to %d", FORK_MAX);
  char(*ids)[SM_NAME_MAX] = calloc(n, sizeof *ids);
  const char **ptrs = calloc(n, sizeof *ptrs);
  sm_fork_item *items = calloc(n, sizeof *items);
  int rc = ids && ptrs && items ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
  if (rc == CLI_EXIT_OK)
    rc = fork_ids(call, cli_str(call, "prefix") ? cli_str(call, "prefix") : snapshot, n, ids, json);
  keep_session s;
  if (rc == CLI_EXIT_OK) rc = keep_session_open(call, &s);
  if (rc == CLI_EXIT_OK) {
    for (size_t i = 0; i < n; i++) ptrs[i] = ids[i];
    sm_fork_request req = {snapshot, NULL, cli_str(call, "project"), ptrs, n};
    sm_error err = SM_ERROR_INIT;
    if (sm_sandbox_fork(s.runner, &req, items, &err) != 0) rc = keep_exit(&err);
    else rc = print_forks(items, n, json);
    keep_session_close(&s);
  }
  free(ids);
  free(ptrs);
  free(items);
  return rc;
}

int cmd_sandbox_rollback(const cli_call *call) {
  int json = cli_has(call, "json");
  const char *to = cli_str(call, "to");
  if (to == NULL) return cli_usage_error(call->cmd, json, "--to NAME is required");
  keep_session s;
  int rc = keep_session_open(call, &s);
  if (rc) return rc;
  char name[SM_NAME_MAX];
  rc = keep_target(call, s.runner, "rollback", name, json);
  if (rc == CLI_EXIT_OK) {
    sm_rest_report r;
    sm_error err = SM_ERROR_INIT;
    if (sm_sandbox_rollback(s.runner, name, to, NULL, &r, &err) != 0) rc = keep_exit(&err);
    else if (json) rc = cli_print_json_owned(sm_rest_report_to_json(&r));
    else printf("rolled back %s (%.12s) to snapshot %s in %.0f ms\n", r.name, r.id, to, r.duration_ms);
  }
  keep_session_close(&s);
  return rc;
}

static void print_changes(json_object *d, const char *key, char mark) {
  json_object *a = NULL;
  if (!json_object_object_get_ex(d, key, &a)) return;
  for (size_t i = 0; i < json_object_array_length(a); i++) {
    json_object *c = json_object_array_get_idx(a, i), *p = NULL, *sz = NULL;
    json_object_object_get_ex(c, "path", &p);
    json_object_object_get_ex(c, "size", &sz);
    printf("%c %s (%lld bytes)\n", mark, json_object_get_string(p), (long long)json_object_get_int64(sz));
  }
}

int cmd_sandbox_diff(const cli_call *call) {
  int json = cli_has(call, "json");
  const char *from = cli_str(call, "from-snapshot");
  if (from == NULL) return cli_usage_error(call->cmd, json, "--from-snapshot NAME is required");
  keep_session s;
  int rc = keep_session_open(call, &s);
  if (rc) return rc;
  char name[SM_NAME_MAX];
  rc = keep_target(call, s.runner, "diff", name, json);
  if (rc == CLI_EXIT_OK) {
    json_object *d = NULL;
    sm_error err = SM_ERROR_INIT;
    if (sm_sandbox_diff(s.runner, name, from, NULL, &d, &err) != 0) {
      rc = keep_exit(&err);
    } else if (json) {
      rc = cli_print_json_owned(d);
    } else {
      print_changes(d, "added", 'A');
      print_changes(d, "modified", 'M');
      print_changes(d, "deleted", 'D');
      json_object_put(d);
    }
  }
  keep_session_close(&s);
  return rc;
}
