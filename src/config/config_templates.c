/* templates: and limits: (docs/configuration.md#templates): the sandboxes
 * a request to the runner may ask for by name, which caller may ask for
 * which (defaults.templates, agents.<name>.templates,
 * workers.<key>.templates), and the most a request may choose. Every name
 * a list gives must be a template of the file: a typo is an error with
 * its position, never a template nobody can use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/util.h>

#include "config/config_internal.h"

#define CFG_MAX_TEMPLATES 256

static const char *const template_keys[] = {"image",   "network", "runtime", "cpu",
                                            "memory",  "pids",    "disk",    "timeout",
                                            "idle_timeout", "description", NULL};
static const cfg_setting template_settings[] = {CS_IMAGE,  CS_NETWORK, CS_RUNTIME, CS_CPU,
                                                CS_MEMORY, CS_PIDS,    CS_DISK,    CS_TIMEOUT,
                                                CS_IDLE_TIMEOUT};
static const char *const limits_keys[] = {"cpu_max", "memory_max", "pids_max", "disk_max",
                                          "timeout_max", "idle_timeout_max", NULL};

static const cfg_template *find_template(const sm_config *c, const char *name) {
  for (size_t i = 0; c && name && i < c->n_templates; i++)
    if (strcmp(c->templates[i].name, name) == 0) return &c->templates[i];
  return NULL;
}

static int parse_template(cfg_vctx *v, const cfg_ynode *key, const cfg_ynode *body,
                          cfg_template *t) {
  char p[512], q[600];
  snprintf(p, sizeof p, "templates.%s", key->str);
  if (!cfg_valid_name(key->str))
    return cfg_verr(v, key, p,
                    "template names may only hold letters, digits, '.', '_' and '-' (up to 63, "
                    "starting with a letter or digit)");
  int rc = cfg_load_check_map(v, body, p, template_keys);
  if (rc) return rc;
  if (!(t->name = strdup(key->str))) return sm_error_set(v->err, SM_ENOMEM, NULL);
  if (cfg_ynode_is_null(body)) return 0;
  for (size_t i = 0; i < sizeof template_settings / sizeof template_settings[0]; i++) {
    cfg_setting id = template_settings[i];
    const cfg_ynode *n = cfg_map_get(body, cfg_settings[id].name);
    snprintf(q, sizeof q, "%s.%s", p, cfg_settings[id].name);
    if (n && (rc = cfg_load_setting(v, n, q, id, &t->v[id]))) return rc;
  }
  const cfg_ynode *d = cfg_map_get(body, "description");
  if (d && !cfg_ynode_is_null(d)) {
    snprintf(q, sizeof q, "%s.description", p);
    if (d->type != CFG_Y_SCALAR) return cfg_verr(v, d, q, "expected a string");
    if (!(t->description = strdup(d->str))) return sm_error_set(v->err, SM_ENOMEM, NULL);
  }
  return 0;
}

static int parse_templates(cfg_vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = cfg_load_check_map(v, map, "templates", NULL);
  if (rc || cfg_ynode_is_null(map)) return rc;
  size_t n = cfg_map_size(map);
  if (n > CFG_MAX_TEMPLATES)
    return cfg_verr(v, map, "templates", "more than %d templates", CFG_MAX_TEMPLATES);
  c->templates = calloc(n ? n : 1, sizeof *c->templates);
  if (!c->templates) return sm_error_set(v->err, SM_ENOMEM, NULL);
  for (size_t i = 0; i < n; i++) {
    rc = parse_template(v, cfg_map_key(map, i), cfg_map_value(map, i), &c->templates[c->n_templates++]);
    if (rc) return rc;
  }
  return 0;
}

/* One limits key: the same kind as the setting it bounds. */
static int parse_limit(cfg_vctx *v, const cfg_ynode *map, const char *key, cfg_setting id,
                       cfg_value *out) {
  const cfg_ynode *n = cfg_map_get(map, key);
  char p[64];
  snprintf(p, sizeof p, "limits.%s", key);
  return n ? cfg_load_setting(v, n, p, id, out) : 0;
}

static int parse_limits(cfg_vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = cfg_load_check_map(v, map, "limits", limits_keys);
  if (rc || cfg_ynode_is_null(map)) return rc;
  cfg_value val[6];
  memset(val, 0, sizeof val);
  if ((rc = parse_limit(v, map, "cpu_max", CS_CPU, &val[0])) == 0 &&
      (rc = parse_limit(v, map, "memory_max", CS_MEMORY, &val[1])) == 0 &&
      (rc = parse_limit(v, map, "pids_max", CS_PIDS, &val[2])) == 0 &&
      (rc = parse_limit(v, map, "disk_max", CS_DISK, &val[3])) == 0 &&
      (rc = parse_limit(v, map, "timeout_max", CS_TIMEOUT, &val[4])) == 0)
    rc = parse_limit(v, map, "idle_timeout_max", CS_IDLE_TIMEOUT, &val[5]);
  c->limits.cpu_max = val[0].d;
  c->limits.memory_max = val[1].i;
  c->limits.pids_max = val[2].i;
  c->limits.disk_max = val[3].i;
  c->limits.timeout_max = val[4].d;
  c->limits.idle_timeout_max = val[5].d;
  return rc;
}

/* Every name of a templates list under node (a layer, or a worker entry)
 * is a template of the file. */
static int check_names(cfg_vctx *v, const sm_config *c, const cfg_ynode *entry, const char *path) {
  const cfg_ynode *list =
      entry && entry->type == CFG_Y_MAP ? cfg_map_get(entry, "templates") : NULL;
  if (list == NULL || list->type != CFG_Y_SEQ) return 0;
  for (size_t i = 0; i < list->n; i++) {
    if (find_template(c, list->kids[i]->str)) continue;
    char p[600];
    snprintf(p, sizeof p, "%s.templates[%zu]", path, i);
    return cfg_verr(v, list->kids[i], p, "'%s' is not a template of this file (templates.%s)",
                    list->kids[i]->str, list->kids[i]->str);
  }
  return 0;
}

static int check_lists(cfg_vctx *v, const cfg_ynode *root, const sm_config *c) {
  int rc = check_names(v, c, cfg_map_get(root, "defaults"), "defaults");
  const char *sections[] = {"agents", "workers"};
  for (size_t s = 0; rc == 0 && s < 2; s++) {
    const cfg_ynode *map = cfg_map_get(root, sections[s]);
    for (size_t i = 0; rc == 0 && map && map->type == CFG_Y_MAP && i < cfg_map_size(map); i++) {
      char p[512];
      snprintf(p, sizeof p, "%s.%s", sections[s], cfg_map_key(map, i)->str);
      rc = check_names(v, c, cfg_map_value(map, i), p);
    }
  }
  return rc;
}

int cfg_templates_parse(cfg_vctx *v, const cfg_ynode *root, sm_config *c) {
  int rc = parse_templates(v, cfg_map_get(root, "templates"), c);
  if (rc == 0) rc = parse_limits(v, cfg_map_get(root, "limits"), c);
  if (rc == 0) rc = check_lists(v, root, c);
  return rc;
}

void cfg_templates_free(sm_config *c) {
  for (size_t i = 0; i < c->n_templates; i++) {
    for (int j = 0; j < CS_COUNT; j++) cfg_value_free(&c->templates[i].v[j]);
    free(c->templates[i].name);
    free(c->templates[i].description);
  }
  free(c->templates);
  c->templates = NULL;
  c->n_templates = 0;
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
  const cfg_agent *a = cfg_find_agent(cfg, agent);
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
