/* Listing, reaping and removing this instance's sandboxes. The engine's
 * labels say what exists; the state directory says what is busy and when
 * each was last used. Every removal holds the sandbox's exclusive busy lock
 * so that no call can start in a sandbox while it goes away. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/egress.h>
#include <sandman/keep.h>
#include <sandman/log.h>
#include <sandman/ops.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "ops/format.h"
#include "ops/parallel.h"
#include "ops/ops_swarm.h"

#define LABEL_MAX (SM_NAME_MAX + 64)


static int check_scope(const sm_ops_scope *scope, sm_error *err) {
  if (scope == NULL || scope->engine == NULL)
    return sm_error_set(err, SM_EINVAL, "no engine client given to the sandbox operations");
  return 0;
}

/* The instance's egress proxy, the sandboxes' relays and the socket volume
 * carry the managed and instance labels too, with io.sandman.egress: not
 * sandboxes, never listed, reaped or removed as such (a relay goes with its
 * sandbox; sm_egress_teardown removes the rest). */
static void drop_egress(json_object *array) {
  for (size_t i = array ? json_object_array_length(array) : 0; i-- > 0;) {
    json_object *labels = NULL;
    if (json_object_object_get_ex(json_object_array_get_idx(array, i), "Labels", &labels) &&
        json_object_is_type(labels, json_type_object) &&
        json_object_object_get_ex(labels, "io.sandman.egress", NULL))
      json_object_array_del_idx(array, i, 1);
  }
}

#define EXTRA_FILTERS_MAX 24

/* The engine's containers of this instance (plus the label filters
 * extra[0..n_extra), "key=value" or "key"). */
static int list_containers(const sm_ops_scope *scope, int all, const char *const *extra,
                           size_t n_extra, json_object **out, sm_error *err) {
  char managed[LABEL_MAX], instance[LABEL_MAX];
  snprintf(managed, sizeof managed, "%s=true", SM_OPS_LABEL_MANAGED);
  snprintf(instance, sizeof instance, "%s=%s", SM_OPS_LABEL_INSTANCE, sm_ops_scope_instance(scope));
  if (n_extra > EXTRA_FILTERS_MAX)
    return sm_error_set(err, SM_EINVAL, "at most %d label filters", EXTRA_FILTERS_MAX);
  const char *labels[EXTRA_FILTERS_MAX + 2] = {managed, instance};
  for (size_t i = 0; i < n_extra; i++) labels[2 + i] = extra[i];
  int rc = sm_engine_container_list(scope->engine, all, labels, 2 + n_extra, out, err);
  if (rc) return sm_error_wrap(err, "listing the sandboxes of instance '%s'", labels[1] + strlen(SM_OPS_LABEL_INSTANCE) + 1);
  if (*out == NULL || !json_object_is_type(*out, json_type_array)) {
    json_object_put(*out);
    *out = NULL;
    return sm_error_set(err, SM_EPROTOCOL, "the engine's container list is not an array");
  }
  drop_egress(*out);
  return 0;
}

/* busy, last-used and the state of rest from the state directory. 1: the
 * container is the successor of a hibernation cut short, not listed apart
 * (its sandbox is listed by its old container, under the sandbox's name). */
static int add_state(const sm_ops_scope *scope, sm_ops_sandbox *sb) {
  if (sb->name[0] == '\0') return 0;
  char base[SM_NAME_MAX], ws[SM_NAME_MAX + 8];
  int side = sm_keep_rest_side(scope->state_dir, sb->name, sb->id, base, sizeof base);
  if (side == 2) return 1;
  if (side == 1) {
    snprintf(ws, sizeof ws, "%s-ws", sb->name);
    if (strcmp(sb->volume, ws) == 0) snprintf(sb->volume, sizeof sb->volume, "%s-ws", base);
    snprintf(sb->name, sizeof sb->name, "%s", base);
  }
  sm_sandbox_rest_state(scope->state_dir, sb->name, sb->state, sb->rest, &sb->rest_since);
  sb->busy = sm_state_is_busy(scope->state_dir, sb->name) == 1;
  double lu = sm_state_last_used(scope->state_dir, sb->name);
  if (lu >= 0) {
    sb->last_used_at = lu;
    sb->last_used_recorded = 1;
  }
  return 0;
}

/* Turns the engine's array into sandboxes (entries it cannot read are
 * logged and skipped: one odd container must not hide the others). */
static int at_rest(const sm_ops_sandbox *sb) {
  return strcmp(sb->rest, "stopped") == 0 || strcmp(sb->rest, "hibernated") == 0;
}

