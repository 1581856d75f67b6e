/* Which sandboxes a reap removes, and why: a pure function of what the
 * engine and the state directory say, so that it can be tested alone. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <sandman/ops.h>
#include <sandman/util.h>

/* Slack between a container's creation and its owner's start: the label's
 * time has whole seconds and /proc/stat's boot time drifts a little. */
#define OWNER_START_SLACK_S 5.0

/* When the process started, in epoch seconds, and whether it is a zombie;
 * -1 when /proc cannot tell. */
static double process_start(pid_t pid, int *zombie) {
  char path[64], line[1024];
  *zombie = 0;
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "re");
  if (f == NULL) return -1;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  /* comm may hold spaces and parentheses: fields start after the last ')'. */
  char *p = strrchr(line, ')');
  if (p == NULL || p[1] != ' ') return -1;
  p += 2;
  *zombie = *p == 'Z' || *p == 'X';
  /* p is field 3 (state); starttime is field 22. */
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (p == NULL) return -1;
    p++;
  }
  char *end = NULL;
  unsigned long long ticks = strtoull(p, &end, 10);
  if (end == p) return -1;

  f = fopen("/proc/stat", "re");
  if (f == NULL) return -1;
  double btime = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long long bt;
    if (sscanf(line, "btime %llu", &bt) == 1) {
      btime = (double)bt;
      break;
    }
  }
  fclose(f);
  long hz = sysconf(_SC_CLK_TCK);
  if (btime < 0 || hz <= 0) return -1;
  return btime + (double)ticks / (double)hz;
}

sm_ops_owner_state sm_ops_owner_check(const char *owner_label, double created_at) {
  if (owner_label == NULL || *owner_label == '\0') return SM_OPS_OWNER_NONE;
  const char *colon = strrchr(owner_label, ':');
  if (colon == NULL || colon == owner_label) return SM_OPS_OWNER_UNKNOWN;
  int64_t pid = 0;
  if (sm_parse_int(colon + 1, 1, INT_MAX, &pid, NULL) != 0) return SM_OPS_OWNER_UNKNOWN;

  char host[256];
  if (gethostname(host, sizeof host) != 0) return SM_OPS_OWNER_UNKNOWN;
  host[sizeof host - 1] = '\0';
  size_t hlen = (size_t)(colon - owner_label);
  if (hlen != strlen(host) || strncmp(owner_label, host, hlen) != 0) return SM_OPS_OWNER_UNKNOWN;

  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return SM_OPS_OWNER_GONE;
  int zombie = 0;
  double started = process_start((pid_t)pid, &zombie);
  /* A zombie holds no locks and will run nothing again. */
  if (zombie) return SM_OPS_OWNER_GONE;
  /* The pid was reused: whoever runs under it now started after the
   * container was made, so it cannot be the process that made it. */
  if (started > 0 && created_at > 0 && started > created_at + OWNER_START_SLACK_S)
    return SM_OPS_OWNER_GONE;
  return SM_OPS_OWNER_ALIVE;
}

static int is_state(const char *state, const char *want) {
  return state != NULL && strcmp(state, want) == 0;
}

/* A sandbox put to rest (frozen, stopped, hibernated) is kept on purpose:
 * its life, the lifecycle's remove_after or an operator's --older-than
 * remove it; its idle timeouts and the engine's "exited" do not. */
