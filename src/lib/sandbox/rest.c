/* A keyed sandbox's tiers of rest and its return (rest.h, docs/state.md).
 *
 * Every change holds the sandbox's key lock (keys/create-<name>, the lock a
 * call holds while it looks the sandbox up), so a change and a call's
 * lookup never overlap; a pause also holds the busy lock exclusively, so
 * no call is in flight while the sandbox goes to rest (it waits for them,
 * or refuses with no_wait).
 *
 * freeze is the engine's pause. stop freezes the sandbox, saves its
 * /workspace (a tmpfs: it goes when the container stops) as a tar in the
 * state directory, then kills it; it comes back by a start, with its
 * /workspace, /tmp's mode and the agent put back (the host-tool route and
 * the egress relay are made again by the next call that needs them).
 * hibernate is rest_hibernate.c's.
 *
 * The record (rest_record.h) is written with `pending` before a change and
 * without it after, so whoever finds a pending record (the next call, the
 * next pause or resume) finishes what was done far enough and undoes the
 * rest: a crash never leaves a half-rested sandbox that no longer answers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/egress.h>
#include <sandman/log.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "common/thread.h"
#include "sandbox/agent.h"
#include "sandbox/lifecycle.h"
#include "sandbox/rest.h"
#include "sandbox/spec.h"
#include "sandbox/ws_fill.h"
#include "sandbox/ws_save.h"

#define HOLD_POLL_MS 100
#define DEFAULT_WAIT_S 60
#define STOP_WAIT_MS 30000

static const char *const tier_names[] = {"freeze", "stop", "hibernate"};
static const char *const tier_states[] = {"frozen", "stopped", "hibernated"};

const char *sm_tier_name(sm_tier t) {
  return (unsigned)t < 3 ? tier_names[t] : "freeze";
}

const char *sm_tier_state(sm_tier t) {
  return (unsigned)t < 3 ? tier_states[t] : "frozen";
}

int sm_tier_parse(const char *s, sm_tier *out, sm_error *err) {
  for (int i = 0; i < 3; i++)
    if (s && strcmp(s, tier_names[i]) == 0) {
      *out = (sm_tier)i;
      return 0;
    }
  return sm_error_set(err, SM_EINVAL, "unknown tier '%s': use freeze, stop or hibernate",
                      s ? s : "");
}

/* ---- the state a sandbox is in ---- */

static int is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* The engine's word and the record, read together. */
static void derive(const char *engine_state, const sandbox_rest_record *rec, int has_rec,
                   char *out, double *since) {
  double when = 0;
  const char *st = engine_state ? engine_state : "";
  if (is(st, "paused")) {
    st = "frozen";
    if (has_rec && is(rec->state, "frozen")) when = rec->since;
  } else if (is(st, "running")) {
    if (has_rec && is(rec->state, "running")) when = rec->since;
  } else if (has_rec && !rec->pending[0] && (is(rec->state, "stopped") || is(rec->state, "hibernated"))) {
    st = rec->state;
    when = rec->since;
  } else if (has_rec && rec->ws_saved && (is(rec->pending, "stopped") || is(rec->pending, "hibernated"))) {
    st = rec->pending; /* saved whole: the next look finishes it */
    when = rec->since;
  } else if (has_rec && is(rec->pending, "running") && (is(rec->prior, "stopped") || is(rec->prior, "hibernated"))) {
    st = rec->prior; /* a resume cut short before it ran: still at rest, the next look resumes it */
    when = rec->since;
  }
  snprintf(out, SM_REST_STATE_MAX, "%s", st);
  if (since) *since = when;
}

void sm_sandbox_rest_state(const char *state_dir, const char *name, const char *engine_state,
                           char *out, double *since) {
  sandbox_rest_record rec;
  sm_error ignore = SM_ERROR_INIT;
  int has = sandbox_rest_read(state_dir, name, &rec, &ignore) == 0;
  derive(engine_state, &rec, has, out, since);
}

