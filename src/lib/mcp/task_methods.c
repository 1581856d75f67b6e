/* The tasks/... methods. A task id is looked up only in the session's own
 * table, so a task of another session (on the runner: another token's) is
 * answered exactly as an id never made: -32602, "task not found". */
#include <string.h>

#include "mcp/mcp_internal.h"
#include "mcp/task_methods.h"

static const char *const modern_methods[] = {"tasks/get", "tasks/update", "tasks/cancel"};
static const char *const legacy_methods[] = {"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"};

int mcp_task_method_known(const char *method, int modern) {
  const char *const *v = modern ? modern_methods : legacy_methods;
  size_t n = modern ? sizeof modern_methods / sizeof *v : sizeof legacy_methods / sizeof *v;
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i], method) == 0) return 1;
  return 0;
}

static const char *task_id(json_object *params) {
  json_object *v = NULL;
  if (!json_object_is_type(params, json_type_object) || !json_object_object_get_ex(params, "taskId", &v) ||
      !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

static json_object *not_found(json_object *id) {
  return mcp_error(id, MCP_INVALID_PARAMS, "Failed to retrieve task: Task not found");
}

/* 2026-07-28: tasks/get (the task with its result or error inline),
 * tasks/update (an empty acknowledgement: sandman's tasks never ask for
 * input, so responses are ignored), tasks/cancel (acknowledged even when
 * the task had already finished). */
static json_object *modern(sm_mcp_session *s, const char *m, json_object *id, const char *tid,
                           json_object *params) {
  if (strcmp(m, "tasks/get") == 0) {
    json_object *task = mcp_tasks_get(s->tasks, tid, MCP_TASK_MODERN, 1);
    return task ? mcp_success(id, task) : not_found(id);
  }
  if (strcmp(m, "tasks/update") == 0) {
    json_object *responses = NULL;
    if (!json_object_object_get_ex(params, "inputResponses", &responses) ||
        !json_object_is_type(responses, json_type_object))
      return mcp_error(id, MCP_INVALID_PARAMS, "tasks/update needs params.inputResponses (an object)");
    json_object *task = mcp_tasks_get(s->tasks, tid, MCP_TASK_MODERN, 0);
    if (task == NULL) return not_found(id);
    json_object_put(task);
    return mcp_success(id, json_object_new_object());
  }
  int rc = mcp_tasks_cancel(s->tasks, tid, MCP_TASK_MODERN, NULL);
  return rc == -1 ? not_found(id) : mcp_success(id, json_object_new_object());
}

/* 2025-11-25's tasks/result: what the call would have answered, once the
 * task has ended. */
static json_object *legacy_result(sm_mcp_session *s, json_object *id, const char *tid,
                                  volatile int *stop) {
  json_object *result = NULL, *error = NULL;
  int rc = mcp_tasks_wait(s->tasks, tid, stop, &result, &error);
  if (rc == -1) return not_found(id);
  if (rc == -2) return mcp_error(id, MCP_REQUEST_CANCELLED, "the request was cancelled");
  if (error) return mcp_error_wrap(id, error);
  if (result == NULL) return mcp_error(id, MCP_REQUEST_CANCELLED, "the task was cancelled");
  json_object *meta = json_object_new_object(), *rel = json_object_new_object();
  json_object_object_add(rel, "taskId", json_object_new_string(tid));
  json_object_object_add(meta, "io.modelcontextprotocol/related-task", rel);
  json_object_object_add(result, "_meta", meta);
  return mcp_success(id, result);
}

static json_object *legacy(sm_mcp_session *s, const char *m, json_object *id, const char *tid,
                           volatile int *stop) {
  if (strcmp(m, "tasks/get") == 0) {
    json_object *task = mcp_tasks_get(s->tasks, tid, MCP_TASK_LEGACY, 0);
    return task ? mcp_success(id, task) : not_found(id);
  }
  if (strcmp(m, "tasks/result") == 0) return legacy_result(s, id, tid, stop);
  json_object *task = NULL;
  int rc = mcp_tasks_cancel(s->tasks, tid, MCP_TASK_LEGACY, &task);
  if (rc == -1) return not_found(id);
  if (rc == -2) {
    json_object_put(task);
    return mcp_error(id, MCP_INVALID_PARAMS, "the task has already finished: it cannot be cancelled");
  }
  return mcp_success(id, task);
}

json_object *mcp_task_method(sm_mcp_session *s, const char *method, json_object *id,
                             json_object *params, int is_modern, volatile int *stop) {
  if (!is_modern && strcmp(method, "tasks/list") == 0) {
    json_object *cursor = NULL;
    if (params && json_object_object_get_ex(params, "cursor", &cursor) && cursor != NULL)
      return mcp_error(id, MCP_INVALID_PARAMS, "invalid cursor: every task is in one page");
    json_object *r = json_object_new_object();
    json_object_object_add(r, "tasks", mcp_tasks_list(s->tasks));
    return mcp_success(id, r);
  }
  const char *tid = task_id(params);
  if (tid == NULL) return mcp_error(id, MCP_INVALID_PARAMS, "%s needs params.taskId (a string)", method);
  return is_modern ? modern(s, method, id, tid, params) : legacy(s, method, id, tid, stop);
}
