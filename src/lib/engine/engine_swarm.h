/* Swarm calls of the engine client: a manager's view of the swarm, its
 * nodes, services and tasks, and the networks sandboxes join. Built only on
 * sm_engine_request_json, so they work over whatever transport the client
 * has (TLS to a remote manager included).
 *
 * Compare-and-swap: a service's name is unique in the swarm (a second create
 * of the same name is SM_ECONFLICT) and an update names the version it was
 * read at (an update of a version that moved on is SM_ECONFLICT). Those two
 * are what several runners coordinate with; nothing else is shared.
 *
 * Ownership: json_object ** outputs are the caller's (json_object_put). */
#ifndef SANDMAN_ENGINE_SWARM_H
#define SANDMAN_ENGINE_SWARM_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>

#define ENGINE_SWARM_NAME_MAX 256
#define ENGINE_SWARM_ADDR_MAX 64

/* Names and ids given to these calls are refused unless they are 1..255 of
 * [A-Za-z0-9_.-] (no escaping needed in a URL path, no path tricks). */
int engine_swarm_ref_valid(const char *ref);

/* ---- the swarm and its nodes ---- */
/* GET /swarm: only a manager answers. A node that is not in a swarm, or
 * not a manager, is SM_EUNSUPPORTED with the engine's words and what to do. */
int engine_swarm_inspect(sm_engine *e, json_object **out, sm_error *err);
int engine_node_list(sm_engine *e, json_object **out, sm_error *err);
int engine_node_inspect(sm_engine *e, const char *id, json_object **out, sm_error *err);

typedef struct engine_swarm_node {
  char id[SM_ENGINE_ID_MAX];
  char hostname[ENGINE_SWARM_NAME_MAX];
  char addr[ENGINE_SWARM_ADDR_MAX]; /* Status.Addr: where the node's engine is reached */
  char state[16];               /* Status.State: "ready", "down", "unknown", "disconnected" */
  char availability[16];        /* Spec.Availability: "active", "pause", "drain" */
  char engine_version[32];
  int ready;                    /* state "ready" and availability "active" */
  int manager;                  /* has ManagerStatus */
  int leader;
  int reachable;                /* a manager whose Reachability is "reachable" */
} engine_swarm_node;

/* One element of GET /nodes into out. SM_EPROTOCOL when a field sandman
 * needs (ID, Status.State, Status.Addr) is missing. */
int engine_swarm_node_parse(json_object *node, engine_swarm_node *out, sm_error *err);

/* ---- services ---- */
/* POST /services/create. out_id (may be NULL) gets the service id. A name
 * that exists is SM_ECONFLICT. */
int engine_service_create(sm_engine *e, json_object *spec, char out_id[SM_ENGINE_ID_MAX],
                             sm_error *err);
/* GET /services/{id or name}; missing is SM_ENOTFOUND. */
int engine_service_inspect(sm_engine *e, const char *ref, json_object **out, sm_error *err);
/* GET /services with label filters ("k=v" or "k", ANDed). */
int engine_service_list(sm_engine *e, const char *const *labels, size_t n_labels,
                           json_object **out, sm_error *err);
/* POST /services/{id}/update?version=N with the whole new spec. A version
 * that is not the current one is SM_ECONFLICT ("update out of sequence"). */
int engine_service_update(sm_engine *e, const char *id, uint64_t version, json_object *spec,
                             sm_error *err);
/* DELETE /services/{id}; missing is SM_ENOTFOUND. */
int engine_service_remove(sm_engine *e, const char *id, sm_error *err);
/* Version.Index of a service (or any swarm object). -1 when absent. */
int engine_swarm_version(json_object *object, uint64_t *out);

/* ---- tasks ---- */
/* GET /tasks?filters={"service":[service]} (service: id or name). */
int engine_task_list(sm_engine *e, const char *service, json_object **out, sm_error *err);

typedef struct engine_swarm_task {
  char id[SM_ENGINE_ID_MAX];
  char node_id[SM_ENGINE_ID_MAX];
  char container_id[SM_ENGINE_ID_MAX]; /* "" until the node made it */
  char state[16];                      /* Status.State */
  char desired[16];                    /* DesiredState */
  char message[256];                   /* Status.Err, else Status.Message */
} engine_swarm_task;

/* The task that stands for a one-task service: the newest by
 * CreatedAt among those whose desired state is "running" (else the newest
 * of all, so that a failed task can be told). 0 with *out filled, or
 * SM_ENOTFOUND when the list is empty. */
int engine_swarm_task_current(json_object *tasks, engine_swarm_task *out, sm_error *err);
/* 1 when the task state is final (complete, shutdown, failed, rejected,
 * orphaned, remove): it will not run again. */
int engine_swarm_task_state_final(const char *state);

/* ---- networks ---- */
/* POST /networks/create {Name, Driver, Internal, Attachable false,
 * CheckDuplicate, Labels}. A name that exists is SM_ECONFLICT. */
int sm_engine_network_create(sm_engine *e, const char *name, const char *driver, int internal,
                             json_object *labels, char out_id[SM_ENGINE_ID_MAX], sm_error *err);
/* DELETE /networks/{id}; missing is SM_ENOTFOUND, in use SM_ECONFLICT. */
int sm_engine_network_remove(sm_engine *e, const char *id, sm_error *err);
/* GET /networks with label filters. */
int sm_engine_network_list(sm_engine *e, const char *const *labels, size_t n_labels,
                           json_object **out, sm_error *err);

/* "?filters=" + the URL-encoded JSON {"key": [values...]} appended to a
 * path of at most cap bytes. SM_EINVAL when it does not fit. */
int engine_swarm_filter_path(char *path, size_t cap, const char *base, const char *key,
                         const char *const *values, size_t n_values, sm_error *err);

#endif