static int to_sandboxes(const sm_ops_scope *scope, json_object *array, int all,
                        sm_ops_sandbox_list *out, sm_error *err) {
  size_t n = json_object_array_length(array);
  out->n = 0;
  out->items = NULL;
  if (n == 0) return 0;
  if (n > OPS_MAX_ITEMS)
    return sm_error_set(err, SM_ETOOBIG, "the engine lists %zu sandboxes, more than %d", n,
                        OPS_MAX_ITEMS);
  out->items = calloc(n, sizeof *out->items);
  if (out->items == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  for (size_t i = 0; i < n; i++) {
    sm_error e = SM_ERROR_INIT;
    sm_ops_sandbox *sb = &out->items[out->n];
    if (sm_ops_sandbox_from_engine(json_object_array_get_idx(array, i), sb, &e) != 0) {
      sm_log(SM_LOG_WARN, "skipping a container the engine listed: %s", e.message);
      continue;
    }
    if (add_state(scope, sb)) continue;
    /* Without --all: running ones, and those kept at rest on purpose; a
     * fork still being made (or cut short) is no sandbox yet. */
    if (!all && strcmp(sb->state, "running") != 0 && strcmp(sb->state, "paused") != 0 &&
        !at_rest(sb))
      continue;
    if (!all && strstr(sb->name, SM_OPS_FORKING_MARK)) continue;
    out->n++;
  }
  return 0;
}

int ops_is_swarm(const sm_ops_scope *scope) {
  return scope && scope->backend && strcmp(scope->backend, "swarm") == 0;
}

int sm_ops_list(const sm_ops_scope *scope, int all, sm_ops_sandbox_list *out, sm_error *err) {
  return sm_ops_list_filtered(scope, all, NULL, 0, out, err);
}

int sm_ops_list_filtered(const sm_ops_scope *scope, int all, const char *const *labels,
                         size_t n_labels, sm_ops_sandbox_list *out, sm_error *err) {
  out->n = 0;
  out->items = NULL;
  int rc = check_scope(scope, err);
  if (rc) return rc;
  if (ops_is_swarm(scope)) {
    if (n_labels)
      return sm_error_set(err, SM_EUNSUPPORTED, "label filters are not supported on a swarm");
    return ops_swarm_list(scope, all, out, err);
  }
  cleanup_json json_object *array = NULL;
  /* Stopped and hibernated ones are listed without --all too: ask for all. */
  rc = list_containers(scope, 1, labels, n_labels, &array, err);
  if (rc) return rc;
  return to_sandboxes(scope, array, all, out, err);
}

/* ---- removing one sandbox ---- */

/* The locks a removal holds, taken without waiting, in this order:
 *  - keys/reap-<name>: no two reapers work on one sandbox;
 *  - keys/create-<name>: the sandbox module holds it while it looks a keyed
 *    sandbox up or creates it, until the call holds the busy lock, so a
 *    sandbox being set up is never taken away;
 *  - busy/<name> exclusive: no call is in flight, and none can start.
 * A call that wants the sandbox meanwhile waits, then finds it gone. */
typedef struct removal_locks {
  sm_state_lock *reap, *create, *busy;
} removal_locks;

enum { LOCKED = 0, LOCK_OTHER_REAPER, LOCK_BUSY, LOCK_SETTING_UP, LOCK_ERROR };

static void unlock_removal(removal_locks *l) {
  sm_state_unlock(l->busy);
  sm_state_unlock(l->create);
  sm_state_unlock(l->reap);
  memset(l, 0, sizeof *l);
}

/* After the sandbox is gone: its lock files go too (state.c says why
 * that is safe for a process waiting on one). */
static void unlock_removal_gone(removal_locks *l) {
  sm_state_unlock_remove(l->busy);
  sm_state_unlock_remove(l->create);
  sm_state_unlock_remove(l->reap);
  memset(l, 0, sizeof *l);
}

/* After one lock attempt (rc): LOCKED to go on, or the outcome (the locks
 * taken so far released). A held lock is `held_means` without force; with
 * force the removal goes on and *was_busy is set. */
static int busy_outcome(int rc, int force, removal_locks *l, int held_means, int *was_busy) {
  if (rc == SM_EBUSY && force) {
    *was_busy = 1;
    return LOCKED;
  }
  if (rc == 0) return LOCKED;
  unlock_removal(l);
  return rc == SM_EBUSY ? held_means : LOCK_ERROR;
}

/* One lock taken without waiting, or, while `until` is ahead, tried again
 * every 20 ms while it is held (SM_EBUSY). */
static int try_until(const char *state_dir, const char *key, int exclusive, double until,
                     sm_state_lock **out, sm_error *e) {
  for (;;) {
    int rc = exclusive ? sm_state_exclusive_try(state_dir, key, out, e)
                       : sm_state_key_try(state_dir, key, out, e);
    if (rc != SM_EBUSY || sm_now() >= until) return rc;
    sm_error_clear(e);
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
}

/* With force, a busy or setting-up sandbox is locked as far as possible
 * and the result is LOCKED with *was_busy set. Without, a call in flight
 * is waited for until `until` (epoch seconds; 0: not at all). */
static int lock_removal(const sm_ops_scope *scope, const char *name, int force, double until,
                        removal_locks *l, int *was_busy, sm_error *e) {
  char key[SM_NAME_MAX + 16];
  memset(l, 0, sizeof *l);
  *was_busy = 0;
  if (force) until = 0;
  snprintf(key, sizeof key, "reap-%s", name);
  int rc = sm_state_key_try(scope->state_dir, key, &l->reap, e);
  if (rc == SM_EBUSY) return LOCK_OTHER_REAPER;
  if (rc) return LOCK_ERROR;
  snprintf(key, sizeof key, "create-%s", name);
  rc = try_until(scope->state_dir, key, 0, until, &l->create, e);
  int how = busy_outcome(rc, force, l, LOCK_SETTING_UP, was_busy);
  if (how != LOCKED) return how;
  rc = try_until(scope->state_dir, name, 1, until, &l->busy, e);
  return busy_outcome(rc, force, l, LOCK_BUSY, was_busy);
}

/* Words for a lock_removal result other than LOCKED. */
static const char *lock_reason(int how) {
  switch (how) {
    case LOCK_OTHER_REAPER: return "another sandman process is removing it";
    case LOCK_SETTING_UP: return "busy: a call is setting it up (--force removes it anyway)";
    case LOCK_BUSY: return "busy: a call is in flight (--force removes it anyway)";
    default: return "cannot lock it in the state directory";
  }
}

/* One removal for the pool: what to do, and (filled by the worker) what
 * happened. Workers only write their own slot; the report is built from
 * the slots afterwards, in the order of the listing. */
typedef enum { OUT_NONE = 0, OUT_REMOVED, OUT_SPARED, OUT_SILENT, OUT_FATAL } outcome_kind;

typedef struct removal {
  const sm_ops_sandbox *sb;
  int has_decide;           /* reap: decide again under the locks */
  sm_ops_reap_input decide;
  int force;
  double wait_until;        /* rm: a call in flight is waited for until then */
  int job;                  /* 0: decided before the pool (spared or dry run) */
  outcome_kind out;
  int failed;
  char why[320];
  sm_error fatal;           /* OUT_FATAL: the engine went away */
} removal;

/* Removes the container, its volume and its state files under the removal
 * locks. The decision (reap only) is taken again under the locks, since a
 * call may have used the sandbox since the snapshot. Returns nonzero only
 * when the engine is unreachable (then nothing more is worth trying). */
static int remove_sandbox(const sm_ops_scope *scope, removal *r) {
  const sm_ops_sandbox *sb = r->sb;
  removal_locks locks;
  sm_error e = SM_ERROR_INIT;
  int busy = 0;
  int how = lock_removal(scope, sb->name, r->force, r->wait_until, &locks, &busy, &e);
  if (how == LOCK_ERROR) {
    r->out = OUT_SPARED;
    r->failed = 1;
    snprintf(r->why, sizeof r->why, "cannot lock it in the state directory: %s", e.message);
    return 0;
  }
  if (how != LOCKED) { /* a refusal is an error for rm, a normal outcome for reap */
    r->out = OUT_SPARED;
    r->failed = !r->has_decide && how != LOCK_OTHER_REAPER;
    snprintf(r->why, sizeof r->why, "%s", lock_reason(how));
    return 0;
  }

  if (r->has_decide) {
    sm_ops_reap_input again = r->decide;
    again.busy = busy;
    again.last_used_at = sm_state_last_used(scope->state_dir, sb->name);
    again.now = sm_now();
    char why[sizeof r->why];
    if (sm_ops_reap_decide(&again, why, sizeof why) == SM_OPS_SPARE) {
      unlock_removal(&locks);
      r->out = OUT_SPARED;
      snprintf(r->why, sizeof r->why, "%s", why);
      return 0;
    }
  }

  int gone = 0;
  /* A hibernation cut short left a successor holding the checkpoint and
   * the volume: it goes with the sandbox (read before the record goes). */
  char successor[SM_ENGINE_ID_MAX];
  sm_keep_rest_successor(scope->state_dir, sb->name, successor, sizeof successor);
  /* Its egress relay first (network allowlist), if it has one. */
  if (sm_egress_revoke(scope->engine, sb->name, &e) != 0) {
    sm_log(SM_LOG_WARN, "sandbox %s: removing its egress relay: %s", sb->name, e.message);
    sm_error_clear(&e);
  }
  int rc = sm_engine_container_remove(scope->engine, sb->id, 1, 1, &e);
  if (rc == SM_ENOTFOUND) {
    gone = 1;
  } else if (rc) {
    unlock_removal(&locks);
    if (rc == SM_EUNREACHABLE) {
      r->out = OUT_FATAL;
      sm_error_set(&r->fatal, rc, "%s", e.message);
      return rc;
    }
    r->out = OUT_SPARED;
    r->failed = 1;
    snprintf(r->why, sizeof r->why, "removal failed: %s", e.message);
    return 0;
  }
  sm_error_clear(&e);
  if (successor[0] && sm_engine_container_remove(scope->engine, successor, 1, 1, &e) != 0 &&
      e.code != SM_ENOTFOUND)
    sm_log(SM_LOG_WARN, "sandbox %s removed, its successor %.12s not: %s", sb->name, successor,
           e.message);
  if (sb->volume[0]) {
    sm_error_clear(&e);
    rc = sm_engine_volume_remove(scope->engine, sb->volume, 0, &e);
    if (rc && rc != SM_ENOTFOUND) {
      sm_log(SM_LOG_WARN, "sandbox %s removed, its volume %s not: %s", sb->name, sb->volume,
             e.message);
      size_t used = strlen(r->why);
      snprintf(r->why + used, sizeof r->why - used, "; its volume %s stays: %s", sb->volume,
               e.message);
    }
  }
  sm_state_forget(scope->state_dir, sb->name);
  unlock_removal_gone(&locks);
  if (gone) {
    /* Another reaper or `docker rm` got there first: not an error, and
     * not ours to report as removed. */
    sm_log(SM_LOG_DEBUG, "sandbox %s was already gone", sb->name);
    r->out = OUT_SILENT;
    return 0;
  }
  sm_log(SM_LOG_DEBUG, "removed sandbox %s (%.12s): %s", sb->name, sb->id, r->why);
  r->out = OUT_REMOVED;
  return 0;
}

typedef struct removals {
  const sm_ops_scope *scope;
  removal *items;
  size_t *jobs; /* indices into items of the removals the pool runs */
} removals;

static int removal_job(void *ctx, sm_engine *engine, size_t i) {
  removals *rs = ctx;
  sm_ops_scope scope = *rs->scope;
  scope.engine = engine;
  return remove_sandbox(&scope, &rs->items[rs->jobs[i]]);
}

/* Runs the slots marked job on the pool, then reports every slot in order.
 * An unreachable engine ends the whole operation with its error. */
static int run_removals(const sm_ops_scope *scope, removal *items, size_t n, sm_ops_report *report,
                        sm_error *err) {
  size_t nj = 0;
  for (size_t i = 0; i < n; i++) nj += items[i].job != 0;
  if (nj) {
    removals rs = {scope, items, calloc(nj, sizeof(size_t))};
    if (rs.jobs == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
    for (size_t i = 0, k = 0; i < n; i++)
      if (items[i].job) rs.jobs[k++] = i;
    ops_parallel(scope->engine, nj, OPS_REMOVE_WORKERS, removal_job, &rs);
    free(rs.jobs);
  }
  for (size_t i = 0; i < n; i++)
    if (items[i].out == OUT_FATAL) return sm_error_set(err, items[i].fatal.code, "%s", items[i].fatal.message);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const removal *r = &items[i];
    if (r->out == OUT_NONE || r->out == OUT_SILENT) continue;
    rc = ops_report_add(report, r->out == OUT_REMOVED, SM_OPS_ITEM_SANDBOX, r->sb->id,
                        r->sb->name, r->failed, err, "%s", r->why);
  }
  return rc;
}

/* ---- reap ---- */

static void reap_input(const sm_ops_sandbox *sb, const sm_ops_reap_options *opts, double now,
                       sm_ops_reap_input *in) {
  memset(in, 0, sizeof *in);
  in->mode = sb->mode;
  in->state = sb->state;
  in->busy = sb->busy;
  in->pool = sb->pool;
  in->created_at = sb->created_at;
  in->last_used_at = sb->last_used_recorded ? sb->last_used_at : -1;
  in->now = now;
  in->owner = sm_ops_owner_check(sb->owner, sb->created_at);
  in->owner_label = sb->owner;
  in->making = sb->making[0] ? sm_ops_owner_check(sb->making, sb->created_at) : SM_OPS_OWNER_NONE;
  in->making_label = sb->making;
  in->older_than_s = opts->older_than_s;
  in->force = opts->force;
  in->keep_pool = opts->keep_pool;
  in->own_first = opts->own_first;
  in->own_idle_s = sb->idle_timeout_s;
  in->expires_at = sb->timeout_s > 0 && sb->created_at > 0 ? sb->created_at + sb->timeout_s : 0;
  if (strcmp(sb->rest, "frozen") == 0 || at_rest(sb)) in->rest = sb->rest;
  in->remove_after_s = opts->remove_after_s;
}

int ops_remove_idle(const sm_ops_scope *scope, const sm_ops_sandbox *sb, double remove_after_s,
                    const char *why, sm_ops_report *report, sm_error *err) {
  sm_ops_reap_options o = SM_OPS_REAP_OPTIONS_INIT;
  o.older_than_s = remove_after_s;
  o.remove_after_s = remove_after_s;
  removal r;
  memset(&r, 0, sizeof r);
  r.sb = sb;
  reap_input(sb, &o, sm_now(), &r.decide);
  r.has_decide = 1;
  r.job = 1;
  snprintf(r.why, sizeof r.why, "%s", why);
  return run_removals(scope, &r, 1, report, err);
}

static int volumes_of(json_object *answer, json_object **out) {
  *out = NULL;
  if (answer == NULL) return 0;
  if (json_object_is_type(answer, json_type_array)) {
    *out = answer;
    drop_egress(*out);
    return 0;
  }
  json_object *v = NULL;
  if (json_object_is_type(answer, json_type_object) &&
      json_object_object_get_ex(answer, "Volumes", &v) &&
      (v == NULL || json_object_is_type(v, json_type_array))) {
    *out = v;
    drop_egress(*out);
    return 0;
  }
  return -1;
}

static int has_volume(const sm_ops_sandbox_list *list, const char *volume) {
  for (size_t i = 0; i < list->n; i++)
    if (strcmp(list->items[i].volume, volume) == 0) return 1;
  return 0;
}

static int has_name(const sm_ops_sandbox_list *list, const char *name) {
  for (size_t i = 0; i < list->n; i++)
    if (strcmp(list->items[i].name, name) == 0) return 1;
  return 0;
}

/* An orphaned /workspace volume: made with a sandbox that is gone now (a
 * crash between the volume and the container, or a container removed by
 * hand). Young ones may belong to a sandbox being created right now. */
static int reap_volume(const sm_ops_scope *scope, json_object *vol, const sm_ops_reap_options *opts,
                       double now, sm_ops_report *report, sm_error *err) {
  json_object *jn = NULL, *labels = NULL, *jc = NULL;
  if (!json_object_object_get_ex(vol, "Name", &jn) || !json_object_is_type(jn, json_type_string))
    return 0;
  const char *name = json_object_get_string(jn);
  json_object_object_get_ex(vol, "Labels", &labels);
  double created = sm_parse_time(ops_label(labels, SM_OPS_LABEL_CREATED));
  if (created < 0 && json_object_object_get_ex(vol, "CreatedAt", &jc))
    created = sm_parse_time(json_object_get_string(jc));
  char owner_name[SM_NAME_MAX];
  size_t len = strlen(name);
  /* "<sandbox>-ws", or "<sandbox>-ws-<8 hex>" made by a rollback. */
  if (len > 12 && strncmp(name + len - 12, "-ws-", 4) == 0 &&
      strspn(name + len - 8, "0123456789abcdef") == 8)
    len -= 9;
  if (len > 3 && strncmp(name + len - 3, "-ws", 3) == 0 && len - 3 < sizeof owner_name)
    snprintf(owner_name, sizeof owner_name, "%.*s", (int)(len - 3), name);
  else
    ops_copy(owner_name, sizeof owner_name, name);

  char age[32], limit[32];
  double idle = created > 0 ? now - created : 0;
  sm_ops_format_duration(idle, age, sizeof age);
  if (opts->older_than_s < 0)
    return ops_report_add(report, 0, SM_OPS_ITEM_VOLUME, NULL, name, 0, err,
                          "orphaned (its sandbox is gone), kept: no --older-than given");
  sm_ops_format_duration(opts->older_than_s, limit, sizeof limit);
  if (created > 0 && idle < opts->older_than_s)
    return ops_report_add(report, 0, SM_OPS_ITEM_VOLUME, NULL, name, 0, err,
                          "no sandbox uses it, created %s ago (limit %s)", age, limit);
  if (opts->dry_run)
    return ops_report_add(report, 1, SM_OPS_ITEM_VOLUME, NULL, name, 0, err,
                          "orphaned: its sandbox %s is gone (created %s ago)", owner_name, age);

  /* The sandbox's locks: a creator holds them while it builds the
   * container this volume is for. */
  removal_locks locks;
  sm_error e = SM_ERROR_INIT;
  int busy = 0;
  int how = lock_removal(scope, owner_name, 0, 0, &locks, &busy, &e);
  if (how == LOCK_OTHER_REAPER) return 0;
  if (how != LOCKED)
    return ops_report_add(report, 0, SM_OPS_ITEM_VOLUME, NULL, name, how == LOCK_ERROR, err,
                          "its sandbox %s: %s", owner_name, lock_reason(how));
  int rc = sm_engine_volume_remove(scope->engine, name, 0, &e);
  unlock_removal(&locks);
  if (rc == SM_ENOTFOUND) return 0;
  if (rc == SM_ECONFLICT)
    return ops_report_add(report, 0, SM_OPS_ITEM_VOLUME, NULL, name, 0, err,
                          "in use by a container made since the listing");
  if (rc == SM_EUNREACHABLE) return sm_error_set(err, rc, "%s", e.message);
  if (rc)
    return ops_report_add(report, 0, SM_OPS_ITEM_VOLUME, NULL, name, 1, err,
                          "removal failed: %s", e.message);
  sm_log(SM_LOG_DEBUG, "removed orphaned volume %s", name);
  return ops_report_add(report, 1, SM_OPS_ITEM_VOLUME, NULL, name, 0, err,
                        "orphaned: its sandbox %s is gone (created %s ago)", owner_name, age);
}

/* Does the name follow this instance's naming rule
 * (sandman-<instance>-<mode>-...)? Another instance may share the state
 * directory: its files are not ours to drop. */
static int ours_by_name(const char *instance, const char *name) {
  static const char *const modes[] = {"per_tool-", "tool-", "per_run-", "per_worker-", "pool-",
                                      "lease-"};
  size_t plen = strlen("sandman-"), ilen = strlen(instance);
  if (strncmp(name, "sandman-", plen) != 0 || strncmp(name + plen, instance, ilen) != 0 ||
      name[plen + ilen] != '-')
    return 0;
  const char *rest = name + plen + ilen + 1;
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (strncmp(rest, modes[i], strlen(modes[i])) == 0) return 1;
  return 0;
}

/* Drops last-used times and manifests of sandboxes the engine no longer
 * has (a crash between removing a container and forgetting it). */
static void forget_stale(const sm_ops_scope *scope, const sm_ops_sandbox_list *present) {
  char **names = NULL;
  size_t n = 0;
  sm_error e = SM_ERROR_INIT;
  if (sm_state_known(scope->state_dir, &names, &n, &e) != 0) {
    sm_log(SM_LOG_DEBUG, "not dropping stale state files: %s", e.message);
    return;
  }
  const char *instance = sm_ops_scope_instance(scope);
  for (size_t i = 0; i < n; i++) {
    if (!ours_by_name(instance, names[i]) || has_name(present, names[i])) continue;
    removal_locks locks;
    int busy = 0;
    if (lock_removal(scope, names[i], 0, 0, &locks, &busy, &e) != LOCKED) continue;
    /* Created after our listing? Then it is not stale. */
    json_object *c = NULL;
    int gone = sm_engine_container_inspect(scope->engine, names[i], &c, &e) == SM_ENOTFOUND;
    if (gone) {
      sm_state_forget(scope->state_dir, names[i]);
      sm_log(SM_LOG_DEBUG, "dropped the state files of gone sandbox %s", names[i]);
    }
    json_object_put(c);
    if (gone) unlock_removal_gone(&locks);
    else unlock_removal(&locks);
  }
  sm_state_names_free(names, n);
}

/* A reaper's exclusive lock looks like a call in flight: its reap key
 * tells the two apart. */
static int being_reaped(const sm_ops_scope *scope, const char *name) {
  char key[SM_NAME_MAX + 16];
  sm_state_lock *l = NULL;
  sm_error e = SM_ERROR_INIT;
  snprintf(key, sizeof key, "reap-%s", name);
  int rc = sm_state_key_try(scope->state_dir, key, &l, &e);
  /* Asking leaves no file behind. */
  sm_state_unlock_remove(l);
  return rc == SM_EBUSY;
}

/* Egress relays whose sandbox is gone (removed by hand, or by a process
 * that died on the way): removed. What fails is logged, never fatal. */
static void sweep_relays(const sm_ops_scope *scope) {
  sm_egress_proxy_options po = SM_EGRESS_PROXY_OPTIONS_INIT;
  po.instance = sm_ops_scope_instance(scope);
  size_t n = 0;
  sm_error e = SM_ERROR_INIT;
  if (sm_egress_sweep(scope->engine, &po, &n, &e) != 0)
    sm_log(SM_LOG_WARN, "removing egress relays of sandboxes that are gone: %s", e.message);
  else if (n > 0)
    sm_log(SM_LOG_INFO, "removed %zu egress relay(s) of sandboxes that are gone", n);
}

int sm_ops_reap(const sm_ops_scope *scope, const sm_ops_reap_options *opts, sm_ops_report *out,
                sm_error *err) {
  memset(out, 0, sizeof *out);
  int rc = check_scope(scope, err);
  if (rc) return rc;
  sm_ops_reap_options o = SM_OPS_REAP_OPTIONS_INIT;
  if (opts) o = *opts;
  out->dry_run = o.dry_run;
  if (ops_is_swarm(scope)) return ops_swarm_reap(scope, &o, out, err);

  char managed[LABEL_MAX], instance[LABEL_MAX];
  snprintf(managed, sizeof managed, "%s=true", SM_OPS_LABEL_MANAGED);
  snprintf(instance, sizeof instance, "%s=%s", SM_OPS_LABEL_INSTANCE, sm_ops_scope_instance(scope));
  const char *labels[2] = {managed, instance};
  /* Volumes before containers: a volume made between the two listings
   * then has its container in the second one. */
  cleanup_json json_object *vol_answer = NULL;
  rc = sm_engine_volume_list(scope->engine, labels, 2, &vol_answer, err);
  if (rc) return sm_error_wrap(err, "listing the volumes of instance '%s'", sm_ops_scope_instance(scope));
  json_object *volumes = NULL;
  if (volumes_of(vol_answer, &volumes) != 0)
    return sm_error_set(err, SM_EPROTOCOL, "the engine's volume list has no Volumes array");

  cleanup_json json_object *array = NULL;
  rc = list_containers(scope, 1, NULL, 0, &array, err);
  if (rc) return rc;
  sm_ops_sandbox_list list = {0, NULL};
  rc = to_sandboxes(scope, array, 1, &list, err);
  if (rc) return rc;

  double now = sm_now();
  removal *items = list.n ? calloc(list.n, sizeof *items) : NULL;
  if (list.n && items == NULL) rc = sm_error_set(err, SM_ENOMEM, NULL);
  for (size_t i = 0; rc == 0 && i < list.n; i++) {
    removal *r = &items[i];
    r->sb = &list.items[i];
    reap_input(r->sb, &o, now, &r->decide);
    r->has_decide = 1;
    r->force = o.force;
    sm_ops_verdict v = sm_ops_reap_decide(&r->decide, r->why, sizeof r->why);
    if (v == SM_OPS_SPARE && r->sb->busy && !o.force && being_reaped(scope, r->sb->name))
      snprintf(r->why, sizeof r->why, "another sandman process is removing it");
    if (v == SM_OPS_SPARE)
      r->out = OUT_SPARED;
    else if (o.dry_run)
      r->out = OUT_REMOVED;
    else
      r->job = 1;
  }
  if (rc == 0) rc = run_removals(scope, items, list.n, out, err);
  free(items);

  size_t nv = volumes ? json_object_array_length(volumes) : 0;
  for (size_t i = 0; rc == 0 && i < nv; i++) {
    json_object *vol = json_object_array_get_idx(volumes, i), *jn = NULL;
    if (!json_object_object_get_ex(vol, "Name", &jn)) continue;
    const char *vname = json_object_get_string(jn);
    if (vname == NULL || has_volume(&list, vname)) continue; /* went with its sandbox */
    rc = reap_volume(scope, vol, &o, now, out, err);
  }
  if (rc == 0 && !o.dry_run) forget_stale(scope, &list);
  if (rc == 0 && !o.dry_run) sweep_relays(scope);
  sm_ops_sandbox_list_dispose(&list);
  if (rc) sm_ops_report_dispose(out);
  return rc;
}

/* ---- rm ---- */

/* Finds ref among the sandboxes: a name, a full id or a unique id prefix. */
static const sm_ops_sandbox *find_ref(const sm_ops_sandbox_list *list, const char *ref,
                                      int *ambiguous) {
  const sm_ops_sandbox *hit = NULL;
  size_t rlen = strlen(ref);
  *ambiguous = 0;
  for (size_t i = 0; i < list->n; i++)
    if (strcmp(list->items[i].name, ref) == 0 || strcmp(list->items[i].id, ref) == 0)
      return &list->items[i];
  if (rlen == 0) return NULL;
  for (size_t i = 0; i < list->n; i++) {
    if (strncmp(list->items[i].id, ref, rlen) != 0) continue;
    if (hit) {
      *ambiguous = 1;
      return NULL;
    }
    hit = &list->items[i];
  }
  return hit;
}

static int already_listed(const sm_ops_sandbox *const *targets, size_t n, const sm_ops_sandbox *sb) {
  for (size_t i = 0; i < n; i++)
    if (targets[i] == sb) return 1;
  return 0;
}

static int select_by_label(const sm_ops_scope *scope, const char *key, const char *value,
                           sm_ops_sandbox_list *out, sm_error *err) {
  char filter[LABEL_MAX];
  if (snprintf(filter, sizeof filter, "%s=%s", key, value) >= (int)sizeof filter)
    return sm_error_set(err, SM_EINVAL, "'%s' is too long", value);
  cleanup_json json_object *array = NULL;
  const char *filters[1] = {filter};
  int rc = list_containers(scope, 1, filters, 1, &array, err);
  if (rc) return rc;
  return to_sandboxes(scope, array, 1, out, err);
}

/* A name that is no sandbox's but some sandbox's run or worker id: what
 * it is ("run id", "worker id"), so that the refusal says which flag was
 * meant; NULL otherwise. */
static const char *label_hint(const sm_ops_sandbox_list *all, const char *ref) {
  for (size_t i = 0; i < all->n; i++) {
    if (strcmp(all->items[i].run_id, ref) == 0) return "run id";
    if (strcmp(all->items[i].worker_id, ref) == 0) return "worker id";
  }
  return NULL;
}

int sm_ops_rm(const sm_ops_scope *scope, const sm_ops_rm_options *opts, sm_ops_report *out,
              sm_error *err) {
  memset(out, 0, sizeof *out);
  int rc = check_scope(scope, err);
  if (rc) return rc;
  if (opts == NULL || (opts->n_refs == 0 && !opts->run_id && !opts->worker_id))
    return sm_error_set(err, SM_EINVAL, "name a sandbox, or give --run-id or --worker-id");
  if (ops_is_swarm(scope)) return ops_swarm_rm(scope, opts, out, err);

  sm_ops_sandbox_list all = {0, NULL}, by_run = {0, NULL}, by_worker = {0, NULL};
  const sm_ops_sandbox **targets = NULL;
  size_t nt = 0;
  if (opts->n_refs) rc = sm_ops_list(scope, 1, &all, err);
  if (rc == 0 && opts->run_id) rc = select_by_label(scope, SM_OPS_LABEL_RUN, opts->run_id, &by_run, err);
  if (rc == 0 && opts->worker_id)
    rc = select_by_label(scope, SM_OPS_LABEL_WORKER, opts->worker_id, &by_worker, err);
  size_t cap = opts->n_refs + by_run.n + by_worker.n;
  if (rc == 0 && cap && (targets = calloc(cap, sizeof *targets)) == NULL)
    rc = sm_error_set(err, SM_ENOMEM, NULL);

  for (size_t i = 0; rc == 0 && i < opts->n_refs; i++) {
    int ambiguous = 0;
    const char *hint = NULL;
    const sm_ops_sandbox *sb = find_ref(&all, opts->refs[i], &ambiguous);
    if (sb == NULL && ambiguous)
      rc = ops_report_add(out, 0, SM_OPS_ITEM_SANDBOX, NULL, opts->refs[i], 1, err,
                          "ambiguous: the ids of several sandboxes start with it");
    else if (sb == NULL && (hint = label_hint(&all, opts->refs[i])) != NULL)
      rc = ops_report_add(out, 0, SM_OPS_ITEM_SANDBOX, NULL, opts->refs[i], 1, err,
                          "no sandbox has that id or name; it is a %s: `sandman sandbox rm --%s %s`",
                          hint, strcmp(hint, "run id") == 0 ? "run-id" : "worker-id",
                          opts->refs[i]);
    else if (sb == NULL)
      rc = ops_report_add(out, 0, SM_OPS_ITEM_SANDBOX, NULL, opts->refs[i], 1, err,
                          "no such sandbox in instance '%s' (`sandman sandbox list --all` lists them)",
                          sm_ops_scope_instance(scope));
    else if (!already_listed(targets, nt, sb))
      targets[nt++] = sb;
  }
  for (size_t i = 0; rc == 0 && i < by_run.n; i++) targets[nt++] = &by_run.items[i];
  for (size_t i = 0; rc == 0 && i < by_worker.n; i++) {
    int dup = 0;
    for (size_t j = 0; j < by_run.n; j++) dup |= strcmp(by_run.items[j].id, by_worker.items[i].id) == 0;
    if (!dup) targets[nt++] = &by_worker.items[i];
  }

  removal *items = nt ? calloc(nt, sizeof *items) : NULL;
  if (rc == 0 && nt && items == NULL) rc = sm_error_set(err, SM_ENOMEM, NULL);
  for (size_t i = 0; rc == 0 && i < nt; i++) {
    removal *r = &items[i];
    r->sb = targets[i];
    r->force = opts->force;
    r->wait_until = opts->wait_s > 0 ? sm_now() + opts->wait_s : 0;
    if (r->sb->busy && !opts->force && opts->wait_s <= 0) {
      r->out = OUT_SPARED;
      r->failed = 1;
      snprintf(r->why, sizeof r->why, "busy: a call is in flight (--force removes it anyway)");
      continue;
    }
    snprintf(r->why, sizeof r->why, "%s",
             r->sb->busy ? "removed on request (busy, --force)" : "removed on request");
    r->job = 1;
  }
  if (rc == 0) rc = run_removals(scope, items, nt, out, err);
  free(items);
  free(targets);
  sm_ops_sandbox_list_dispose(&all);
  sm_ops_sandbox_list_dispose(&by_run);
  sm_ops_sandbox_list_dispose(&by_worker);
  if (rc) sm_ops_report_dispose(out);
  return rc;
}
