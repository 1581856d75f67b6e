/* The swarm backend's sandboxes: find or make, lease, check on the node,
 * release, remove (see backend_swarm_box.h for how several runners share them). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/thread.h"
#include "sandbox/helper.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"
#include "sandbox/backend_swarm_state.h"
#include "sandbox/swarm_spec.h"

/* ---- removal ---- */

/* The removal of service svc (read at its version): marks it reaping at
 * that version (a lease taken since makes this fail with SM_ECONFLICT),
 * then removes it and its network. */
static int remove_read(sm_engine *m, json_object *svc, int force, sm_error *err) {
  json_object *spec = NULL, *labels = NULL;
  uint64_t version = 0;
  int rc = sandbox_swarm_service_parts(svc, &spec, &labels, &version, err);
  if (rc) return rc;
  const char *id = sandbox_swarm_service_id(svc);
  if (id == NULL) return sm_error_set(err, SM_EPROTOCOL, "a service without an ID");
  if (!force && sandbox_swarm_busy(labels, sm_now()))
    return sm_error_set(err, SM_EBUSY, "a call is in flight in it");
  if (sandbox_swarm_label(labels, SM_SWARM_LABEL_REAPING) == NULL) {
    char who[64];
    snprintf(who, sizeof who, "%.0f", sm_now());
    json_object_object_add(labels, SM_SWARM_LABEL_REAPING, json_object_new_string(who));
    rc = engine_service_update(m, id, version, spec, err);
    if (rc) return rc;
  }
  char net[SM_NAME_MAX];
  const char *n = sandbox_swarm_label(labels, SM_SWARM_LABEL_NETWORK);
  snprintf(net, sizeof net, "%s", n ? n : "");
  rc = engine_service_remove(m, id, err);
  if (rc) return rc;
  if (net[0]) {
    /* The swarm may still hold it for the task being torn down: then a
     * later reap's sweep removes it. */
    sm_error ignore = SM_ERROR_INIT;
    sm_engine_network_remove(m, net, &ignore);
  }
  return 0;
}

int sandbox_swarm_remove(sm_engine *m, const char *ref, int force, sm_error *err) {
  for (int attempt = 0; attempt < CAS_TRIES; attempt++) {
    json_object *svc = NULL;
    int rc = engine_service_inspect(m, ref, &svc, err);
    if (rc) return rc;
    rc = remove_read(m, svc, force, err);
    json_object_put(svc);
    if (rc != SM_ECONFLICT) return rc;
  }
  return sm_error_set(err, SM_EBUSY, "service %s kept changing while being removed", ref);
}

/* ---- creation ---- */

static void remember_lost(sandbox_swarm *sw, const char *node_id) {
  pthread_mutex_lock(&sw->lock);
  int slot = 0;
  for (int i = 0; i < MAX_LOST; i++)
    if (sw->lost[i].at < sw->lost[slot].at) slot = i;
  snprintf(sw->lost[slot].id, sizeof sw->lost[slot].id, "%s", node_id);
  sw->lost[slot].at = sm_now();
  pthread_mutex_unlock(&sw->lock);
}

/* Constraints: the runner's, plus node.id!=X for every node it lost lately. */
static size_t constraints(sandbox_swarm *sw, char out[][SM_ENGINE_ID_MAX + 16], const char **ptrs,
                          size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < sw->n_constraints && n < cap; i++) ptrs[n++] = sw->constraints[i];
  double now = sm_now();
  pthread_mutex_lock(&sw->lock);
  for (int i = 0; i < MAX_LOST && n < cap; i++)
    if (sw->lost[i].id[0] && now - sw->lost[i].at < LOST_NODE_MEMORY_S) {
      snprintf(out[i], SM_ENGINE_ID_MAX + 16, "node.id!=%s", sw->lost[i].id);
      ptrs[n++] = out[i];
    }
  pthread_mutex_unlock(&sw->lock);
  return n;
}

static json_object *config_labels(json_object *config) {
  json_object *l = NULL;
  return json_object_object_get_ex(config, "Labels", &l) ? l : NULL;
}

/* Makes the service, born with this call's lease. SM_ECONFLICT when another
 * runner made it first (nothing of ours left behind). */
