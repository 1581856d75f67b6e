/* The configuration's egress settings: a sandbox's allow and deny lists by
 * level (defaults, then the agent's entry: each narrows), and the
 * instance's proxy settings (egress_proxy). Everything is borrowed from the
 * loaded configuration. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

static int add_level(const cfg_layer *l, const char *name, sm_egress_level *out) {
  if (!l->egress_allow.set && !l->egress_deny.set) return 0;
  out->name = name;
  out->allow = (const char *const *)l->egress_allow.list.items;
  out->n_allow = l->egress_allow.list.n;
  out->deny = (const char *const *)l->egress_deny.list.items;
  out->n_deny = l->egress_deny.list.n;
  return 1;
}

void sm_config_egress_get(const sm_config *cfg, const char *agent, sm_config_egress *out) {
  memset(out, 0, sizeof *out);
  if (cfg == NULL) return;
  out->n_levels += (size_t)add_level(&cfg->defaults, "defaults", &out->levels[out->n_levels]);
  const cfg_agent *a = agent ? config_find_agent(cfg, agent) : NULL;
  if (a) {
    snprintf(out->agent_level, sizeof out->agent_level, "agents.%s", a->name);
    out->n_levels += (size_t)add_level(&a->layer, out->agent_level, &out->levels[out->n_levels]);
  }
}

void sm_config_egress_proxy(const sm_config *cfg, sm_egress_proxy_options *out) {
  sm_egress_proxy_options none = SM_EGRESS_PROXY_OPTIONS_INIT;
  *out = none;
  if (cfg == NULL) return;
  out->network = cfg->egress_network;
  out->hosts = (const char *const *)cfg->egress_hosts.items;
  out->n_hosts = cfg->egress_hosts.n;
  out->max_connections = cfg->egress_max_connections;
  out->max_per_sandbox = cfg->egress_max_per_sandbox;
  out->idle_timeout_s = cfg->egress_idle_timeout;
  out->connect_timeout_s = cfg->egress_connect_timeout;
}

json_object *sm_config_egress_json(const sm_config_egress *e) {
  json_object *o = json_object_new_object(), *allow = json_object_new_array(), *deny = json_object_new_array();
  for (size_t l = 0; l < e->n_levels; l++) {
    for (int pass = 0; pass < 2; pass++) {
      const char *const *list = pass ? e->levels[l].deny : e->levels[l].allow;
      size_t n = pass ? e->levels[l].n_deny : e->levels[l].n_allow;
      if (list == NULL && n == 0) continue;
      json_object *lv = json_object_new_object(), *pats = json_object_new_array();
      for (size_t i = 0; i < n; i++) json_object_array_add(pats, json_object_new_string(list[i]));
      json_object_object_add(lv, "level", json_object_new_string(e->levels[l].name));
      json_object_object_add(lv, "patterns", pats);
      json_object_array_add(pass ? deny : allow, lv);
    }
  }
  json_object_object_add(o, "allow", allow);
  json_object_object_add(o, "deny", deny);
  return o;
}
