/* templates: and limits: as the file says them (config_load.c parses and
 * checks them: docs/configuration.md#templates): a template by name, the
 * templates a caller may ask for (defaults.templates,
 * agents.<name>.templates, narrowed by workers.<key>.templates), and the
 * most a request may choose. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/util.h>

#include "config/config_internal.h"

static const cfg_template *find_template(const sm_config *c, const char *name) {
  for (size_t i = 0; c && name && i < c->n_templates; i++)
    if (strcmp(c->templates[i].name, name) == 0) return &c->templates[i];
  return NULL;
}

/* ---- the public side ---- */

int sm_config_template_get(const sm_config *cfg, const char *name, sm_config_template *out) {
  memset(out, 0, sizeof *out);
  const cfg_template *t = find_template(cfg, name);
  if (t == NULL) return SM_ENOTFOUND;
  out->name = t->name;
  out->description = t->description;
  out->image = t->v[CS_IMAGE].set ? t->v[CS_IMAGE].str : NULL;
  out->network = t->v[CS_NETWORK].set ? t->v[CS_NETWORK].str : NULL;
  out->runtime = t->v[CS_RUNTIME].set ? t->v[CS_RUNTIME].str : NULL;
  out->cpu = t->v[CS_CPU].set ? t->v[CS_CPU].d : 0;
  out->memory = t->v[CS_MEMORY].set ? t->v[CS_MEMORY].i : 0;
  out->pids = t->v[CS_PIDS].set ? t->v[CS_PIDS].i : 0;
  out->disk = t->v[CS_DISK].set ? t->v[CS_DISK].i : 0;
  out->timeout_s = t->v[CS_TIMEOUT].set ? t->v[CS_TIMEOUT].d : 0;
  out->idle_timeout_s = t->v[CS_IDLE_TIMEOUT].set ? t->v[CS_IDLE_TIMEOUT].d : 0;
  return 0;
}

void sm_config_template_apply(const sm_config_template *t, sm_sandbox_settings *s) {
  if (t->image) snprintf(s->image, sizeof s->image, "%s", t->image);
  if (t->network) snprintf(s->network, sizeof s->network, "%s", t->network);
  if (t->runtime) snprintf(s->runtime, sizeof s->runtime, "%s", t->runtime);
  if (t->cpu > 0) s->cpu = t->cpu;
  if (t->memory > 0) s->memory = t->memory;
  if (t->pids > 0) s->pids = t->pids;
  if (t->disk > 0) s->disk = t->disk;
}

static int in_list(const cfg_list *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->items[i], name) == 0) return 1;
  return 0;
}

/* The workers' lists for worker_key: 1 when any is set, *union of them. */
static int worker_lists(const sm_config *cfg, const char *worker_key, const char *name, int *listed) {
  int set = 0;
  *listed = 0;
  for (size_t i = 0; cfg && worker_key && i < cfg->n_workers; i++) {
    const cfg_worker *w = &cfg->workers[i];
    if (!w->templates.set || (strcmp(w->key, worker_key) != 0 && strcmp(w->key, "*") != 0)) continue;
    set = 1;
    *listed |= in_list(&w->templates.list, name);
  }
  return set;
}

int sm_config_templates_allowed(const sm_config *cfg, const char *agent, const char *worker_key,
                                sm_string_list *out, char *rule, size_t len) {
  memset(out, 0, sizeof *out);
  const cfg_agent *a = config_find_agent(cfg, agent);
  const cfg_opt_list *l = a && a->layer.templates.set ? &a->layer.templates
                          : cfg                       ? &cfg->defaults.templates
                                                      : NULL;
  if (rule && a && a->layer.templates.set)
    snprintf(rule, len, "agents.%s.templates%s", a->name,
             worker_key ? " and the workers' templates lists" : "");
  else if (rule)
    snprintf(rule, len, "defaults.templates%s", worker_key ? " and the workers' templates lists" : "");
  for (size_t i = 0; l && l->set && i < l->list.n; i++) {
    int listed = 1;
    if (worker_lists(cfg, worker_key, l->list.items[i], &listed) && !listed) continue;
    if (sm_string_list_add(out, l->list.items[i], NULL) != 0) break;
  }
  return (int)out->n;
}

void sm_config_limits_get(const sm_config *cfg, sm_config_limits *out) {
  memset(out, 0, sizeof *out);
  if (cfg) *out = cfg->limits;
}