static int create_service(sandbox_swarm *sw, sm_engine *m, const sandbox_swarm_want *w, const char *lease,
                          double deadline, sandbox_swarm_box *box, sm_error *err) {
  json_object *config = NULL;
  int rc = w->config(w->config_ud, m, &config, &box->uid, &box->gid, err);
  if (rc) return rc;
  char rnd[17], net[SM_NAME_MAX + 32] = "";
  rc = sm_random_hex(rnd, 8, err);
  json_object *hc = NULL;
  json_object_object_get_ex(config, "HostConfig", &hc);
  json_object *nm = NULL;
  int none = hc && json_object_object_get_ex(hc, "NetworkMode", &nm) &&
             strcmp(json_object_get_string(nm), "none") == 0;
  json_object *labels = NULL;
  json_object_deep_copy(config_labels(config), &labels, NULL);
  if (labels == NULL) labels = json_object_new_object();
  if (rc == 0 && none) {
    /* A network of its own: an internal overlay has no gateway and lives
     * in a namespace of its own on each node, so the sandbox reaches
     * nothing (not the outside, not the node, not another sandbox). */
    snprintf(net, sizeof net, "sandman-net-%s", rnd);
    json_object *nl = json_object_new_object();
    const char *inst = sandbox_swarm_label(labels, SM_LABEL_PREFIX "instance");
    json_object_object_add(nl, SM_LABEL_PREFIX "instance", json_object_new_string(inst ? inst : ""));
    json_object_object_add(nl, SM_LABEL_PREFIX "component",
                           json_object_new_string(SM_SWARM_NETWORK_COMPONENT));
    json_object_object_add(nl, SM_LABEL_PREFIX "service", json_object_new_string(w->name));
    rc = sm_engine_network_create(m, net, "overlay", 1, nl, NULL, err);
    json_object_put(nl);
    if (rc) sm_error_wrap(err, "creating the network of sandbox %s", w->name);
    json_object_object_add(labels, SM_SWARM_LABEL_NETWORK, json_object_new_string(net));
  }
  sandbox_swarm_labels_lease(labels, lease, deadline, NULL, sm_now(), sm_now());
  char cbuf[MAX_LOST + 8][SM_ENGINE_ID_MAX + 16];
  const char *cons[64 + MAX_LOST];
  sandbox_swarm_spec_options so = {
      .name = w->name,
      .network = net,
      .service_labels = labels,
      .constraints = cons,
      .reserve_nano_cpus = (int64_t)(sw->reserve_cpu * 1e9 + 0.5),
      .reserve_memory = sw->reserve_memory,
  };
  so.n_constraints = constraints(sw, cbuf, cons, sizeof cons / sizeof cons[0] - 1);
  char pin[SM_ENGINE_ID_MAX + 16];
  if (w->node_id) {
    /* A warm pool's sandbox: on the node its pool keeps it on. */
    snprintf(pin, sizeof pin, "node.id==%s", w->node_id);
    cons[so.n_constraints++] = pin;
    json_object_object_add(labels, SM_SWARM_LABEL_POOL_NODE, json_object_new_string(w->node_id));
  }
  json_object *spec = NULL;
  sandbox_swarm_checks checks;
  if (rc == 0) rc = sandbox_swarm_service_spec(config, &so, &spec, &checks, err);
  json_object_put(config);
  json_object_put(labels);
  if (rc == 0) {
    /* What the node must show once the task runs, for whichever runner
     * meets the container first (checks_of reads it back). */
    json_object *sl = NULL;
    json_object_object_get_ex(spec, "Labels", &sl);
    char v[32];
    if (checks.no_new_privileges)
      json_object_object_add(sl, "io.sandman.swarm.nnp", json_object_new_string("1"));
    if (checks.ipc_private)
      json_object_object_add(sl, "io.sandman.swarm.ipc", json_object_new_string("private"));
    if (checks.runtime[0])
      json_object_object_add(sl, "io.sandman.swarm.runtime", json_object_new_string(checks.runtime));
    if (checks.memory_swap > 0) {
      snprintf(v, sizeof v, "%lld", (long long)checks.memory_swap);
      json_object_object_add(sl, "io.sandman.swarm.swap", json_object_new_string(v));
    }
  }
  if (rc == 0) {
    rc = engine_service_create(m, spec, box->service_id, err);
    if (rc && rc != SM_ECONFLICT) sm_error_wrap(err, "creating sandbox %s", w->name);
  }
  json_object_put(spec);
  if (rc && net[0]) {
    sm_error ignore = SM_ERROR_INIT;
    sm_engine_network_remove(m, net, &ignore);
  }
  return rc;
}

