/* The swarm backend's warm pool: a ready sandbox taken by a call, the
 * ready nodes counted, the node of the next pool sandbox chosen (see
 * backend_swarm_box.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "sandbox/backend_swarm_state.h"
#include "sandbox/spec.h"
#include "sandbox/swarm_spec.h"

/* ---- the warm pool ---- */

/* Swaps lease `drop` for `lease` (until deadline) on the service read as
 * svc; SM_ENOTFOUND when it is being removed or no longer holds `drop`. */
static int swap_lease(sm_engine *m, json_object *svc, const char *drop, const char *lease,
                      double deadline, sm_error *err) {
  json_object *spec = NULL, *labels = NULL;
  uint64_t version = 0;
  int rc = sandbox_swarm_service_parts(svc, &spec, &labels, &version, err);
  if (rc) return rc;
  char key[96];
  snprintf(key, sizeof key, SM_SWARM_LABEL_LEASE_PREFIX "%s", drop);
  if (sandbox_swarm_label(labels, SM_SWARM_LABEL_REAPING) || sandbox_swarm_label(labels, key) == NULL)
    return sm_error_set(err, SM_ENOTFOUND, "it is being removed, or its pool lease ran out");
  sandbox_swarm_labels_lease(labels, lease, deadline, drop, 0, sm_now());
  /* The call's from now on: no longer a ready one of the pool. */
  json_object_object_del(labels, SM_LABEL_PREFIX "pool");
  return engine_service_update(m, sandbox_swarm_service_id(svc), version, spec, err);
}

int sandbox_swarm_take(sandbox_swarm *sw, sm_engine *m, const sandbox_swarm_box *ready,
                       double lease_s, sandbox_swarm_box *out, sm_error *err) {
  *out = *ready;
  out->node = NULL;
  out->reused = 0;
  int rc = sm_random_hex(out->lease, 8, err);
  for (int attempt = 0; rc == 0 && attempt < CAS_TRIES; attempt++) {
    json_object *svc = NULL;
    rc = engine_service_inspect(m, ready->service_id, &svc, err);
    if (rc == 0) rc = swap_lease(m, svc, ready->lease, out->lease, sm_now() + lease_s, err);
    json_object_put(svc);
    if (rc != SM_ECONFLICT) break;
  }
  if (rc) {
    out->lease[0] = '\0';
    return sm_error_wrap(err, "taking ready sandbox %s", ready->name);
  }
  /* Held by this call from here: the task and its node as they are now. */
  engine_swarm_task task;
  engine_swarm_node node;
  rc = sandbox_swarm_wait_running(m, ready->service_id, &task, err);
  if (rc == 0 && strcmp(task.container_id, ready->container_id) != 0)
    rc = sm_error_set(err, SM_ESANDBOX, "its task was replaced");
  if (rc == 0) rc = sandbox_swarm_node_of(m, task.node_id, &node, err);
  if (rc == 0 && strcmp(node.state, "ready") != 0)
    rc = sm_error_set(err, SM_ESANDBOX, "its node %s is %s", node.hostname, node.state);
  if (rc == 0) rc = sandbox_swarm_node_engine(sw, &node, &out->node, err);
  if (rc) {
    out->node = NULL;
    return sm_error_wrap(err, "ready sandbox %s", ready->name);
  }
  snprintf(out->node_addr, sizeof out->node_addr, "%s", node.addr);
  snprintf(out->node_name, sizeof out->node_name, "%s", node.hostname);
  return 0;
}

/* A node attribute a constraint names, from the node's JSON: "" when the
 * node lacks it, NULL when sandman does not read that key (the scheduler
 * alone judges those). */
static const char *node_attr(json_object *n, const char *key) {
  json_object *spec = NULL, *desc = NULL, *labels = NULL, *eng = NULL, *v = NULL;
  json_object_object_get_ex(n, "Spec", &spec);
  json_object_object_get_ex(n, "Description", &desc);
  const char *out = NULL;
  if (strcmp(key, "node.id") == 0) {
    if (json_object_object_get_ex(n, "ID", &v)) out = json_object_get_string(v);
  } else if (strcmp(key, "node.hostname") == 0) {
    if (json_object_object_get_ex(desc, "Hostname", &v)) out = json_object_get_string(v);
  } else if (strcmp(key, "node.role") == 0) {
    if (json_object_object_get_ex(spec, "Role", &v)) out = json_object_get_string(v);
  } else if (strncmp(key, "node.labels.", 12) == 0) {
    json_object_object_get_ex(spec, "Labels", &labels);
    if (json_object_object_get_ex(labels, key + 12, &v)) out = json_object_get_string(v);
  } else if (strncmp(key, "engine.labels.", 14) == 0) {
    json_object_object_get_ex(desc, "Engine", &eng);
    json_object_object_get_ex(eng, "Labels", &labels);
    if (json_object_object_get_ex(labels, key + 14, &v)) out = json_object_get_string(v);
  } else {
    return NULL;
  }
  return out ? out : "";
}

/* Whether node n meets the runner's constraints ("KEY==VALUE", "KEY!=VALUE"). */
static int node_eligible(const sandbox_swarm *sw, json_object *n) {
  for (size_t i = 0; i < sw->n_constraints; i++) {
    const char *c = sw->constraints[i];
    const char *eq = strstr(c, "==");
    const char *ne = strstr(c, "!=");
    const char *op = eq && (!ne || eq < ne) ? eq : ne;
    if (op == NULL) continue;
    char key[128];
    size_t klen = (size_t)(op - c);
    while (klen > 0 && c[klen - 1] == ' ') klen--;
    while (*c == ' ' && klen > 0) c++, klen--;
    if (klen >= sizeof key) continue;
    memcpy(key, c, klen);
    key[klen] = '\0';
    const char *want = op + 2;
    while (*want == ' ') want++;
    const char *have = node_attr(n, key);
    if (have == NULL) continue;
    int same = strcmp(have, want) == 0;
    if (op == eq ? !same : same) return 0;
  }
  return 1;
}