int sm_keep_rest_side(const char *state_dir, const char *container_name, const char *id,
                      char *base, size_t len) {
  static const char *const sides[] = {"-hib", "-next"};
  size_t n = container_name ? strlen(container_name) : 0;
  for (int i = 0; i < 2; i++) {
    size_t s = strlen(sides[i]);
    if (n <= s || n - s >= len || strcmp(container_name + n - s, sides[i]) != 0) continue;
    snprintf(base, len, "%.*s", (int)(n - s), container_name);
    sandbox_rest_record rec;
    sm_error ignore = SM_ERROR_INIT;
    if (sandbox_rest_read(state_dir, base, &rec, &ignore) != 0 || !is(rec.pending, "hibernated"))
      return 0;
    if (i == 0 && is(rec.id, id)) return 1;
    if (i == 1 && is(rec.next_id, id)) return 2;
    return 0;
  }
  return 0;
}

void sm_keep_rest_successor(const char *state_dir, const char *name, char *id, size_t len) {
  sandbox_rest_record rec;
  sm_error ignore = SM_ERROR_INIT;
  int has = sandbox_rest_read(state_dir, name, &rec, &ignore) == 0 && rec.next_id[0];
  snprintf(id, len, "%s", has ? rec.next_id : "");
}

int sandbox_rest_unsettled(const char *state_dir, const char *name, unsigned generation) {
  sandbox_rest_record rec;
  sm_error ignore = SM_ERROR_INIT;
  int rc = sandbox_rest_read(state_dir, name, &rec, &ignore);
  if (rc == SM_ENOTFOUND) return generation != 0;
  if (rc) return 1;
  return rec.pending[0] || !is(rec.state, "running") || rec.generation != generation;
}

int sandbox_rest_only_frozen(const char *state_dir, const char *name, unsigned generation) {
  sandbox_rest_record rec;
  sm_error ignore = SM_ERROR_INIT;
  return sandbox_rest_read(state_dir, name, &rec, &ignore) == 0 && !rec.pending[0] &&
         is(rec.state, "frozen") && rec.generation == generation;
}

int sandbox_rest_resting(const char *state_dir, const char *name) {
  sandbox_rest_record rec;
  sm_error ignore = SM_ERROR_INIT;
  int rc = sandbox_rest_read(state_dir, name, &rec, &ignore);
  if (rc == SM_ENOTFOUND) return 0;
  return rc != 0 || rec.pending[0] || !is(rec.state, "running");
}

unsigned sandbox_rest_generation(const char *state_dir, const char *name) {
  sandbox_rest_record rec;
  sm_error ignore = SM_ERROR_INIT;
  return sandbox_rest_read(state_dir, name, &rec, &ignore) == 0 ? rec.generation : 0;
}

/* ---- one change ---- */

static const char *status_of(json_object *insp) { return sandbox_json_str(insp, "State", "Status"); }
static const char *id_of(sandbox_rest_op *op) {
  const char *id = sandbox_json_str(op->insp, "Id", NULL);
  return id ? id : op->name;
}

static void op_init(sandbox_rest_op *op, const sandbox_ctx *ctx, sm_engine *e, const char *name) {
  memset(op, 0, sizeof *op);
  op->ctx = ctx;
  op->e = e;
  op->name = name;
  op->t0 = sm_monotonic_ms();
}

static void op_dispose(sandbox_rest_op *op) {
  json_object_put(op->insp);
  op->insp = NULL;
}

/* Reads the record and inspects the sandbox (by the record's container
 * when its name is missing: a hibernation cut short between two renames). */
static int op_look(sandbox_rest_op *op, sm_error *err) {
  op_dispose(op);
  int rc = sandbox_rest_read(op->ctx->state_dir, op->name, &op->rec, err);
  op->has_rec = rc == 0;
  if (rc && rc != SM_ENOTFOUND) return sm_error_wrap(err, "sandbox %s", op->name);
  if (!op->has_rec) memset(&op->rec, 0, sizeof op->rec);
  rc = sm_engine_container_inspect(op->e, op->name, &op->insp, err);
  if (rc == SM_ENOTFOUND && op->has_rec && op->rec.id[0]) {
    sm_error_clear(err);
    rc = sm_engine_container_inspect(op->e, op->rec.id, &op->insp, err);
  }
  if (rc == SM_ENOTFOUND) return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s", op->name);
  if (rc) return sm_error_wrap(err, "looking up sandbox %s", op->name);
  derive(status_of(op->insp), &op->rec, op->has_rec, op->state, NULL);
  return 0;
}