/* ---- on the node ---- */

static const char *inspect_str(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x)) return NULL;
  if (b == NULL) return json_object_get_string(x);
  return json_object_object_get_ex(x, b, &y) ? json_object_get_string(y) : NULL;
}

static int64_t inspect_int(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x) || !json_object_object_get_ex(x, b, &y)) return -1;
  return json_object_get_int64(y);
}

/* What the service spec could not say, made or checked on the node; the
 * spec's checks are recomputed from the service's own task template. */
static int check_on_node(sm_engine *node, const char *cid, const sandbox_swarm_checks *c,
                         sm_error *err) {
  json_object *insp = NULL;
  int rc = sm_engine_container_inspect(node, cid, &insp, err);
  if (rc) return rc;
  const char *ipc = inspect_str(insp, "HostConfig", "IpcMode");
  const char *runtime = inspect_str(insp, "HostConfig", "Runtime");
  int64_t mem = inspect_int(insp, "HostConfig", "Memory");
  int64_t swap = inspect_int(insp, "HostConfig", "MemorySwap");
  if (c->ipc_private && (ipc == NULL || strcmp(ipc, "private") != 0))
    rc = sm_error_set(err, SM_ESANDBOX, "its IPC namespace is '%s', not private (set the node's "
                                        "dockerd --default-ipc-mode private)",
                      ipc ? ipc : "?");
  else if (c->runtime[0] && (runtime == NULL || strcmp(runtime, c->runtime) != 0))
    rc = sm_error_set(err, SM_ESANDBOX,
                      "it runs with runtime '%s', not '%s' (a node labelled "
                      "sandman.runtime=%s must have it as its default runtime)",
                      runtime ? runtime : "?", c->runtime, c->runtime);
  json_object_put(insp);
  if (rc == 0 && c->memory_swap > 0 && swap != c->memory_swap) {
    /* A task gets twice its memory as memory+swap: set it as asked. */
    json_object *u = json_object_new_object();
    json_object_object_add(u, "Memory", json_object_new_int64(mem > 0 ? mem : c->memory_swap));
    json_object_object_add(u, "MemorySwap", json_object_new_int64(c->memory_swap));
    char path[SM_ENGINE_ID_MAX + 32];
    snprintf(path, sizeof path, "/containers/%s/update", cid);
    rc = sm_engine_request_json(node, "POST", path, u, NULL, NULL, err);
    json_object_put(u);
    if (rc) sm_error_wrap(err, "limiting its swap");
  }
  if (rc == 0 && c->no_new_privileges) {
    /* Read from the stream, not the exit code: the stream's end is the
     * file's end, where an exec's exit code may lag on a loaded node. */
    const char *argv[] = {"/bin/cat", "/proc/self/status"};
    common_buf out;
    common_buf_init(&out, 64 * 1024);
    rc = sandbox_exec_helper(node, cid, argv, 2, NULL, NULL, NULL, 60, &out, NULL, err);
    const char *text = rc == 0 && out.data ? out.data : "";
    if (rc == 0 && strstr(text, "NoNewPrivs:\t1") == NULL)
      rc = strstr(text, "NoNewPrivs:") != NULL
               ? sm_error_set(err, SM_ESANDBOX,
                              "its processes may gain privileges (NoNewPrivs is not 1): start the "
                              "node's dockerd with --no-new-privileges (docs/scale-out.md)")
               : sm_error_set(err, SM_ESANDBOX,
                              "could not read its /proc/self/status to check no-new-privileges");
    common_buf_dispose(&out);
  }
  return rc;
}

