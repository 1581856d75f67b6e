/* Host-tool policy: the configuration's narrowing rules (as tool policy,
 * docs/configuration.md): defaults.broker, then agents.<name>.broker; a
 * deny anywhere wins, an allow list narrows, and with no allow naming a
 * host tool nobody gets it (fail closed). */
#include <stdio.h>
#include <string.h>

#include <sandman/config.h>
#include <sandman/util.h>

#include "broker/broker_policy.h"

typedef struct level {
  const char *where; /* "defaults.broker", "agents.a.broker" */
  json_object *o;
} level;

static size_t levels(json_object *broker, const char *agent, level out[2], char *agent_where,
                     size_t len) {
  size_t n = 0;
  json_object *d = NULL, *agents = NULL, *a = NULL;
  if (json_object_object_get_ex(broker, "defaults", &d)) out[n++] = (level){"defaults.broker", d};
  if (agent && agent[0] && json_object_object_get_ex(broker, "agents", &agents) &&
      json_object_object_get_ex(agents, agent, &a)) {
    snprintf(agent_where, len, "agents.%s.broker", agent);
    out[n++] = (level){agent_where, a};
  }
  return n;
}

/* A host tool pattern: a glob, or group:G of broker.groups. */
static int host_match(json_object *broker, const char *pattern, const char *name) {
  if (strncmp(pattern, "group:", 6) != 0) return sm_glob_match(pattern, name);
  json_object *groups = NULL, *g = NULL;
  if (!json_object_object_get_ex(broker, "groups", &groups) ||
      !json_object_object_get_ex(groups, pattern + 6, &g))
    return 0;
  for (size_t i = 0; i < json_object_array_length(g); i++)
    if (sm_glob_match(json_object_get_string(json_object_array_get_idx(g, i)), name)) return 1;
  return 0;
}

/* The first entry of o[key] that matches name, or NULL; *set says whether
 * the list is there and not empty. */
static const char *list_match(json_object *broker, json_object *o, const char *key,
                              const char *name, int host, int *set) {
  json_object *l = NULL;
  *set = 0;
  if (!json_object_object_get_ex(o, key, &l) || json_object_array_length(l) == 0) return NULL;
  *set = 1;
  for (size_t i = 0; i < json_object_array_length(l); i++) {
    const char *p = json_object_get_string(json_object_array_get_idx(l, i));
    if (host ? host_match(broker, p, name) : sm_config_tool_matches(p, name)) return p;
  }
  return NULL;
}

int broker_policy_route(json_object *broker, const char *agent, const char *tool, char *rule,
                        size_t len) {
  level lv[2];
  char aw[128];
  const char *t = tool && tool[0] ? tool : "exec";
  size_t n = broker ? levels(broker, agent, lv, aw, sizeof aw) : 0;
  for (size_t i = 0; i < n; i++) {
    int set = 0;
    if (!list_match(broker, lv[i].o, "from_tools", t, 0, &set) && set) {
      snprintf(rule, len, "%s.from_tools does not include %s", lv[i].where, t);
      return 0;
    }
  }
  snprintf(rule, len, "no broker.from_tools leaves %s out", t);
  return 1;
}

int broker_policy_tool(json_object *broker, const char *agent, const char *tool,
                       const char *host_tool, char *rule, size_t len) {
  if (!broker) {
    snprintf(rule, len, "no broker section: nobody gets a host tool");
    return 0;
  }
  if (!broker_policy_route(broker, agent, tool, rule, len)) return 0;
  level lv[2];
  char aw[128];
  size_t n = levels(broker, agent, lv, aw, sizeof aw);
  const char *m;
  int set = 0;
  for (size_t i = 0; i < n; i++)
    if ((m = list_match(broker, lv[i].o, "deny", host_tool, 1, &set))) {
      snprintf(rule, len, "%s.deny: %s matches %s", lv[i].where, m, host_tool);
      return 0;
    }
  const char *by = NULL, *where = NULL;
  for (size_t i = 0; i < n; i++) {
    m = list_match(broker, lv[i].o, "allow", host_tool, 1, &set);
    if (set && !m) {
      snprintf(rule, len, "%s.allow does not include %s", lv[i].where, host_tool);
      return 0;
    }
    if (m) by = m, where = lv[i].where;
  }
  if (!by) {
    snprintf(rule, len, "no broker.allow names %s (host tools are refused unless allowed)",
             host_tool);
    return 0;
  }
  snprintf(rule, len, "%s.allow: %s matches %s", where, by, host_tool);
  return 1;
}

int broker_policy_agent_allows(json_object *broker, const char *agent) {
  level lv[2];
  char aw[128];
  size_t n = broker ? levels(broker, agent, lv, aw, sizeof aw) : 0;
  for (size_t i = 0; i < n; i++) {
    json_object *l = NULL;
    if (json_object_object_get_ex(lv[i].o, "allow", &l) && json_object_array_length(l) > 0)
      return 1;
  }
  return 0;
}
