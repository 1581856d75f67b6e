/* Internal to the swarm backend's files (backend_swarm_*.c): the runner's
 * hold on the swarm (struct sandbox_swarm, made in backend_swarm_nodes.c)
 * and the helpers the files share. */
#ifndef SANDMAN_SANDBOX_BACKEND_SWARM_STATE_H
#define SANDMAN_SANDBOX_BACKEND_SWARM_STATE_H

#include <limits.h>
#include <pthread.h>

#include "sandbox/backend_swarm_box.h"

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

/* backend_swarm_labels.c: label `key` of a service's labels (a string, or
 * NULL); the service's Spec (borrowed), its labels (borrowed, made when
 * missing) and its version; the service's ID. */
const char *sandbox_swarm_label(json_object *labels, const char *key);
int sandbox_swarm_service_parts(json_object *svc, json_object **spec, json_object **labels,
                                uint64_t *version, sm_error *err);
const char *sandbox_swarm_service_id(json_object *svc);

/* backend_swarm_box.c: node `node_id` as the manager lists it; waits for
 * the service's task to run (START_WAIT_S at most). */
int sandbox_swarm_node_of(sm_engine *m, const char *node_id, engine_swarm_node *out, sm_error *err);
int sandbox_swarm_wait_running(sm_engine *m, const char *service, engine_swarm_task *task,
                               sm_error *err);

#endif