/* The checks the spec of service svc implies (its own config is gone). */
static void checks_of(json_object *svc, sandbox_swarm_checks *c) {
  memset(c, 0, sizeof *c);
  json_object *labels = NULL, *spec = NULL;
  json_object_object_get_ex(svc, "Spec", &spec);
  json_object_object_get_ex(spec, "Labels", &labels);
  const char *v = sandbox_swarm_label(labels, "io.sandman.swarm.nnp");
  c->no_new_privileges = v && strcmp(v, "1") == 0;
  v = sandbox_swarm_label(labels, "io.sandman.swarm.ipc");
  c->ipc_private = v && strcmp(v, "private") == 0;
  v = sandbox_swarm_label(labels, "io.sandman.swarm.runtime");
  snprintf(c->runtime, sizeof c->runtime, "%s", v ? v : "");
  v = sandbox_swarm_label(labels, "io.sandman.swarm.swap");
  c->memory_swap = v ? strtoll(v, NULL, 10) : 0;
}

/* ---- acquire ---- */

int sandbox_swarm_node_of(sm_engine *m, const char *node_id, engine_swarm_node *out, sm_error *err) {
  json_object *n = NULL;
  int rc = engine_node_inspect(m, node_id, &n, err);
  if (rc == 0) rc = engine_swarm_node_parse(n, out, err);
  json_object_put(n);
  return rc;
}

static void known_drop(sandbox_swarm *sw, const char *name);

static int node_lost(sandbox_swarm *sw, sm_engine *m, const char *service, const engine_swarm_node *n,
                     const char *why, sm_error *err) {
  remember_lost(sw, n->id);
  known_drop(sw, service);
  sm_error e2 = SM_ERROR_INIT;
  if (sandbox_swarm_remove(m, service, 1, &e2) != 0 && e2.code != SM_ENOTFOUND)
    sm_log(SM_LOG_WARN, "removing sandbox %s after its node was lost: %s", service, e2.message);
  return sm_error_set(err, SM_ESANDBOX,
                      "node lost: sandbox %s ran on node %s (%s), which %s; it is made again on "
                      "another node at the next call (its workspace is copied in again)",
                      service, n->hostname[0] ? n->hostname : n->id, n->addr, why);
}

/* Waits for the service's task to run. 0 with *task; SM_ESANDBOX when it
 * ended or failed (*task tells how), SM_ETIMEOUT. */
int sandbox_swarm_wait_running(sm_engine *m, const char *service, engine_swarm_task *task, sm_error *err) {
  double deadline = sm_monotonic_ms() + START_WAIT_S * 1000.0;
  for (;;) {
    json_object *tasks = NULL;
    int rc = engine_task_list(m, service, &tasks, err);
    if (rc == 0) rc = engine_swarm_task_current(tasks, task, err);
    json_object_put(tasks);
    if (rc && rc != SM_ENOTFOUND) return rc;
    if (rc == 0 && strcmp(task->state, "running") == 0 && task->container_id[0]) return 0;
    if (rc == 0 && engine_swarm_task_state_final(task->state))
      return sm_error_set(err, SM_ESANDBOX, "its task is %s: %s", task->state,
                          task->message[0] ? task->message : "no reason given");
    if (sm_monotonic_ms() >= deadline)
      return sm_error_set(err, SM_ETIMEOUT,
                          "the swarm did not start it within %.0f s (task %s: %s)", START_WAIT_S,
                          rc == 0 ? task->state : "not scheduled",
                          rc == 0 && task->message[0] ? task->message : "no message");
    common_sleep_ms(POLL_MS);
  }
}

/* Records on the service that its current container passed the checks. */
static int mark_checked(sm_engine *m, const char *name, const char *cid, sm_error *err) {
  for (int attempt = 0; attempt < CAS_TRIES; attempt++) {
    json_object *svc = NULL, *spec = NULL, *labels = NULL;
    uint64_t version = 0;
    int rc = engine_service_inspect(m, name, &svc, err);
    if (rc == 0) rc = sandbox_swarm_service_parts(svc, &spec, &labels, &version, err);
    if (rc == 0) {
      json_object_object_add(labels, SM_SWARM_LABEL_CHECKED, json_object_new_string(cid));
      rc = engine_service_update(m, sandbox_swarm_service_id(svc), version, spec, err);
    }
    json_object_put(svc);
    if (rc != SM_ECONFLICT) return rc;
  }
  return sm_error_set(err, SM_EBUSY, "sandbox %s kept changing", name);
}

