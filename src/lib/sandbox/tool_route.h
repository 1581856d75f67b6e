/* The host side of the host-tool route (sandman/hostroute.h): for each
 * container whose calls are given host tools, one relay exec of
 * sandman-agent (`route`, as root without capabilities) that this process
 * keeps attached, and a thread that pumps its frames: each request the
 * relay forwards goes to the handler on a thread of its own, with the
 * identity of the call with the route that the requesting process descends
 * from (or none), and the handler's answer goes back as a frame. */
#ifndef SANDMAN_SANDBOX_TOOL_ROUTE_H
#define SANDMAN_SANDBOX_TOOL_ROUTE_H

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/run.h>

#include "common/strv.h"
#include "sandbox/agent.h"

typedef struct sandbox_routes sandbox_routes;         /* a runner's routes */
typedef struct sandbox_route_call sandbox_route_call; /* one call's hold on a route */

sandbox_routes *sandbox_routes_new(void);
/* Ends every relay (it removes its socket), waits for the handlers in
 * flight and frees. The handlers given to sandbox_route_begin must stay
 * valid until then. */
void sandbox_routes_free(sandbox_routes *rs);

/* Before a call in container cid (name: its name) that has
 * req->host_route: starts the container's route unless this process has
 * one alive (installing the agent first), makes req->host_route its
 * handler, marks the call active with its identity, and adds
 * SM_ROUTE_BIN_DIR to env's PATH. A call without host_route is not
 * tracked (*out NULL): its processes get no identity. */
int sandbox_route_begin(sandbox_routes *rs, sandbox_agents *agents, sm_engine *e, const char *cid,
                        const char *name, const sm_run_request *req, common_strv *env,
                        sandbox_route_call **out, sm_error *err);
/* The call's first process, as its preamble says (decimal pid and start
 * time in clock ticks since boot; sandbox_call_watch's on_start, with the
 * sandbox_route_call as call): from now on a request from it or its
 * descendants gets the call's identity. Until then a request from the
 * sandbox waits for it (bounded). call may be NULL. */
void sandbox_route_started(void *call, const char *pid, const char *start);
/* The call is over: its identity is no longer given to requests. close:
 * the container goes too (per_tool), so its route ends now. c may be NULL. */
void sandbox_route_end(sandbox_routes *rs, sandbox_route_call *c, int close);

/* The most bytes of requests this process's routes hold at once (the
 * handlers' copies, over every sandbox); a request past it is answered 503
 * (reason busy) at once. 0: the default, 32 MiB. */
void sandbox_routes_set_memory(sandbox_routes *rs, size_t bytes);

/* How many relays this process started (tests: a call without a route
 * must start none). */
unsigned long sandbox_routes_started(sandbox_routes *rs);

#endif