static sm_ops_verdict decide_at_rest(const sm_ops_reap_input *in, const char *busy_note,
                                     char *reason, size_t len) {
  char idle_s[32], limit_s[32];
  double since = in->last_used_at >= 0 ? in->last_used_at : in->created_at;
  double idle = in->now - since > 0 ? in->now - since : 0;
  sm_ops_format_duration(idle, idle_s, sizeof idle_s);
  if (in->expires_at > 0 && in->now >= in->expires_at) {
    sm_ops_format_duration(in->expires_at - in->created_at, limit_s, sizeof limit_s);
    snprintf(reason, len, "%s, and its life of %s is over%s", in->rest, limit_s, busy_note);
    return SM_OPS_REMOVE;
  }
  double limit = !in->own_first && in->older_than_s >= 0 ? in->older_than_s : -1;
  const char *why = "--older-than";
  if (in->remove_after_s > 0 && (limit < 0 || in->remove_after_s < limit)) {
    limit = in->remove_after_s;
    why = "remove_after";
  }
  if (limit >= 0 && idle >= limit) {
    sm_ops_format_duration(limit, limit_s, sizeof limit_s);
    snprintf(reason, len, "%s and unused for %s (%s %s)%s", in->rest, idle_s, why, limit_s, busy_note);
    return SM_OPS_REMOVE;
  }
  snprintf(reason, len, "%s on purpose, unused for %s: kept (remove_after, rm or --older-than remove it)",
           in->rest, idle_s);
  return SM_OPS_SPARE;
}

sm_ops_verdict sm_ops_reap_decide(const sm_ops_reap_input *in, char *reason, size_t len) {
  const char *owner = in->owner_label && *in->owner_label ? in->owner_label : "?";
  char idle_s[32], limit_s[32];

  if (is_state(in->state, "removing")) {
    snprintf(reason, len, "the engine is already removing it");
    return SM_OPS_SPARE;
  }
  /* A fork cut short (its maker killed mid-way) is no sandbox: no call
   * finds it under its "-forking-" name, and its /workspace may be half
   * restored. Its maker alive: it is being made. */
  if (in->making == SM_OPS_OWNER_GONE) {
    snprintf(reason, len, "a fork cut short: its maker %s is gone", in->making_label);
    return SM_OPS_REMOVE;
  }
  if (in->making == SM_OPS_OWNER_ALIVE && !in->force) {
    snprintf(reason, len, "being made from a snapshot by %s", in->making_label);
    return SM_OPS_SPARE;
  }
  if (in->busy && !in->force) {
    snprintf(reason, len, "busy: a call is in flight (--force removes it anyway)");
    return SM_OPS_SPARE;
  }
  /* A pool whose runner died keeps nothing: its containers are leftovers. */
  if (in->pool && in->keep_pool && in->owner != SM_OPS_OWNER_GONE) {
    snprintf(reason, len, "kept by the warm pool");
    return SM_OPS_SPARE;
  }
  const char *busy_note = in->busy ? "; busy, removed because of --force" : "";
  if (in->rest && *in->rest) return decide_at_rest(in, busy_note, reason, len);
  if (is_state(in->state, "exited") || is_state(in->state, "dead")) {
    snprintf(reason, len, "not running (%s)%s", in->state, busy_note);
    return SM_OPS_REMOVE;
  }
  if (in->owner == SM_OPS_OWNER_GONE) {
    snprintf(reason, len, "its owner %s is gone%s", owner, busy_note);
    return SM_OPS_REMOVE;
  }
  if (in->owner == SM_OPS_OWNER_ALIVE && !in->force) {
    /* A per_tool container lives only as long as its call: a live owner
     * is setting it up or tearing it down, with or without the lock yet. */
    snprintf(reason, len, "its owner %s is alive (a call is being set up or torn down)", owner);
    return SM_OPS_SPARE;
  }
  if (in->expires_at > 0 && in->now >= in->expires_at) {
    sm_ops_format_duration(in->expires_at - in->created_at, limit_s, sizeof limit_s);
    snprintf(reason, len, "its life of %s is over%s", limit_s, busy_note);
    return SM_OPS_REMOVE;
  }
  /* Which idle limit applies: the sandbox's own, or the reap's. */
  double limit = in->older_than_s;
  if (in->own_idle_s > 0 && (in->own_first || limit < 0)) limit = in->own_idle_s;
  if (limit < 0) {
    snprintf(reason, len, "%s and its owner is not gone (no --older-than given)",
             in->state && *in->state ? in->state : "present");
    return SM_OPS_SPARE;
  }
  double since = in->last_used_at >= 0 ? in->last_used_at : in->created_at;
  double idle = in->now - since;
  if (idle < 0) idle = 0;
  sm_ops_format_duration(idle, idle_s, sizeof idle_s);
  sm_ops_format_duration(limit, limit_s, sizeof limit_s);
  if (idle >= limit) {
    if (in->last_used_at >= 0)
      snprintf(reason, len, "idle for %s (limit %s)%s", idle_s, limit_s, busy_note);
    else
      snprintf(reason, len, "never used, created %s ago (limit %s)%s", idle_s, limit_s, busy_note);
    return SM_OPS_REMOVE;
  }
  if (in->last_used_at >= 0)
    snprintf(reason, len, "used %s ago (limit %s)", idle_s, limit_s);
  else
    snprintf(reason, len, "created %s ago, not used yet (limit %s)", idle_s, limit_s);
  return SM_OPS_SPARE;
}