/* Adds this call's lease to the service read as svc. SM_ECONFLICT: read
 * again. SM_EAGAIN-like states are reported through *wait (being removed). */
static int lease_read(json_object *svc, const char *lease, double deadline, sm_engine *m,
                      sm_error *err) {
  json_object *spec = NULL, *labels = NULL;
  uint64_t version = 0;
  int rc = sandbox_swarm_service_parts(svc, &spec, &labels, &version, err);
  if (rc) return rc;
  sandbox_swarm_labels_lease(labels, lease, deadline, NULL, 0, sm_now());
  return engine_service_update(m, sandbox_swarm_service_id(svc), version, spec, err);
}

/* Whether a found service may serve this call: ours, same settings, same
 * principal and project. 0 yes, 1 no (to be replaced), <0 refused. */
static int judge(json_object *labels, const sandbox_swarm_want *w, sm_error *err) {
  const char *managed = sandbox_swarm_label(labels, SM_LABEL_PREFIX "managed");
  const char *inst = sandbox_swarm_label(labels, SM_LABEL_PREFIX "instance");
  if (managed == NULL || strcmp(managed, "true") != 0 || inst == NULL ||
      strcmp(inst, w->instance) != 0)
    return sm_error_set(err, SM_ESANDBOX,
                        "a service named %s exists that sandman did not make; remove or rename it",
                        w->name);
  if (!sm_principal_may_use(w->principal, sandbox_swarm_label(labels, SM_LABEL_PREFIX "principal")))
    return sm_error_set(err, SM_EPOLICY,
                        "sandbox %s belongs to another worker; this call may not use it", w->name);
  const char *proj = sandbox_swarm_label(labels, SM_LABEL_PREFIX "project");
  if (w->project && proj && strcmp(proj, w->project) != 0)
    return sm_error_set(err, SM_EPOLICY, "this worker is pinned to project '%s'; a call for "
                                         "project '%s' is refused",
                        proj, w->project);
  const char *hash = sandbox_swarm_label(labels, SM_LABEL_PREFIX "config-hash");
  return hash == NULL || strcmp(hash, w->hash) != 0 ? 1 : 0;
}

/* ---- what this runner knows of a sandbox it met (skips the task list,
 * the node and the checks on its next calls there) ---- */

static int known_get(sandbox_swarm *sw, const char *name, const char *service_id, known_box *out) {
  int hit = 0;
  pthread_mutex_lock(&sw->lock);
  for (size_t i = 0; i < sw->n_known && !hit; i++)
    if (strcmp(sw->known[i].name, name) == 0 && strcmp(sw->known[i].service_id, service_id) == 0) {
      *out = sw->known[i];
      hit = 1;
    }
  pthread_mutex_unlock(&sw->lock);
  return hit;
}

static void known_put(sandbox_swarm *sw, const known_box *k) {
  pthread_mutex_lock(&sw->lock);
  size_t i = 0;
  while (i < sw->n_known && strcmp(sw->known[i].name, k->name) != 0) i++;
  if (i == sw->n_known && sw->n_known == sw->cap_known) {
    size_t cap = sw->cap_known ? sw->cap_known * 2 : 64;
    known_box *grown = cap <= KNOWN_MAX ? realloc(sw->known, cap * sizeof *grown) : NULL;
    if (grown) {
      sw->known = grown;
      sw->cap_known = cap;
    } else {
      i = 0; /* full: forget the first */
    }
  }
  if (i < sw->cap_known) {
    sw->known[i] = *k;
    if (i == sw->n_known) sw->n_known++;
  }
  pthread_mutex_unlock(&sw->lock);
}

static void known_drop(sandbox_swarm *sw, const char *name) {
  pthread_mutex_lock(&sw->lock);
  for (size_t i = 0; i < sw->n_known; i++)
    if (strcmp(sw->known[i].name, name) == 0) {
      sw->known[i] = sw->known[--sw->n_known];
      break;
    }
  pthread_mutex_unlock(&sw->lock);
}

/* ---- acquire ---- */

/* Leases the sandbox for this call, making it when there is none. On
 * return the service exists with box->lease among its labels. */
