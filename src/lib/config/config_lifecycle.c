/* The idle lifecycle of keyed sandboxes and the runner's snapshot reaping
 * (docs/configuration.md#lifecycle):
 *
 *   defaults.lifecycle / agents.<name>.lifecycle / workers.<key>.lifecycle:
 *     {freeze_after, stop_after, remove_after}   durations, or "never"
 *   snapshots: {older_than, keep}
 *
 * A level says what it sets; the rest comes from the level below it, key
 * by key (a worker's entry over the agent's over the defaults). Every
 * combination a sandbox can get must keep the order freeze_after <
 * stop_after < remove_after: checked here, at load, with the place of the
 * value that breaks it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/config.h>
#include <sandman/util.h>

#include "config/config_internal.h"

/* The longest idle time a step may wait: a year. */
#define LC_MAX_S (366.0 * 86400)
#define SNAP_KEEP_MAX 100000

static const char *const lc_keys[CFG_LC_COUNT] = {"freeze_after", "stop_after", "remove_after"};

void config_lifecycle_unset(cfg_lifecycle *lc) {
  for (int i = 0; i < CFG_LC_COUNT; i++) lc->after[i] = -1;
}

/* Where each value of a level came from, for the order's messages. */
typedef struct lc_level {
  const cfg_lifecycle *lc;
  const cfg_ynode *node[CFG_LC_COUNT];
  char path[200];
} lc_level;

static int lc_duration(cfg_vctx *v, const cfg_ynode *n, const char *path, double *out) {
  double d = 0;
  sm_error perr = SM_ERROR_INIT;
  if (n->type == CFG_Y_SCALAR && strcmp(n->str, "never") == 0) return *out = 0, 0;
  if (n->type != CFG_Y_SCALAR || config_ynode_is_null(n) ||
      sm_parse_duration(n->str, &d, &perr) != 0 || d < 1 || d > LC_MAX_S)
    return config_verr(v, n, path,
                       "expected a duration from 1s to 366d (e.g. 30s, 10m, 2h, 7d) or \"never\", "
                       "got %s",
                       n->type == CFG_Y_SCALAR ? n->str : "a list or mapping");
  *out = d;
  return 0;
}

/* One level's lifecycle: map (may be NULL: nothing set) into lc and lv. */
static int lc_parse_level(cfg_vctx *v, const cfg_ynode *owner, const char *owner_path,
                          cfg_lifecycle *lc, lc_level *lv) {
  memset(lv, 0, sizeof *lv);
  lv->lc = lc;
  snprintf(lv->path, sizeof lv->path, "%s.lifecycle", owner_path);
  config_lifecycle_unset(lc);
  const cfg_ynode *map = owner && owner->type == CFG_Y_MAP ? config_map_get(owner, "lifecycle") : NULL;
  if (map == NULL || config_ynode_is_null(map)) return 0;
  if (map->type != CFG_Y_MAP)
    return config_verr(v, map, lv->path,
                       "expected a mapping of freeze_after, stop_after, remove_after");
  for (size_t i = 0; i < config_map_size(map); i++) {
    const cfg_ynode *k = config_map_key(map, i);
    int which = -1;
    for (int j = 0; j < CFG_LC_COUNT; j++)
      if (k->type == CFG_Y_SCALAR && strcmp(k->str, lc_keys[j]) == 0) which = j;
    char p[300];
    snprintf(p, sizeof p, "%s.%s", lv->path, k->type == CFG_Y_SCALAR ? k->str : "?");
    if (which < 0)
      return config_verr(v, k, p, "unknown key (lifecycle takes freeze_after, stop_after, remove_after)");
    if (lv->node[which])
      return config_verr(v, k, p, "given twice");
    lv->node[which] = config_map_value(map, i);
    int rc = lc_duration(v, lv->node[which], p, &lc->after[which]);
    if (rc) return rc;
  }
  return 0;
}

/* The levels (lowest first, NULL skipped) stacked key by key: the
 * values and the level each came from. */
static void lc_stack(const lc_level *const *levels, size_t n, double *after, const lc_level **from) {
  for (int k = 0; k < CFG_LC_COUNT; k++) {
    after[k] = 0;
    from[k] = NULL;
    for (size_t i = 0; i < n; i++)
      if (levels[i] && levels[i]->lc->after[k] >= 0) {
        after[k] = levels[i]->lc->after[k];
        from[k] = levels[i];
      }
  }
}

