/* tools/list and tools/call of a session. A call runs in its request (the
 * transport's thread), or, for a tool flagged SM_MCP_LONG_RUNNING when the
 * client supports tasks, on a thread of its own as a task: the request is
 * answered with the task at once and the result is kept in the session's
 * task table for tasks/get (or tasks/result). Either way a call holds one
 * of the session's in-flight slots, so at most SM_MCP_MAX_CALLS_IN_FLIGHT
 * tools run at once. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/thread.h"
#include "mcp/mcp_internal.h"
#include "mcp/revision.h"
#include "mcp/tool_calls.h"

static int tool_name_ok(const char *n) {
  size_t len = n ? strlen(n) : 0;
  if (len == 0 || len > 64) return 0;
  for (const char *c = n; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '_' || *c == '-' || *c == '.'))
      return 0;
  return 1;
}

static json_object *annotations(const sm_mcp_tool *t) {
  json_object *ann = json_object_new_object();
  if (t->title) json_object_object_add(ann, "title", json_object_new_string(t->title));
  json_object_object_add(ann, "readOnlyHint", json_object_new_boolean(!!(t->hints & SM_MCP_READ_ONLY)));
  json_object_object_add(ann, "destructiveHint", json_object_new_boolean(!!(t->hints & SM_MCP_DESTRUCTIVE)));
  json_object_object_add(ann, "idempotentHint", json_object_new_boolean(!!(t->hints & SM_MCP_IDEMPOTENT)));
  json_object_object_add(ann, "openWorldHint", json_object_new_boolean(!!(t->hints & SM_MCP_OPEN_WORLD)));
  return ann;
}

/* One tools/list entry; NULL with err set when the tool is not valid. */
static json_object *describe(const sm_mcp_tool *t, sm_error *err) {
  if (!tool_name_ok(t->name)) {
    sm_error_set(err, SM_EINVAL, "MCP tool name '%s' is not valid", t->name ? t->name : "");
    return NULL;
  }
  json_object *in = t->input_schema ? json_tokener_parse(t->input_schema) : NULL;
  json_object *outs = t->output_schema ? json_tokener_parse(t->output_schema) : NULL;
  if (!json_object_is_type(in, json_type_object) ||
      (t->output_schema && !json_object_is_type(outs, json_type_object))) {
    json_object_put(in);
    json_object_put(outs);
    sm_error_set(err, SM_EINVAL, "MCP tool '%s': its schema is not a JSON object", t->name);
    return NULL;
  }
  json_object *o = json_object_new_object();
  json_object_object_add(o, "name", json_object_new_string(t->name));
  if (t->title) json_object_object_add(o, "title", json_object_new_string(t->title));
  json_object_object_add(o, "description", json_object_new_string(t->description ? t->description : ""));
  json_object_object_add(o, "inputSchema", in);
  if (outs) json_object_object_add(o, "outputSchema", outs);
  json_object_object_add(o, "annotations", annotations(t));
  return o;
}

int mcp_tools_build(sm_mcp_session *s, sm_error *err) {
  if (s->provider.list) return 0; /* asked per request */
  size_t n = 0;
  const sm_mcp_tool *t = s->provider.tools ? s->provider.tools(s->provider.ud, &n) : NULL;
  json_object *plain = json_object_new_array(), *tasks = json_object_new_array();
  if (plain == NULL || tasks == NULL) {
    json_object_put(plain);
    json_object_put(tasks);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  for (size_t i = 0; i < n; i++) {
    json_object *o = describe(&t[i], err);
    if (o == NULL) {
      json_object_put(plain);
      json_object_put(tasks);
      return err->code;
    }
    json_object *copy = NULL;
    if (json_object_deep_copy(o, &copy, NULL) != 0 || copy == NULL) {
      json_object_put(o);
      json_object_put(plain);
      json_object_put(tasks);
      return sm_error_set(err, SM_ENOMEM, NULL);
    }
    if (t[i].hints & SM_MCP_LONG_RUNNING) {
      json_object *ex = json_object_new_object();
      json_object_object_add(ex, "taskSupport", json_object_new_string("optional"));
      json_object_object_add(copy, "execution", ex);
      s->long_running = 1;
    }
    json_object_array_add(plain, o);
    json_object_array_add(tasks, copy);
  }
  s->defs = t;
  s->n_defs = n;
  s->tools = plain;
  s->tools_tasks = tasks;
  return 0;
}

/* The whole list in one page: no answer carries a nextCursor, so no cursor
 * a client sends can be one of ours (-32602, as the protocol asks). */
json_object *mcp_tools_list(sm_mcp_session *s, void *request, json_object *id, json_object *params,
                            int with_tasks) {
  json_object *cursor = NULL;
  if (params && json_object_object_get_ex(params, "cursor", &cursor) && cursor != NULL)
    return mcp_error(id, MCP_INVALID_PARAMS,
                     "invalid cursor: this server lists every tool in one page (send no cursor)");
  json_object *tools = NULL;
  if (s->tools) {
    /* A copy: requests are answered on several threads at once, and
     * json-c's reference counts are not atomic. */
    if (json_object_deep_copy(with_tasks ? s->tools_tasks : s->tools, &tools, NULL) != 0)
      return mcp_error(id, MCP_INTERNAL_ERROR, "out of memory");
  } else {
    sm_error err = SM_ERROR_INIT;
    int rc = s->provider.list(s->provider.ud, request, &tools, &err);
    if (rc == 0 && !json_object_is_type(tools, json_type_array))
      rc = sm_error_set(&err, SM_EINVAL, "the tool list is not an array");
    if (rc) {
      json_object_put(tools);
      return mcp_error(id, rc == SM_EPOLICY ? MCP_INVALID_REQUEST : MCP_INTERNAL_ERROR, "%s",
                       err.message[0] ? err.message : sm_error_default_message(rc));
    }
  }
  json_object *r = json_object_new_object();
  json_object_object_add(r, "tools", tools);
  return mcp_success(id, r);
}

/* ---- calls in flight ---- */

/* Registers a call in flight; NULL when the table is full. */
static mcp_inflight *track(sm_mcp_session *s, json_object *id, volatile int *outer) {
  const char *text = id ? json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN) : "";
  pthread_mutex_lock(&s->mu);
  mcp_inflight *slot = NULL;
  for (size_t i = 0; i < SM_MCP_MAX_CALLS_IN_FLIGHT && slot == NULL; i++)
    if (!s->calls[i].used) slot = &s->calls[i];
  if (slot) {
    slot->used = 1;
    slot->cancel = s->closing;
    slot->outer = outer;
    if (outer && s->closing) *outer = 1;
    snprintf(slot->id, sizeof slot->id, "%s", text ? text : "");
  }
  pthread_mutex_unlock(&s->mu);
  return slot;
}

