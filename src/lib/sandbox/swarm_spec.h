/* The swarm service of a sandbox, translated from the hardened container
 * config that the docker backend creates (sandbox_container_config_build), so
 * that a swarm sandbox gets every setting a local one gets, and a setting
 * added there later cannot be dropped silently here: every key of the
 * config is either carried into the service spec, turned into a check made
 * on the node after the task starts, or refused (SM_EUNSUPPORTED naming the
 * key). Pure: no engine. */
#ifndef SANDMAN_SANDBOX_SWARM_SPEC_H
#define SANDMAN_SANDBOX_SWARM_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/error.h>

typedef struct sandbox_swarm_spec_options {
  const char *name;               /* the service name (unique in the swarm) */
  const char *network;            /* network none: the sandbox's own internal overlay */
  json_object *service_labels;    /* borrowed; the service's labels (the truth for list/reap) */
  const char *const *constraints; /* placement, e.g. "node.labels.sandman.pool==a" */
  size_t n_constraints;
  int64_t reserve_nano_cpus;      /* scheduler reservations; 0: none */
  int64_t reserve_memory;
} sandbox_swarm_spec_options;

/* What a service spec of API 1.41 cannot say, checked (or set) on the node
 * once the task's container exists. */
typedef struct sandbox_swarm_checks {
  int no_new_privileges;   /* NoNewPrivs must read 1 inside (the node's dockerd
                              runs with --no-new-privileges) */
  int ipc_private;         /* the container's IpcMode must be "private" */
  char runtime[64];        /* "" or the runtime the container must run with */
  int64_t memory_swap;     /* > 0: set on the node's container (update) and checked */
} sandbox_swarm_checks;

/* Translates config (ContainerConfig with HostConfig, as for
 * POST /containers/create) into a service spec for POST /services/create:
 * one replicated task, restart policy none, endpoint mode dnsrr, the
 * config's mounts and tmpfs as volumes of the local driver on tmpfs
 * (anonymous, so the swarm removes them with the task; exec stays allowed
 * where the config allows it, which the 1.41 tmpfs mount cannot say).
 * *out is the caller's. SM_EUNSUPPORTED names the first key that cannot be
 * carried, SM_EINVAL a value that makes no sense. */
int sandbox_swarm_service_spec(json_object *config, const sandbox_swarm_spec_options *opts,
                          json_object **out, sandbox_swarm_checks *checks, sm_error *err);

/* Label keys of a swarm sandbox's service besides the docker backend's. */
#define SM_SWARM_LABEL_NETWORK "io.sandman.swarm.network" /* its own network's name */
#define SM_SWARM_LABEL_LEASE_PREFIX "io.sandman.lease." /* + lease id: deadline (epoch s) */
#define SM_SWARM_LABEL_REAPING "io.sandman.reaping"      /* set by the runner removing it */

#endif
