/* Swarm calls: swarm, nodes, services, tasks, networks (see engine_swarm.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_call.h"
#include "engine/engine_swarm.h"

#define PATH_CAP 4096

int engine_swarm_ref_valid(const char *ref) {
  if (ref == NULL || *ref == '\0' || strlen(ref) >= ENGINE_SWARM_NAME_MAX) return 0;
  for (const char *p = ref; *p; p++) {
    char c = *p;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '-';
    if (!ok) return 0;
  }
  return 1;
}

static int check_ref(const char *ref, const char *what, sm_error *err) {
  if (engine_swarm_ref_valid(ref)) return 0;
  return sm_error_set(err, SM_EINVAL, "%s '%.64s' is not 1..255 of [A-Za-z0-9_.-]", what,
                      ref ? ref : "");
}

/* Appends s percent-encoded (RFC 3986 unreserved kept) at path[*n]. */
static int url_encode(char *path, size_t cap, size_t *n, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~';
    if (*n + (plain ? 1 : 3) >= cap) return -1;
    if (plain) {
      path[(*n)++] = (char)*p;
    } else {
      path[(*n)++] = '%';
      path[(*n)++] = hex[*p >> 4];
      path[(*n)++] = hex[*p & 15];
    }
  }
  path[*n] = '\0';
  return 0;
}

int engine_swarm_filter_path(char *path, size_t cap, const char *base, const char *key,
                         const char *const *values, size_t n_values, sm_error *err) {
  int n = snprintf(path, cap, "%s", base);
  if (n < 0 || (size_t)n >= cap) return sm_error_set(err, SM_EINVAL, "request path too long");
  if (n_values == 0) return 0;
  json_object *f = json_object_new_object();
  json_object *arr = json_object_new_array();
  if (f == NULL || arr == NULL) {
    json_object_put(f);
    json_object_put(arr);
    return sm_error_set(err, SM_ENOMEM, "filters: out of memory");
  }
  json_object_object_add(f, key, arr);
  for (size_t i = 0; i < n_values; i++)
    json_object_array_add(arr, json_object_new_string(values[i] ? values[i] : ""));
  const char *text = json_object_to_json_string_ext(f, JSON_C_TO_STRING_PLAIN);
  size_t len = (size_t)n;
  int rc = 0;
  if (len + 9 >= cap) rc = -1;
  if (rc == 0) {
    memcpy(path + len, "?filters=", 9);
    len += 9;
    path[len] = '\0';
    rc = url_encode(path, cap, &len, text);
  }
  json_object_put(f);
  if (rc != 0) return sm_error_set(err, SM_EINVAL, "filters too long for a request path");
  return 0;
}

/* GET base?filters={key: values}; the answer must be an array. */
static int list_call(sm_engine *e, const char *base, const char *key, const char *const *values,
                     size_t n_values, json_object **out, sm_error *err) {
  *out = NULL;
  char path[PATH_CAP];
  int rc = engine_swarm_filter_path(path, sizeof path, base, key, values, n_values, err);
  if (rc != 0) return rc;
  rc = sm_engine_request_json(e, "GET", path, NULL, NULL, out, err);
  if (rc == 0 && !json_object_is_type(*out, json_type_array)) {
    json_object_put(*out);
    *out = NULL;
    return sm_error_set(err, SM_EPROTOCOL, "GET %s: the answer is not an array", base);
  }
  return rc;
}

/* ---- the swarm and its nodes ---- */

int engine_swarm_inspect(sm_engine *e, json_object **out, sm_error *err) {
  *out = NULL;
  int status = 0;
  int rc = sm_engine_request_json(e, "GET", "/swarm", NULL, &status, out, err);
  /* 503: "This node is not a swarm manager..." (in no swarm, or a worker). */
  if (rc != 0 && status == 503) {
    sm_error_wrap(err, "the engine at %s is not a swarm manager (the swarm backend needs a "
                       "manager's address: docs/scale-out.md)",
                  sm_engine_host(e));
    if (err) err->code = SM_EUNSUPPORTED;
    return SM_EUNSUPPORTED;
  }
  return rc;
}

int engine_node_list(sm_engine *e, json_object **out, sm_error *err) {
  *out = NULL;
  return sm_engine_request_json(e, "GET", "/nodes", NULL, NULL, out, err);
}

/* GET <prefix><ref> (ref checked, named by what). */
static int inspect(sm_engine *e, const char *prefix, const char *ref, const char *what,
                   json_object **out, sm_error *err) {
  *out = NULL;
  int rc = check_ref(ref, what, err);
  if (rc != 0) return rc;
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s%s", prefix, ref);
  return sm_engine_request_json(e, "GET", path, NULL, NULL, out, err);
}

int engine_node_inspect(sm_engine *e, const char *id, json_object **out, sm_error *err) {
  return inspect(e, "/nodes/", id, "node id", out, err);
}

