/* The broker: its life, whether a call gets the route (offers), explain,
 * and the approvals table. The list is in list.c, calls in broker_call.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/config.h>

#include "broker/audit_rows.h"
#include "broker/mcp_catalog.h"
#include "broker/broker_policy.h"
#include "broker/route_mcp.h"
#include "broker/state.h"

int sm_broker_new(sm_broker **out, const sm_broker_options *opts, sm_error *err) {
  *out = NULL;
  if (!opts) return sm_error_set(err, SM_EINVAL, "broker: no options");
  sm_broker *b = calloc(1, sizeof *b);
  if (!b) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  b->config = opts->config;
  b->conf = sm_config_broker(opts->config);
  b->audit = opts->audit;
  b->approvals_on = opts->approvals;
  b->credentials = opts->credentials;
  b->credentials_ud = opts->credentials_ud;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->idle, NULL);
  json_object *servers = NULL;
  if (b->conf) json_object_object_get_ex(b->conf, "mcp_servers", &servers);
  int rc = broker_catalog_build(&b->catalog, b->conf, err);
  if (rc == 0 && (broker_limits_new(&b->limits) || broker_approvals_new(&b->approvals)))
    rc = sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  if (rc == 0 && servers && json_object_object_length(servers) > 0)
    rc = broker_mcp_servers_new(&b->mcp, servers, err);
  if (rc) {
    sm_broker_free(b);
    return rc;
  }
  *out = b;
  return 0;
}

void sm_broker_free(sm_broker *b) {
  if (!b) return;
  broker_approvals_close(b->approvals); /* wakes calls waiting for an operator */
  pthread_mutex_lock(&b->mu);
  while (b->in_flight > 0) pthread_cond_wait(&b->idle, &b->mu);
  pthread_mutex_unlock(&b->mu);
  broker_route_mcp_dispose(b); /* its sessions' calls are over: in_flight is 0 */
  broker_approvals_free(b->approvals);
  broker_mcp_servers_free(b->mcp);
  broker_limits_free(b->limits);
  broker_catalog_dispose(&b->catalog);
  pthread_cond_destroy(&b->idle);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

void sm_broker_set_credentials(sm_broker *b, sm_broker_credentials_fn fn, void *ud) {
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->credentials = fn;
  b->credentials_ud = fn ? ud : NULL;
  pthread_mutex_unlock(&b->mu);
}

int sm_broker_offers(sm_broker *b, const char *agent, const char *tool) {
  char rule[256];
  if (!b || !b->conf || !broker_policy_route(b->conf, agent, tool, rule, sizeof rule)) return 0;
  for (size_t i = 0; i < b->catalog.n; i++)
    if (broker_policy_tool(b->conf, agent, tool, b->catalog.tools[i].name, rule, sizeof rule))
      return 1;
  /* The host MCP servers' tools are known once a server runs: the route is
   * offered, and the list decides (no server starts for this). */
  return b->mcp != NULL;
}

int sm_broker_agent_has_tools(sm_broker *b, const char *agent) {
  return b && b->conf && broker_policy_agent_allows(b->conf, agent);
}

json_object *sm_broker_explain(sm_broker *b, const char *agent, const char *tool) {
  json_object *o = json_object_new_object(), *arr = json_object_new_array();
  if (!o || !arr) {
    json_object_put(o);
    json_object_put(arr);
    return NULL;
  }
  char rule[256] = "no broker section: nobody gets a host tool";
  int route = b && b->conf && broker_policy_route(b->conf, agent, tool, rule, sizeof rule);
  int offers = route && sm_broker_offers(b, agent, tool);
  if (route && !offers) snprintf(rule, sizeof rule, "no host tool is allowed to this call");
  json_object_object_add(o, "route", json_object_new_boolean(offers));
  json_object_object_add(o, "route_rule", json_object_new_string(rule));
  /* The host MCP servers are asked for their tools (started) here too: a
   * server that cannot start leaves its tools out, and says why. */
  sm_error jerr = SM_ERROR_INIT;
  if (b && broker_catalog_join_servers(b, &jerr))
    json_object_object_add(o, "mcp_servers_error", json_object_new_string(jerr.message));
  for (size_t i = 0; b && i < broker_catalog_size(&b->catalog); i++) {
    const bk_tool *t = broker_catalog_at(&b->catalog, i);
    json_object *e = json_object_new_object();
    int ok = broker_policy_tool(b->conf, agent, tool, t->name, rule, sizeof rule);
    json_object_object_add(e, "name", json_object_new_string(t->name));
    json_object_object_add(e, "kind", json_object_new_string(broker_kind_name(t->kind)));
    json_object_object_add(e, "allowed", json_object_new_boolean(ok));
    json_object_object_add(e, "rule", json_object_new_string(rule));
    json_object_object_add(e, "approval", json_object_new_boolean(t->approval));
    json_object_array_add(arr, e);
  }
  json_object_object_add(o, "tools", arr);
  return o;
}

int sm_broker_approvals(sm_broker *b, json_object **pending, sm_error *err) {
  *pending = b && b->approvals ? broker_approvals_list(b->approvals) : json_object_new_array();
  if (!*pending) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  return 0;
}

int sm_broker_approve(sm_broker *b, const char *id, int approve, const char *who,
                      sm_error *err) {
  if (!b || !b->approvals || !id) return sm_error_set(err, SM_ENOTFOUND, "no such approval");
  return broker_approvals_answer(b->approvals, id, approve, who, err);
}
