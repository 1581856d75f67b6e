/* The swarm backend's list, reap and rm (ops_swarm.c), for a scope whose
 * backend is "swarm": the manager's services are the sandboxes. */
#ifndef SANDMAN_OPS_SWARM_H
#define SANDMAN_OPS_SWARM_H

#include <sandman/ops.h>

/* 1 when scope->backend is "swarm". */
int ops_is_swarm(const sm_ops_scope *scope);
int ops_swarm_list(const sm_ops_scope *scope, int all, sm_ops_sandbox_list *out, sm_error *err);
int ops_swarm_reap(const sm_ops_scope *scope, const sm_ops_reap_options *opts, sm_ops_report *out,
                   sm_error *err);
int ops_swarm_rm(const sm_ops_scope *scope, const sm_ops_rm_options *opts, sm_ops_report *out,
                 sm_error *err);

#endif
