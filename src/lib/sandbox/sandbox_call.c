/* The call driver of the container modes (sandbox_call.h). One call:
 *   acquire (the backend: backend.h) -> its exec path (an agent session,
 *   or for a leased call a container of its own: lease_box.h) ->
 *   workspace in -> environment -> the exec (exec.c) -> workspace out ->
 *   release.
 * Everything in the sandbox goes through the engine the backend hands back
 * (c->e). A keyed sandbox can vanish between lookup and exec (a forced
 * reap), and a pooled one can be gone: then the call looks it up (and
 * creates it) once more, when the backend says so (backend->gone). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/workspace.h>

#include "common/cleanup.h"
#include "common/unconst.h"
#include "sandbox/backend.h"
#include "sandbox/agent.h"
#include "sandbox/sandbox_call.h"
#include "sandbox/capture.h"
#include "sandbox/env.h"
#include "sandbox/exec.h"
#include "sandbox/lease_box.h"
#include "sandbox/network.h"
#include "sandbox/pool.h"
#include "sandbox/sandbox_result.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"
#include "sandbox/tool_route.h"
#include "sandbox/ws_copy_out.h"
#include "sandbox/ws_open.h"

/* sm_workspace_target.install: the copy in of a sandbox that may run
 * processes is extracted by the agent binary as the sandbox's user. */
typedef struct unpacker_ctx {
  sandbox_agents *agents;
  sm_engine *e;
  const char *cid;
} unpacker_ctx;

/* What one call holds while it runs. */
typedef struct call {
  const sandbox_ctx *ctx;
  const sm_run_request *req;
  sm_run_result *out;
  sm_engine *e;        /* the sandbox's engine (on a swarm: the task's node) */
  sm_engine *manager;  /* the runner's engine (on a swarm: the manager) */
  sandbox_box sb;
  int held;            /* sb is acquired: release it */
  int attempt;         /* 0, or 1 when the sandbox was gone and looked up again */
  int may_retry;       /* the failure may be a sandbox gone since it was found */
  sandbox_exec_target t;
  sandbox_thaw_job *thaw_job; /* a thaw the call's answer does not wait for */
  sandbox_lease lease;  /* a leased call: where it runs (lease_box.h) */
  char unpacker[128];
  unpacker_ctx uctx;
  sm_workspace_target target;
  sm_sync_mode sync;
  sm_workspace_sync *ws;
  sandbox_ws_open wsopen; /* ws being opened on a thread */
  sandbox_capture cap;
  common_strv env;
  sandbox_exec_outcome oc;
  sm_run_request helper_req;
  const char **helper_argv;
  int sync_failed;
  sm_error sync_err;
} call;

/* The call goes over an agent session when one is parked for this
 * container (the pool opened it) or, in a keyed sandbox this runner has
 * used before, when one can be opened (see agent.c). So does a keyed
 * sandbox's first call here when it copies a workspace into a sandbox made
 * before: the copy in that made it installed the agent (its unpacker), and
 * over a session the copy out learns from the agent's digest that nothing
 * changed, where an engine exec would list the whole workspace. */
static int take_agent(const sandbox_ctx *ctx, sm_engine *e, const sandbox_box *sb,
                      const sm_run_request *req, sm_sync_mode sync, sandbox_exec_target *t,
                      sm_error *err) {
  sandbox_agents *a = ctx->agents;
  if (a == NULL || !sandbox_agents_enabled(a)) return 0;
  int keyed = sb->mode != SM_MODE_PER_TOOL;
  int open_new = keyed && (sb->cached || ctx->backend->sessions_at_once) ? SM_AGENT_OPEN
                 : keyed && sb->reused && req->workspace && sync == SM_SYNC_INOUT
                     ? SM_AGENT_OPEN_INSTALLED
                     : SM_AGENT_IDLE_ONLY;
  /* A session parked for this very container serves any keyed call: one
   * found again without the runner's cache (thawed after a freeze, which
   * ends no process) takes it instead of an engine exec. */
  if (!open_new && !keyed && !sb->pooled) return 0;
  int rc = sandbox_agent_take(a, e, sb->id, sb->user, open_new, &t->agent);
  if (rc) return sm_error_set(err, rc, "the sandbox %s is gone", sb->name);
  if (t->agent) t->agents = a;
  else if (open_new) sandbox_agent_note_fallback(a);
  return 0;
}

