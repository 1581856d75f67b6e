/* doctor's report building (doctor.c), for the checks made elsewhere in
 * src/ops (swarm.c), and the swarm's checks. */
#ifndef SANDMAN_OPS_DOCTOR_H
#define SANDMAN_OPS_DOCTOR_H

#include <sandman/ops.h>

/* A new check in r (NULL when the report is full). */
sm_ops_check *ops_check_add(sm_ops_doctor_report *r, const char *name, int required);
/* Its result: ok, what to do when not, what was found. */
void ops_check_result(sm_ops_check *c, int ok, const char *fix, const char *detail);

/* The swarm's checks (swarm.c): the manager and its quorum, the nodes, TLS
 * to each ready node, the image on each (engine: the manager's client,
 * negotiated). */
void ops_doctor_swarm(sm_ops_doctor_report *r, sm_engine *engine, const sm_ops_doctor_options *o,
                      const char *image);

#endif
