/* Internal to src/lib/mcp: the tasks/... methods of a session (task_methods.c),
 * in the shape of each era: 2026-07-28's tasks extension (tasks/get with
 * the result inline, tasks/update, tasks/cancel) and 2025-11-25's
 * experimental tasks (tasks/get, tasks/result, tasks/list,
 * tasks/cancel). */
#ifndef SANDMAN_MCP_TASK_METHODS_H
#define SANDMAN_MCP_TASK_METHODS_H

#include <json-c/json.h>

#include "mcp/session_state.h"

/* 1 when method is a tasks/... method of that era. */
int mcp_task_method_known(const char *method, int modern);
/* The answer to one (known) tasks/... request. stop: the transport's flag
 * (tasks/result waits for the task, or until it is set). */
json_object *mcp_task_method(sm_mcp_session *s, const char *method, json_object *id,
                             json_object *params, int modern, volatile int *stop);

#endif
