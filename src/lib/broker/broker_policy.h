/* Who may see and call which host tool (docs/host-tools.md "Policy"). */
#ifndef SANDMAN_BROKER_POLICY_H
#define SANDMAN_BROKER_POLICY_H

#include <stddef.h>

#include <json-c/json.h>

/* 1 when agent's calling tool gets the route at all (from_tools of
 * defaults.broker and agents.<agent>.broker), 0 with rule saying why not. */
int broker_policy_route(json_object *broker, const char *agent, const char *tool, char *rule,
                        size_t len);
/* 1 when agent's calling tool may see and call host_tool: the route, then
 * deny at any level wins, every allow set must name it, and some allow must
 * (nobody gets a host tool by default). rule: the deciding rule. */
int broker_policy_tool(json_object *broker, const char *agent, const char *tool,
                       const char *host_tool, char *rule, size_t len);

/* 1 when an allow list of defaults.broker or agents.<agent>.broker is not
 * empty: some calling tool of agent may get a host tool. */
int broker_policy_agent_allows(json_object *broker, const char *agent);

#endif