static size_t lc_index(const lc_level *const *levels, size_t n, const lc_level *l) {
  for (size_t i = 0; i < n; i++)
    if (levels[i] == l) return i;
  return 0;
}

/* Every pair of steps that are both on must keep their order. */
static int lc_check_order(cfg_vctx *v, const lc_level *const *levels, size_t n) {
  double after[CFG_LC_COUNT];
  const lc_level *from[CFG_LC_COUNT];
  lc_stack(levels, n, after, from);
  for (int a = 0; a < CFG_LC_COUNT; a++)
    for (int b = a + 1; b < CFG_LC_COUNT; b++) {
      if (after[a] <= 0 || after[b] <= 0 || after[a] < after[b]) continue;
      /* Point at the value of the higher level: the one that broke the order. */
      int key = lc_index(levels, n, from[b]) >= lc_index(levels, n, from[a]) ? b : a;
      const lc_level *at = from[key];
      char p[300];
      snprintf(p, sizeof p, "%s.%s", at->path, lc_keys[key]);
      return config_verr(v, at->node[key], p,
                         "%s (%s, %s) must be shorter than %s (%s, %s): a sandbox goes running "
                         "-> frozen -> stopped -> removed",
                         lc_keys[a], from[a]->node[a]->str, from[a]->path, lc_keys[b],
                         from[b]->node[b]->str, from[b]->path);
    }
  return 0;
}

/* snapshots: {older_than, keep}. */
static int lc_parse_snapshots(cfg_vctx *v, const cfg_ynode *map, sm_config *c) {
  c->snapshots_older_than = -1;
  c->snapshots_keep = 0;
  if (map == NULL || config_ynode_is_null(map)) return 0;
  if (map->type != CFG_Y_MAP)
    return config_verr(v, map, "snapshots", "expected a mapping of older_than, keep");
  for (size_t i = 0; i < config_map_size(map); i++) {
    const cfg_ynode *k = config_map_key(map, i), *val = config_map_value(map, i);
    char p[300];
    snprintf(p, sizeof p, "snapshots.%s", k->type == CFG_Y_SCALAR ? k->str : "?");
    sm_error perr = SM_ERROR_INIT;
    if (k->type == CFG_Y_SCALAR && strcmp(k->str, "older_than") == 0) {
      int rc = lc_duration(v, val, p, &c->snapshots_older_than);
      if (rc) return rc;
    } else if (k->type == CFG_Y_SCALAR && strcmp(k->str, "keep") == 0) {
      if (val->type != CFG_Y_SCALAR ||
          sm_parse_int(val->str, 1, SNAP_KEEP_MAX, &c->snapshots_keep, &perr) != 0)
        return config_verr(v, val, p, "expected a whole number from 1 to %d, got %s", SNAP_KEEP_MAX,
                           val->type == CFG_Y_SCALAR ? val->str : "a list or mapping");
    } else {
      return config_verr(v, k, p, "unknown key (snapshots takes older_than, keep)");
    }
  }
  return 0;
}

static const cfg_ynode *lc_entry(const cfg_ynode *root, const char *section, const char *key) {
  const cfg_ynode *sec = root ? config_map_get(root, section) : NULL;
  if (sec == NULL || sec->type != CFG_Y_MAP) return NULL;
  return key ? config_map_get(sec, key) : sec;
}

