/* snapshot, fork, rollback, diff, pause and resume over MCP: see snapshot_tools.h. The
 * sandbox is always the session's own (named from its prepared request,
 * never from an argument), and the snapshots those of the session's
 * principal (a worker session: its own; the operator's: the instance's),
 * so a session can neither reach another's sandbox nor use another
 * principal's snapshot: such a snapshot is "not found", as a missing one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/keep.h>
#include <sandman/util.h>
#include <sandman/name.h>

#include "mcp/snapshot_tools.h"

#define FORK_MAX 64
#define DIFF_LIST_MAX 1000 /* entries of each kind a diff result shows */

const char mcp_snapshot_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"description\":\"The snapshot's name: letters, digits, _ . - "
    "(default snap-<UTC time>-<4 hex>)\"}},\"additionalProperties\":false}";
const char mcp_snapshot_out[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"files\":{\"type\":\"integer\"},\"size\":{\"type\":\"object\"},"
    "\"duration_ms\":{\"type\":\"number\"}},\"required\":[\"name\"]}";
const char mcp_fork_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"snapshot\":{\"type\":\"string\",\"description\":\"The snapshot to start from\"},"
    "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":64,\"description\":\"How many new "
    "sandboxes (default 1)\"},"
    "\"prefix\":{\"type\":\"string\",\"description\":\"Their run ids are <prefix>-<8 hex> "
    "(default the snapshot's name)\"}},"
    "\"required\":[\"snapshot\"],\"additionalProperties\":false}";
const char mcp_fork_out[] =
    "{\"type\":\"object\",\"properties\":{\"forks\":{\"type\":\"array\"}},"
    "\"required\":[\"forks\"]}";
const char mcp_rollback_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"snapshot\":{\"type\":\"string\",\"description\":\"The snapshot this sandbox goes back "
    "to\"}},\"required\":[\"snapshot\"],\"additionalProperties\":false}";
const char mcp_rollback_out[] =
    "{\"type\":\"object\",\"properties\":{\"state\":{\"type\":\"string\"},"
    "\"previous\":{\"type\":\"string\"},\"duration_ms\":{\"type\":\"number\"}},"
    "\"required\":[\"state\"]}";
const char mcp_diff_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"snapshot\":{\"type\":\"string\",\"description\":\"The snapshot to compare the workspace "
    "with\"}},\"required\":[\"snapshot\"],\"additionalProperties\":false}";
const char mcp_diff_out[] =
    "{\"type\":\"object\",\"properties\":{\"added\":{\"type\":\"array\"},"
    "\"modified\":{\"type\":\"array\"},\"deleted\":{\"type\":\"array\"},"
    "\"truncated\":{\"type\":\"boolean\"}},\"required\":[\"added\",\"modified\",\"deleted\"]}";

const char mcp_pause_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"tier\":{\"type\":\"string\",\"enum\":[\"freeze\",\"stop\",\"hibernate\"],"
    "\"description\":\"freeze (default: memory kept, no CPU), stop (processes end, files kept) "
    "or hibernate (memory written to disk; gVisor sandboxes)\"}},\"additionalProperties\":false}";
const char mcp_resume_schema[] =
    "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";
const char mcp_rest_out[] =
    "{\"type\":\"object\",\"properties\":{\"state\":{\"type\":\"string\"},"
    "\"previous\":{\"type\":\"string\"},\"since\":{\"type\":[\"string\",\"null\"]},"
    "\"changed\":{\"type\":\"boolean\"},\"duration_ms\":{\"type\":\"number\"}},"
    "\"required\":[\"state\"]}";

static const char *arg_str(json_object *args, const char *key) {
  json_object *v = NULL;
  return json_object_object_get_ex(args, key, &v) ? json_object_get_string(v) : NULL;
}

/* The session's sandbox's name, or a tool error. */
static int own_sandbox(sm_runner *runner, const sm_run_request *req, char *name, sm_mcp_result *out) {
  sm_error err = SM_ERROR_INIT;
  if (sm_run_keyed_sandbox(runner, req, name, SM_NAME_MAX, &err) != 0) {
    sm_mcp_result_error(out, "this session's sandbox cannot be branched: %s", err.message);
    return -1;
  }
  return 0;
}

static int failed(sm_mcp_result *out, const char *what, const sm_error *err) {
  if (err->code == SM_ENOTFOUND)
    return sm_mcp_result_error(out, "%s: %s (a sandbox is made by this session's first command; "
                                    "a snapshot is found by the name it was given)", what, err->message);
  return sm_mcp_result_error(out, "%s: %s", what, err->message);
}

/* The JSON as the result's text and structured content (taken). */
static int answer(sm_mcp_result *out, const char *head, json_object *st) {
  if (st == NULL) return SM_ENOMEM;
  const char *j = json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN);
  size_t hlen = strlen(head), jlen = strlen(j);
  char *text = malloc(hlen + jlen + 2);
  if (text == NULL) {
    json_object_put(st);
    return SM_ENOMEM;
  }
  memcpy(text, head, hlen);
  text[hlen] = '\n';
  memcpy(text + hlen + 1, j, jlen + 1);
  sm_mcp_result_text(out, text, hlen + 1 + jlen);
  free(text);
  sm_mcp_result_structured(out, st);
  return 0;
}

