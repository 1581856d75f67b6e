/* The swarm backend: a sandbox is a swarm service of one task, created
 * through a manager and placed by the swarm's scheduler; its calls, files
 * and agent go to the node that runs the task, over that node's Engine API
 * (TCP+TLS), with the same exec, agent and workspace code as the docker
 * backend.
 *
 * Several runners share one swarm with no lock service of sandman's own:
 *  - a keyed sandbox's service name is unique in the swarm: of two runners
 *    creating it, one gets a conflict and uses the other's;
 *  - a call holds a lease: a service label io.sandman.lease.<id> = deadline,
 *    added and removed by versioned updates (compare-and-swap); a removal
 *    first writes io.sandman.reaping at the version it read with no live
 *    lease, so a call that leased it meanwhile makes the removal fail, and a
 *    call that comes after sees it going;
 *  - a dead runner's leases expire at their deadline; its half-made
 *    networks are swept by any runner's reap.
 * Labels are the truth for list and reap, as with the docker backend. */
#ifndef SANDMAN_SANDBOX_SWARM_H
#define SANDMAN_SANDBOX_SWARM_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/runner.h>

#include "engine/engine_swarm.h"

typedef struct sandbox_swarm sandbox_swarm;

/* manager: the runner's engine options (the manager's address and TLS). */
int sandbox_swarm_new(sandbox_swarm **out, const sm_swarm_options *opts, const sm_engine_options *manager,
                 sm_error *err);
void sandbox_swarm_free(sandbox_swarm *sw);

/* The calling thread's client for a node's engine: tcp://ADDR:PORT with
 * TLS, certificates from DIR/<hostname>/ or DIR/<node id>/ when one holds a
 * ca.pem, else DIR (DIR: the options' node_certs, else the manager's
 * certificate directory). Kept per thread and node. */
int sandbox_swarm_node_engine(sandbox_swarm *sw, const engine_swarm_node *node, sm_engine **out,
                         sm_error *err);
/* The certificate directory used for a node (for doctor). */
void sandbox_swarm_node_cert_dir(const sandbox_swarm *sw, const engine_swarm_node *node, char *out,
                            size_t len);

/* One call's hold on a swarm sandbox. */
typedef struct sandbox_swarm_box {
  char name[SM_NAME_MAX];               /* the service's name */
  char service_id[SM_ENGINE_ID_MAX];
  char container_id[SM_ENGINE_ID_MAX];  /* the task's container on its node */
  char node_id[SM_ENGINE_ID_MAX];
  char node_name[ENGINE_SWARM_NAME_MAX];
  char node_addr[ENGINE_SWARM_ADDR_MAX];
  char lease[24];                       /* this call's lease (label suffix) */
  char state_name[SM_NAME_MAX + 16];    /* name.<container id>: the workspace manifest's */
  int per_tool;
  int reused;                           /* found running, not made for this call */
  int uid, gid;
  sm_engine *node;                      /* the thread's client for the node (borrowed) */
} sandbox_swarm_box;

/* What acquire needs to make a sandbox it does not find: the hardened
 * container config (the docker backend's), built on demand. */
typedef int (*sandbox_swarm_config_fn)(void *ud, sm_engine *manager, json_object **config, int *uid,
                                  int *gid, sm_error *err);

typedef struct sandbox_swarm_want {
  const char *name;        /* service name */
  const char *instance;    /* io.sandman.instance it must carry */
  const char *hash;        /* io.sandman.config-hash the sandbox must carry */
  const char *project;     /* per_worker: the project it is pinned to */
  const char *principal;   /* the call's principal */
  const char *node_id;     /* NULL, or the node it must run on (the warm pool's) */
  int per_tool;
  double lease_s;          /* how long the lease holds without the call ending */
  sandbox_swarm_config_fn config;
  void *config_ud;
} sandbox_swarm_want;

/* Finds the sandbox (or makes it), waits for its task to run, checks on
 * the node what the service spec could not say, and leases it for this
 * call. A sandbox whose node is gone is removed and the call fails with
 * SM_ESANDBOX "node lost ..." (the next call makes a new one elsewhere). */
