/* The swarm backend's hold on the swarm: its options, and the calling
 * thread's client for each node's engine (see backend_swarm_box.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "sandbox/backend_swarm_state.h"

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
  cleanup_free sandbox_swarm *sw = calloc(1, sizeof *sw);
  if (sw == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  const char *certs = o && o->node_certs ? o->node_certs : NULL;
  if (certs == NULL) certs = manager && manager->cert_path ? manager->cert_path : getenv("DOCKER_CERT_PATH");
  char home_certs[PATH_MAX];
  if (certs == NULL || *certs == '\0') {
    const char *home = getenv("HOME");
    snprintf(home_certs, sizeof home_certs, "%s/.docker", home ? home : "");
    certs = home_certs;
  }
  if (snprintf(sw->node_certs, sizeof sw->node_certs, "%s", certs) >= (int)sizeof sw->node_certs)
    return sm_error_set(err, SM_EINVAL, "the nodes' certificate directory path is too long");
  sw->node_port = o && o->node_port > 0 ? o->node_port : 2376;
  if (sw->node_port > 65535)
    return sm_error_set(err, SM_EINVAL, "node port %d is not a TCP port", o->node_port);
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
      sandbox_swarm_free(steal_pointer(&sw));
      return sm_error_set(err, SM_ENOMEM, NULL);
    }
  }
  pthread_mutex_init(&sw->lock, NULL);
  pthread_mutex_init(&sw->pool_lock, NULL);
  if (pthread_key_create(&sw->key, thread_nodes_free) != 0) {
    pthread_mutex_destroy(&sw->lock);
    pthread_mutex_destroy(&sw->pool_lock);
    common_strings_free(sw->constraints, sw->n_constraints);
    return sm_error_set(err, SM_ENOMEM, "no thread key left");
  }
  *out = steal_pointer(&sw);
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