static void untrack(sm_mcp_session *s, mcp_inflight *slot) {
  pthread_mutex_lock(&s->mu);
  slot->used = 0;
  slot->outer = NULL;
  pthread_mutex_unlock(&s->mu);
}

void mcp_calls_cancel_id(sm_mcp_session *s, json_object *id) {
  if (!mcp_id_ok(id)) return;
  const char *text = json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN);
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < SM_MCP_MAX_CALLS_IN_FLIGHT; i++)
    if (s->calls[i].used && s->calls[i].id[0] && strcmp(s->calls[i].id, text) == 0) {
      s->calls[i].cancel = 1;
      if (s->calls[i].outer) *s->calls[i].outer = 1;
    }
  pthread_mutex_unlock(&s->mu);
}

/* ---- one call ---- */

/* Runs tool: *result gets its CallToolResult, or *error a JSON-RPC error
 * object ({"code", "message"}). */
static void run_tool(sm_mcp_session *s, void *request, const char *tool, json_object *args,
                     volatile int *flag, json_object **result, json_object **error) {
  json_object *empty = args ? NULL : json_object_new_object();
  sm_mcp_result r;
  sm_mcp_result_init(&r);
  sm_error err = SM_ERROR_INIT;
  int rc = s->provider.call(s->provider.ud, request, tool, args ? args : empty, flag, &r, &err);
  json_object_put(empty);
  *result = *error = NULL;
  if (rc) {
    int code = rc == SM_ENOTFOUND ? MCP_INVALID_PARAMS
               : rc == SM_ECANCELLED ? MCP_REQUEST_CANCELLED : MCP_INTERNAL_ERROR;
    char msg[SM_ERROR_MESSAGE_MAX + 32];
    if (rc == SM_ENOTFOUND) snprintf(msg, sizeof msg, "unknown tool: %s", tool);
    else if (rc == SM_ECANCELLED) snprintf(msg, sizeof msg, "the call was cancelled");
    else snprintf(msg, sizeof msg, "%s", err.message[0] ? err.message : sm_error_default_message(rc));
    json_object *a = mcp_error(NULL, code, "%s", msg), *e = NULL;
    json_object_object_get_ex(a, "error", &e);
    *error = json_object_get(e);
    json_object_put(a);
  } else {
    json_object *res = json_object_new_object();
    json_object_object_add(res, "content", r.content ? json_object_get(r.content) : json_object_new_array());
    if (r.structured) json_object_object_add(res, "structuredContent", json_object_get(r.structured));
    json_object_object_add(res, "isError", json_object_new_boolean(r.is_error));
    *result = res;
  }
  sm_mcp_result_dispose(&r);
}

/* The provider's definition of tool, or NULL (a per-request list: the
 * provider knows its tools). *known: the session knows the name. */
static const sm_mcp_tool *lookup(sm_mcp_session *s, const char *tool, int *known) {
  *known = s->tools == NULL;
  for (size_t i = 0; i < s->n_defs; i++)
    if (strcmp(s->defs[i].name, tool) == 0) {
      *known = 1;
      return &s->defs[i];
    }
  return NULL;
}

typedef struct task_job {
  sm_mcp_session *s;
  mcp_task *task;
  mcp_inflight *slot;
  char *tool;
  json_object *args; /* a copy of its own */
} task_job;

