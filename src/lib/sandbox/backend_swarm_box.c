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

#include "common/thread.h"
#include "sandbox/helper.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"
#include "sandbox/backend_swarm_box.h"
#include "sandbox/swarm_spec.h"

#define START_WAIT_S 90.0      /* a task from create to running */
#define POLL_MS 100
#define CAS_TRIES 40
#define LOST_NODE_MEMORY_S 120.0
#define MAX_LOST 16
#define NODE_CONNECT_TIMEOUT_MS 3000L
#define KNOWN_MAX 65536
#define NODES_COUNT_EVERY_S 30.0
#define MAX_NODES 256

typedef struct node_engine {
  char id[SM_ENGINE_ID_MAX];
  char addr[ENGINE_SWARM_ADDR_MAX];
  sm_engine *engine;
  struct node_engine *next;
} node_engine;

typedef struct known_box {
  char name[SM_SWARM_SERVICE_NAME_MAX + 1];
  char service_id[SM_ENGINE_ID_MAX];
  char container_id[SM_ENGINE_ID_MAX];
  char node_id[SM_ENGINE_ID_MAX];
  char node_addr[ENGINE_SWARM_ADDR_MAX];
  char node_name[ENGINE_SWARM_NAME_MAX];
  int uid, gid;
} known_box;

typedef struct thread_nodes {
  sandbox_swarm *sw;
  node_engine *list;
  struct thread_nodes *prev, *next;
} thread_nodes;

struct sandbox_swarm {
  char node_certs[PATH_MAX];
  int node_port;
  char **constraints;
  size_t n_constraints;
  double reserve_cpu;
  int64_t reserve_memory;
  pthread_mutex_t lock;
  pthread_key_t key;
  thread_nodes *threads;
  known_box *known;           /* sandboxes this runner met, by name */
  size_t n_known, cap_known;
  /* Nodes this runner found unreachable, avoided by its next sandboxes
   * while the manager may still count them ready. */
  struct {
    char id[SM_ENGINE_ID_MAX];
    double at;
  } lost[MAX_LOST];
  unsigned ready_nodes;       /* last count (sandbox_swarm_ready_nodes) */
  double ready_nodes_at;      /* when, epoch seconds; 0 never */
  /* Pool sandboxes this process is making, per node (pool_lock). */
  pthread_mutex_t pool_lock;
  struct {
    char id[SM_ENGINE_ID_MAX];
    unsigned n;
  } pending[MAX_NODES];
};

static void nodes_free_list(node_engine *n) {
  while (n) {
    node_engine *next = n->next;
    sm_engine_free(n->engine);
    free(n);
    n = next;
  }
}

static void thread_nodes_free(void *p) {
  thread_nodes *tn = p;
  if (tn == NULL) return;
  sandbox_swarm *sw = tn->sw;
  pthread_mutex_lock(&sw->lock);
  if (tn->prev) tn->prev->next = tn->next;
  else sw->threads = tn->next;
  if (tn->next) tn->next->prev = tn->prev;
  pthread_mutex_unlock(&sw->lock);
  nodes_free_list(tn->list);
  free(tn);
}