static int lease_or_make(sandbox_swarm *sw, sm_engine *m, const sandbox_swarm_want *w, double lease_s,
                         sandbox_swarm_box *box, sm_error *err) {
  double start = sm_monotonic_ms();
  for (int attempt = 0;; attempt++) {
    if (attempt > 0 && sm_monotonic_ms() - start > START_WAIT_S * 1000.0)
      return sm_error_set(err, SM_EBUSY, "sandbox %s could not be had within %.0f s (being "
                                         "replaced or removed by another runner)",
                          w->name, START_WAIT_S);
    double deadline = sm_now() + lease_s;
    cleanup_json json_object *svc = NULL; /* released at the end of each attempt */
    int rc = engine_service_inspect(m, w->name, &svc, err);
    if (rc == SM_ENOTFOUND) {
      box->reused = 0;
      rc = create_service(sw, m, w, box->lease, deadline, box, err);
      if (rc == SM_ECONFLICT) continue; /* another runner made it: lease theirs */
      return rc;
    }
    if (rc) return sm_error_wrap(err, "looking up sandbox %s", w->name);
    box->reused = 1;
    json_object *spec = NULL, *labels = NULL;
    uint64_t version = 0;
    rc = sandbox_swarm_service_parts(svc, &spec, &labels, &version, err);
    int verdict = rc == 0 ? judge(labels, w, err) : rc;
    if (verdict < 0) return verdict;
    if (sandbox_swarm_label(labels, SM_SWARM_LABEL_REAPING)) {
      /* Being removed by a runner that read it with no call in flight:
       * a new one is made once it is gone. */
      common_sleep_ms(POLL_MS);
      continue;
    }
    if (verdict == 1) {
      sm_log(SM_LOG_INFO, "replacing sandbox %s: its configuration changed", w->name);
      rc = remove_read(m, svc, 0, err);
      if (rc && rc != SM_EBUSY && rc != SM_ECONFLICT && rc != SM_ENOTFOUND) return rc;
      if (rc) common_sleep_ms(POLL_MS);
      continue;
    }
    snprintf(box->service_id, sizeof box->service_id, "%s", sandbox_swarm_service_id(svc));
    rc = lease_read(svc, box->lease, deadline, m, err);
    if (rc == SM_ECONFLICT || rc == SM_ENOTFOUND) continue;
    if (rc) return sm_error_wrap(err, "leasing sandbox %s", w->name);
    return 0;
  }
}

/* Checks what the spec could not say on a container met for the first
 * time, and records it on the service. */
static int first_meeting(sm_engine *m, const sandbox_swarm_want *w, sandbox_swarm_box *box, sm_error *err) {
  json_object *svc = NULL, *spec = NULL, *labels = NULL;
  uint64_t version = 0;
  int rc = engine_service_inspect(m, w->name, &svc, err);
  if (rc == 0) rc = sandbox_swarm_service_parts(svc, &spec, &labels, &version, err);
  const char *checked = rc == 0 ? sandbox_swarm_label(labels, SM_SWARM_LABEL_CHECKED) : NULL;
  if (rc == 0 && (checked == NULL || strcmp(checked, box->container_id) != 0)) {
    sandbox_swarm_checks c;
    checks_of(svc, &c);
    rc = check_on_node(box->node, box->container_id, &c, err);
    if (rc == 0) rc = mark_checked(m, w->name, box->container_id, err);
  }
  json_object_put(svc);
  if (rc == 0 && box->reused) {
    /* The user the sandbox runs as, for the workspace's owner. */
    json_object *insp = NULL;
    box->uid = box->gid = 1000;
    if (sm_engine_container_inspect(box->node, box->container_id, &insp, err) == 0) {
      /* The calls' user is the label (the container runs as root). */
      json_object *cfg = NULL, *lu = NULL;
      const char *u = NULL;
      if (json_object_object_get_ex(insp, "Config", &cfg) &&
          json_object_object_get_ex(cfg, "Labels", &cfg) &&
          json_object_object_get_ex(cfg, SM_LABEL_PREFIX "user", &lu))
        u = json_object_get_string(lu);
      if (u == NULL || *u == '\0') u = inspect_str(insp, "Config", "User");
      if (u && *u >= '0' && *u <= '9') {
        char *end = NULL;
        box->uid = (int)strtol(u, &end, 10);
        box->gid = end && *end == ':' ? (int)strtol(end + 1, NULL, 10) : box->uid;
      }
    }
    json_object_put(insp);
  }
  return rc;
}