int config_lifecycle_parse(cfg_vctx *v, const cfg_ynode *root, sm_config *c) {
  lc_level def, *agents = NULL, *workers = NULL;
  int rc = lc_parse_level(v, lc_entry(root, "defaults", NULL), "defaults", &c->defaults.lifecycle,
                          &def);
  size_t na = c->n_agents, nw = c->n_workers;
  agents = calloc(na + 1, sizeof *agents);
  workers = calloc(nw + 1, sizeof *workers);
  if (rc == 0 && (agents == NULL || workers == NULL))
    rc = sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
  char p[200];
  for (size_t i = 0; rc == 0 && i < na; i++) {
    snprintf(p, sizeof p, "agents.%s", c->agents[i].name);
    rc = lc_parse_level(v, lc_entry(root, "agents", c->agents[i].name), p,
                        &c->agents[i].layer.lifecycle, &agents[i]);
  }
  size_t star = SIZE_MAX; /* workers."*" applies to every worker: below a worker's own entry */
  for (size_t i = 0; rc == 0 && i < nw; i++) {
    snprintf(p, sizeof p, "workers.%s", c->workers[i].key);
    rc = lc_parse_level(v, lc_entry(root, "workers", c->workers[i].key), p,
                        &c->workers[i].lifecycle, &workers[i]);
    if (strcmp(c->workers[i].key, "*") == 0) star = i;
  }
  /* Every combination: defaults; an agent or none; then no worker (w ==
   * nw), a worker without an entry ("*" only, w == nw + 1) or one with. */
  for (size_t a = 0; rc == 0 && a <= na; a++)
    for (size_t w = 0; rc == 0 && w <= nw + 1; w++) {
      if (w < nw && w == star) continue;
      const lc_level *stack[4] = {&def, a < na ? &agents[a] : NULL,
                                  w != nw && star < nw ? &workers[star] : NULL,
                                  w < nw ? &workers[w] : NULL};
      rc = lc_check_order(v, stack, 4);
    }
  free(agents);
  free(workers);
  if (rc) return rc;
  return lc_parse_snapshots(v, root ? config_map_get(root, "snapshots") : NULL, c);
}

/* ---- what the runner and `sandbox reap` read ---- */

static const cfg_worker *lc_worker(const sm_config *cfg, const char *key) {
  for (size_t i = 0; key && i < cfg->n_workers; i++)
    if (strcmp(cfg->workers[i].key, key) == 0) return &cfg->workers[i];
  return NULL;
}

void sm_config_lifecycle(const sm_config *cfg, const char *agent, const char *worker,
                         sm_lifecycle *out) {
  memset(out, 0, sizeof *out);
  if (cfg == NULL) return;
  const cfg_agent *ag = NULL;
  for (size_t i = 0; agent && *agent && i < cfg->n_agents; i++)
    if (strcmp(cfg->agents[i].name, agent) == 0) ag = &cfg->agents[i];
  /* workers."*" is every worker's: not a sandbox of no worker. */
  int has_worker = worker && *worker && strcmp(worker, "*") != 0;
  const cfg_worker *star = has_worker ? lc_worker(cfg, "*") : NULL;
  const cfg_worker *own = has_worker ? lc_worker(cfg, worker) : NULL;
  const cfg_lifecycle *stack[4] = {&cfg->defaults.lifecycle, ag ? &ag->layer.lifecycle : NULL,
                                   star ? &star->lifecycle : NULL, own ? &own->lifecycle : NULL};
  double after[CFG_LC_COUNT] = {0, 0, 0};
  for (size_t i = 0; i < 4; i++)
    for (int k = 0; stack[i] && k < CFG_LC_COUNT; k++)
      if (stack[i]->after[k] >= 0) after[k] = stack[i]->after[k];
  out->freeze_after_s = after[CFG_LC_FREEZE];
  out->stop_after_s = after[CFG_LC_STOP];
  out->remove_after_s = after[CFG_LC_REMOVE];
}

int sm_config_lifecycle_any(const sm_config *cfg) {
  if (cfg == NULL) return 0;
  const cfg_lifecycle *l = &cfg->defaults.lifecycle;
  for (int k = 0; k < CFG_LC_COUNT; k++)
    if (l->after[k] > 0) return 1;
  for (size_t i = 0; i < cfg->n_agents; i++)
    for (int k = 0; k < CFG_LC_COUNT; k++)
      if (cfg->agents[i].layer.lifecycle.after[k] > 0) return 1;
  for (size_t i = 0; i < cfg->n_workers; i++)
    for (int k = 0; k < CFG_LC_COUNT; k++)
      if (cfg->workers[i].lifecycle.after[k] > 0) return 1;
  return 0;
}

void sm_config_snapshot_reap(const sm_config *cfg, double *older_than_s, size_t *keep) {
  *older_than_s = cfg && cfg->snapshots_older_than > 0 ? cfg->snapshots_older_than : 0;
  *keep = cfg && cfg->snapshots_keep > 0 ? (size_t)cfg->snapshots_keep : 0;
}