int sandbox_swarm_new(sandbox_swarm **out, const sm_swarm_options *o, const sm_engine_options *manager,
                 sm_error *err) {
  *out = NULL;
  sandbox_swarm *sw = calloc(1, sizeof *sw);
  if (sw == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  const char *certs = o && o->node_certs ? o->node_certs : NULL;
  if (certs == NULL) certs = manager && manager->cert_path ? manager->cert_path : getenv("DOCKER_CERT_PATH");
  char home_certs[PATH_MAX];
  if (certs == NULL || *certs == '\0') {
    const char *home = getenv("HOME");
    snprintf(home_certs, sizeof home_certs, "%s/.docker", home ? home : "");
    certs = home_certs;
  }
  if (snprintf(sw->node_certs, sizeof sw->node_certs, "%s", certs) >= (int)sizeof sw->node_certs) {
    free(sw);
    return sm_error_set(err, SM_EINVAL, "the nodes' certificate directory path is too long");
  }
  sw->node_port = o && o->node_port > 0 ? o->node_port : 2376;
  if (sw->node_port > 65535) {
    free(sw);
    return sm_error_set(err, SM_EINVAL, "node port %d is not a TCP port", o->node_port);
  }
  sw->reserve_cpu = o ? o->reserve_cpu : 0;
  sw->reserve_memory = o ? o->reserve_memory : 0;
  size_t n = o ? o->n_constraints : 0;
  if (n > 0) {
    sw->constraints = calloc(n, sizeof *sw->constraints);
    for (size_t i = 0; sw->constraints && i < n; i++) {
      sw->constraints[i] = strdup(o->constraints[i] ? o->constraints[i] : "");
      if (sw->constraints[i] == NULL) break;
      sw->n_constraints++;
    }
    if (sw->n_constraints != n) {
      sandbox_swarm_free(sw);
      return sm_error_set(err, SM_ENOMEM, NULL);
    }
  }
  pthread_mutex_init(&sw->lock, NULL);
  pthread_mutex_init(&sw->pool_lock, NULL);
  if (pthread_key_create(&sw->key, thread_nodes_free) != 0) {
    pthread_mutex_destroy(&sw->lock);
    pthread_mutex_destroy(&sw->pool_lock);
    free(sw->constraints);
    free(sw);
    return sm_error_set(err, SM_ENOMEM, "no thread key left");
  }
  *out = sw;
  return 0;
}

void sandbox_swarm_free(sandbox_swarm *sw) {
  if (sw == NULL) return;
  pthread_key_delete(sw->key);
  pthread_mutex_lock(&sw->lock);
  thread_nodes *tn = sw->threads;
  sw->threads = NULL;
  pthread_mutex_unlock(&sw->lock);
  while (tn) {
    thread_nodes *next = tn->next;
    nodes_free_list(tn->list);
    free(tn);
    tn = next;
  }
  for (size_t i = 0; i < sw->n_constraints; i++) free(sw->constraints[i]);
  free(sw->constraints);
  free(sw->known);
  pthread_mutex_destroy(&sw->lock);
  pthread_mutex_destroy(&sw->pool_lock);
  free(sw);
}

static int has_ca(const char *dir) {
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s/ca.pem", dir) >= (int)sizeof p) return 0;
  return access(p, R_OK) == 0;
}

void sandbox_swarm_node_cert_dir(const sandbox_swarm *sw, const engine_swarm_node *node, char *out,
                            size_t len) {
  const char *names[] = {node->hostname, node->id};
  for (size_t i = 0; i < 2; i++) {
    if (!engine_swarm_ref_valid(names[i])) continue;
    if (snprintf(out, len, "%s/%s", sw->node_certs, names[i]) < (int)len && has_ca(out)) return;
  }
  snprintf(out, len, "%s", sw->node_certs);
}

int sandbox_swarm_node_engine(sandbox_swarm *sw, const engine_swarm_node *node, sm_engine **out,
                         sm_error *err) {
  *out = NULL;
  thread_nodes *tn = pthread_getspecific(sw->key);
  if (tn == NULL) {
    tn = calloc(1, sizeof *tn);
    if (tn == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
    tn->sw = sw;
    pthread_mutex_lock(&sw->lock);
    tn->next = sw->threads;
    if (sw->threads) sw->threads->prev = tn;
    sw->threads = tn;
    pthread_mutex_unlock(&sw->lock);
    if (pthread_setspecific(sw->key, tn) != 0) {
      thread_nodes_free(tn);
      return sm_error_set(err, SM_ENOMEM, "storing the thread's node clients");
    }
  }
  for (node_engine *n = tn->list; n; n = n->next)
    if (strcmp(n->id, node->id) == 0) {
      if (strcmp(n->addr, node->addr) == 0) {
        *out = n->engine;
        return 0;
      }
      /* The node came back elsewhere: a new client. */
      sm_engine_free(n->engine);
      n->engine = NULL;
      n->addr[0] = '\0';
    }
  char host[ENGINE_SWARM_ADDR_MAX + 32], dir[PATH_MAX];
  int colon = strchr(node->addr, ':') != NULL; /* IPv6 */
  snprintf(host, sizeof host, colon ? "tcp://[%s]:%d" : "tcp://%s:%d", node->addr, sw->node_port);
  sandbox_swarm_node_cert_dir(sw, node, dir, sizeof dir);
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  o.host = host;
  o.tls_verify = 1;
  o.cert_path = dir;
  o.connect_timeout_ms = NODE_CONNECT_TIMEOUT_MS;
  sm_engine *e = NULL;
  int rc = sm_engine_new(&e, &o, err);
  if (rc == 0) rc = sm_engine_negotiate(e, err);
  if (rc) {
    sm_engine_free(e);
    return sm_error_wrap(err, "reaching node %s at %s", node->hostname, host);
  }
  node_engine *slot = NULL;
  for (node_engine *n = tn->list; n; n = n->next)
    if (strcmp(n->id, node->id) == 0) slot = n;
  if (slot == NULL) {
    slot = calloc(1, sizeof *slot);
    if (slot == NULL) {
      sm_engine_free(e);
      return sm_error_set(err, SM_ENOMEM, NULL);
    }
    snprintf(slot->id, sizeof slot->id, "%s", node->id);
    slot->next = tn->list;
    tn->list = slot;
  }
  snprintf(slot->addr, sizeof slot->addr, "%s", node->addr);
  slot->engine = e;
  *out = e;
  return 0;
}

/* ---- labels ---- */

static const char *label(json_object *labels, const char *key) {
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
  const char *pool = label(labels, SM_LABEL_PREFIX "pool");
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
static int service_parts(json_object *svc, json_object **spec, json_object **labels,
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

static const char *service_id(json_object *svc) {
  json_object *v = NULL;
  return json_object_object_get_ex(svc, "ID", &v) ? json_object_get_string(v) : NULL;
}

/* ---- removal ---- */

/* The removal of service svc (read at its version): marks it reaping at
 * that version (a lease taken since makes this fail with SM_ECONFLICT),
 * then removes it and its network. */
static int remove_read(sm_engine *m, json_object *svc, int force, sm_error *err) {
  json_object *spec = NULL, *labels = NULL;
  uint64_t version = 0;
  int rc = service_parts(svc, &spec, &labels, &version, err);
  if (rc) return rc;
  const char *id = service_id(svc);
  if (id == NULL) return sm_error_set(err, SM_EPROTOCOL, "a service without an ID");
  if (!force && sandbox_swarm_busy(labels, sm_now()))
    return sm_error_set(err, SM_EBUSY, "a call is in flight in it");
  if (label(labels, SM_SWARM_LABEL_REAPING) == NULL) {
    char who[64];
    snprintf(who, sizeof who, "%.0f", sm_now());
    json_object_object_add(labels, SM_SWARM_LABEL_REAPING, json_object_new_string(who));
    rc = engine_service_update(m, id, version, spec, err);
    if (rc) return rc;
  }
  char net[SM_NAME_MAX];
  const char *n = label(labels, SM_SWARM_LABEL_NETWORK);
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
  sm_sha256_hex(name, strlen(name), hex);
  snprintf(out, SM_SWARM_SERVICE_NAME_MAX + 1, "sandman-%.48s", hex);
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
    const char *inst = label(labels, SM_LABEL_PREFIX "instance");
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
    sm_buf out;
    sm_buf_init(&out, 64 * 1024);
    rc = sm_exec_helper(node, cid, argv, 2, NULL, NULL, NULL, 60, &out, NULL, err);
    const char *text = rc == 0 && out.data ? out.data : "";
    if (rc == 0 && strstr(text, "NoNewPrivs:\t1") == NULL)
      rc = strstr(text, "NoNewPrivs:") != NULL
               ? sm_error_set(err, SM_ESANDBOX,
                              "its processes may gain privileges (NoNewPrivs is not 1): start the "
                              "node's dockerd with --no-new-privileges (docs/scale-out.md)")
               : sm_error_set(err, SM_ESANDBOX,
                              "could not read its /proc/self/status to check no-new-privileges");
    sm_buf_dispose(&out);
  }
  return rc;
}

/* The checks the spec of service svc implies (its own config is gone). */
static void checks_of(json_object *svc, sandbox_swarm_checks *c) {
  memset(c, 0, sizeof *c);
  json_object *labels = NULL, *spec = NULL;
  json_object_object_get_ex(svc, "Spec", &spec);
  json_object_object_get_ex(spec, "Labels", &labels);
  const char *v = label(labels, "io.sandman.swarm.nnp");
  c->no_new_privileges = v && strcmp(v, "1") == 0;
  v = label(labels, "io.sandman.swarm.ipc");
  c->ipc_private = v && strcmp(v, "private") == 0;
  v = label(labels, "io.sandman.swarm.runtime");
  snprintf(c->runtime, sizeof c->runtime, "%s", v ? v : "");
  v = label(labels, "io.sandman.swarm.swap");
  c->memory_swap = v ? strtoll(v, NULL, 10) : 0;
}

/* ---- acquire ---- */

static int node_of(sm_engine *m, const char *node_id, engine_swarm_node *out, sm_error *err) {
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
static int wait_running(sm_engine *m, const char *service, engine_swarm_task *task, sm_error *err) {
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
    sm_sleep_ms(POLL_MS);
  }
}

/* Records on the service that its current container passed the checks. */
static int mark_checked(sm_engine *m, const char *name, const char *cid, sm_error *err) {
  for (int attempt = 0; attempt < CAS_TRIES; attempt++) {
    json_object *svc = NULL, *spec = NULL, *labels = NULL;
    uint64_t version = 0;
    int rc = engine_service_inspect(m, name, &svc, err);
    if (rc == 0) rc = service_parts(svc, &spec, &labels, &version, err);
    if (rc == 0) {
      json_object_object_add(labels, SM_SWARM_LABEL_CHECKED, json_object_new_string(cid));
      rc = engine_service_update(m, service_id(svc), version, spec, err);
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
  int rc = service_parts(svc, &spec, &labels, &version, err);
  if (rc) return rc;
  sandbox_swarm_labels_lease(labels, lease, deadline, NULL, 0, sm_now());
  return engine_service_update(m, service_id(svc), version, spec, err);
}

/* Whether a found service may serve this call: ours, same settings, same
 * principal and project. 0 yes, 1 no (to be replaced), <0 refused. */
static int judge(json_object *labels, const sandbox_swarm_want *w, sm_error *err) {
  const char *managed = label(labels, SM_LABEL_PREFIX "managed");
  const char *inst = label(labels, SM_LABEL_PREFIX "instance");
  if (managed == NULL || strcmp(managed, "true") != 0 || inst == NULL ||
      strcmp(inst, w->instance) != 0)
    return sm_error_set(err, SM_ESANDBOX,
                        "a service named %s exists that sandman did not make; remove or rename it",
                        w->name);
  if (!sm_principal_may_use(w->principal, label(labels, SM_LABEL_PREFIX "principal")))
    return sm_error_set(err, SM_EPOLICY,
                        "sandbox %s belongs to another worker; this call may not use it", w->name);
  const char *proj = label(labels, SM_LABEL_PREFIX "project");
  if (w->project && proj && strcmp(proj, w->project) != 0)
    return sm_error_set(err, SM_EPOLICY, "this worker is pinned to project '%s'; a call for "
                                         "project '%s' is refused",
                        proj, w->project);
  const char *hash = label(labels, SM_LABEL_PREFIX "config-hash");
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
    json_object *svc = NULL;
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
    rc = service_parts(svc, &spec, &labels, &version, err);
    int verdict = rc == 0 ? judge(labels, w, err) : rc;
    if (verdict < 0) {
      json_object_put(svc);
      return verdict;
    }
    if (label(labels, SM_SWARM_LABEL_REAPING)) {
      /* Being removed by a runner that read it with no call in flight:
       * a new one is made once it is gone. */
      json_object_put(svc);
      sm_sleep_ms(POLL_MS);
      continue;
    }
    if (verdict == 1) {
      sm_log(SM_LOG_INFO, "replacing sandbox %s: its configuration changed", w->name);
      rc = remove_read(m, svc, 0, err);
      json_object_put(svc);
      if (rc && rc != SM_EBUSY && rc != SM_ECONFLICT && rc != SM_ENOTFOUND) return rc;
      if (rc) sm_sleep_ms(POLL_MS);
      continue;
    }
    snprintf(box->service_id, sizeof box->service_id, "%s", service_id(svc));
    rc = lease_read(svc, box->lease, deadline, m, err);
    json_object_put(svc);
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
  if (rc == 0) rc = service_parts(svc, &spec, &labels, &version, err);
  const char *checked = rc == 0 ? label(labels, SM_SWARM_LABEL_CHECKED) : NULL;
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
  int rc = wait_running(m, w->name, &task, err);
  if (rc) return rc;
  snprintf(box->container_id, sizeof box->container_id, "%s", task.container_id);
  snprintf(box->node_id, sizeof box->node_id, "%s", task.node_id);
  rc = node_of(m, task.node_id, node, err);
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

/* ---- the warm pool ---- */

/* Swaps lease `drop` for `lease` (until deadline) on the service read as
 * svc; SM_ENOTFOUND when it is being removed or no longer holds `drop`. */
static int swap_lease(sm_engine *m, json_object *svc, const char *drop, const char *lease,
                      double deadline, sm_error *err) {
  json_object *spec = NULL, *labels = NULL;
  uint64_t version = 0;
  int rc = service_parts(svc, &spec, &labels, &version, err);
  if (rc) return rc;
  char key[96];
  snprintf(key, sizeof key, SM_SWARM_LABEL_LEASE_PREFIX "%s", drop);
  if (label(labels, SM_SWARM_LABEL_REAPING) || label(labels, key) == NULL)
    return sm_error_set(err, SM_ENOTFOUND, "it is being removed, or its pool lease ran out");
  sandbox_swarm_labels_lease(labels, lease, deadline, drop, 0, sm_now());
  /* The call's from now on: no longer a ready one of the pool. */
  json_object_object_del(labels, SM_LABEL_PREFIX "pool");
  return engine_service_update(m, service_id(svc), version, spec, err);
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
  rc = wait_running(m, ready->service_id, &task, err);
  if (rc == 0 && strcmp(task.container_id, ready->container_id) != 0)
    rc = sm_error_set(err, SM_ESANDBOX, "its task was replaced");
  if (rc == 0) rc = node_of(m, task.node_id, &node, err);
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
  char (*ids)[SM_ENGINE_ID_MAX] = calloc(MAX_NODES, sizeof *ids);
  unsigned *count = calloc(MAX_NODES, sizeof *count);
  if (ids == NULL || count == NULL) {
    free(ids);
    free(count);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
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
    const char *on = label(labels, SM_SWARM_LABEL_POOL_NODE);
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
  free(ids);
  free(count);
  return rc;
}

void sandbox_swarm_pool_placed(sandbox_swarm *sw, const char *node_id) {
  pthread_mutex_lock(&sw->pool_lock);
  unsigned *p = pending_of(sw, node_id, 0);
  if (p && *p > 0) (*p)--;
  pthread_mutex_unlock(&sw->pool_lock);
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
    if (rc == 0) rc = service_parts(svc, &spec, &labels, &version, &err);
    if (rc == 0) {
      sandbox_swarm_labels_lease(labels, NULL, 0, box->lease, sm_now(), sm_now());
      rc = engine_service_update(m, service_id(svc), version, spec, &err);
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
  if (node_of(m, box->node_id, &node, &e2) != 0) {
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