/* Parks the session for the sandbox's next call (keep) or closes it. */
static void drop_agent(sandbox_exec_target *t, int keep) {
  if (t->agent && keep) sandbox_agent_give_back(t->agents, t->agent);
  else sandbox_agent_close(t->agent);
  t->agent = NULL;
  t->agents = NULL;
}

/* sm_workspace_target.run over the call's session; 1 (use an engine exec)
 * once the session is broken, e.g. the tool killed the agent. */
static int run_via_agent(void *ud, const char *const *argv, size_t argc, sm_read_fn in,
                         void *in_ud, sm_output_fn out, void *out_ud, int *exit_code,
                         sm_error *err) {
  sandbox_exec_target *t = ud;
  if (t->agent == NULL || sandbox_agent_broken(t->agent)) return 1;
  return sandbox_agent_run(t->agent, argv, argc, in, in_ud, out, out_ud,
                           in ? 3600 * 1000 : 300 * 1000, exit_code, err);
}

static int install_unpacker(void *ud, sm_error *err) {
  unpacker_ctx *u = ud;
  return sandbox_agent_install(u->agents, u->e, u->cid, err);
}

static void helper_dispose(const char **argv) {
  if (argv) free(SM_UNCONST(argv[0]));
  free(argv);
}

/* A call of sandman's helper: the same request with the helper's path in
 * front of its arguments, once the helper is installed in container cid. */
