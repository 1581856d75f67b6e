/* sandman: the host-tool broker.
 *
 * The host side of the host-tool route (sandman/hostroute.h): it owns the
 * catalog of host tools (the configuration's `broker.tools.<name>` and the
 * tools of host MCP servers, `broker.mcp_servers.<name>`), decides who may
 * see and call which (the agents' host-tool policy, deny wins), checks
 * arguments against each tool's JSON Schema, runs the tool (an argv on the
 * host with no shell, a relay to an HTTP endpoint, or a host MCP server's
 * tool) within its limits (timeout, output cap, concurrency and rate per
 * sandbox), waits for an operator's approval where a tool requires one,
 * shapes the result, and records every decision in the audit trail.
 *
 * Every sandbox sees it through the route only: sm_broker_route gives the
 * handler that answers the route's HTTP requests (`GET /v1/tools`,
 * `POST /v1/tools/{name}/call`, MCP at `/mcp`).
 *
 * See docs/host-tools.md. */
#ifndef SANDMAN_BROKER_H
#define SANDMAN_BROKER_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/audit.h>
#include <sandman/config.h>
#include <sandman/error.h>
#include <sandman/export.h>
#include <sandman/hostroute.h>
#include <sandman/mcp.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sm_broker sm_broker;

/* Hands the variables of one service of a credentials file to add (name,
 * value) one by one; SM_ENOTFOUND when there is no such service. The
 * values reach the host tool's environment only. */
typedef int (*sm_broker_add_env_fn)(void *add_ud, const char *name, const char *value);
typedef int (*sm_broker_credentials_fn)(void *ud, const char *service, sm_broker_add_env_fn add,
                                        void *add_ud, sm_error *err);

typedef struct sm_broker_options {
  const sm_config *config; /* borrowed; must outlive the broker */
  sm_audit *audit;         /* borrowed; NULL: nothing recorded */
  /* Approvals (`approval: required`) need somebody to answer them: 1 in
   * the runner (GET/POST /v1/approvals), 0 in a one-shot CLI call, where
   * such a tool is refused with a message that says so. */
  int approvals;
  /* `credentials: [services]` of argv tools (the runner's credentials
   * file). NULL: such a tool is refused ("needs the runner's credentials
   * file"). */
  sm_broker_credentials_fn credentials;
  void *credentials_ud;
} sm_broker_options;

SM_API int sm_broker_new(sm_broker **out, const sm_broker_options *opts, sm_error *err);
/* Sets (or, fn NULL, takes away) where `credentials:` come from. */
SM_API void sm_broker_set_credentials(sm_broker *b, sm_broker_credentials_fn fn, void *ud);
/* Stops host MCP servers it started and waits for calls in flight. */
SM_API void sm_broker_free(sm_broker *b);

/* 1 when agent's tool would see at least one host tool (the call then gets
 * the route), 0 when none; the same policy as sm_broker_list. */
SM_API int sm_broker_offers(sm_broker *b, const char *agent, const char *tool);

/* 1 when some level's broker.allow (defaults.broker, agents.<agent>.broker)
 * names anything for agent: any of its calls may get host tools, and its
 * keyed sandboxes are its own (sm_run_request.agent_has_host_tools). */
SM_API int sm_broker_agent_has_tools(sm_broker *b, const char *agent);

/* `config explain`'s "host_tools" part for agent and its tool: {"route":
 * bool, "route_rule", "tools": [{"name", "kind", "allowed", "rule"}]}
 * (caller owns it). */
SM_API json_object *sm_broker_explain(sm_broker *b, const char *agent, const char *tool);

/* The handler for sm_run_request.host_route (ud is the broker). */
SM_API sm_host_route sm_broker_route(sm_broker *b);

/* The host tools who may see: an array of MCP tool descriptions
 * ({"name", "description", "inputSchema"}, caller owns it). Recorded as
 * host_tool.list. An inactive caller is SM_EPOLICY ("no active call"). */
SM_API int sm_broker_list(sm_broker *b, const sm_route_caller *who, json_object **tools,
                          sm_error *err);

/* Calls host tool name for who with args (an object, borrowed): policy,
 * schema, limits, approval, then the tool. A tool that ran and failed is
 * out->is_error with 0 returned; a refusal (policy, schema, rate,
 * approval denied or timed out, no active call) is a negative code with
 * err saying why (SM_EPOLICY, SM_EINVAL, SM_EBUSY, SM_ETIMEOUT,
 * SM_ENOTFOUND for a tool who may not see). Every outcome is audited.
 * *cancel (may be NULL) becomes non-zero when the caller goes away. */
SM_API int sm_broker_call(sm_broker *b, const sm_route_caller *who, const char *name,
                          json_object *args, volatile int *cancel, sm_mcp_result *out,
                          sm_error *err);

/* ---- approvals (the runner's /v1/approvals) ---- */
/* The pending approvals: an array of {"id", "tool", "agent", "sandbox",
 * "call_id", "arguments" (secret ones masked), "created", "expires"}. */
SM_API int sm_broker_approvals(sm_broker *b, json_object **pending, sm_error *err);
/* Answers approval id: approve 1 lets the call run, 0 refuses it. `who`
 * is the operator's identity for the audit trail. SM_ENOTFOUND when no
 * such approval is pending. */
SM_API int sm_broker_approve(sm_broker *b, const char *id, int approve, const char *who,
                             sm_error *err);

#ifdef __cplusplus
}
#endif

#endif
