/* What a sandbox says about itself in its labels beyond its keys (who made
 * it, as what, with which resources, for how long, the owner's labels),
 * read back for list, get and reap; one sandbox found by name or id. The
 * labels are the truth: a runner that starts again finds all of it there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/ops.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "ops/format.h"

static double number_label(json_object *labels, const char *key, double none) {
  const char *v = ops_label(labels, key);
  double d = 0;
  if (v == NULL || sm_parse_double(v, 0, 1e15, &d, NULL) != 0) return none;
  return d;
}

/* The owner's labels (io.sandman.label.<key>) as a JSON object's text. */
static void user_labels(json_object *labels, char *out, size_t len) {
  json_object *o = json_object_new_object();
  size_t plen = strlen(SM_OPS_LABEL_USER_PREFIX);
  if (o && labels && json_object_is_type(labels, json_type_object)) {
    json_object_object_foreach(labels, k, v) {
      if (strncmp(k, SM_OPS_LABEL_USER_PREFIX, plen) != 0 || k[plen] == '\0' ||
          !json_object_is_type(v, json_type_string))
        continue;
      json_object_object_add(o, k + plen, json_object_get(v));
    }
  }
  const char *text = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : "{}";
  /* Labels this sandman wrote fit; anything else is not shown cut. */
  snprintf(out, len, "%s", strlen(text) < len ? text : "{}");
  json_object_put(o);
}

void ops_sandbox_describe(json_object *labels, sm_ops_sandbox *out) {
  ops_copy(out->principal, sizeof out->principal, ops_label(labels, SM_OPS_LABEL_PRINCIPAL));
  const char *res = ops_label(labels, SM_OPS_LABEL_RESOURCE);
  out->resource = res && strcmp(res, "true") == 0;
  ops_copy(out->template_name, sizeof out->template_name, ops_label(labels, SM_OPS_LABEL_TEMPLATE));
  ops_copy(out->network, sizeof out->network, ops_label(labels, "io.sandman.network"));
  out->cpu = number_label(labels, "io.sandman.cpu", -1);
  out->memory = (int64_t)number_label(labels, "io.sandman.memory", -1);
  out->pids = (int64_t)number_label(labels, "io.sandman.pids", -1);
  out->disk = (int64_t)number_label(labels, "io.sandman.disk", -1);
  out->timeout_s = number_label(labels, SM_OPS_LABEL_TIMEOUT, 0);
  out->idle_timeout_s = number_label(labels, SM_OPS_LABEL_IDLE_TIMEOUT, 0);
  user_labels(labels, out->labels, sizeof out->labels);
}

static json_object *count_or_null(double v) {
  return v >= 0 ? json_object_new_int64((int64_t)v) : NULL;
}

void ops_sandbox_describe_json(json_object *o, const sm_ops_sandbox *sb) {
  json_object_object_add(o, "resource", json_object_new_boolean(sb->resource));
  json_object_object_add(o, "template", sb->template_name[0]
                                            ? json_object_new_string(sb->template_name)
                                            : NULL);
  json_object_object_add(o, "network", sb->network[0] ? json_object_new_string(sb->network) : NULL);
  json_object *r = json_object_new_object();
  json_object_object_add(r, "cpu", sb->cpu >= 0 ? json_object_new_double(sb->cpu) : NULL);
  json_object_object_add(r, "memory", count_or_null((double)sb->memory));
  json_object_object_add(r, "pids", count_or_null((double)sb->pids));
  json_object_object_add(r, "disk", count_or_null((double)sb->disk));
  json_object_object_add(o, "resources", r);
  json_object_object_add(o, "timeout_s",
                         sb->timeout_s > 0 ? json_object_new_double(sb->timeout_s) : NULL);
  json_object_object_add(o, "idle_timeout_s", sb->idle_timeout_s > 0
                                                  ? json_object_new_double(sb->idle_timeout_s)
                                                  : NULL);
  char t[40];
  if (sb->timeout_s > 0 && sb->created_at > 0) {
    sm_format_time(sb->created_at + sb->timeout_s, t, sizeof t);
    json_object_object_add(o, "expires_at", json_object_new_string(t));
  } else {
    json_object_object_add(o, "expires_at", NULL);
  }
  json_object *labels = json_tokener_parse(sb->labels[0] ? sb->labels : "{}");
  json_object_object_add(o, "labels", labels ? labels : json_object_new_object());
}

/* A container's inspect object as the listing's summary would say it. */
static int from_inspect(const sm_ops_scope *scope, json_object *insp, sm_ops_sandbox *out,
                        sm_error *err) {
  cleanup_json json_object *sum = json_object_new_object();
  json_object *v = NULL, *cfg = NULL, *state = NULL;
  if (sum == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  if (json_object_object_get_ex(insp, "Id", &v)) json_object_object_add(sum, "Id", json_object_get(v));
  if (json_object_object_get_ex(insp, "Name", &v)) {
    json_object *names = json_object_new_array();
    json_object_array_add(names, json_object_get(v));
    json_object_object_add(sum, "Names", names);
  }
  if (json_object_object_get_ex(insp, "Config", &cfg)) {
    if (json_object_object_get_ex(cfg, "Image", &v)) json_object_object_add(sum, "Image", json_object_get(v));
    if (json_object_object_get_ex(cfg, "Labels", &v)) json_object_object_add(sum, "Labels", json_object_get(v));
  }
  if (json_object_object_get_ex(insp, "State", &state) &&
      json_object_object_get_ex(state, "Status", &v)) {
    json_object_object_add(sum, "State", json_object_get(v));
    json_object_object_add(sum, "Status", json_object_get(v));
  }
  int rc = sm_ops_sandbox_from_engine(sum, out, err);
  if (rc) return rc;
  out->busy = sm_state_is_busy(scope->state_dir, out->name) == 1;
  double lu = sm_state_last_used(scope->state_dir, out->name);
  if (lu >= 0) {
    out->last_used_at = lu;
    out->last_used_recorded = 1;
  }
  return 0;
}

int sm_ops_get(const sm_ops_scope *scope, const char *ref, sm_ops_sandbox *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  if (scope == NULL || scope->engine == NULL)
    return sm_error_set(err, SM_EINVAL, "no engine client given to the sandbox operations");
  if (ref == NULL || *ref == '\0' || strlen(ref) >= SM_NAME_MAX || strchr(ref, '/'))
    return sm_error_set(err, SM_ENOTFOUND, "no such sandbox");
  /* The name, or an id: the engine resolves both (a prefix too). */
  cleanup_json json_object *insp = NULL;
  int rc = sm_engine_container_inspect(scope->engine, ref, &insp, err);
  if (rc == SM_ENOTFOUND || (rc == 0 && insp == NULL))
    return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s", ref);
  if (rc) return rc;
  json_object *cfg = NULL, *labels = NULL;
  json_object_object_get_ex(insp, "Config", &cfg);
  if (cfg) json_object_object_get_ex(cfg, "Labels", &labels);
  const char *managed = ops_label(labels, SM_OPS_LABEL_MANAGED);
  const char *inst = ops_label(labels, SM_OPS_LABEL_INSTANCE);
  if (!managed || strcmp(managed, "true") != 0 || !inst ||
      strcmp(inst, sm_ops_scope_instance(scope)) != 0 || ops_label(labels, "io.sandman.egress"))
    return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s", ref);
  return from_inspect(scope, insp, out, err);
}