/* ---- the idle lifecycle ---- */

static int lifecycle_keyed(const sm_ops_lifecycle_input *in, char *reason, size_t len) {
  if (!is_state(in->mode, "per_run") && !is_state(in->mode, "per_worker")) {
    snprintf(reason, len, "not keyed (%s): it ends with its call",
             in->mode && *in->mode ? in->mode : "no mode");
    return 0;
  }
  if (in->pool || in->owned || in->making) {
    snprintf(reason, len, "%s", in->pool    ? "kept by the warm pool"
                                : in->owned ? "a call's own container"
                                            : "being made from a snapshot");
    return 0;
  }
  if (in->busy) {
    snprintf(reason, len, "busy: a call is in flight");
    return 0;
  }
  return 1;
}

sm_ops_move sm_ops_lifecycle_decide(const sm_ops_lifecycle_input *in, char *reason, size_t len) {
  if (!lifecycle_keyed(in, reason, len)) return SM_OPS_MOVE_NONE;
  const sm_lifecycle *lc = &in->lifecycle;
  int running = is_state(in->state, "running"), frozen = is_state(in->state, "frozen");
  int deep = is_state(in->state, "stopped") || is_state(in->state, "hibernated");
  if (!running && !frozen && !deep) {
    snprintf(reason, len, "%s: not sandman's to move (a reap removes it)",
             in->state && *in->state ? in->state : "no state");
    return SM_OPS_MOVE_NONE;
  }
  double since = in->last_used_at >= 0 ? in->last_used_at : in->created_at;
  double idle = in->now - since > 0 ? in->now - since : 0;
  char idle_s[32], limit_s[32];
  sm_ops_format_duration(idle, idle_s, sizeof idle_s);
  const char *unused = in->last_used_at >= 0 ? "unused for" : "never used, made";
  if (lc->remove_after_s > 0 && idle >= lc->remove_after_s) {
    sm_ops_format_duration(lc->remove_after_s, limit_s, sizeof limit_s);
    snprintf(reason, len, "lifecycle: %s, %s %s (remove_after %s)", in->state, unused, idle_s, limit_s);
    return SM_OPS_MOVE_REMOVE;
  }
  if (!deep && lc->stop_after_s > 0 && idle >= lc->stop_after_s) {
    sm_ops_format_duration(lc->stop_after_s, limit_s, sizeof limit_s);
    snprintf(reason, len, "lifecycle: %s %s (stop_after %s)", unused, idle_s, limit_s);
    return SM_OPS_MOVE_STOP;
  }
  if (running && lc->freeze_after_s > 0 && idle >= lc->freeze_after_s) {
    sm_ops_format_duration(lc->freeze_after_s, limit_s, sizeof limit_s);
    snprintf(reason, len, "lifecycle: %s %s (freeze_after %s)", unused, idle_s, limit_s);
    return SM_OPS_MOVE_FREEZE;
  }
  snprintf(reason, len, "%s, %s %s: no step due", in->state, unused, idle_s);
  return SM_OPS_MOVE_NONE;
}
