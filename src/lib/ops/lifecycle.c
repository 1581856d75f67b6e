/* The idle lifecycle (docs/state.md#the-idle-lifecycle): keyed sandboxes
 * unused for the configuration's freeze_after, stop_after, remove_after
 * are frozen, stopped, removed. The decision is decide.c's; the moves are
 * the rest module's pause (which holds the sandbox's key lock and, alone,
 * its busy lock: no call is in flight while it goes to rest) and the
 * reap's removal (under its locks, deciding again there). */
#include <stdio.h>
#include <string.h>

#include <sandman/keep.h>
#include <sandman/log.h>
#include <sandman/ops.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "ops/format.h"
#include "ops/ops_swarm.h"

/* The worker whose entry of the configuration applies: a worker token's
 * key (its principal), else the worker id the sandbox was made for. */
static const char *lifecycle_worker(const sm_ops_sandbox *sb) {
  static const char prefix[] = "worker:";
  if (strncmp(sb->principal, prefix, sizeof prefix - 1) == 0) return sb->principal + sizeof prefix - 1;
  return sb->worker_id;
}

static void lifecycle_input(const sm_ops_sandbox *sb, const sm_config *cfg, double now,
                            sm_ops_lifecycle_input *in) {
  memset(in, 0, sizeof *in);
  in->mode = sb->mode;
  in->state = sb->rest[0] ? sb->rest : sb->state;
  in->busy = sb->busy;
  in->pool = sb->pool;
  in->owned = sb->owner[0] != '\0';
  in->making = sb->making[0] != '\0' || strstr(sb->name, SM_OPS_FORKING_MARK) != NULL;
  in->created_at = sb->created_at;
  in->last_used_at = sb->last_used_recorded ? sb->last_used_at : -1;
  in->now = now;
  sm_config_lifecycle(cfg, sb->agent, lifecycle_worker(sb), &in->lifecycle);
}

/* Freezes or stops one sandbox. A sandbox a call took meanwhile (busy),
 * that moved or went away is left as it is: not an error. */
static int lifecycle_pause(sm_runner *runner, const sm_ops_sandbox *sb, sm_tier tier,
                           const char *why, sm_ops_report *out, sm_error *err) {
  sm_rest_options o = SM_REST_OPTIONS_INIT;
  o.tier = tier;
  o.no_wait = 1;
  o.why = why;
  sm_rest_report r;
  sm_error e = SM_ERROR_INIT;
  int rc = sm_sandbox_pause(runner, sb->name, &o, &r, &e);
  if (rc == SM_EBUSY || rc == SM_ECONFLICT || rc == SM_ENOTFOUND) {
    sm_log(SM_LOG_DEBUG, "lifecycle: sandbox %s left as it is: %s", sb->name, e.message);
    return 0;
  }
  if (rc) {
    sm_log(SM_LOG_WARN, "lifecycle: could not %s sandbox %s: %s", sm_tier_name(tier), sb->name,
           e.message);
    return ops_report_add(out, 0, SM_OPS_ITEM_SANDBOX, sb->id, sb->name, 1, err,
                          "lifecycle: could not %s it: %s", sm_tier_name(tier), e.message);
  }
  if (!r.changed) return 0;
  sm_log(SM_LOG_INFO, "lifecycle: sandbox %s %s -> %s in %.0f ms (%s)", sb->name, r.previous,
         r.state, r.duration_ms, why);
  return ops_report_move(out, r.id, sb->name, r.state, why, err);
}

static int lifecycle_one(sm_runner *runner, const sm_ops_scope *scope, const sm_config *cfg,
                         const sm_ops_sandbox *sb, int dry_run, sm_ops_report *out,
                         sm_error *err) {
  sm_ops_lifecycle_input in;
  lifecycle_input(sb, cfg, sm_now(), &in);
  char why[256];
  sm_ops_move move = sm_ops_lifecycle_decide(&in, why, sizeof why);
  if (move == SM_OPS_MOVE_NONE) return 0;
  if (move == SM_OPS_MOVE_REMOVE) {
    if (dry_run) return ops_report_add(out, 1, SM_OPS_ITEM_SANDBOX, sb->id, sb->name, 0, err, "%s", why);
    size_t before = out->n_removed;
    int rc = ops_remove_idle(scope, sb, in.lifecycle.remove_after_s, why, out, err);
    if (rc == 0 && out->n_removed > before) sm_log(SM_LOG_INFO, "lifecycle: removed sandbox %s (%s)", sb->name, why);
    return rc;
  }
  sm_tier tier = move == SM_OPS_MOVE_STOP ? SM_TIER_STOP : SM_TIER_FREEZE;
  if (dry_run) return ops_report_move(out, sb->id, sb->name, sm_tier_state(tier), why, err);
  return lifecycle_pause(runner, sb, tier, why, out, err);
}

int sm_ops_lifecycle(sm_runner *runner, const sm_config *cfg, int dry_run, sm_ops_report *out,
                     sm_error *err) {
  out->dry_run = dry_run;
  if (!sm_config_lifecycle_any(cfg)) return 0;
  sm_ops_scope scope;
  int rc = sm_ops_scope_from_runner(&scope, runner, err);
  if (rc) return rc;
  /* A sandbox's state is kept on the docker backend only (docs/state.md). */
  if (ops_is_swarm(&scope)) return 0;
  sm_ops_sandbox_list list = {0, NULL};
  rc = sm_ops_list(&scope, 1, &list, err);
  for (size_t i = 0; rc == 0 && i < list.n; i++)
    rc = lifecycle_one(runner, &scope, cfg, &list.items[i], dry_run, out, err);
  sm_ops_sandbox_list_dispose(&list);
  return rc;
}