static int op_put(sandbox_rest_op *op, sm_error *err) {
  op->has_rec = 1;
  return sandbox_rest_write(op->ctx->state_dir, op->name, &op->rec, err);
}

/* The audit trail, the log and the program's hook hear of a change. */
void sandbox_rest_notify(sandbox_rest_op *op, const char *event, const char *state,
                      const char *previous, const char *previous_id, const char *why) {
  const sandbox_ctx *ctx = op->ctx;
  char msg[256];
  snprintf(msg, sizeof msg, "%s -> %s%s%s", previous, state, why ? ": " : "", why ? why : "");
  sm_log(SM_LOG_DEBUG, "sandbox %s: %s", op->name, msg);
  if (ctx->audit) {
    sm_audit_event ev = SM_AUDIT_EVENT_INIT;
    ev.name = event;
    ev.request_id = sm_log_request_id();
    ev.sandbox = op->name;
    ev.mode = sandbox_label_of(op->insp, "mode");
    ev.project = sandbox_label_of(op->insp, "project");
    ev.run_id = sandbox_label_of(op->insp, "run");
    ev.worker = sandbox_label_of(op->insp, "worker");
    ev.agent = sandbox_label_of(op->insp, "agent");
    ev.message = msg;
    ev.duration_ms = sm_monotonic_ms() - op->t0;
    sm_error e = SM_ERROR_INIT;
    if (sm_audit_record(ctx->audit, &ev, &e) != 0) sm_log(SM_LOG_WARN, "audit: %s", e.message);
  }
  if (ctx->state_hook) {
    sm_state_event se = {op->name, id_of(op), previous_id, state, previous};
    ctx->state_hook(ctx->state_hook_ud, &se);
  }
}

static int ignore_conflict(int rc, sm_error *err) {
  if (rc == SM_ECONFLICT) {
    sm_error_clear(err);
    return 0;
  }
  return rc;
}

/* ---- freeze ---- */

static int do_freeze(sandbox_rest_op *op, sm_error *err) {
  sandbox_rest_record before = op->rec;
  int had = op->has_rec;
  snprintf(op->rec.state, sizeof op->rec.state, "frozen");
  op->rec.pending[0] = op->rec.prior[0] = '\0';
  op->rec.since = sm_now();
  snprintf(op->rec.id, sizeof op->rec.id, "%s", id_of(op));
  int rc = op_put(op, err);
  if (rc == 0) rc = ignore_conflict(sm_engine_container_pause(op->e, id_of(op), err), err);
  if (rc) {
    sm_error ignore = SM_ERROR_INIT;
    if (had) sandbox_rest_write(op->ctx->state_dir, op->name, &before, &ignore);
    else sandbox_rest_drop(op->ctx->state_dir, op->name);
    return sm_error_wrap(err, "freezing sandbox %s", op->name);
  }
  /* Its parked session outlives the idle sessions' cap while it rests. */
  sandbox_agents_rest(op->ctx->agents, id_of(op));
  return 0;
}

/* The record of a thaw is not flushed: a machine's crash that loses it
 * also stops the container, and a record that says frozen of a running
 * sandbox is put right by the next look (wake_op). */
static int put_thawed(sandbox_rest_op *op, sm_error *err) {
  snprintf(op->rec.state, sizeof op->rec.state, "running");
  op->rec.since = sm_now();
  const char *id = sandbox_json_str(op->insp, "Id", NULL);
  if (id) snprintf(op->rec.id, sizeof op->rec.id, "%s", id);
  op->has_rec = 1;
  return sandbox_rest_write_quick(op->ctx->state_dir, op->name, &op->rec, err);
}

static int resume_frozen(sandbox_rest_op *op, sm_error *err) {
  int rc = ignore_conflict(sm_engine_container_unpause(op->e, id_of(op), err), err);
  if (rc) return sm_error_wrap(err, "unfreezing sandbox %s", op->name);
  return put_thawed(op, err);
}

/* ---- stop ---- */

static int is_gvisor(sm_engine *e, json_object *insp) {
  int gv = 0;
  sm_error ignore = SM_ERROR_INIT;
  const char *rt = sandbox_json_str(insp, "HostConfig", "Runtime");
  if (rt && *rt && sandbox_runtime_present(e, rt, &gv, &ignore) != 0)
    gv = strncmp(rt, "runsc", 5) == 0;
  return gv;
}

