/* Who sees which host tool: the list (GET /v1/tools, MCP tools/list) and
 * one tool's description, by policy; a tool the caller may not use is not
 * listed. */
#include "broker/audit_rows.h"
#include "broker/broker_core.h"
#include "broker/mcp_catalog.h"
#include "broker/broker_policy.h"
#include "broker/state.h"

static void refuse_inactive(sm_broker *b, const sm_route_caller *who, const char *tool) {
  bk_row row = BK_ROW_INIT;
  row.event = "host_tool.refused";
  row.host_tool = tool;
  row.reason = "no_active_call";
  row.rule = "the route answers only while sandman drives a call in the sandbox";
  row.message = "a host-tool request came from a sandbox with no call in progress";
  broker_audit(b->audit, who, &row);
}

int sm_broker_list(sm_broker *b, const sm_route_caller *who, json_object **tools,
                   sm_error *err) {
  *tools = NULL;
  if (!who || !who->active) {
    if (who) refuse_inactive(b, who, NULL);
    return sm_error_set(err, SM_EPOLICY, "no active call");
  }
  json_object *arr = json_object_new_array();
  if (!arr) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  int rc = broker_catalog_join_servers(b, err);
  if (rc) {
    json_object_put(arr);
    return rc;
  }
  char rule[256];
  for (size_t i = 0; i < broker_catalog_size(&b->catalog); i++) {
    const bk_tool *t = broker_catalog_at(&b->catalog, i);
    if (!broker_policy_tool(b->conf, who->agent, who->tool, t->name, rule, sizeof rule)) continue;
    json_object *d = broker_tool_describe(t);
    if (!d || json_object_array_add(arr, d)) {
      json_object_put(d);
      json_object_put(arr);
      return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
    }
  }
  bk_row row = BK_ROW_INIT;
  row.event = "host_tool.list";
  row.count = (int)json_object_array_length(arr);
  row.message = "host tools listed";
  broker_audit(b->audit, who, &row);
  *tools = arr;
  return 0;
}

json_object *broker_describe_visible(sm_broker *b, const sm_route_caller *who, const char *name) {
  sm_error err = SM_ERROR_INIT;
  if (!who->active || broker_catalog_join_servers(b, &err)) return NULL;
  const bk_tool *t = broker_catalog_find(&b->catalog, name);
  char rule[256];
  if (!t || !who->active ||
      !broker_policy_tool(b->conf, who->agent, who->tool, name, rule, sizeof rule))
    return NULL;
  return broker_tool_describe(t);
}