static json_object *at(json_object *o, const char *a, const char *b) {
  json_object *v = NULL;
  if (o == NULL || !json_object_object_get_ex(o, a, &v)) return NULL;
  if (b == NULL) return v;
  json_object *w = NULL;
  return json_object_object_get_ex(v, b, &w) ? w : NULL;
}

static const char *str_at(json_object *o, const char *a, const char *b) {
  json_object *v = at(o, a, b);
  return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static void copy(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

int engine_swarm_node_parse(json_object *node, engine_swarm_node *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  const char *id = str_at(node, "ID", NULL);
  const char *state = str_at(node, "Status", "State");
  const char *addr = str_at(node, "Status", "Addr");
  if (id == NULL || state == NULL || addr == NULL)
    return sm_error_set(err, SM_EPROTOCOL, "a node in the swarm's answer lacks %s",
                        id == NULL ? "ID" : state == NULL ? "Status.State" : "Status.Addr");
  copy(out->id, sizeof out->id, id);
  copy(out->state, sizeof out->state, state);
  copy(out->addr, sizeof out->addr, addr);
  copy(out->hostname, sizeof out->hostname, str_at(at(node, "Description", NULL), "Hostname", NULL));
  copy(out->availability, sizeof out->availability, str_at(node, "Spec", "Availability"));
  copy(out->engine_version, sizeof out->engine_version,
       str_at(at(node, "Description", "Engine"), "EngineVersion", NULL));
  out->ready = strcmp(out->state, "ready") == 0 && strcmp(out->availability, "active") == 0;
  json_object *ms = at(node, "ManagerStatus", NULL);
  if (ms && json_object_is_type(ms, json_type_object)) {
    out->manager = 1;
    json_object *leader = at(ms, "Leader", NULL);
    out->leader = leader && json_object_get_boolean(leader);
    const char *r = str_at(ms, "Reachability", NULL);
    out->reachable = r && strcmp(r, "reachable") == 0;
    /* A manager advertises its own address in ManagerStatus.Addr
     * ("IP:2377"); Status.Addr of a manager may be 0.0.0.0 on older engines. */
    if (strcmp(out->addr, "0.0.0.0") == 0) {
      const char *maddr = str_at(ms, "Addr", NULL);
      if (maddr) {
        copy(out->addr, sizeof out->addr, maddr);
        char *colon = strrchr(out->addr, ':');
        if (colon) *colon = '\0';
      }
    }
  }
  return 0;
}

/* The id a create answered with (resp is taken): SM_EPROTOCOL when its
 * key holds no usable id. */
static int created_id(json_object *resp, const char *key, const char *what,
                      char out_id[SM_ENGINE_ID_MAX], sm_error *err) {
  const char *id = str_at(resp, key, NULL);
  int rc = 0;
  if (id == NULL || !engine_swarm_ref_valid(id))
    rc = sm_error_set(err, SM_EPROTOCOL, "%s: the answer has no usable %s", what, key);
  else if (out_id)
    copy(out_id, SM_ENGINE_ID_MAX, id);
  json_object_put(resp);
  return rc;
}

/* ---- services ---- */

int engine_service_create(sm_engine *e, json_object *spec, char out_id[SM_ENGINE_ID_MAX],
                             sm_error *err) {
  if (out_id) out_id[0] = '\0';
  json_object *resp = NULL;
  int rc = sm_engine_request_json(e, "POST", "/services/create", spec, NULL, &resp, err);
  if (rc != 0) return rc;
  return created_id(resp, "ID", "service create", out_id, err);
}

int engine_service_inspect(sm_engine *e, const char *ref, json_object **out, sm_error *err) {
  return inspect(e, "/services/", ref, "service", out, err);
}

int engine_service_list(sm_engine *e, const char *const *labels, size_t n_labels,
                           json_object **out, sm_error *err) {
  return list_call(e, "/services", "label", labels, n_labels, out, err);
}

int engine_service_update(sm_engine *e, const char *id, uint64_t version, json_object *spec,
                             sm_error *err) {
  int rc = check_ref(id, "service", err);
  if (rc != 0) return rc;
  char path[PATH_CAP];
  snprintf(path, sizeof path, "/services/%s/update?version=%llu", id,
           (unsigned long long)version);
  rc = sm_engine_request_json(e, "POST", path, spec, NULL, NULL, err);
  /* The swarm answers a stale version with 500 "update out of sequence":
   * for sandman that is the compare-and-swap failing, a conflict. */
  if (rc != 0 && err && strstr(err->message, "update out of sequence")) {
    err->code = SM_ECONFLICT;
    return SM_ECONFLICT;
  }
  return rc;
}

int engine_service_remove(sm_engine *e, const char *id, sm_error *err) {
  int rc = check_ref(id, "service", err);
  if (rc != 0) return rc;
  char path[PATH_CAP];
  snprintf(path, sizeof path, "/services/%s", id);
  return sm_engine_request_json(e, "DELETE", path, NULL, NULL, NULL, err);
}

int engine_swarm_version(json_object *object, uint64_t *out) {
  json_object *v = at(at(object, "Version", NULL), "Index", NULL);
  if (v == NULL || !json_object_is_type(v, json_type_int)) return -1;
  int64_t n = json_object_get_int64(v);
  if (n < 0) return -1;
  *out = (uint64_t)n;
  return 0;
}

/* ---- tasks ---- */

int engine_task_list(sm_engine *e, const char *service, json_object **out, sm_error *err) {
  *out = NULL;
  int rc = check_ref(service, "service", err);
  if (rc != 0) return rc;
  const char *values[1] = {service};
  return list_call(e, "/tasks", "service", values, 1, out, err);
}

int engine_swarm_task_state_final(const char *state) {
  static const char *const finals[] = {"complete", "shutdown", "failed", "rejected",
                                       "orphaned", "remove"};
  if (state == NULL) return 0;
  for (size_t i = 0; i < sizeof finals / sizeof finals[0]; i++)
    if (strcmp(state, finals[i]) == 0) return 1;
  return 0;
}

int engine_swarm_task_current(json_object *tasks, engine_swarm_task *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  json_object *best = NULL;
  const char *best_at = NULL;
  int best_running = 0;
  size_t n = json_object_is_type(tasks, json_type_array) ? json_object_array_length(tasks) : 0;
  for (size_t i = 0; i < n; i++) {
    json_object *t = json_object_array_get_idx(tasks, i);
    const char *desired = str_at(t, "DesiredState", NULL);
    const char *created = str_at(t, "CreatedAt", NULL);
    if (str_at(t, "ID", NULL) == NULL) continue;
    int running = desired && strcmp(desired, "running") == 0;
    /* RFC 3339 times of one clock (the manager's) compare as strings once
     * they have the same length; a shorter fraction is an older-looking
     * string only by accident, so compare by length first. */
    int newer = best == NULL || (running && !best_running) ||
                (running == best_running && created && best_at &&
                 (strlen(created) != strlen(best_at) ? strlen(created) > strlen(best_at)
                                                     : strcmp(created, best_at) > 0));
    if (newer) {
      best = t;
      best_at = created;
      best_running = running;
    }
  }
  if (best == NULL) return sm_error_set(err, SM_ENOTFOUND, "the service has no task");
  copy(out->id, sizeof out->id, str_at(best, "ID", NULL));
  copy(out->node_id, sizeof out->node_id, str_at(best, "NodeID", NULL));
  copy(out->container_id, sizeof out->container_id,
       str_at(at(best, "Status", "ContainerStatus"), "ContainerID", NULL));
  copy(out->state, sizeof out->state, str_at(best, "Status", "State"));
  copy(out->desired, sizeof out->desired, str_at(best, "DesiredState", NULL));
  const char *msg = str_at(best, "Status", "Err");
  if (msg == NULL || *msg == '\0') msg = str_at(best, "Status", "Message");
  copy(out->message, sizeof out->message, msg);
  return 0;
}

/* ---- networks ---- */

int sm_engine_network_create(sm_engine *e, const char *name, const char *driver, int internal,
                             json_object *labels, char out_id[SM_ENGINE_ID_MAX], sm_error *err) {
  if (out_id) out_id[0] = '\0';
  int rc = check_ref(name, "network name", err);
  if (rc != 0) return rc;
  json_object *body = NULL;
  rc = engine_create_body("network create", name, driver ? driver : "bridge", labels, &body, err);
  if (rc != 0) return rc;
  json_object_object_add(body, "Internal", json_object_new_boolean(internal));
  json_object_object_add(body, "Attachable", json_object_new_boolean(0));
  json_object_object_add(body, "CheckDuplicate", json_object_new_boolean(1));
  json_object *resp = NULL;
  rc = sm_engine_request_json(e, "POST", "/networks/create", body, NULL, &resp, err);
  json_object_put(body);
  if (rc != 0) return rc;
  return created_id(resp, "Id", "network create", out_id, err);
}

int sm_engine_network_remove(sm_engine *e, const char *id, sm_error *err) {
  int rc = check_ref(id, "network", err);
  if (rc != 0) return rc;
  char path[PATH_CAP];
  snprintf(path, sizeof path, "/networks/%s", id);
  int status = 0;
  rc = sm_engine_request_json(e, "DELETE", path, NULL, &status, NULL, err);
  /* "network ... is in use by task/service": the swarm still holds it. */
  if (rc != 0 && err && strstr(err->message, "in use")) {
    err->code = SM_ECONFLICT;
    return SM_ECONFLICT;
  }
  return rc;
}

int sm_engine_network_list(sm_engine *e, const char *const *labels, size_t n_labels,
                           json_object **out, sm_error *err) {
  return list_call(e, "/networks", "label", labels, n_labels, out, err);
}