/* Its processes end: killed while frozen (runc); gVisor's sandbox cannot
 * take a signal while frozen, so it is thawed first (what runs for that
 * moment writes nothing that is kept: /workspace was saved frozen). */
static int kill_frozen(sandbox_rest_op *op, sm_error *err) {
  const char *id = id_of(op);
  if (is_gvisor(op->e, op->insp)) {
    int rc = ignore_conflict(sm_engine_container_unpause(op->e, id, err), err);
    if (rc) return rc;
  }
  int rc = sm_engine_container_kill(op->e, id, "KILL", err);
  if (rc == SM_ECONFLICT) rc = 0, sm_error_clear(err); /* not running any more */
  if (rc == 0) rc = sm_engine_container_wait(op->e, id, "not-running", STOP_WAIT_MS, NULL, err);
  return rc;
}

/* Undoes a stop that did not get as far as the kill. */
static void stop_undo(sandbox_rest_op *op, const char *prior) {
  sm_error ignore = SM_ERROR_INIT;
  char path[4096];
  if (sandbox_rest_ws_path(op->ctx->state_dir, op->name, path, sizeof path, &ignore) == 0) unlink(path);
  if (is(prior, "running")) sm_engine_container_unpause(op->e, id_of(op), &ignore);
  snprintf(op->rec.state, sizeof op->rec.state, "%s", prior[0] ? prior : "running");
  op->rec.pending[0] = op->rec.prior[0] = '\0';
  op->rec.ws_saved = 0;
  op->rec.workspace_bytes = 0;
  sandbox_rest_write(op->ctx->state_dir, op->name, &op->rec, &ignore);
}

static int do_stop(sandbox_rest_op *op, sm_error *err) {
  char was[SM_REST_STATE_MAX], path[4096];
  snprintf(was, sizeof was, "%s", op->state);
  snprintf(op->rec.prior, sizeof op->rec.prior, "%s", was);
  snprintf(op->rec.pending, sizeof op->rec.pending, "stopped");
  snprintf(op->rec.id, sizeof op->rec.id, "%s", id_of(op));
  op->rec.ws_saved = 0;
  int rc = sandbox_rest_ws_path(op->ctx->state_dir, op->name, path, sizeof path, err);
  if (rc == 0) rc = op_put(op, err);
  if (rc) return rc;
  /* Frozen while /workspace is read: nothing changes under the copy. */
  if (is(was, "running")) rc = ignore_conflict(sm_engine_container_pause(op->e, id_of(op), err), err);
  /* Entries "./..." (as a snapshot's): the agent's unpacker can take them. */
  if (rc == 0)
    rc = sandbox_ws_save_tee(op->e, id_of(op), path, 0, -1, &op->rec.workspace_bytes, err);
  if (rc == 0) {
    op->rec.ws_saved = 1;
    rc = op_put(op, err);
  }
  if (rc == 0) rc = kill_frozen(op, err);
  if (rc) {
    stop_undo(op, was);
    return sm_error_wrap(err, "stopping sandbox %s", op->name);
  }
  sm_error ignore = SM_ERROR_INIT;
  if (sm_egress_revoke(op->e, op->name, &ignore) != 0)
    sm_log(SM_LOG_WARN, "sandbox %s: its egress relay: %s", op->name, ignore.message);
  sandbox_agents_forget(op->ctx->agents, id_of(op));
  snprintf(op->rec.state, sizeof op->rec.state, "stopped");
  op->rec.pending[0] = op->rec.prior[0] = '\0';
  op->rec.since = sm_now();
  return op_put(op, err);
}

/* A stop cut short: kept when /workspace was saved whole and the
 * container stopped, else undone. */