/* With the lease held: the running task, its node and the node's client;
 * the checks on a container met for the first time. */
static int place(sandbox_swarm *sw, sm_engine *m, const sandbox_swarm_want *w, sandbox_swarm_box *box,
                 engine_swarm_node *node, sm_error *err) {
  engine_swarm_task task;
  int rc = sandbox_swarm_wait_running(m, w->name, &task, err);
  if (rc) return rc;
  snprintf(box->container_id, sizeof box->container_id, "%s", task.container_id);
  snprintf(box->node_id, sizeof box->node_id, "%s", task.node_id);
  rc = sandbox_swarm_node_of(m, task.node_id, node, err);
  if (rc) return sm_error_wrap(err, "the node of sandbox %s", w->name);
  snprintf(box->node_name, sizeof box->node_name, "%s", node->hostname);
  snprintf(box->node_addr, sizeof box->node_addr, "%s", node->addr);
  if (strcmp(node->state, "ready") != 0) {
    box->lease[0] = '\0';
    return node_lost(sw, m, w->name, node, "the swarm reports down", err);
  }
  rc = sandbox_swarm_node_engine(sw, node, &box->node, err);
  if (rc) {
    box->lease[0] = '\0';
    char why[SM_ERROR_MESSAGE_MAX / 2];
    snprintf(why, sizeof why, "does not answer (%s)", err->message);
    return node_lost(sw, m, w->name, node, why, err);
  }
  rc = first_meeting(m, w, box, err);
  if (rc) {
    sm_error_wrap(err, "sandbox %s on node %s refused", w->name, node->hostname);
    sm_error ignore = SM_ERROR_INIT;
    sandbox_swarm_remove(m, w->name, 1, &ignore);
    box->lease[0] = '\0';
    if (rc != SM_EUNREACHABLE) rc = err->code = SM_ESANDBOX;
  }
  return rc;
}

int sandbox_swarm_acquire(sandbox_swarm *sw, sm_engine *m, const sandbox_swarm_want *w, sandbox_swarm_box *box,
                     sm_error *err) {
  memset(box, 0, sizeof *box);
  snprintf(box->name, sizeof box->name, "%s", w->name);
  box->per_tool = w->per_tool;
  int rc = sm_random_hex(box->lease, 8, err);
  if (rc) return rc;
  double lease_s = w->lease_s > 0 ? w->lease_s : 24 * 3600.0;
  for (int attempt = 0;; attempt++) {
    rc = lease_or_make(sw, m, w, lease_s, box, err);
    if (rc) return rc;
    known_box k;
    if (box->reused && known_get(sw, w->name, box->service_id, &k)) {
      /* Met before: its container runs there unless the call finds it gone. */
      engine_swarm_node node;
      memset(&node, 0, sizeof node);
      snprintf(node.id, sizeof node.id, "%s", k.node_id);
      snprintf(node.addr, sizeof node.addr, "%s", k.node_addr);
      snprintf(node.hostname, sizeof node.hostname, "%s", k.node_name);
      snprintf(box->container_id, sizeof box->container_id, "%s", k.container_id);
      snprintf(box->node_id, sizeof box->node_id, "%s", k.node_id);
      snprintf(box->node_name, sizeof box->node_name, "%s", k.node_name);
      snprintf(box->node_addr, sizeof box->node_addr, "%s", k.node_addr);
      box->uid = k.uid;
      box->gid = k.gid;
      rc = sandbox_swarm_node_engine(sw, &node, &box->node, err);
      if (rc == 0) break;
      known_drop(sw, w->name);
    }
    engine_swarm_node node;
    rc = place(sw, m, w, box, &node, err);
    if (rc == SM_ESANDBOX && box->lease[0] && attempt < 3) {
      /* Its task ended (failed, or shut down): the sandbox is made anew. */
      sm_log(SM_LOG_INFO, "replacing sandbox %s: %s", w->name, err->message);
      sm_error ignore = SM_ERROR_INIT;
      sandbox_swarm_remove(m, w->name, 1, &ignore);
      continue;
    }
    if (rc) {
      sm_error_wrap(err, "sandbox %s", w->name);
      if (box->lease[0]) sandbox_swarm_release(sw, m, box);
      return rc == SM_ETIMEOUT ? SM_ESANDBOX : rc;
    }
    memset(&k, 0, sizeof k);
    snprintf(k.name, sizeof k.name, "%s", w->name);
    snprintf(k.service_id, sizeof k.service_id, "%s", box->service_id);
    snprintf(k.container_id, sizeof k.container_id, "%s", box->container_id);
    snprintf(k.node_id, sizeof k.node_id, "%s", node.id);
    snprintf(k.node_addr, sizeof k.node_addr, "%s", node.addr);
    snprintf(k.node_name, sizeof k.node_name, "%s", node.hostname);
    k.uid = box->uid;
    k.gid = box->gid;
    if (!w->per_tool) known_put(sw, &k);
    break;
  }
  snprintf(box->state_name, sizeof box->state_name, "%s.%.12s", w->name, box->container_id);
  return 0;
}