static int helper_call(const sandbox_ctx *ctx, sm_engine *e, const char *cid,
                       const sm_run_request *req, sm_run_request *out, const char ***argv,
                       sm_error *err) {
  if (!req->helper) return 0;
  helper_dispose(*argv);
  *argv = calloc(req->argc + 2, sizeof **argv);
  cleanup_free char *path = malloc(128);
  if (*argv == NULL || path == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  sandbox_agent_binary_path(path, 128);
  int rc = sandbox_agent_install(ctx->agents, e, cid, err);
  if (rc) return sm_error_wrap(err, "installing sandman's helper in the sandbox");
  (*argv)[0] = steal_pointer(&path); /* freed with the array (below) */
  for (size_t i = 0; i < req->argc; i++) (*argv)[i + 1] = req->argv[i];
  *out = *req;
  out->argv = *argv;
  out->argc = req->argc + 1;
  return 0;
}

/* The sandbox went since it was found: look it up again (the backend says). */
static int gone(const call *c, int rc) {
  return c->ctx->backend->gone && c->ctx->backend->gone(&c->sb, rc);
}

/* The sandbox's name, volume and key (keyed modes; per_tool gets them when
 * acquired). */
static int call_names(call *c, sm_error *err) {
  sandbox_box *sb = &c->sb;
  sb->mode = c->req->settings.mode;
  sm_sandbox_settings_hash(&c->req->settings, sb->hash);
  /* Named, it runs there or nowhere: never in a fresh per_tool container. */
  if (c->req->sandbox && sb->mode != SM_MODE_PER_RUN && sb->mode != SM_MODE_PER_WORKER)
    return sm_error_set(err, SM_EINVAL, "a sandbox named by its id is per_run or per_worker");
  if (sb->mode == SM_MODE_PER_TOOL) return 0;
  if (c->req->sandbox) {
    /* Named by the runner: found under its name, never made. */
    if (strcmp(c->ctx->backend->name, "docker") != 0)
      return sm_error_set(err, SM_EUNSUPPORTED, "sandboxes named by their id need the docker backend");
    snprintf(sb->name, sizeof sb->name, "%s", c->req->sandbox);
    snprintf(sb->volume, sizeof sb->volume, "%s-ws", sb->name);
    sb->scope_key[0] = '\0';
    return 0;
  }
  int rc = sandbox_scope_key(c->req, sb->mode, sb->scope_key, sizeof sb->scope_key, err);
  if (rc == 0)
    rc = sandbox_keyed_name(c->ctx->instance, sb->mode, sb->scope_key, sb->name, sizeof sb->name,
                            err);
  if (rc == 0) snprintf(sb->volume, sizeof sb->volume, "%s-ws", sb->name);
  return rc;
}

/* Finds or makes the sandbox; the call's exec target points at it. */
static int call_acquire(call *c, sm_error *err) {
  const sandbox_ctx *ctx = c->ctx;
  const sm_run_request *req = c->req;
  sandbox_box *sb = &c->sb;
  sb->reused = 0;
  sb->pooled = 0;
  sb->cached = 0;
  sb->made = 0;
  sb->uncached = 0;
  sb->thaw_later = 0;
  sb->carried = NULL;
  sb->id[0] = '\0';
  int rc = ctx->backend->acquire(ctx, c->manager, req, sb, &c->e, err);
  if (rc) return rc;
  c->held = 1;
  c->t.engine = c->e;
  /* A sandbox made before (or by the pool): this call's policy, which a
   * reloaded configuration may have changed since. */
  if (sandbox_allowlist(&req->settings) && (sb->reused || sb->pooled) &&
      (rc = sandbox_egress_apply(ctx->egress(ctx->runner), c->e, req, NULL, sb->id, sb->name,
                                 err)) != 0)
    return rc;
  sm_run_result *out = c->out;
  snprintf(out->sandbox_id, sizeof out->sandbox_id, "%s", sb->id);
  out->reused = sb->reused;
  snprintf(out->replaced_previous, sizeof out->replaced_previous, "%s", sb->replaced);
  snprintf(out->replaced_because, sizeof out->replaced_because, "%s", sb->because);
  out->replaced_workspace = sb->replaced[0] ? sb->carried : NULL;
  snprintf(out->resumed, sizeof out->resumed, "%s", sb->resumed);
  /* Every exec of the call names its user: the container runs as root. */
  snprintf(sb->user, sizeof sb->user, "%d:%d", sb->uid, sb->gid);
  c->t.container_id = sb->id;
  c->t.user = sb->user;
  c->t.per_tool = sb->mode == SM_MODE_PER_TOOL;
  return 0;
}

static int call_thaw(void *ud, sm_error *err) {
  call *c = ud;
  int rc = c->ctx->backend->thaw(c->ctx, c->e, c->req, &c->sb, err);
  snprintf(c->out->resumed, sizeof c->out->resumed, "%s", c->sb.resumed);
  return rc;
}

static int call_thaw_start(void *ud, sandbox_thaw_job **out, sm_error *err) {
  call *c = ud;
  if (c->ctx->backend->thaw_start == NULL)
    return sm_error_set(err, SM_EUNSUPPORTED, "no thaw beside the call on this backend");
  return c->ctx->backend->thaw_start(c->ctx, c->e, c->req, &c->sb, out, err);
}

/* The thaw beside the call, waited for: as call_thaw's end. */
static void call_thaw_settle(void *ud, int thawed) {
  call *c = ud;
  c->sb.thaw_later = 0;
  if (!thawed) c->sb.resumed[0] = '\0'; /* it ran already: nothing was resumed */
  snprintf(c->out->resumed, sizeof c->out->resumed, "%s", c->sb.resumed);
}

/* A sandbox acquired still frozen (acquire.c, thaw_may_wait): thawed by
 * the exec right after the call's frame went to the parked session it
 * took (beside the call when it can: exec_thaw.c), or now when it took
 * none. */
static int call_thaw_plan(call *c, sm_error *err) {
  if (c->ctx->backend->thaw == NULL) return sm_error_set(err, SM_EINVAL, "no thaw on this backend");
  if (c->t.agent) {
    c->t.thaw = call_thaw;
    c->t.thaw_ud = c;
    c->t.thaw_start = call_thaw_start;
    c->t.thaw_settle = call_thaw_settle;
    c->t.thaw_left = &c->thaw_job;
    return 0;
  }
  return call_thaw(c, err);
}

/* How the call runs in it. A call with leased credentials never goes
 * through the agent (a process of the sandbox's user that earlier calls
 * could have touched) and never shares a process namespace with what
 * earlier calls left: in a shared sandbox it runs in a container of its
 * own on the sandbox's /workspace, which dies with it (lease_box.h). Other
 * calls go over an agent session when there is one. */
static int call_exec_path(call *c, sm_error *err) {
  const sandbox_box *sb = &c->sb;
  int leased = c->req->n_secret_env > 0;
  c->may_retry = 1;
  if (leased && sb->mode != SM_MODE_PER_TOOL && !c->ctx->backend->exclusive) {
    return sm_error_set(err, SM_ESANDBOX,
                        "a call with leased credentials runs in a container of its own beside "
                        "its sandbox, which the %s backend cannot make for %s sandboxes; lease "
                        "in mode per_tool",
                        c->ctx->backend->name, sm_mode_name(sb->mode));
  }
  if (c->req->tty) {
    /* A terminal holds a session of its own for its whole life. */
    int rc = sandbox_agent_open(c->ctx->agents, c->e, sb->id, sb->user, &c->t.agent, err);
    if (rc == 0) c->t.agents = c->ctx->agents;
    else if (!gone(c, rc))
      sm_error_wrap(err, "opening sandman's agent for a terminal in %s", sb->name);
    return rc;
  }
  if (!leased) {
    int rc = take_agent(c->ctx, c->e, sb, c->req, c->sync, &c->t, err);
    if (rc == 0 && sb->thaw_later) rc = call_thaw_plan(c, err);
    return rc;
  }
  int rc = sandbox_lease_open(c->ctx, c->e, c->req, sb, &c->lease, err);
  if (rc == 0 && c->lease.id[0]) c->t.container_id = c->lease.id;
  return rc;
}

/* Where the call's execs go: its lease container, else its sandbox. */
static const char *call_container(const call *c) { return c->t.container_id; }

/* The copy's target: a per_tool sandbox is this call's alone and nothing
 * has run in it yet: the engine may extract its copy in. Any other copy in
 * goes through the unpacker, as the sandbox's user. */
static void call_target(call *c) {
  const sandbox_box *sb = &c->sb;
  sandbox_agent_binary_path(c->unpacker, sizeof c->unpacker);
  c->uctx = (unpacker_ctx){c->ctx->agents, c->e, call_container(c)};
  c->target = (sm_workspace_target){.engine = c->e,
                                    .container_id = call_container(c),
                                    .sandbox_path = "/workspace",
                                    .uid = sb->uid,
                                    .gid = sb->gid,
                                    .untouched = sb->mode == SM_MODE_PER_TOOL,
                                    .unpacker = c->unpacker,
                                    .install = install_unpacker,
                                    .install_ud = &c->uctx,
                                    /* A lease container works on the sandbox's volume. */
                                    .workspace_of = c->lease.id[0] ? sb->id : NULL};
  if (c->t.agent) {
    /* The workspace's listings and deletes go over the session too. */
    c->target.run = run_via_agent;
    c->target.run_ud = &c->t;
  }
}

/* Where this sandbox's manifest is kept ("" for per_tool: none). */
static void workspace_manifest(const call *c, char *out, size_t len) {
  if (c->sb.mode == SM_MODE_PER_TOOL) {
    out[0] = '\0';
    return;
  }
  snprintf(out, len, "%s/workspaces/%s.manifest", c->ctx->state_dir,
           c->ctx->backend->state_name(&c->sb));
}

/* Once the call holds a keyed sandbox made before: its workspace state is
 * opened, and the host folder walked, while the call waits for its agent
 * session. (A new sandbox's first copy in starts its upload before the
 * walk instead: early.c.) */
static void workspace_open_ahead(call *c) {
  if (!c->req->workspace || c->sync == SM_SYNC_NONE || c->ws || c->wsopen.running ||
      c->sb.mode == SM_MODE_PER_TOOL || !c->sb.reused)
    return;
  char manifest[PATH_MAX];
  workspace_manifest(c, manifest, sizeof manifest);
  sandbox_ws_open_start(&c->wsopen, c->req, manifest);
}

/* The workspace state of this sandbox (once per call: a retry reloads it). */
static int call_workspace_open(call *c, sm_error *err) {
  const sm_run_request *req = c->req;
  if (!req->workspace || c->sync == SM_SYNC_NONE || c->ws) return 0;
  if (c->wsopen.running) return sandbox_ws_open_finish(&c->wsopen, &c->ws, err);
  char manifest[PATH_MAX];
  workspace_manifest(c, manifest, sizeof manifest);
  return sandbox_ws_open_now(req, manifest, &c->ws, err);
}

/* A step in the sandbox failed: as the backend reads it (the swarm: a
 * node's loss is said so). */
static int backend_failed(call *c, int rc, sm_error *err) {
  return rc ? c->ctx->backend->failed(c->ctx, c->manager, &c->sb, rc, err) : 0;
}

static int call_workspace_in(call *c, sm_error *err) {
  call_target(c);
  c->may_retry = 0;
  int rc = call_workspace_open(c, err);
  if (rc || c->ws == NULL) return rc;
  c->may_retry = 1;
  rc = backend_failed(c, sm_workspace_sync_in(c->ws, &c->target, err), err);
  if (rc && !(c->attempt == 0 && gone(c, rc)))
    sm_error_wrap(err, "copying the workspace into %s", c->sb.name);
  return rc;
}

/* The call's scrubbed environment, with its marker. */
static int call_env(call *c, sm_error *err) {
  const sm_run_request *req = c->req;
  char token[17], marker[64];
  c->may_retry = 0;
  int rc = sm_random_hex(token, 8, err);
  if (rc) return rc;
  snprintf(marker, sizeof marker, "SANDMAN_CALL=%s", token);
  common_strv_dispose(&c->env);
  sandbox_env_spec es = {.home = "/workspace", .tmpdir = "/tmp", .marker = marker};
  sandbox_env_from_request(&es, req);
  return sandbox_env_build(&es, &c->env, err);
}

/* The tool runs; then its changes come out. */
static int call_exec(call *c, sm_error *err) {
  const sm_run_request *req = c->req;
  c->may_retry = 1;
  int rc = backend_failed(
      c, helper_call(c->ctx, c->e, call_container(c), req, &c->helper_req, &c->helper_argv, err),
      err);
  if (rc) return rc;
  /* The host-tool route answers for this call's processes while it runs:
   * it knows them by the call's first process, which the wrapper names. */
  sandbox_route_call *route = NULL;
  if ((rc = sandbox_route_begin(c->ctx->routes, c->ctx->agents, c->e, call_container(c),
                                c->sb.name, req, &c->env, &route, err)) != 0)
    return rc;
  c->t.on_start = route ? sandbox_route_started : NULL;
  c->t.on_start_ud = route;
  /* From here on leased values may be in the sandbox, whatever follows. */
  c->out->credentials_passed = req->n_secret_env > 0;
  rc = sandbox_exec_call(&c->t, req->helper ? &c->helper_req : req, &c->env, &c->cap, &c->oc, err);
  c->t.on_start = NULL;
  c->t.on_start_ud = NULL;
  /* A tool that started is never run a second time, whatever failed after. */
  if (c->oc.began) c->may_retry = 0;
  /* A per_tool sandbox or a lease container goes after the call: its route too. */
  sandbox_route_end(c->ctx->routes, route,
                    c->sb.mode == SM_MODE_PER_TOOL || c->lease.id[0] != '\0');
  rc = backend_failed(c, rc, err);
  if (rc) return rc;
  c->out->started = 1;
  if (c->ws && c->sync == SM_SYNC_INOUT) {
    /* The tool ran: a failed copy out is added to its result. */
    c->sync_failed = sandbox_ws_copy_out(c->out, c->ws, &c->target, c->sb.name, &c->sync_err) != 0;
    /* On a swarm the copy out may have failed because the node is gone. */
    if (c->sync_failed) backend_failed(c, c->sync_err.code, &c->sync_err);
  }
  return 0;
}

static int call_attempt(call *c, sm_error *err) {
  c->may_retry = 0;
  if (c->req->host_route && !c->ctx->backend->host_route)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "the host-tool route is not available on the %s backend: run this "
                        "agent's calls on the docker backend",
                        c->ctx->backend->name);
  if ((c->req->tty || c->req->existing || c->req->from_snapshot) &&
      c->ctx->backend != &sandbox_backend_docker)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "terminals, sandman exec and forks need the docker backend, not %s",
                        c->ctx->backend->name);
  int rc = call_acquire(c, err);
  if (rc == 0) workspace_open_ahead(c);
  if (rc == 0) rc = call_exec_path(c, err);
  if (rc == 0) rc = call_workspace_in(c, err);
  if (rc == 0) rc = call_env(c, err);
  if (rc == 0) rc = call_exec(c, err);
  return rc;
}