static int stop_recover(sandbox_rest_op *op, sm_error *err) {
  const char *st = status_of(op->insp);
  int down = !is(st, "running") && !is(st, "paused") && !is(st, "restarting");
  if (down && op->rec.ws_saved) {
    sm_error ignore = SM_ERROR_INIT; /* as do_stop: its relay made again by the next call */
    if (sm_egress_revoke(op->e, op->name, &ignore) != 0)
      sm_log(SM_LOG_WARN, "sandbox %s: its egress relay: %s", op->name, ignore.message);
    snprintf(op->rec.state, sizeof op->rec.state, "stopped");
    op->rec.pending[0] = op->rec.prior[0] = '\0';
    return op_put(op, err);
  }
  if (!down) {
    char prior[SM_REST_STATE_MAX];
    snprintf(prior, sizeof prior, "%s", op->rec.prior);
    stop_undo(op, prior);
    return 0;
  }
  /* Stopped before its /workspace was saved: it is gone, as for any
   * sandbox that stopped; its next call replaces it. */
  sandbox_rest_drop(op->ctx->state_dir, op->name);
  return 0;
}

/* Back from stopped: started, /tmp's mode, /workspace and the agent put
 * back. Done again from the start when cut short (each step may repeat). */
static int resume_stopped(sandbox_rest_op *op, sm_error *err) {
  char path[4096];
  snprintf(op->rec.prior, sizeof op->rec.prior, "stopped");
  snprintf(op->rec.pending, sizeof op->rec.pending, "running");
  int rc = sandbox_rest_ws_path(op->ctx->state_dir, op->name, path, sizeof path, err);
  if (rc == 0) rc = op_put(op, err);
  const char *id = id_of(op);
  if (rc == 0) rc = sm_engine_container_start(op->e, id, err);
  if (rc == 0)
    rc = sandbox_fix_tmp(op->e, id, op->name, sandbox_json_str(op->insp, "Image", NULL), err);
  /* Its agent's processes ended: what the runner knew of them is dropped
   * before the fill, whose session (the agent's unpacker puts /workspace
   * back, ws_fill.h) the first call then takes. The binary is still there
   * when /.sandman is a volume of the container's (spec.h: the session is
   * opened at once); on a tmpfs it went with the stop, and the fill
   * installs it again. */
  sandbox_agents_forget(op->ctx->agents, id);
  int open_mode = sandbox_agent_volume_kept(op->insp) ? SM_AGENT_OPEN_INSTALLED : SM_AGENT_OPEN;
  if (rc == 0 && op->rec.ws_saved)
    rc = sandbox_ws_fill(op->ctx->agents, open_mode, op->e, id, sandbox_label_of(op->insp, "user"),
                         path, NULL, err);
  if (rc) return sm_error_wrap(err, "starting sandbox %s again", op->name);
  snprintf(op->rec.state, sizeof op->rec.state, "running");
  op->rec.pending[0] = op->rec.prior[0] = '\0';
  op->rec.since = sm_now();
  op->rec.generation++;
  op->rec.ws_saved = 0;
  op->rec.workspace_bytes = 0;
  rc = op_put(op, err);
  if (rc == 0) unlink(path);
  return rc;
}

/* ---- a change cut short ---- */

static int recover(sandbox_rest_op *op, sm_error *err) {
  if (!op->has_rec || !op->rec.pending[0]) return 0;
  sm_log(SM_LOG_INFO, "sandbox %s: a change to %s was cut short: finishing or undoing it",
         op->name, op->rec.pending);
  sandbox_rest_sweep(op->ctx->state_dir, op->name); /* a save of /workspace cut short */
  int rc = 0;
  if (is(op->rec.pending, "stopped")) rc = stop_recover(op, err);
  else if (is(op->rec.pending, "hibernated")) rc = sandbox_rest_hibernate_recover(op, err);
  else if (is(op->rec.pending, "running") && is(op->rec.prior, "hibernated")) rc = sandbox_rest_restore(op, err);
  else if (is(op->rec.pending, "running")) rc = resume_stopped(op, err);
  if (rc) return rc;
  return op_look(op, err);
}

/* ---- bringing one back ---- */

static int wake_op(sandbox_rest_op *op, char *was, sm_error *err) {
  char prev[SM_REST_STATE_MAX], prev_id[SM_ENGINE_ID_MAX];
  snprintf(prev, sizeof prev, "%s", op->state);
  snprintf(prev_id, sizeof prev_id, "%s", id_of(op));
  int rc = 0;
  if (is(prev, "frozen")) rc = resume_frozen(op, err);
  else if (is(prev, "stopped")) rc = resume_stopped(op, err);
  else if (is(prev, "hibernated")) rc = sandbox_rest_restore(op, err);
  else if (is(prev, "running") && op->has_rec && !op->rec.pending[0] && is(op->rec.state, "frozen")) {
    sm_error ignore = SM_ERROR_INIT; /* thawed, its record lost (or thawed by hand) */
    put_thawed(op, &ignore);
    return 0;
  } else return 0;
  if (rc) return rc;
  if (was) snprintf(was, SM_REST_STATE_MAX, "%s", prev);
  rc = op_look(op, err);
  if (rc == 0) sandbox_rest_notify(op, "sandbox.resumed", "running", prev, prev_id, NULL);
  return rc;
}