static void *run_task(void *arg) {
  task_job *j = arg;
  json_object *result = NULL, *error = NULL;
  run_tool(j->s, NULL, j->tool, j->args, mcp_task_cancel_flag(j->task), &result, &error);
  untrack(j->s, j->slot);
  json_object_put(j->args);
  free(j->tool);
  mcp_tasks *t = j->s->tasks;
  mcp_task *k = j->task;
  free(j);
  mcp_tasks_finish(t, k, result, error); /* last: the session may end right after */
  return NULL;
}

/* The CreateTaskResult of a task just made. */
static json_object *created(sm_mcp_session *s, json_object *id, const char *task_id,
                            const mcp_call_mode *mode) {
  json_object *task = mcp_tasks_get(s->tasks, task_id, mode->modern ? MCP_TASK_MODERN : MCP_TASK_LEGACY, 0);
  if (task == NULL) return mcp_error(id, MCP_INTERNAL_ERROR, "the task ended before it was reported");
  if (mode->modern) {
    json_object_object_add(task, "resultType", json_object_new_string("task"));
    return mcp_success(id, task);
  }
  json_object *r = json_object_new_object();
  json_object_object_add(r, "task", task);
  return mcp_success(id, r);
}

/* Starts tool as a task; NULL when no task could be made (the table is
 * full of live ones): the caller then decides. */
static json_object *start_task(sm_mcp_session *s, json_object *id, const char *tool,
                               json_object *args, const mcp_call_mode *mode) {
  char task_id[MCP_TASK_ID_LEN + 1];
  mcp_task *k = mcp_tasks_create(s->tasks, mode->modern ? MCP_TASK_MODERN : MCP_TASK_LEGACY,
                                 mode->ttl_ms, task_id);
  if (k == NULL) return NULL;
  mcp_inflight *slot = track(s, NULL, mcp_task_cancel_flag(k));
  task_job *j = slot ? calloc(1, sizeof *j) : NULL;
  pthread_t th;
  if (j) {
    *j = (task_job){s, k, slot, strdup(tool), NULL};
    if (args) json_object_deep_copy(args, &j->args, NULL);
  }
  if (j && j->tool && (args == NULL || j->args) &&
      common_thread_start(&th, NULL, run_task, j) == 0) {
    pthread_detach(th);
    return created(s, id, task_id, mode);
  }
  int busy = slot == NULL;
  if (j) {
    json_object_put(j->args);
    free(j->tool);
    free(j);
  }
  if (slot) untrack(s, slot);
  mcp_tasks_discard(s->tasks, k);
  if (busy)
    return mcp_error(id, mode->modern ? MCP_BUSY : MCP_SERVER_BUSY,
                     "too many tool calls in flight (at most %d)", SM_MCP_MAX_CALLS_IN_FLIGHT);
  return mcp_error(id, MCP_INTERNAL_ERROR, "the task could not start");
}

/* The provider sees one cancel flag: the transport's when it gave one
 * (the sender going away), which a notifications/cancelled sets too, else
 * the call's own. */
json_object *mcp_tools_call(sm_mcp_session *s, void *request, json_object *id, json_object *params,
                            volatile int *outer, const mcp_call_mode *mode) {
  json_object *name = NULL, *args = NULL;
  if (!json_object_is_type(params, json_type_object) ||
      !json_object_object_get_ex(params, "name", &name) || !json_object_is_type(name, json_type_string))
    return mcp_error(id, MCP_INVALID_PARAMS, "tools/call needs params.name");
  if (json_object_object_get_ex(params, "arguments", &args) && args != NULL &&
      !json_object_is_type(args, json_type_object))
    return mcp_error(id, MCP_INVALID_PARAMS, "params.arguments must be an object");
  const char *tool = json_object_get_string(name);
  int known = 0;
  const sm_mcp_tool *def = lookup(s, tool, &known);
  if (!known) return mcp_error(id, MCP_INVALID_PARAMS, "unknown tool: %s", tool);
  int long_running = def && (def->hints & SM_MCP_LONG_RUNNING);
  if (mode->task && !mode->modern && !long_running)
    return mcp_error(id, MCP_METHOD_NOT_FOUND, "tool %s does not run as a task", tool);
  if (mode->task && long_running) {
    json_object *a = start_task(s, id, tool, args, mode);
    if (a) return a;
    if (!mode->modern) /* 2025-11-25: a task was asked for, none can be made */
      return mcp_error(id, MCP_SERVER_BUSY, "too many tasks (at most %d)", MCP_TASKS_MAX);
    /* 2026-07-28: the server decides; the call runs in its request. */
  }
  mcp_inflight *slot = track(s, id, outer);
  if (slot == NULL)
    return mcp_error(id, mode->modern ? MCP_BUSY : MCP_SERVER_BUSY,
                     "too many tool calls in flight (at most %d)", SM_MCP_MAX_CALLS_IN_FLIGHT);
  volatile int *flag = slot->outer ? slot->outer : &slot->cancel;
  json_object *result = NULL, *error = NULL;
  run_tool(s, request, tool, args, flag, &result, &error);
  untrack(s, slot);
  return error ? mcp_error_wrap(id, error) : mcp_success(id, result);
}