int sandbox_swarm_acquire(sandbox_swarm *sw, sm_engine *manager, const sandbox_swarm_want *want,
                     sandbox_swarm_box *out, sm_error *err);
/* Ends the call's lease (records last use); a per_tool sandbox is removed. */
void sandbox_swarm_release(sandbox_swarm *sw, sm_engine *manager, sandbox_swarm_box *box);
/* A call in box failed with rc: when its node no longer answers, the
 * sandbox is removed, the node avoided by this runner's next sandboxes, and
 * err says "node lost" (SM_ESANDBOX); otherwise rc as it was. */
int sandbox_swarm_check_node_lost(sandbox_swarm *sw, sm_engine *manager, sandbox_swarm_box *box, int rc,
                             sm_error *err);

/* The warm pool (pool.c keeps the ready ones, backend_swarm.c makes them with
 * sandbox_swarm_acquire): a per_tool sandbox made ahead of time holds the
 * pool's lease, of SM_SWARM_POOL_LEASE_S, until a call takes it. A pool
 * whose runner died is reaped when that lease has run out. */
#define SM_SWARM_POOL_LEASE_S 3600.0
/* Takes ready sandbox `ready` for a call: swaps the pool's lease for the
 * call's in one versioned update, checks that its task still runs that
 * container on a ready node, and gives the calling thread's client for the
 * node. On failure the caller removes it and makes a sandbox of its own. */
int sandbox_swarm_take(sandbox_swarm *sw, sm_engine *manager, const sandbox_swarm_box *ready,
                       double lease_s, sandbox_swarm_box *out, sm_error *err);
/* How many nodes of the swarm are ready, active and meet the runner's
 * constraints (the warm pool keeps its size on each); asked of the manager
 * at most every 30 s, 1 when it cannot say. */
unsigned sandbox_swarm_ready_nodes(sandbox_swarm *sw, sm_engine *manager);
/* The node the next pool sandbox of configuration `hash` made by runner
 * `owner` (its io.sandman.owner label) goes to: of the eligible ready
 * nodes, the one with the fewest of them (ready, or being made by this
 * process). Pair with sandbox_swarm_pool_placed once it is made or failed. */
int sandbox_swarm_pool_node(sandbox_swarm *sw, sm_engine *manager, const char *hash,
                            const char *owner, char node_id[SM_ENGINE_ID_MAX], sm_error *err);
void sandbox_swarm_pool_placed(sandbox_swarm *sw, const char *node_id);

/* Removes service `ref` unless a call holds a live lease on it (SM_EBUSY),
 * or whatever holds it when force. Its own network goes too. Gone already
 * is SM_ENOTFOUND. */
int sandbox_swarm_remove(sm_engine *manager, const char *ref, int force, sm_error *err);

/* ---- pure helpers (unit-tested) ---- */
#define SM_SWARM_SERVICE_NAME_MAX 63
/* The service name of sandbox `name` (its docker name when that fits in a
 * swarm name, else "sandman-" and 48 hex digits of its SHA-256). */
void sandbox_swarm_service_name(const char *name, char out[SM_SWARM_SERVICE_NAME_MAX + 1]);
/* Live leases among a service's labels at time now (epoch seconds). */
int sandbox_swarm_live_leases(json_object *labels, double now);
/* Whether a call holds the service (labels): a live lease that is not the
 * warm pool's (a ready pool sandbox carries io.sandman.pool=true until a
 * call takes it). */
int sandbox_swarm_busy(json_object *labels, double now);
/* The service labels of a lease change: adds lease `id` until deadline
 * (id NULL: none), drops lease `drop` (NULL: none) and every expired one,
 * sets io.sandman.last-used when `used` > 0. Changes labels in place. */
void sandbox_swarm_labels_lease(json_object *labels, const char *id, double deadline, const char *drop,
                           double used, double now);

#define SM_SWARM_LABEL_CHECKED "io.sandman.swarm.checked"   /* container id checked */
#define SM_SWARM_LABEL_LAST_USED "io.sandman.last-used"     /* epoch seconds */
#define SM_SWARM_LABEL_POOL_NODE "io.sandman.swarm.pool-node" /* a pool sandbox's node id */
#define SM_SWARM_NETWORK_COMPONENT "sandbox-network"

#endif
