/* The runner: engine address, state directory and instance, shared by all
 * threads. An sm_engine is not thread-safe, so each thread gets its own,
 * cloned from a template (one /_ping for the whole process) and kept in a
 * pthread key; the runner also keeps a list of them so that freeing the
 * runner frees every client, whichever thread made it. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/keep.h>
#include <sandman/runner.h>
#include <sandman/run.h>
#include <sandman/state.h>

#include "common/cleanup.h"
#include "sandbox/agent.h"
#include "sandbox/backend.h"
#include "sandbox/context.h"
#include "sandbox/lookup.h"
#include "sandbox/pool.h"
#include "sandbox/thaw_job.h"
#include "sandbox/spec.h"
#include "sandbox/backend_swarm_box.h"
#include "sandbox/tool_route.h"

typedef struct thread_engine {
  struct sm_runner *runner;
  sm_engine *engine;
  struct thread_engine *prev, *next;
} thread_engine;

struct sm_runner {
  char state_dir[PATH_MAX];
  char instance[72];
  char *host;
  char *cert_path;
  char *api_version;
  sm_engine_options engine_opts; /* strings point at the copies above */
  pthread_mutex_t lock;
  pthread_key_t key;
  sm_engine *template_engine; /* negotiated once, then cloned */
  thread_engine *threads;
  sm_egress_settings *egress; /* network allowlist: the proxy's settings (under lock) */
  /* What the parts below the runner are handed: the agents' sessions
   * (agent.c), the warm pool and background removals (pool.c), the lookup
   * cache (lookup.c), the swarm backend or NULL (backend_swarm_box.c), the audit trail
   * (borrowed; NULL: none). */
  sandbox_ctx ctx;
};

static void thread_engine_free(void *p) {
  thread_engine *te = p;
  if (te == NULL) return;
  sm_runner *r = te->runner;
  pthread_mutex_lock(&r->lock);
  if (te->prev) te->prev->next = te->next;
  else r->threads = te->next;
  if (te->next) te->next->prev = te->prev;
  pthread_mutex_unlock(&r->lock);
  sm_engine_free(te->engine);
  free(te);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* The parts below the runner, handed down in r->ctx. Agents are on unless
 * SANDMAN_AGENT says off/0/false (or a program turns them off): they only
 * start from a sandbox's second call in a runner. */
static int make_parts(sm_runner *r, sm_error *err) {
  r->ctx.instance = r->instance;
  r->ctx.state_dir = r->state_dir;
  r->ctx.runner = r;
  r->ctx.backend = r->ctx.swarm ? &sandbox_backend_swarm : &sandbox_backend_docker;
  r->ctx.engine = sm_runner_engine;
  r->ctx.egress = sm_runner_egress;
  r->ctx.agents = sandbox_agents_new();
  r->ctx.lookup = sandbox_lookup_new();
  r->ctx.pool = sandbox_pool_new(&r->ctx);
  r->ctx.routes = sandbox_routes_new();
  r->ctx.thaws = sandbox_thaws_new();
  if (!r->ctx.agents || !r->ctx.lookup || !r->ctx.pool || !r->ctx.routes || !r->ctx.thaws)
    return sm_error_set(err, SM_ENOMEM, NULL);
  const char *v = getenv("SANDMAN_AGENT");
  if (v && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "false") == 0 ||
            strcmp(v, "no") == 0))
    sandbox_agents_set_enabled(r->ctx.agents, 0);
  return 0;
}

const sandbox_ctx *sandbox_runner_ctx(const sm_runner *r) { return &r->ctx; }

void sm_runner_settle_thaws(sm_runner *r) {
  if (r) sandbox_thaws_wait(r->ctx.thaws, NULL);
}

