/* The task table of an MCP session: ids, states, the bounds in number and
 * in age, cancellation, 2025-11-25's wait and list, and the two eras kept
 * apart. The work is simulated by the test (finish called by hand, or
 * from a thread). No engine. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/util.h>

#include "mcp/tasks.h"

static json_object *result_text(const char *t) {
  json_object *r = json_object_new_object(), *c = json_object_new_array(), *b = json_object_new_object();
  json_object_object_add(b, "type", json_object_new_string("text"));
  json_object_object_add(b, "text", json_object_new_string(t));
  json_object_array_add(c, b);
  json_object_object_add(r, "content", c);
  json_object_object_add(r, "isError", json_object_new_boolean(0));
  return r;
}

static const char *field(json_object *o, const char *k) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static void test_lifecycle(void **state) {
  (void)state;
  mcp_tasks *t = mcp_tasks_new(4, 0);
  assert_non_null(t);
  char id[MCP_TASK_ID_LEN + 1], id2[MCP_TASK_ID_LEN + 1];
  mcp_task *k = mcp_tasks_create(t, MCP_TASK_MODERN, 0, id);
  assert_non_null(k);
  assert_int_equal(strlen(id), MCP_TASK_ID_LEN);
  mcp_task *k1 = mcp_tasks_create(t, MCP_TASK_MODERN, 0, id2);
  assert_non_null(k1);
  assert_string_not_equal(id, id2); /* minted, random */
  json_object *g = mcp_tasks_get(t, id, MCP_TASK_MODERN, 1);
  assert_string_equal(field(g, "status"), "working");
  assert_string_equal(field(g, "taskId"), id);
  assert_non_null(field(g, "createdAt"));
  assert_non_null(field(g, "lastUpdatedAt"));
  assert_int_equal(atoi(field(g, "ttlMs")), MCP_TASK_TTL_MS);
  assert_non_null(field(g, "pollIntervalMs"));
  assert_null(field(g, "result"));
  json_object_put(g);
  assert_true(mcp_tasks_busy(t));

  /* Completed: the result inline (2026-07-28), only when asked. */
  mcp_tasks_finish(t, k, result_text("done"), NULL);
  g = mcp_tasks_get(t, id, MCP_TASK_MODERN, 1);
  assert_string_equal(field(g, "status"), "completed");
  json_object *r = NULL;
  assert_true(json_object_object_get_ex(g, "result", &r));
  assert_non_null(strstr(json_object_to_json_string(r), "done"));
  assert_null(field(g, "pollIntervalMs"));
  json_object_put(g);
  g = mcp_tasks_get(t, id, MCP_TASK_MODERN, 0);
  assert_null(field(g, "result"));
  json_object_put(g);
  /* Unknown ids, and ids of the other era, are unknown alike. */
  assert_null(mcp_tasks_get(t, "0123456789abcdef0123456789abcdef", MCP_TASK_MODERN, 1));
  assert_null(mcp_tasks_get(t, id, MCP_TASK_LEGACY, 0));
  assert_null(mcp_tasks_get(t, NULL, MCP_TASK_MODERN, 0));
  assert_int_equal(mcp_tasks_cancel(t, id, MCP_TASK_LEGACY, NULL), -1);
  /* A finished task cannot be cancelled (-2). */
  assert_int_equal(mcp_tasks_cancel(t, id, MCP_TASK_MODERN, NULL), -2);

  /* Failed: the JSON-RPC error inline. */
  mcp_task *k2 = NULL;
  char id3[MCP_TASK_ID_LEN + 1];
  assert_non_null(k2 = mcp_tasks_create(t, MCP_TASK_MODERN, 0, id3));
  json_object *e = json_object_new_object();
  json_object_object_add(e, "code", json_object_new_int(-32603));
  json_object_object_add(e, "message", json_object_new_string("boom"));
  mcp_tasks_finish(t, k2, NULL, e);
  g = mcp_tasks_get(t, id3, MCP_TASK_MODERN, 1);
  assert_string_equal(field(g, "status"), "failed");
  assert_true(json_object_object_get_ex(g, "error", &r));
  json_object_put(g);
  mcp_tasks_finish(t, k1, NULL, NULL);
  mcp_tasks_free(t);
}

/* At most max tasks live at once: a full table makes none, until one
 * expires. */
