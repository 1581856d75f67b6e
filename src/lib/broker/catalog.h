/* The catalog of host tools: the configuration's broker.tools, each with
 * its limits read once (src/lib/broker). */
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
  int by_server;        /* re-exported from a host MCP server: its schema is the server's to check */
} bk_tool;

typedef struct bk_catalog {
  bk_tool *tools;       /* broker.tools */
  size_t n;
  /* The tools host MCP servers re-export (mcp_catalog.c): added once by
   * broker_catalog_extend, never changed after; read them only once
   * broker_catalog_join_servers has returned 0. */
  bk_tool *extra;
  size_t n_extra;
  json_object *extra_defs; /* their entries (owned) */
  int joined;
} bk_catalog;

/* From sm_config_broker's object (NULL: an empty catalog). */
int broker_catalog_build(bk_catalog *c, json_object *broker, sm_error *err);
void broker_catalog_dispose(bk_catalog *c);
/* Adds the tools of entries (an array of normalized entries with "name";
 * a reference is taken), once. A name broker.tools has already is
 * SM_ECONFIG and adds nothing. */
int broker_catalog_extend(bk_catalog *c, json_object *entries, sm_error *err);
/* Every tool: broker.tools, then the re-exported ones. */
size_t broker_catalog_size(const bk_catalog *c);
const bk_tool *broker_catalog_at(const bk_catalog *c, size_t i);
const bk_tool *broker_catalog_find(const bk_catalog *c, const char *name);
const char *broker_kind_name(bk_kind k);
/* {"name", "description", "inputSchema"} (an MCP tool description). */
json_object *broker_tool_describe(const bk_tool *t);
/* 1 when argument name is marked secret. */
int broker_tool_secret(const bk_tool *t, const char *name);
/* A copy of args with secret values replaced by "***" and long values cut
 * (for the audit trail and approvals). */
json_object *broker_tool_masked_args(const bk_tool *t, json_object *args);

#endif