int sm_runner_new(sm_runner **out, const sm_runner_options *opts, sm_error *err) {
  sm_runner_options defaults = SM_RUNNER_OPTIONS_INIT;
  if (opts == NULL) opts = &defaults;
  cleanup_free sm_runner *r = calloc(1, sizeof *r);
  if (r == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  int rc;
  if (opts->state_dir && *opts->state_dir) {
    if (snprintf(r->state_dir, sizeof r->state_dir, "%s", opts->state_dir) >=
        (int)sizeof r->state_dir)
      return sm_error_set(err, SM_EINVAL, "state directory path too long");
  } else if ((rc = sm_state_default_dir(r->state_dir, sizeof r->state_dir, err)) != 0) {
    return rc;
  }
  const char *inst = opts->instance;
  if (inst == NULL || *inst == '\0') inst = getenv("SANDMAN_INSTANCE");
  if (inst == NULL || *inst == '\0') inst = "default";
  if (!sandbox_instance_valid(inst)) {
    return sm_error_set(err, SM_EINVAL,
                        "instance name '%s' is not valid: use 1 to 64 letters, digits, '_', "
                        "'.' or '-' (set SANDMAN_INSTANCE)",
                        inst);
  }
  snprintf(r->instance, sizeof r->instance, "%s", inst);
  r->engine_opts = opts->engine;
  r->host = dup_or_null(opts->engine.host);
  r->cert_path = dup_or_null(opts->engine.cert_path);
  r->api_version = dup_or_null(opts->engine.api_version);
  if ((opts->engine.host && !r->host) || (opts->engine.cert_path && !r->cert_path) ||
      (opts->engine.api_version && !r->api_version)) {
    rc = sm_error_set(err, SM_ENOMEM, NULL);
    goto fail;
  }
  r->engine_opts.host = r->host;
  r->engine_opts.cert_path = r->cert_path;
  r->engine_opts.api_version = r->api_version;
  /* Resolve the address now so a bad --host is reported before anything. */
  if ((rc = sm_engine_new(&r->template_engine, &r->engine_opts, err)) != 0) goto fail;
  if (opts->backend && *opts->backend && strcmp(opts->backend, "docker") != 0) {
    if (strcmp(opts->backend, "swarm") != 0)
      rc = sm_error_set(err, SM_EINVAL, "unknown sandbox backend '%s' (use docker or swarm)",
                        opts->backend);
    else
      rc = sandbox_swarm_new(&r->ctx.swarm, &opts->swarm, &r->engine_opts, err);
    if (rc) goto fail;
  }
  sm_egress_proxy_options eo = SM_EGRESS_PROXY_OPTIONS_INIT;
  if (opts->egress) eo = *opts->egress;
  eo.instance = r->instance; /* the proxy belongs to the runner's instance */
  eo.state_dir = r->state_dir;
  if ((rc = sm_egress_settings_new(&r->egress, &eo, err)) != 0) goto fail;
  if ((rc = make_parts(r, err)) != 0) goto fail;
  pthread_mutex_init(&r->lock, NULL);
  if (pthread_key_create(&r->key, thread_engine_free) != 0) {
    pthread_mutex_destroy(&r->lock);
    rc = sm_error_set(err, SM_ENOMEM, "no thread key left");
    goto fail;
  }
  *out = steal_pointer(&r);
  return 0;

fail: /* r itself goes with its cleanup */
  sandbox_thaws_free(r->ctx.thaws);
  sandbox_routes_free(r->ctx.routes);
  sandbox_pool_free(r->ctx.pool);
  sandbox_lookup_free(r->ctx.lookup);
  sandbox_agents_free(r->ctx.agents);
  sm_egress_settings_unref(r->egress);
  sandbox_swarm_free(r->ctx.swarm);
  sm_engine_free(r->template_engine);
  free(r->host);
  free(r->cert_path);
  free(r->api_version);
  return rc;
}

void sm_runner_free(sm_runner *r) {
  if (r == NULL) return;
  /* A thaw left running by a call that had its answer writes the
   * sandbox's record and audit row: it ends before anything goes. */
  sandbox_thaws_free(r->ctx.thaws);
  r->ctx.thaws = NULL;
  /* Then the host-tool routes (their relays remove their sockets). */
  sandbox_routes_free(r->ctx.routes);
  r->ctx.routes = NULL;
  /* Then, while every engine client still works: the pool's containers
   * and pending per_tool removals go, and its threads end. */
  sandbox_pool_free(r->ctx.pool);
  r->ctx.pool = NULL;
  sandbox_agents_free(r->ctx.agents);
  r->ctx.agents = NULL;
  sandbox_lookup_free(r->ctx.lookup);
  r->ctx.lookup = NULL;
  sandbox_swarm_free(r->ctx.swarm);
  r->ctx.swarm = NULL;
  /* Deleting the key first means no destructor runs on a freed runner. */
  pthread_key_delete(r->key);
  pthread_mutex_lock(&r->lock);
  thread_engine *te = r->threads;
  r->threads = NULL;
  pthread_mutex_unlock(&r->lock);
  while (te) {
    thread_engine *next = te->next;
    sm_engine_free(te->engine);
    free(te);
    te = next;
  }
  sm_engine_free(r->template_engine);
  sm_egress_settings_unref(r->egress);
  pthread_mutex_destroy(&r->lock);
  free(r->host);
  free(r->cert_path);
  free(r->api_version);
  free(r);
}

static int new_engine(sm_runner *r, sm_engine **out, sm_error *err) {
  pthread_mutex_lock(&r->lock);
  int rc = 0;
  if (sm_engine_api_version(r->template_engine) == NULL)
    rc = sm_engine_negotiate(r->template_engine, err);
  if (rc == 0) rc = sm_engine_clone(out, r->template_engine, err);
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int sm_runner_engine(sm_runner *r, sm_engine **out, sm_error *err) {
  thread_engine *te = pthread_getspecific(r->key);
  if (te) {
    *out = te->engine;
    return 0;
  }
  sm_engine *e = NULL;
  int rc = new_engine(r, &e, err);
  if (rc) return rc;
  te = calloc(1, sizeof *te);
  if (te == NULL) {
    sm_engine_free(e);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  te->runner = r;
  te->engine = e;
  pthread_mutex_lock(&r->lock);
  te->next = r->threads;
  if (r->threads) r->threads->prev = te;
  r->threads = te;
  pthread_mutex_unlock(&r->lock);
  if (pthread_setspecific(r->key, te) != 0) {
    thread_engine_free(te);
    return sm_error_set(err, SM_ENOMEM, "storing the thread's engine client");
  }
  *out = e;
  return 0;
}

void sm_runner_set_agent(sm_runner *r, int on) { sandbox_agents_set_enabled(r->ctx.agents, on); }

int sm_runner_agent_enabled(sm_runner *r) { return sandbox_agents_enabled(r->ctx.agents); }

void sm_runner_agent_stats(sm_runner *r, sm_agent_stats *out) {
  sandbox_agents_stats(r->ctx.agents, &out->sessions_opened, &out->calls, &out->fallbacks);
}

const char *sm_runner_backend(const sm_runner *r) { return r->ctx.backend->name; }

const char *sm_runner_state_dir(const sm_runner *r) { return r->state_dir; }
const char *sm_runner_instance(const sm_runner *r) { return r->instance; }

sm_egress_settings *sm_runner_egress(sm_runner *r) {
  pthread_mutex_lock(&r->lock);
  sm_egress_settings *s = sm_egress_settings_ref(r->egress);
  pthread_mutex_unlock(&r->lock);
  return s;
}

int sm_runner_set_egress(sm_runner *r, const sm_egress_proxy_options *opts, sm_error *err) {
  sm_egress_proxy_options eo = SM_EGRESS_PROXY_OPTIONS_INIT;
  if (opts) eo = *opts;
  eo.instance = r->instance;
  eo.state_dir = r->state_dir;
  sm_egress_settings *fresh = NULL;
  int rc = sm_egress_settings_new(&fresh, &eo, err);
  if (rc != 0) return rc;
  pthread_mutex_lock(&r->lock);
  sm_egress_settings *old = r->egress;
  r->egress = fresh;
  pthread_mutex_unlock(&r->lock);
  sm_egress_settings_unref(old);
  return 0;
}

void sm_runner_set_audit(sm_runner *r, sm_audit *audit) { r->ctx.audit = audit; }

void sm_runner_set_state_hook(sm_runner *r, sm_state_hook hook, void *ud) {
  r->ctx.state_hook = hook;
  r->ctx.state_hook_ud = ud;
}
sm_audit *sm_runner_audit(const sm_runner *r) { return r->ctx.audit; }

void sm_runner_set_route_memory(sm_runner *r, size_t bytes) {
  if (r) sandbox_routes_set_memory(r->ctx.routes, bytes);
}

/* ---- the warm pool and background work (pool.c) ---- */

int sm_runner_pool_set_size(sm_runner *r, unsigned size, sm_error *err) {
  if (r == NULL) return sm_error_set(err, SM_EINVAL, "no runner given");
  return sandbox_pool_set_size(r->ctx.pool, size, err);
}

int sm_runner_pool_set_limits(sm_runner *r, unsigned max_size, unsigned parallel,
                              sm_error *err) {
  if (r == NULL) return sm_error_set(err, SM_EINVAL, "no runner given");
  return sandbox_pool_set_limits(r->ctx.pool, max_size, parallel, err);
}

void sm_runner_set_background_removal(sm_runner *r, int on) {
  if (r) sandbox_pool_set_background_removal(r->ctx.pool, on);
}

unsigned sm_runner_pool_size(sm_runner *r) { return r ? sandbox_pool_size(r->ctx.pool) : 0; }

int sm_runner_pool_prepare(sm_runner *r, const sm_run_request *req, sm_error *err) {
  if (r == NULL || req == NULL) return sm_error_set(err, SM_EINVAL, "no runner or request");
  return sandbox_pool_prepare(r->ctx.pool, req, err);
}

void sm_runner_pool_drain(sm_runner *r) {
  if (r) sandbox_pool_drain(r->ctx.pool);
}

int sm_runner_settle(sm_runner *r, double timeout_s, sm_error *err) {
  return r ? sandbox_pool_settle(r->ctx.pool, timeout_s, err) : 0;
}

void sm_runner_pool_stats(sm_runner *r, sm_pool_stats *out) {
  if (r) sandbox_pool_stats_get(r->ctx.pool, out);
  else memset(out, 0, sizeof *out);
}
