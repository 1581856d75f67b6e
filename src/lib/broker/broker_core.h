/* What the route's handler needs of the broker beyond its public API: the
 * refusal's HTTP shape (status, reason, rule) and one visible tool. */
#ifndef SANDMAN_BROKER_CORE_H
#define SANDMAN_BROKER_CORE_H

#include <json-c/json.h>

#include <sandman/broker.h>

typedef struct bk_refusal {
  int status;         /* 403, 404, 400, 429, 503, 504; 0: none */
  const char *reason; /* "policy", "no_active_call", "not_found", "schema", "rate", ... */
  char rule[256];     /* the deciding rule, "" when it is not shown to the caller */
} bk_refusal;

typedef struct bk_outcome {
  char host_call[40]; /* the broker's id of this host tool call */
  double duration_ms;
} bk_outcome;

/* sm_broker_call with the refusal's shape and the call's id and duration. */
int broker_call(sm_broker *b, const sm_route_caller *who, const char *name, json_object *args,
                volatile int *cancel, sm_mcp_result *out, bk_outcome *done, bk_refusal *why,
                sm_error *err);
/* The description of host tool name if who may see it, else NULL (the
 * same for a tool that does not exist). */
json_object *broker_describe_visible(sm_broker *b, const sm_route_caller *who, const char *name);

#endif