int mcp_snapshot_call(const sm_mcp_sandbox_options *opts, const sm_run_request *req, json_object *args,
                      sm_mcp_result *out) {
  char name[SM_NAME_MAX];
  if (own_sandbox(opts->runner, req, name, out)) return 0;
  sm_snapshot_options o = SM_SNAPSHOT_OPTIONS_INIT;
  o.name = arg_str(args, "name");
  sm_snapshot snap;
  sm_error err = SM_ERROR_INIT;
  if (sm_sandbox_snapshot(opts->runner, name, &o, &snap, &err) != 0) return failed(out, "snapshot", &err);
  if (opts->snapshotted && snap.source_id[0]) opts->snapshotted(opts->prepare_ud, snap.source_id);
  char head[SM_SNAPSHOT_NAME_MAX + 96];
  snprintf(head, sizeof head, "snapshot %s: %lld files in %.0f ms", snap.name, (long long)snap.files,
           snap.duration_ms);
  return answer(out, head, sm_snapshot_to_json(&snap, sm_now()));
}

int mcp_rollback_call(sm_runner *runner, const sm_run_request *req, json_object *args,
                      sm_mcp_result *out) {
  char name[SM_NAME_MAX];
  if (own_sandbox(runner, req, name, out)) return 0;
  const char *snap = arg_str(args, "snapshot");
  sm_rest_report r;
  sm_error err = SM_ERROR_INIT;
  if (sm_sandbox_rollback(runner, name, snap, req->principal, &r, &err) != 0)
    return failed(out, "rollback", &err);
  char head[SM_SNAPSHOT_NAME_MAX + 96];
  snprintf(head, sizeof head, "the sandbox is back at snapshot %.100s (its processes were ended)", snap);
  return answer(out, head, sm_rest_report_to_json(&r));
}

/* At most DIFF_LIST_MAX entries of kind in d (in place); 1 when some went. */
static int cap_kind(json_object *d, const char *kind) {
  json_object *arr = NULL;
  if (!json_object_object_get_ex(d, kind, &arr) || !json_object_is_type(arr, json_type_array)) return 0;
  size_t n = json_object_array_length(arr);
  if (n <= DIFF_LIST_MAX) return 0;
  json_object_array_del_idx(arr, DIFF_LIST_MAX, n - DIFF_LIST_MAX);
  return 1;
}

static size_t count_of(json_object *d, const char *kind) {
  json_object *arr = NULL;
  return json_object_object_get_ex(d, kind, &arr) ? json_object_array_length(arr) : 0;
}

int mcp_diff_call(sm_runner *runner, const sm_run_request *req, json_object *args, sm_mcp_result *out) {
  char name[SM_NAME_MAX];
  if (own_sandbox(runner, req, name, out)) return 0;
  json_object *d = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_sandbox_diff(runner, name, arg_str(args, "snapshot"), req->principal, &d, &err) != 0)
    return failed(out, "diff", &err);
  char head[160];
  snprintf(head, sizeof head, "since the snapshot: %zu added, %zu modified, %zu deleted",
           count_of(d, "added"), count_of(d, "modified"), count_of(d, "deleted"));
  int cut = cap_kind(d, "added") | cap_kind(d, "modified") | cap_kind(d, "deleted");
  json_object_object_add(d, "truncated", json_object_new_boolean(cut));
  return answer(out, head, d);
}

