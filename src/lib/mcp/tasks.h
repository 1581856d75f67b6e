/* Internal to src/lib/mcp: a session's tasks (tasks.c), the state of tool
 * calls that outlive the request that started them.
 *
 * A task has a server-minted id (128 random bits in hex) and lives in the
 * table of the session that made it, so only the session's owner can name
 * it: on the runner a session belongs to one token's principal, and
 * another's id is as unknown as a made-up one. The table is bounded in
 * number (a full table makes no task: the call then runs in its request)
 * and in age (a task is dropped once its time to live from creation has
 * passed: a running one is cancelled first, and its result is never
 * kept). */
#ifndef SANDMAN_MCP_TASKS_H
#define SANDMAN_MCP_TASKS_H

#include <stdint.h>

#include <json-c/json.h>

#define MCP_TASKS_MAX 32                  /* tasks of one session, running or held */
#define MCP_TASK_TTL_MS (60 * 60 * 1000)  /* a task's life from creation, at most */
#define MCP_TASK_TTL_MIN_MS 1000          /* the least a client may ask (2025-11-25) */
#define MCP_TASK_POLL_MS 500              /* the polling interval suggested */
#define MCP_TASK_ID_LEN 32

enum { MCP_TASK_WORKING, MCP_TASK_COMPLETED, MCP_TASK_FAILED, MCP_TASK_CANCELLED };

/* The era of the requests that see a task: its shape differs (ttlMs and
 * the result inline in 2026-07-28's extension; ttl and tasks/result in
 * 2025-11-25), and a task of one era is unknown to the other's methods. */
enum { MCP_TASK_MODERN = 0, MCP_TASK_LEGACY = 1 };

typedef struct mcp_tasks mcp_tasks;
typedef struct mcp_task mcp_task;

/* A table of at most max tasks (0: MCP_TASKS_MAX), ttl_ms the longest life
 * (0: MCP_TASK_TTL_MS). NULL when out of memory. */
mcp_tasks *mcp_tasks_new(unsigned max, int64_t ttl_ms);
/* Cancels the running tasks, waits for their work to end, frees. */
void mcp_tasks_free(mcp_tasks *t);

/* A new working task of era, living ttl_ms (0: the table's; clamped to
 * MCP_TASK_TTL_MIN_MS and the table's), its id in id. NULL when the table
 * is full of live tasks (or the random source fails). The caller runs the
 * work and ends it with mcp_tasks_finish, exactly once. */
mcp_task *mcp_tasks_create(mcp_tasks *t, int era, int64_t ttl_ms, char id[MCP_TASK_ID_LEN + 1]);
/* The flag the work watches: set by a cancel, by the end of the table and
 * when the task outlives its time to live. */
volatile int *mcp_task_cancel_flag(mcp_task *k);
/* The work ended with result (a CallToolResult) or error (a JSON-RPC error
 * object); both taken. A cancelled task stays cancelled and drops them.
 * The last thing the work does with the table. */
void mcp_tasks_finish(mcp_tasks *t, mcp_task *k, json_object *result, json_object *error);
/* The work never started: the task is dropped (its id was never given). */
void mcp_tasks_discard(mcp_tasks *t, mcp_task *k);

/* The task id of era as the client sees it (a new object), NULL when
 * unknown. detailed: with the result or error of a finished task inline
 * (2026-07-28's tasks/get). */
json_object *mcp_tasks_get(mcp_tasks *t, const char *id, int era, int detailed);
/* Cancels task id of era: 0 (and *out, if asked, its state after), -1 when
 * unknown, -2 when it had already finished (a 2025-11-25 refusal; a
 * 2026-07-28 cancel acknowledges it anyway). */
int mcp_tasks_cancel(mcp_tasks *t, const char *id, int era, json_object **out);
/* 2025-11-25's tasks/result: waits until task id (legacy) ends or *stop is
 * set, then gives its result or error (new objects). -1 unknown (or gone
 * while waiting), -2 stopped, 0 done: *result for a completed task, *error
 * for a failed one, neither for a cancelled one. */
int mcp_tasks_wait(mcp_tasks *t, const char *id, volatile int *stop, json_object **result,
                   json_object **error);
/* The legacy tasks, as an array (2025-11-25's tasks/list). */
json_object *mcp_tasks_list(mcp_tasks *t);
/* Sets every running task's cancel flag. */
void mcp_tasks_cancel_all(mcp_tasks *t);
/* 1 while a task runs or a finished one is kept (its owner may still poll). */
int mcp_tasks_busy(mcp_tasks *t);

#endif
