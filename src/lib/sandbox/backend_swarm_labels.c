/* The swarm backend's pure pieces: a service's labels and leases, its
 * parts, its name (unit-tested; see backend_swarm_box.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/backend_swarm_state.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"
#include "sandbox/swarm_spec.h"

/* ---- labels ---- */

const char *sandbox_swarm_label(json_object *labels, const char *key) {
  json_object *v = NULL;
  if (labels == NULL || !json_object_object_get_ex(labels, key, &v)) return NULL;
  return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

int sandbox_swarm_live_leases(json_object *labels, double now) {
  int n = 0;
  size_t plen = strlen(SM_SWARM_LABEL_LEASE_PREFIX);
  if (!json_object_is_type(labels, json_type_object)) return 0;
  json_object_object_foreach(labels, key, v) {
    if (strncmp(key, SM_SWARM_LABEL_LEASE_PREFIX, plen) != 0) continue;
    double deadline = strtod(json_object_get_string(v), NULL);
    if (deadline > now) n++;
  }
  return n;
}

int sandbox_swarm_busy(json_object *labels, double now) {
  const char *pool = sandbox_swarm_label(labels, SM_LABEL_PREFIX "pool");
  if (pool && strcmp(pool, "true") == 0) return 0;
  return sandbox_swarm_live_leases(labels, now) > 0;
}

void sandbox_swarm_labels_lease(json_object *labels, const char *id, double deadline, const char *drop,
                           double used, double now) {
  size_t plen = strlen(SM_SWARM_LABEL_LEASE_PREFIX);
  char *gone[64];
  size_t n_gone = 0;
  json_object_object_foreach(labels, key, v) {
    if (strncmp(key, SM_SWARM_LABEL_LEASE_PREFIX, plen) != 0) continue;
    int expired = strtod(json_object_get_string(v), NULL) <= now;
    int dropped = drop && strcmp(key + plen, drop) == 0;
    if ((expired || dropped) && n_gone < 64) gone[n_gone++] = strdup(key);
  }
  for (size_t i = 0; i < n_gone; i++) {
    if (gone[i]) json_object_object_del(labels, gone[i]);
    free(gone[i]);
  }
  char lease_key[96], value[32];
  if (id) {
    snprintf(lease_key, sizeof lease_key, SM_SWARM_LABEL_LEASE_PREFIX "%s", id);
    snprintf(value, sizeof value, "%.0f", deadline);
    json_object_object_add(labels, lease_key, json_object_new_string(value));
  }
  if (used > 0) {
    snprintf(value, sizeof value, "%.0f", used);
    json_object_object_add(labels, SM_SWARM_LABEL_LAST_USED, json_object_new_string(value));
  }
}

/* The service's Spec (borrowed), its labels (borrowed), its version. */
int sandbox_swarm_service_parts(json_object *svc, json_object **spec, json_object **labels,
                         uint64_t *version, sm_error *err) {
  *spec = NULL;
  *labels = NULL;
  if (!json_object_object_get_ex(svc, "Spec", spec) || engine_swarm_version(svc, version) != 0)
    return sm_error_set(err, SM_EPROTOCOL, "a service in the swarm's answer has no Spec or Version");
  if (!json_object_object_get_ex(*spec, "Labels", labels) ||
      !json_object_is_type(*labels, json_type_object)) {
    *labels = json_object_new_object();
    json_object_object_add(*spec, "Labels", *labels);
  }
  return 0;
}

const char *sandbox_swarm_service_id(json_object *svc) {
  json_object *v = NULL;
  return json_object_object_get_ex(svc, "ID", &v) ? json_object_get_string(v) : NULL;
}

/* ---- names ---- */

void sandbox_swarm_service_name(const char *name, char out[SM_SWARM_SERVICE_NAME_MAX + 1]) {
  /* A swarm name is a DNS label: at most 63 characters. A longer sandbox
   * name (a long instance) becomes a digest of itself, still one name per
   * sandbox; the labels keep the instance, mode and keys for list and reap. */
  if (strlen(name) <= SM_SWARM_SERVICE_NAME_MAX) {
    snprintf(out, SM_SWARM_SERVICE_NAME_MAX + 1, "%s", name);
    return;
  }
  char hex[65];
  sandbox_sha256_hex(name, strlen(name), hex);
  snprintf(out, SM_SWARM_SERVICE_NAME_MAX + 1, "sandman-%.48s", hex);
}

