/* Internal to src/lib/sandbox: network mode allowlist, the sandbox's side (network.c). */
#ifndef SANDMAN_SANDBOX_NETWORK_H
#define SANDMAN_SANDBOX_NETWORK_H

#include <sandman/egress.h>
#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>

#include "common/strv.h"

int sandbox_allowlist(const sm_sandbox_settings *s);
/* Before a sandbox is made: the topology, and the proxy variables added to
 * env. The runtime must have a network. Both take the reference st (the
 * runner's proxy settings, sm_runner_egress). */
int sandbox_egress_prepare(sm_egress_settings *st, sm_engine *e, const sm_run_request *req,
                           sm_egress_net *net, common_strv *env, sm_error *err);
/* The call's policy written into the proxy for container cid (net: the
 * topology when just made, else NULL to look it up). */
int sandbox_egress_apply(sm_egress_settings *st, sm_engine *e, const sm_run_request *req, const sm_egress_net *net,
                         const char *cid, const char *name, sm_error *err);

#endif
