/* One sandbox of the instance found by its name or id (sm_ops_get), from
 * the engine's inspect object: the same description as the listing's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/ops.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "ops/format.h"

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
  sm_sandbox_rest_state(scope->state_dir, out->name, out->state, out->rest, &out->rest_since);
  out->busy = sm_state_is_busy(scope->state_dir, out->name) == 1;
  double lu = sm_state_last_used(scope->state_dir, out->name);
  if (lu >= 0) {
    out->last_used_at = lu;
    out->last_used_recorded = 1;
  }
  return 0;
}

/* A hibernated sandbox comes back in a new container (docs/state.md): the
 * id its caller kept is its io.sandman.origin label. A full id, or a
 * prefix of one that names one sandbox. */
static int by_origin(const sm_ops_scope *scope, const char *ref, json_object **insp, sm_error *err) {
  char managed[128], instance[200];
  snprintf(managed, sizeof managed, "%s=true", SM_OPS_LABEL_MANAGED);
  snprintf(instance, sizeof instance, "%s=%s", SM_OPS_LABEL_INSTANCE, sm_ops_scope_instance(scope));
  const char *labels[3] = {managed, instance, "io.sandman.origin"};
  cleanup_json json_object *list = NULL;
  sm_error e = SM_ERROR_INIT;
  if (strlen(ref) < 4 || sm_engine_container_list(scope->engine, 1, labels, 3, &list, &e) != 0)
    return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s", ref);
  const char *hit = NULL;
  size_t rlen = strlen(ref);
  for (size_t i = 0; list && i < json_object_array_length(list); i++) {
    json_object *c = json_object_array_get_idx(list, i), *l = NULL, *id = NULL;
    json_object_object_get_ex(c, "Labels", &l);
    const char *origin = ops_label(l, "io.sandman.origin");
    if (origin == NULL || strncmp(origin, ref, rlen) != 0) continue;
    if (hit) return sm_error_set(err, SM_ENOTFOUND, "'%s' names more than one sandbox", ref);
    if (json_object_object_get_ex(c, "Id", &id)) hit = json_object_get_string(id);
  }
  if (hit == NULL) return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s", ref);
  sm_error_clear(err);
  return sm_engine_container_inspect(scope->engine, hit, insp, err);
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
  if (rc == SM_ENOTFOUND) rc = by_origin(scope, ref, &insp, err);
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