int sandbox_rest_wake(const sandbox_ctx *ctx, sm_engine *e, const char *name, char *was,
                      json_object **insp, sm_error *err) {
  was[0] = '\0';
  *insp = NULL;
  sandbox_rest_record probe;
  sm_error ignore = SM_ERROR_INIT;
  if (sandbox_rest_read(ctx->state_dir, name, &probe, &ignore) == SM_ENOTFOUND) return 0;
  sandbox_rest_op op;
  op_init(&op, ctx, e, name);
  int rc = op_look(&op, err);
  if (rc == SM_ENOTFOUND) {
    sm_error_clear(err);
    op_dispose(&op);
    return 0; /* gone: the caller finds it missing */
  }
  if (rc == 0) rc = recover(&op, err);
  if (rc == 0) rc = wake_op(&op, was, err);
  if (rc == 0 && was[0]) {
    *insp = op.insp; /* looked at after the change (wake_op) */
    op.insp = NULL;
  }
  op_dispose(&op);
  if (rc) return sm_error_set(err, rc == SM_ENOTFOUND ? SM_ESANDBOX : rc,
                              "sandbox %s is at rest and could not be brought back: %s", name,
                              err->message);
  return 0;
}

/* The record of a thaw (op.rec read) and, when this thaw did it (tell),
 * its audit row. */
static void thawed_known(sandbox_rest_op *op, const char *id, json_object *who, int tell) {
  sm_error ignore = SM_ERROR_INIT;
  op->insp = who; /* borrowed: its id and labels for the audit row */
  if (put_thawed(op, &ignore) != 0)
    sm_log(SM_LOG_WARN, "sandbox %s: its record: %s", op->name, ignore.message);
  if (tell) sandbox_rest_notify(op, "sandbox.resumed", "running", "frozen", id, NULL);
  op->insp = NULL;
}

int sandbox_rest_thaw_known(const sandbox_ctx *ctx, sm_engine *e, const char *name, const char *id,
                            unsigned generation, json_object *who, int later) {
  sandbox_rest_op op;
  op_init(&op, ctx, e, name);
  sm_error ignore = SM_ERROR_INIT;
  /* Read again under the key lock: still frozen by sandman, in the same
   * container, nothing else changed since the caller's cache. */
  if (sandbox_rest_read(ctx->state_dir, name, &op.rec, &ignore) != 0 || op.rec.pending[0] ||
      !is(op.rec.state, "frozen") || op.rec.generation != generation || strcmp(op.rec.id, id) != 0)
    return 0;
  op.has_rec = 1;
  if (later) return 1;
  /* Gone, not paused, anything else: the caller looks at it the long way. */
  if (sm_engine_container_unpause(e, id, &ignore) != 0) return 0;
  thawed_known(&op, id, who, 1);
  return 1;
}

static int running_unpaused(sm_engine *e, const char *id) {
  json_object *insp = NULL;
  sm_error ignore = SM_ERROR_INIT;
  int yes = sm_engine_container_inspect(e, id, &insp, &ignore) == 0 &&
            is(sandbox_json_str(insp, "State", "Status"), "running");
  json_object_put(insp);
  return yes;
}

