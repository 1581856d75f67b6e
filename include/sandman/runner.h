/* sandman: the runner, the long-lived context of tool calls.
 *
 * sm_runner holds the engine address, state directory and instance name,
 * and the speed-ups a long-lived process wants (agent sessions, the warm
 * pool). It is thread-safe: each thread gets its own engine client. Calls
 * are made with sm_run (sandman/run.h). */
#ifndef SANDMAN_RUNNER_H
#define SANDMAN_RUNNER_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>

#include <sandman/audit.h>
#include <sandman/egress.h>
#include <sandman/engine.h>
#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sm_runner sm_runner;

/* The swarm backend (docs/scale-out.md): the runner's engine is a swarm
 * manager; sandboxes are services placed by the swarm, reached on their
 * node's engine over TCP+TLS. */
typedef struct sm_swarm_options {
  /* The nodes' client certificates (ca.pem, cert.pem, key.pem): DIR/<node
   * hostname>/ or DIR/<node id>/ when it has a ca.pem, else DIR itself.
   * NULL: the manager's certificate directory for every node. */
  const char *node_certs;
  int node_port;                  /* the nodes' TLS port; 0: 2376 */
  const char *const *constraints; /* placement, e.g. "node.labels.sandman==yes" */
  size_t n_constraints;
  double reserve_cpu;             /* scheduler reservations per sandbox; 0: none */
  int64_t reserve_memory;
} sm_swarm_options;

typedef struct sm_runner_options {
  sm_engine_options engine;
  const char *state_dir;   /* NULL: $SANDMAN_STATE_DIR, else XDG/root default */
  const char *instance;    /* NULL: $SANDMAN_INSTANCE, else "default" */
  const char *backend;     /* NULL or "docker": the engine runs the sandboxes;
                              "swarm": the engine is a swarm manager */
  sm_swarm_options swarm;
  /* network allowlist: the egress proxy's settings (copied); NULL: built-in. */
  const sm_egress_proxy_options *egress;
} sm_runner_options;

#define SM_RUNNER_OPTIONS_INIT {SM_ENGINE_OPTIONS_INIT, NULL, NULL, NULL, {NULL, 0, NULL, 0, 0, 0}, NULL}

SM_API int sm_runner_new(sm_runner **out, const sm_runner_options *opts, sm_error *err);
SM_API void sm_runner_free(sm_runner *runner);
/* The calling thread's engine client (created on first use). */
SM_API int sm_runner_engine(sm_runner *runner, sm_engine **out, sm_error *err);
SM_API const char *sm_runner_state_dir(const sm_runner *runner);
/* Waits until every thaw that a call of this runner left to end after its
 * answer (docs/state.md: the first call into a frozen sandbox) has ended,
 * its record and audit row written: a listing or a state change that
 * follows sees the sandbox running. A matter of the engine's answer to
 * one unpause. */
SM_API void sm_runner_settle_thaws(sm_runner *runner);
SM_API const char *sm_runner_instance(const sm_runner *runner);
/* "docker" or "swarm" (sm_runner_options.backend). */
SM_API const char *sm_runner_backend(const sm_runner *runner);
/* The audit trail the runner records its sandboxes' lives in (created,
 * replaced, removed, reaped); borrowed, NULL (the default): none. */
SM_API void sm_runner_set_audit(sm_runner *runner, sm_audit *audit);
SM_API sm_audit *sm_runner_audit(const sm_runner *runner);
/* The most bytes of host-tool requests (sandman/hostroute.h) the runner's
 * routes hold at once, over all its sandboxes: a request past it is
 * answered 503 (reason "busy") before the host sees it. 0: the default,
 * 32 MiB. */
SM_API void sm_runner_set_route_memory(sm_runner *runner, size_t bytes);
/* The egress proxy settings in force (a reference: sm_egress_settings_unref). */
SM_API sm_egress_settings *sm_runner_egress(sm_runner *runner);
/* Replaces them (a configuration reload): calls that start afterwards use
 * the new ones. Copies opts. */
SM_API int sm_runner_set_egress(sm_runner *runner, const sm_egress_proxy_options *opts, sm_error *err);

/* ---- speed: the in-sandbox agent (src/lib/sandbox/agent.c, docs/agent.md) ----
 * From the second call a runner makes in a keyed sandbox (and for warm-pool
 * containers), calls go over a long-lived exec of sandman-agent instead of
 * one engine exec each: a few ms instead of ~45. On by default; the
 * environment variable SANDMAN_AGENT=off (or 0/false/no) or this setter
 * turns it off, and every call then uses the engine's exec. */
