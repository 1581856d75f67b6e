/* The catalog of host tools: the configuration's broker.tools, each with
 * its limits read once (src/broker). */
#ifndef SANDMAN_BROKER_CATALOG_H
#define SANDMAN_BROKER_CATALOG_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>

typedef enum { BK_ARGV, BK_HTTP, BK_MCP } bk_kind;

typedef struct bk_tool {
  const char *name;     /* borrowed from the configuration */
  json_object *def;     /* its normalized entry (borrowed) */
  json_object *schema;  /* input_schema (borrowed) */
  json_object *secret;  /* array of argument names to mask (borrowed) */
  bk_kind kind;
  double timeout_s, approval_timeout_s;
  size_t max_output;
  int concurrency, rate, approval;
} bk_tool;

typedef struct bk_catalog {
  bk_tool *tools;
  size_t n;
} bk_catalog;

/* From sm_config_broker's object (NULL: an empty catalog). */
int bk_catalog_build(bk_catalog *c, json_object *broker, sm_error *err);
void bk_catalog_dispose(bk_catalog *c);
const bk_tool *bk_catalog_find(const bk_catalog *c, const char *name);
const char *bk_kind_name(bk_kind k);
/* {"name", "description", "inputSchema"} (an MCP tool description). */
json_object *bk_tool_describe(const bk_tool *t);
/* 1 when argument name is marked secret. */
int bk_tool_secret(const bk_tool *t, const char *name);
/* A copy of args with secret values replaced by "***" and long values cut
 * (for the audit trail and approvals). */
json_object *bk_tool_masked_args(const bk_tool *t, json_object *args);

#endif
