/* Internal to src/lib/mcp: what a session holds, shared by the files that
 * answer its methods (session.c: life and dispatch; stateless.c: the
 * 2026-07-28 requests; tool_calls.c: tools/list and tools/call, in
 * flight or as tasks; task_methods.c: tasks/...). */
#ifndef SANDMAN_MCP_SESSION_STATE_H
#define SANDMAN_MCP_SESSION_STATE_H

#include <pthread.h>

#include <json-c/json.h>

#include <sandman/mcp.h>

#include "mcp/tasks.h"

#define MCP_ID_MAX 128 /* bytes of a request id's JSON form we track */

typedef struct mcp_inflight {
  int used;
  char id[MCP_ID_MAX];      /* the id's JSON text ("" for a task's call: no notification names it) */
  volatile int cancel;
  volatile int *outer;      /* the transport's flag (or the task's), watched too */
} mcp_inflight;

struct sm_mcp_session {
  pthread_mutex_t mu;
  sm_mcp_provider provider;
  char *name, *title, *version, *instructions;
  size_t max_message;
  const sm_mcp_tool *defs;  /* the provider's tools (NULL: provider.list) */
  size_t n_defs;
  json_object *tools;       /* the tools/list array, built once (NULL: provider.list) */
  json_object *tools_tasks; /* the same with execution.taskSupport (2025-11-25 sessions) */
  int long_running;         /* some tool is SM_MCP_LONG_RUNNING: tasks are offered */
  char protocol[16];        /* the initialize era's version; "" before initialize */
  int initialized;          /* notifications/initialized seen */
  int closing;              /* cancel_all was called: later calls start cancelled */
  mcp_inflight calls[SM_MCP_MAX_CALLS_IN_FLIGHT];
  mcp_tasks *tasks;
};

/* How a tools/call is served. */
typedef struct mcp_call_mode {
  int modern;        /* a 2026-07-28 request (its errors use that revision's codes) */
  int task;          /* 2026-07-28: the client declared the tasks extension;
                        2025-11-25: params.task was sent */
  int64_t ttl_ms;    /* 2025-11-25's params.task.ttl (0: the table's) */
} mcp_call_mode;

#endif