static void test_bounds(void **state) {
  (void)state;
  mcp_tasks *t = mcp_tasks_new(3, 200); /* 200 ms of life */
  assert_non_null(t);
  char id[4][MCP_TASK_ID_LEN + 1];
  mcp_task *k[4];
  for (int i = 0; i < 3; i++) assert_non_null(k[i] = mcp_tasks_create(t, MCP_TASK_MODERN, 0, id[i]));
  assert_null(mcp_tasks_create(t, MCP_TASK_MODERN, 0, id[3]));
  /* Finished ones are kept (their owner may poll) and still count. */
  mcp_tasks_finish(t, k[0], result_text("a"), NULL);
  assert_null(mcp_tasks_create(t, MCP_TASK_LEGACY, 0, id[3]));
  json_object *g = mcp_tasks_get(t, id[1], MCP_TASK_MODERN, 0);
  assert_int_equal(atoi(field(g, "ttlMs")), 200); /* the table's life, asked for more or not */
  json_object_put(g);
  /* Past the time to live: a finished task is gone, a running one is told
   * to stop (and gone when its work ends). A bounded poll, not a sleep. */
  double start = sm_monotonic_ms();
  json_object *still;
  while ((still = mcp_tasks_get(t, id[0], MCP_TASK_MODERN, 0)) != NULL) {
    json_object_put(still);
    assert_true(sm_monotonic_ms() - start < 10000);
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  assert_null(mcp_tasks_get(t, id[1], MCP_TASK_MODERN, 0));
  assert_true(*mcp_task_cancel_flag(k[1]));
  assert_true(*mcp_task_cancel_flag(k[2]));
  assert_true(mcp_tasks_busy(t)); /* their work has not ended */
  /* The slot of the finished one is free again. */
  assert_non_null(k[3] = mcp_tasks_create(t, MCP_TASK_MODERN, 0, id[3]));
  assert_null(mcp_tasks_create(t, MCP_TASK_MODERN, 0, id[0]));
  /* A result that comes after the time to live is never kept. */
  mcp_tasks_finish(t, k[1], result_text("late"), NULL);
  assert_null(mcp_tasks_get(t, id[1], MCP_TASK_MODERN, 1));
  assert_non_null(k[0] = mcp_tasks_create(t, MCP_TASK_MODERN, 0, id[0]));
  mcp_tasks_finish(t, k[2], result_text("late"), NULL);
  mcp_tasks_finish(t, k[3], NULL, NULL);
  mcp_tasks_finish(t, k[0], NULL, NULL);
  mcp_tasks_free(t);

  /* The life asked by a 2025-11-25 client is honoured within the bounds. */
  t = mcp_tasks_new(2, 0);
  assert_non_null(t);
  mcp_task *a = mcp_tasks_create(t, MCP_TASK_LEGACY, 5000, id[0]);
  mcp_task *b = mcp_tasks_create(t, MCP_TASK_LEGACY, 1, id[1]);
  g = mcp_tasks_get(t, id[0], MCP_TASK_LEGACY, 0);
  assert_int_equal(atoi(field(g, "ttl")), 5000);
  assert_non_null(field(g, "pollInterval"));
  assert_null(field(g, "ttlMs"));
  json_object_put(g);
  g = mcp_tasks_get(t, id[1], MCP_TASK_LEGACY, 0);
  assert_int_equal(atoi(field(g, "ttl")), MCP_TASK_TTL_MIN_MS);
  json_object_put(g);
  mcp_tasks_discard(t, b);
  assert_null(mcp_tasks_get(t, id[1], MCP_TASK_LEGACY, 0));
  mcp_tasks_finish(t, a, result_text("x"), NULL);
  mcp_tasks_free(t);
}

typedef struct worker {
  mcp_tasks *t;
  mcp_task *k;
} worker;

/* Work that runs until it is told to stop, as a tool call would. */
static void *until_cancelled(void *arg) {
  worker *w = arg;
  while (!*mcp_task_cancel_flag(w->k)) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  mcp_tasks_finish(w->t, w->k, result_text("stopped"), NULL);
  return NULL;
}

static void test_cancel_and_wait(void **state) {
  (void)state;
  mcp_tasks *t = mcp_tasks_new(0, 0);
  assert_non_null(t);
  char id[MCP_TASK_ID_LEN + 1];
  worker w = {t, mcp_tasks_create(t, MCP_TASK_LEGACY, 0, id)};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, until_cancelled, &w), 0);
  /* tasks/result stops waiting when its own request goes away. */
  volatile int stop = 1;
  json_object *res = NULL, *err = NULL;
  assert_int_equal(mcp_tasks_wait(t, id, &stop, &res, &err), -2);
  assert_int_equal(mcp_tasks_wait(t, "nope", NULL, &res, &err), -1);
  /* Cancelled at once; the work is told to stop and what it ends with is
   * dropped; the task stays cancelled. */
  json_object *after = NULL;
  assert_int_equal(mcp_tasks_cancel(t, id, MCP_TASK_LEGACY, &after), 0);
  assert_string_equal(field(after, "status"), "cancelled");
  json_object_put(after);
  pthread_join(th, NULL);
  assert_int_equal(mcp_tasks_wait(t, id, NULL, &res, &err), 0);
  assert_null(res);
  assert_null(err);
  json_object *g = mcp_tasks_get(t, id, MCP_TASK_LEGACY, 1);
  assert_string_equal(field(g, "status"), "cancelled");
  assert_null(field(g, "result"));
  json_object_put(g);
  assert_int_equal(mcp_tasks_cancel(t, id, MCP_TASK_LEGACY, NULL), -2);

  /* tasks/result waits for the end, then gives the result. */
  worker w2 = {t, mcp_tasks_create(t, MCP_TASK_LEGACY, 0, id)};
  assert_int_equal(pthread_create(&th, NULL, until_cancelled, &w2), 0);
  char other[MCP_TASK_ID_LEN + 1];
  mcp_task *m = mcp_tasks_create(t, MCP_TASK_MODERN, 0, other);
  /* The list is 2025-11-25's tasks only. */
  json_object *list = mcp_tasks_list(t);
  assert_int_equal(json_object_array_length(list), 2);
  json_object_put(list);
  *mcp_task_cancel_flag(w2.k) = 1; /* the work ends on its own (not a tasks/cancel) */
  assert_int_equal(mcp_tasks_wait(t, id, NULL, &res, &err), 0);
  assert_non_null(res);
  assert_non_null(strstr(json_object_to_json_string(res), "stopped"));
  json_object_put(res);
  pthread_join(th, NULL);
  /* The end of the table cancels what still runs and waits for it. */
  worker w3 = {t, m};
  assert_int_equal(pthread_create(&th, NULL, until_cancelled, &w3), 0);
  mcp_tasks_free(t);
  pthread_join(th, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lifecycle),
      cmocka_unit_test(test_bounds),
      cmocka_unit_test(test_cancel_and_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