/* The ready, active nodes that meet the constraints: their ids. */
static size_t eligible_nodes(sandbox_swarm *sw, sm_engine *m, char (*ids)[SM_ENGINE_ID_MAX],
                             size_t cap, sm_error *err) {
  json_object *nodes = NULL;
  if (engine_node_list(m, &nodes, err) != 0) return 0;
  size_t n = 0;
  for (size_t i = 0; i < json_object_array_length(nodes) && n < cap; i++) {
    json_object *j = json_object_array_get_idx(nodes, i);
    engine_swarm_node node;
    sm_error ignore = SM_ERROR_INIT;
    if (engine_swarm_node_parse(j, &node, &ignore) == 0 && node.ready && node_eligible(sw, j))
      snprintf(ids[n++], SM_ENGINE_ID_MAX, "%s", node.id);
  }
  json_object_put(nodes);
  return n;
}

unsigned sandbox_swarm_ready_nodes(sandbox_swarm *sw, sm_engine *m) {
  double now = sm_now();
  pthread_mutex_lock(&sw->lock);
  unsigned n = sw->ready_nodes;
  int fresh = sw->ready_nodes_at > 0 && now - sw->ready_nodes_at < NODES_COUNT_EVERY_S;
  pthread_mutex_unlock(&sw->lock);
  if (fresh) return n ? n : 1;
  char (*ids)[SM_ENGINE_ID_MAX] = calloc(MAX_NODES, sizeof *ids);
  sm_error err = SM_ERROR_INIT;
  n = ids ? (unsigned)eligible_nodes(sw, m, ids, MAX_NODES, &err) : 0;
  free(ids);
  pthread_mutex_lock(&sw->lock);
  sw->ready_nodes = n;
  sw->ready_nodes_at = now;
  pthread_mutex_unlock(&sw->lock);
  return n ? n : 1;
}

static unsigned *pending_of(sandbox_swarm *sw, const char *node_id, int add) {
  int free_i = -1;
  for (int i = 0; i < MAX_NODES; i++) {
    if (strcmp(sw->pending[i].id, node_id) == 0) return &sw->pending[i].n;
    if (free_i < 0 && sw->pending[i].n == 0) free_i = i;
  }
  if (!add || free_i < 0) return NULL;
  snprintf(sw->pending[free_i].id, sizeof sw->pending[free_i].id, "%s", node_id);
  return &sw->pending[free_i].n;
}

int sandbox_swarm_pool_node(sandbox_swarm *sw, sm_engine *m, const char *hash, const char *owner,
                            char node_id[SM_ENGINE_ID_MAX], sm_error *err) {
  cleanup_free char (*ids)[SM_ENGINE_ID_MAX] = calloc(MAX_NODES, sizeof *ids);
  cleanup_free unsigned *count = calloc(MAX_NODES, sizeof *count);
  if (ids == NULL || count == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  /* One choice at a time in this process: two pool threads never both
   * pick the node that lacks one. */
  pthread_mutex_lock(&sw->pool_lock);
  size_t n = eligible_nodes(sw, m, ids, MAX_NODES, err);
  int rc = n == 0 ? (err->code ? err->code
                               : sm_error_set(err, SM_ESANDBOX, "no ready node meets the constraints"))
                  : 0;
  char l_pool[64], l_hash[128], l_owner[400];
  snprintf(l_pool, sizeof l_pool, SM_LABEL_PREFIX "pool=true");
  snprintf(l_hash, sizeof l_hash, SM_LABEL_PREFIX "config-hash=%s", hash);
  snprintf(l_owner, sizeof l_owner, SM_LABEL_PREFIX "owner=%s", owner);
  const char *filters[3] = {l_pool, l_hash, l_owner};
  json_object *svcs = NULL;
  if (rc == 0) rc = engine_service_list(m, filters, 3, &svcs, err);
  for (size_t i = 0; rc == 0 && i < json_object_array_length(svcs); i++) {
    json_object *spec = NULL, *labels = NULL;
    json_object_object_get_ex(json_object_array_get_idx(svcs, i), "Spec", &spec);
    json_object_object_get_ex(spec, "Labels", &labels);
    const char *on = sandbox_swarm_label(labels, SM_SWARM_LABEL_POOL_NODE);
    for (size_t k = 0; on && k < n; k++)
      if (strcmp(ids[k], on) == 0) count[k]++;
  }
  json_object_put(svcs);
  if (rc == 0) {
    size_t best = 0;
    for (size_t k = 0; k < n; k++) {
      unsigned *p = pending_of(sw, ids[k], 0);
      if (p) count[k] += *p;
      if (count[k] < count[best]) best = k;
    }
    snprintf(node_id, SM_ENGINE_ID_MAX, "%s", ids[best]);
    unsigned *p = pending_of(sw, node_id, 1);
    if (p) (*p)++;
  }
  pthread_mutex_unlock(&sw->pool_lock);
  return rc;
}

void sandbox_swarm_pool_placed(sandbox_swarm *sw, const char *node_id) {
  pthread_mutex_lock(&sw->pool_lock);
  unsigned *p = pending_of(sw, node_id, 0);
  if (p && *p > 0) (*p)--;
  pthread_mutex_unlock(&sw->pool_lock);
}