int sandbox_rest_thaw_finish(const sandbox_ctx *ctx, sm_engine *e, const char *name, const char *id,
                             json_object *who, int *thawed, sm_error *err) {
  sandbox_rest_op op;
  op_init(&op, ctx, e, name);
  *thawed = 0;
  int rc = sm_engine_container_unpause(e, id, err);
  /* The engine refuses one that is not paused (a 500 from 20.10): running
   * is what the call needs. */
  if (rc && rc != SM_ENOTFOUND && running_unpaused(e, id)) rc = SM_ECONFLICT;
  if (rc && rc != SM_ECONFLICT) return sm_error_wrap(err, "unfreezing sandbox %s", name);
  *thawed = rc == 0;
  sm_error_clear(err);
  sm_error ignore = SM_ERROR_INIT;
  /* The record as it is now (a call beside this one may have written it).
   * Not paused: thawed by hand (or by another call), nothing to tell. */
  op.has_rec = sandbox_rest_read(ctx->state_dir, name, &op.rec, &ignore) == 0;
  thawed_known(&op, id, who, *thawed);
  return 0;
}

/* ---- the public pause and resume ---- */

/* The key lock, and for a pause the sandbox to itself: calls in flight
 * are waited for (o->wait_s) or, with no_wait, refused. */
int sandbox_rest_hold(const sandbox_ctx *ctx, const char *name, const sm_rest_options *o, int alone,
                sm_state_lock **key, sm_state_lock **busy, sm_error *err) {
  char k[SM_NAME_MAX + 16];
  snprintf(k, sizeof k, "create-%s", name);
  int rc = sm_state_key_lock(ctx->state_dir, k, key, err);
  if (rc || !alone) return rc;
  double wait_s = o && o->wait_s > 0 ? o->wait_s : DEFAULT_WAIT_S;
  double deadline = sm_monotonic_ms() + wait_s * 1000.0;
  for (;;) {
    rc = sm_state_exclusive_try(ctx->state_dir, name, busy, err);
    if (rc != SM_EBUSY) break;
    if ((o && o->no_wait) || sm_monotonic_ms() >= deadline) {
      rc = sm_error_set(err, SM_EBUSY, "sandbox %s has a call in flight%s", name,
                        o && o->no_wait ? " (--no-wait)" : "; retry when it has finished");
      break;
    }
    common_sleep_ms(HOLD_POLL_MS);
  }
  if (rc) {
    sm_state_unlock(*key);
    *key = NULL;
  }
  return rc;
}

static int keyed_sandbox(sandbox_rest_op *op, sm_error *err) {
  const char *managed = sandbox_label_of(op->insp, "managed");
  const char *inst = sandbox_label_of(op->insp, "instance");
  const char *mode = sandbox_label_of(op->insp, "mode");
  if (!is(managed, "true") || !is(inst, op->ctx->instance))
    return sm_error_set(err, SM_ENOTFOUND, "no such sandbox: %s", op->name);
  if (!is(mode, "per_run") && !is(mode, "per_worker"))
    return sm_error_set(err, SM_EINVAL,
                        "sandbox %s is %s: only keyed sandboxes (per_run, per_worker) rest", op->name,
                        mode ? mode : "not keyed");
  return 0;
}

static void report(sandbox_rest_op *op, const char *previous, sm_rest_report *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", op->name);
  snprintf(out->id, sizeof out->id, "%s", id_of(op));
  snprintf(out->previous, sizeof out->previous, "%s", previous);
  derive(status_of(op->insp), &op->rec, op->has_rec, out->state, &out->since);
  out->changed = strcmp(previous, out->state) != 0;
  out->duration_ms = sm_monotonic_ms() - op->t0;
  out->workspace_bytes = op->rec.workspace_bytes;
}

/* Where a tier may go from the state the sandbox is in. */
static int tier_allowed(const sandbox_rest_op *op, sm_tier tier, sm_error *err) {
  const char *st = op->state;
  if (is(st, sm_tier_state(tier))) return 0;
  if (is(st, "running") || (is(st, "frozen") && tier != SM_TIER_FREEZE)) return 0;
  return sm_error_set(err, SM_ECONFLICT, "sandbox %s is %s: it cannot %s from there%s", op->name,
                      st, sm_tier_name(tier),
                      is(st, "stopped") || is(st, "hibernated") ? " (resume it first)" : "");
}

