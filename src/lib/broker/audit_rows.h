/* The broker's rows of the audit trail (docs/audit.md): host_tool.list,
 * host_tool.allowed, host_tool.call, host_tool.refused, host_tool.approval. */
#ifndef SANDMAN_BROKER_AUDIT_ROWS_H
#define SANDMAN_BROKER_AUDIT_ROWS_H

#include <json-c/json.h>

#include <sandman/audit.h>
#include <sandman/hostroute.h>

typedef struct bk_row {
  const char *event;      /* "host_tool.call", ... */
  const char *host_tool;  /* NULL for a list */
  const char *message;
  const char *rule;
  const char *host_call;  /* the broker's id of the host tool call */
  const char *outcome;    /* "ok", "error", "timeout", "approved", ... */
  const char *reason;     /* a refusal's kind: "policy", "schema", "rate", ... */
  const char *by;         /* an approval's operator */
  const char *approval;   /* an approval's id */
  int exit_code;          /* -1: none */
  int count;              /* host_tool.list: how many were listed; -1: none */
  double duration_ms;     /* < 0: none */
  json_object *arguments; /* masked (borrowed); NULL: none */
} bk_row;

#define BK_ROW_INIT {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, -1, -1, -1.0, NULL}

/* Records row for who; a failed write is logged, never fatal. */
void broker_audit(sm_audit *audit, const sm_route_caller *who, const bk_row *row);

#endif
