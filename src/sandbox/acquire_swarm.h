/* Internal to src/sandbox: a call's hold on its sandbox on the swarm
 * backend (swarm.c): the same container config, made a service; the call
 * then runs on the task's node. */
#ifndef SANDMAN_SANDBOX_ACQUIRE_SWARM_H
#define SANDMAN_SANDBOX_ACQUIRE_SWARM_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>

#include "sandbox/box.h"
#include "sandbox/context.h"

/* m: the manager. On success sb->swarm.node is the task's node's engine. */
int sandbox_acquire_swarm(const sandbox_ctx *ctx, sm_engine *m, const sm_run_request *req,
                          sandbox_box *sb, sm_error *err);
/* Ends the call's hold on a swarm sandbox (a per_tool one goes). */
void sandbox_release_swarm(const sandbox_ctx *ctx, sm_engine *m, const sm_run_request *req,
                           sandbox_box *sb);

#endif