static int pause_held(sandbox_rest_op *op, const sm_rest_options *o, sm_rest_report *out,
                      sm_error *err) {
  int rc = op_look(op, err);
  if (rc == 0) rc = keyed_sandbox(op, err);
  if (rc == 0) rc = recover(op, err);
  if (rc == 0) rc = tier_allowed(op, o->tier, err);
  if (rc) return rc;
  char prev[SM_REST_STATE_MAX], prev_id[SM_ENGINE_ID_MAX];
  snprintf(prev, sizeof prev, "%s", op->state);
  snprintf(prev_id, sizeof prev_id, "%s", id_of(op));
  if (!is(prev, sm_tier_state(o->tier))) {
    if (!op->rec.origin[0]) snprintf(op->rec.origin, sizeof op->rec.origin, "%s", id_of(op));
    if (o->tier == SM_TIER_FREEZE) rc = do_freeze(op, err);
    else if (o->tier == SM_TIER_STOP) rc = do_stop(op, err);
    else rc = sandbox_rest_hibernate(op, err);
    if (rc == 0) rc = op_look(op, err);
    if (rc) return rc;
    char ev[32];
    snprintf(ev, sizeof ev, "sandbox.%s", sm_tier_state(o->tier));
    sandbox_rest_notify(op, ev, sm_tier_state(o->tier), prev, prev_id, o->why ? o->why : "requested");
  }
  report(op, prev, out);
  return 0;
}

int sandbox_rest_pause(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                       const sm_rest_options *o, sm_rest_report *out, sm_error *err) {
  sm_rest_options defaults = SM_REST_OPTIONS_INIT;
  if (o == NULL) o = &defaults;
  sm_state_lock *key = NULL, *busy = NULL;
  int rc = sandbox_rest_hold(ctx, name, o, 1, &key, &busy, err);
  if (rc) return rc;
  sandbox_rest_op op;
  op_init(&op, ctx, e, name);
  rc = pause_held(&op, o, out, err);
  op_dispose(&op);
  sm_state_unlock(busy);
  sm_state_unlock(key);
  return rc;
}

int sandbox_rest_resume(const sandbox_ctx *ctx, sm_engine *e, const char *name,
                        const sm_rest_options *o, sm_rest_report *out, sm_error *err) {
  sm_state_lock *key = NULL, *busy = NULL;
  int rc = sandbox_rest_hold(ctx, name, o, 0, &key, &busy, err);
  if (rc) return rc;
  sandbox_rest_op op;
  op_init(&op, ctx, e, name);
  rc = op_look(&op, err);
  if (rc == 0) rc = keyed_sandbox(&op, err);
  if (rc == 0) rc = recover(&op, err);
  char prev[SM_REST_STATE_MAX] = "";
  if (rc == 0) {
    snprintf(prev, sizeof prev, "%s", op.state);
    if (!is(prev, "running") && !is(prev, "frozen") && !is(prev, "stopped") && !is(prev, "hibernated"))
      rc = sm_error_set(err, SM_ECONFLICT,
                        "sandbox %s is %s, not at rest: nothing of it is kept to resume (its "
                        "next call replaces it)",
                        name, prev);
  }
  if (rc == 0) rc = wake_op(&op, NULL, err);
  if (rc == 0) report(&op, prev, out);
  op_dispose(&op);
  sm_state_unlock(key);
  return rc;
}

int sandbox_rest_open(const sandbox_ctx *ctx, sm_engine *e, const char *name, sandbox_rest_op *op,
                      sm_error *err) {
  op_init(op, ctx, e, name);
  int rc = op_look(op, err);
  if (rc == 0) rc = keyed_sandbox(op, err);
  if (rc == 0) rc = recover(op, err);
  return rc;
}

void sandbox_rest_close(sandbox_rest_op *op) { op_dispose(op); }

json_object *sm_rest_report_to_json(const sm_rest_report *r) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  char when[40];
  json_object_object_add(o, "id", json_object_new_string(r->id));
  json_object_object_add(o, "name", json_object_new_string(r->name));
  json_object_object_add(o, "previous", json_object_new_string(r->previous));
  json_object_object_add(o, "state", json_object_new_string(r->state));
  if (r->since > 0) {
    sm_format_time(r->since, when, sizeof when);
    json_object_object_add(o, "since", json_object_new_string(when));
  } else {
    json_object_object_add(o, "since", NULL);
  }
  json_object_object_add(o, "changed", json_object_new_boolean(r->changed));
  json_object_object_add(o, "duration_ms", json_object_new_double(r->duration_ms));
  json_object_object_add(o, "workspace_bytes", json_object_new_int64(r->workspace_bytes));
  return o;
}