SM_API void sm_runner_set_agent(sm_runner *runner, int on);
SM_API int sm_runner_agent_enabled(sm_runner *runner);
typedef struct sm_agent_stats {
  unsigned long sessions_opened; /* agent execs started */
  unsigned long calls;           /* calls that went through an agent */
  unsigned long fallbacks;       /* calls that wanted one and used the engine's exec */
} sm_agent_stats;
SM_API void sm_runner_agent_stats(sm_runner *runner, sm_agent_stats *out);

/* ---- speed: the warm pool and background work (src/lib/sandbox/pool.c) ----
 *
 * A per_tool call normally waits for the engine to create and start its
 * container (a few hundred ms). A long-running process (the runner
 * service, a program calling sm_run in a loop) can keep containers created
 * and started ahead of time: `size` ready containers per configuration
 * (the settings hash of sm_sandbox_settings_hash and the project), made on
 * the first per_tool call of a configuration or by sm_runner_pool_prepare,
 * refilled by background threads, each taken by one call and never reused.
 * They have the same spec, limits and /workspace volume as any per_tool
 * sandbox, carry io.sandman.pool=true beside the usual labels, count in
 * `sandbox list` and are reaped like others. When the configuration of a
 * caller (project, agent, tool) changes, the pool of its old configuration
 * is drained if no other caller uses it. The pool is off (size 0) until
 * set: a one-shot process would only pay for containers it never uses.
 *
 * Long-running processes also want a per_tool container removed after its
 * call in the background, off the caller's time: sm_runner_set_background_removal.
 * sm_runner_free waits for those removals (and drains the pool) so nothing
 * is left. */
#define SM_POOL_DEFAULT_SIZE 2
#define SM_POOL_MAX_SIZE 64
/* While calls come faster than containers are made (bursts), a
 * configuration keeps more ready: as many as arrived within one making
 * time lately, up to the maximum (default SM_POOL_DEFAULT_MAX, never below
 * the size). Refills run up to `parallel` at once (all configurations). */
#define SM_POOL_DEFAULT_MAX 8
#define SM_POOL_DEFAULT_PARALLEL 2
#define SM_POOL_MAX_PARALLEL 8

/* Off by default: a per_tool container is gone when sm_run returns. On: it
 * is removed by a background thread holding the call's busy lock until it is
 * gone (the runner service turns it on). */
SM_API void sm_runner_set_background_removal(sm_runner *runner, int on);
/* 0 turns the pool off and removes its ready containers (in the
 * background). SM_EINVAL above SM_POOL_MAX_SIZE. */
SM_API int sm_runner_pool_set_size(sm_runner *runner, unsigned size, sm_error *err);
SM_API unsigned sm_runner_pool_size(sm_runner *runner);
/* The pool's bounds while calls come in bursts: ready containers per
 * configuration at most (0..SM_POOL_MAX_SIZE; below the size: the size)
 * and refills at once (1..SM_POOL_MAX_PARALLEL). SM_EINVAL outside. */
SM_API int sm_runner_pool_set_limits(sm_runner *runner, unsigned max_size, unsigned parallel,
                                     sm_error *err);
/* Fills the pool of req's configuration (req->settings.mode must be
 * per_tool) ahead of its first call. Returns at once; a no-op while the
 * pool is off. */
struct sm_run_request; /* sandman/run.h's sm_run_request (run.h includes this header) */
SM_API int sm_runner_pool_prepare(sm_runner *runner, const struct sm_run_request *req,
                                  sm_error *err);
/* Turns the pool off, removes every ready container and waits for them and
 * for pending per_tool removals (a runner's shutdown). */
SM_API void sm_runner_pool_drain(sm_runner *runner);
/* Waits until the background work is done: every pool full (or backing off
 * after a failed creation) and no removal pending. SM_ETIMEOUT after
 * timeout_s (< 0: no limit). For tests and benchmarks. */
SM_API int sm_runner_settle(sm_runner *runner, double timeout_s, sm_error *err);

typedef struct sm_pool_stats {
  unsigned size;              /* ready containers wanted per configuration (its base) */
  unsigned configurations;    /* pools */
  unsigned ready;             /* containers ready now, all pools */
  unsigned creating;
  unsigned removals_pending;  /* queued or running */
  unsigned agents_preparing;  /* agent sessions being opened (queued or running) */
  unsigned long taken;        /* calls that got a ready container */
  unsigned long missed;       /* calls that found their pool empty */
  unsigned long created, removed, failed;
  unsigned max_size;          /* the most kept per configuration while calls come fast */
  unsigned parallel;          /* refills at once */
  unsigned wanted;            /* ready containers wanted now, all pools (from their calls) */
} sm_pool_stats;

SM_API void sm_runner_pool_stats(sm_runner *runner, sm_pool_stats *out);

#ifdef __cplusplus
}
#endif
#endif