static json_object *fork_items(const sm_fork_item *items, size_t n) {
  json_object *arr = json_object_new_array();
  for (size_t i = 0; arr && i < n; i++) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "run_id", json_object_new_string(items[i].run_id));
    json_object_object_add(o, "id", items[i].id[0] ? json_object_new_string(items[i].id) : NULL);
    json_object_object_add(o, "error", items[i].error[0] ? json_object_new_string(items[i].error) : NULL);
    json_object_array_add(arr, o);
  }
  json_object *body = json_object_new_object();
  json_object_object_add(body, "forks", arr);
  return body;
}

int mcp_fork_call(sm_runner *runner, const sm_run_request *req, json_object *args, sm_mcp_result *out) {
  const char *snap = arg_str(args, "snapshot"), *prefix = arg_str(args, "prefix");
  json_object *v = NULL;
  int64_t count = json_object_object_get_ex(args, "count", &v) ? json_object_get_int64(v) : 1;
  if (count < 1 || count > FORK_MAX) return sm_mcp_result_error(out, "count must be 1 to %d", FORK_MAX);
  const char *base = prefix ? prefix : snap;
  if (!sm_name_valid(base) || strlen(base) > SM_NAME_MAX - 16)
    return sm_mcp_result_error(out, "prefix: letters, digits, _ . - (not starting with . or -)");
  char ids[FORK_MAX][SM_NAME_MAX];
  const char *ptrs[FORK_MAX];
  sm_error err = SM_ERROR_INIT;
  for (int64_t i = 0; i < count; i++) {
    char hex[9];
    if (sm_random_hex(hex, 4, &err) != 0) return failed(out, "fork", &err);
    snprintf(ids[i], sizeof ids[i], "%s-%s", base, hex);
    ptrs[i] = ids[i];
  }
  sm_fork_item *items = calloc((size_t)count, sizeof *items);
  if (items == NULL) return SM_ENOMEM;
  sm_fork_request fr = {snap, req->principal, NULL, ptrs, (size_t)count};
  if (sm_sandbox_fork(runner, &fr, items, &err) != 0) {
    free(items);
    return failed(out, "fork", &err);
  }
  size_t made = 0;
  for (int64_t i = 0; i < count; i++) made += items[i].error[0] == '\0';
  char head[160];
  snprintf(head, sizeof head, "%zu of %lld new sandboxes made from the snapshot (run ids below; this "
           "session's tools stay in its own sandbox)", made, (long long)count);
  json_object *body = fork_items(items, (size_t)count);
  free(items);
  int rc = answer(out, head, body);
  if (rc == 0 && made < (size_t)count) out->is_error = 1;
  return rc;
}

/* A pause waits this long for the session's other calls (a terminal of
 * its own counts as one) before it is refused. */
#define PAUSE_WAIT_S 10.0

int mcp_rest_call(sm_runner *runner, const sm_run_request *req, json_object *args, int pause,
                  sm_mcp_result *out) {
  char name[SM_NAME_MAX];
  if (own_sandbox(runner, req, name, out)) return 0;
  sm_rest_options o = SM_REST_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  const char *tier = arg_str(args, "tier");
  if (pause && tier && sm_tier_parse(tier, &o.tier, &err) != 0)
    return sm_mcp_result_error(out, "%s", err.message);
  o.wait_s = PAUSE_WAIT_S;
  o.why = pause ? "requested (MCP tool pause)" : "requested (MCP tool resume)";
  sm_rest_report r;
  int rc = pause ? sm_sandbox_pause(runner, name, &o, &r, &err) : sm_sandbox_resume(runner, name, &o, &r, &err);
  if (rc != 0) return failed(out, pause ? "pause" : "resume", &err);
  char head[160];
  if (!r.changed)
    snprintf(head, sizeof head, "the sandbox is %s already", r.state);
  else
    snprintf(head, sizeof head, "the sandbox went %s -> %s in %.0f ms%s", r.previous, r.state,
             r.duration_ms, pause ? " (the next tool call brings it back by itself)" : "");
  return answer(out, head, sm_rest_report_to_json(&r));
}