void sandbox_swarm_release(sandbox_swarm *sw, sm_engine *m, sandbox_swarm_box *box) {
  (void)sw;
  if (box->lease[0] == '\0') return;
  sm_error err = SM_ERROR_INIT;
  if (box->per_tool) {
    if (sandbox_swarm_remove(m, box->name, 1, &err) != 0 && err.code != SM_ENOTFOUND)
      sm_log(SM_LOG_WARN, "removing sandbox %s: %s (a reap will remove it)", box->name,
             err.message);
    box->lease[0] = '\0';
    return;
  }
  for (int attempt = 0; attempt < CAS_TRIES; attempt++) {
    json_object *svc = NULL, *spec = NULL, *labels = NULL;
    uint64_t version = 0;
    int rc = engine_service_inspect(m, box->name, &svc, &err);
    if (rc == 0) rc = sandbox_swarm_service_parts(svc, &spec, &labels, &version, &err);
    if (rc == 0) {
      sandbox_swarm_labels_lease(labels, NULL, 0, box->lease, sm_now(), sm_now());
      rc = engine_service_update(m, sandbox_swarm_service_id(svc), version, spec, &err);
    }
    json_object_put(svc);
    if (rc == SM_ECONFLICT) continue;
    if (rc && rc != SM_ENOTFOUND)
      sm_log(SM_LOG_WARN, "ending the lease on sandbox %s: %s (it expires by itself)", box->name,
             err.message);
    break;
  }
  box->lease[0] = '\0';
}

int sandbox_swarm_check_node_lost(sandbox_swarm *sw, sm_engine *m, sandbox_swarm_box *box, int rc,
                             sm_error *err) {
  if (rc == 0 || box->node == NULL) return rc;
  /* Whatever went wrong, the next call looks the sandbox up afresh. */
  known_drop(sw, box->name);
  if (rc != SM_EUNREACHABLE && rc != SM_EIO && rc != SM_ETIMEOUT && rc != SM_ETLS &&
      rc != SM_EPROTOCOL && rc != SM_ENOTFOUND && rc != SM_ECONFLICT)
    return rc;
  engine_swarm_node node;
  sm_error e2 = SM_ERROR_INIT;
  int gone = 0;
  char why[160] = "does not answer";
  if (sandbox_swarm_node_of(m, box->node_id, &node, &e2) != 0) {
    gone = 1;
    memset(&node, 0, sizeof node);
    snprintf(node.id, sizeof node.id, "%s", box->node_id);
    snprintf(node.hostname, sizeof node.hostname, "%s", box->node_name);
    snprintf(why, sizeof why, "the swarm no longer knows");
  } else if (strcmp(node.state, "ready") != 0) {
    gone = 1;
    snprintf(why, sizeof why, "the swarm reports %s", node.state);
  } else if (sm_engine_ping(box->node, &e2) != 0) {
    gone = 1;
  }
  if (!gone) return rc;
  box->lease[0] = '\0';
  return node_lost(sw, m, box->name, &node, why, err);
}