static void call_release(call *c) {
  if (!c->held) return;
  c->ctx->backend->release(c->ctx, c->manager, c->req, &c->sb);
  c->held = 0;
}

/* What the call held goes; its output and outcome go into the result. */
static int call_end(call *c, int rc, sm_error *err) {
  sandbox_ws_open_drop(&c->wsopen);
  call_release(c);
  if (c->ws) sm_workspace_sync_free(c->ws);
  common_strv_dispose(&c->env);
  helper_dispose(c->helper_argv);
  int keep = sandbox_capture_to_result(&c->cap, c->out);
  sandbox_capture_dispose(&c->cap);
  if (rc) {
    sandbox_result_fail(c->out, sm_error_failure_kind(rc), err);
    return 0;
  }
  if (keep) {
    /* The tool ran: its result says what was lost (sm_run's contract). */
    sm_error_set(err, SM_ENOMEM, "keeping the tool's output");
    sandbox_result_fail(c->out, SM_FAIL_SANDBOX, err);
    return 0;
  }
  sandbox_result_apply_outcome(c->out, &c->oc, &c->req->settings);
  if (c->sync_failed) sandbox_result_sync_failed(c->out, &c->sync_err);
  return 0;
}

int sandbox_run_container(const sandbox_ctx *ctx, const sm_run_request *req, sm_run_result *out,
                          sm_error *err) {
  const sm_sandbox_settings *s = &req->settings;
  cleanup_free call *c = calloc(1, sizeof *c);
  if (c == NULL) {
    sm_error_set(err, SM_ENOMEM, NULL);
    sandbox_result_fail(out, SM_FAIL_SANDBOX, err);
    return 0;
  }
  c->ctx = ctx;
  c->req = req;
  c->out = out;
  int rc = ctx->engine(ctx->runner, &c->e, err);
  if (rc) {
    sandbox_result_fail(out, sm_error_failure_kind(rc), err);
    return 0;
  }
  c->manager = c->e;
  if ((rc = call_names(c, err)) != 0) {
    sandbox_result_fail(out, SM_FAIL_SANDBOX, err);
    return rc;
  }
  sandbox_capture_init(&c->cap, s->stdout_cap, s->stderr_cap, req->on_output, req->on_output_ud);
  c->cap.forward_only = req->stdout_forward_only;
  c->t.engine = c->e;
  c->sync = req->sync == SM_SYNC_DEFAULT ? SM_SYNC_INOUT : req->sync;
  for (c->attempt = 0; c->attempt < 2; c->attempt++) {
    rc = call_attempt(c, err);
    if (c->thaw_job) { /* its record and audit row are written when the engine answers */
      sandbox_thaw_job_leave(c->thaw_job);
      c->thaw_job = NULL;
    }
    sandbox_lease_close(ctx, c->e, req, &c->lease);
    if (rc && c->held && c->may_retry && c->attempt == 0 && gone(c, rc)) {
      drop_agent(&c->t, 0);
      ctx->backend->release_gone(ctx, c->manager, req, &c->sb);
      c->held = 0;
      sandbox_ws_open_drop(&c->wsopen);
      if (c->ws) sm_workspace_sync_free(c->ws);
      c->ws = NULL;
      continue;
    }
    break;
  }
  if (rc == 0) {
    /* A keyed sandbox's first call here went through the engine: its next
     * one can find a session ready (long-running processes only). */
    if (!ctx->backend->sessions_at_once && c->t.agent == NULL && c->sb.mode != SM_MODE_PER_TOOL &&
        !c->sb.cached && c->sb.id[0] && sandbox_agents_enabled(ctx->agents))
      sandbox_pool_prepare_agent_later(ctx->pool, c->sb.id, c->sb.name, c->sb.user);
    /* A per_tool container goes now: its session goes with it; a
     * terminal's was its own. */
    drop_agent(&c->t, c->sb.mode != SM_MODE_PER_TOOL && req->tty == NULL);
  } else {
    drop_agent(&c->t, 0);
  }
  return call_end(c, rc, err);
}
