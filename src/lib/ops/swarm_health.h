/* The facts doctor reports about a swarm (swarm_health.c). */
#ifndef SANDMAN_OPS_SWARM_HEALTH_H
#define SANDMAN_OPS_SWARM_HEALTH_H

#include <stddef.h>

#include <sandman/ops.h>

typedef struct ops_swarm_health_report {
  int manager_ok;           /* the engine is a manager and lists its nodes */
  char manager_error[512];
  size_t managers, reachable; /* managers, and those reachable (quorum: more than half) */
  size_t nodes, ready;      /* nodes, and those ready and active */
  char down[512];           /* the others: "name (state/availability), ..." */
  size_t tls_tried, tls_ok; /* ready nodes, and those answering over TLS */
  char tls_bad[640];
  size_t image_ok;          /* of tls_ok, those that have the image */
  char image_missing[512];
  char image_fix[320];
} ops_swarm_health_report;

/* engine: the manager's client, negotiated. */
void ops_swarm_health(sm_engine *engine, const sm_ops_doctor_options *o, const char *image,
                      ops_swarm_health_report *out);

#endif
