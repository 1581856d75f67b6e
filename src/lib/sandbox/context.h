/* Internal to src/lib/sandbox: what the runner hands down to the parts below it.
 *
 * The runner (runner.c) is the top of the module: it picks the backend
 * (backend.h), makes the agents' sessions, the warm pool, the lookup cache
 * and the swarm backend's state, frees them, and hands them down in one
 * sandbox_ctx. Nothing below the runner
 * finds these through the runner: the call driver (sandbox_call.c), acquisition
 * (acquire*.c), the pool (pool.c), creation and removal (lifecycle.c) and
 * mode none (host.c) are given the ctx. The two pieces of the runner that
 * change while it lives, its per-thread engine clients and its egress
 * settings, are reached through the ctx's two functions. */
#ifndef SANDMAN_SANDBOX_CONTEXT_H
#define SANDMAN_SANDBOX_CONTEXT_H

#include <sandman/audit.h>
#include <sandman/egress.h>
#include <sandman/keep.h>
#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/runner.h>

typedef struct sandbox_agents sandbox_agents; /* agent.h */
typedef struct sandbox_pool sandbox_pool;     /* pool.h */
typedef struct sandbox_lookup sandbox_lookup; /* lookup.h */
typedef struct sandbox_swarm sandbox_swarm; /* backend_swarm_box.h */
typedef struct sandbox_backend sandbox_backend; /* backend.h */
typedef struct sandbox_routes sandbox_routes; /* tool_route.h */
typedef struct sandbox_thaws sandbox_thaws; /* thaw_job.h */

typedef struct sandbox_ctx {
  const char *instance;
  const char *state_dir;
  sandbox_agents *agents;  /* the runner's agent sessions */
  sandbox_pool *pool;      /* warm pool and background work */
  sandbox_lookup *lookup;  /* keyed sandboxes found before */
  const sandbox_backend *backend; /* where sandboxes live: docker or swarm */
  sandbox_swarm *swarm;    /* the swarm backend's state, or NULL */
  sandbox_routes *routes;  /* the host-tool routes this process keeps */
  sandbox_thaws *thaws;    /* thaws beside their calls; NULL: none */
  sm_audit *audit;         /* NULL: no trail (sm_runner_set_audit sets it) */
  /* Told of each change of a sandbox's state (keep.h); NULL: nobody. */
  void (*state_hook)(void *ud, const struct sm_state_event *ev);
  void *state_hook_ud;
  sm_runner *runner;       /* only to pass to the two functions below */
  /* The calling thread's engine client (kept by the runner). */
  int (*engine)(sm_runner *runner, sm_engine **out, sm_error *err);
  /* A reference to the egress settings in force (the callee unrefs). */
  sm_egress_settings *(*egress)(sm_runner *runner);
} sandbox_ctx;

/* The runner's ctx (runner.c; for sm_run and the tests). */
const sandbox_ctx *sandbox_runner_ctx(const sm_runner *runner);

#endif
