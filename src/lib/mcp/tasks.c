/* A session's tasks: a fixed table of task records (ids, states, results),
 * bounded in number and in age. The work itself runs elsewhere (the
 * session starts a thread per task); this file keeps what outlives the
 * request: the state a later tasks/get, tasks/cancel or tasks/result
 * reads. Everything under one lock; the work's end is signalled on a
 * condition variable, which tasks/result (2025-11-25) and the table's end
 * wait on. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include <sandman/util.h>

#include "mcp/tasks.h"

#define WAIT_SLICE_MS 100 /* tasks/result looks at its request's flag this often */

struct mcp_task {
  int used;
  int running;              /* its work has not called finish yet */
  int era;
  int status;
  char id[MCP_TASK_ID_LEN + 1];
  double deadline;          /* monotonic ms: created + ttl */
  double created, updated;  /* wall clock, seconds */
  int64_t ttl_ms;
  json_object *result, *error;
  volatile int cancel;
};

struct mcp_tasks {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned max, running;
  int64_t ttl_ms;
  mcp_task *v;
};

mcp_tasks *mcp_tasks_new(unsigned max, int64_t ttl_ms) {
  mcp_tasks *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->max = max ? max : MCP_TASKS_MAX;
  t->ttl_ms = ttl_ms > 0 ? ttl_ms : MCP_TASK_TTL_MS;
  t->v = calloc(t->max, sizeof *t->v);
  if (t->v == NULL) {
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  return t;
}

static void drop(mcp_task *k) {
  json_object_put(k->result);
  json_object_put(k->error);
  memset(k, 0, sizeof *k);
}

void mcp_tasks_cancel_all(mcp_tasks *t) {
  pthread_mutex_lock(&t->mu);
  for (unsigned i = 0; i < t->max; i++)
    if (t->v[i].used && t->v[i].running) t->v[i].cancel = 1;
  pthread_mutex_unlock(&t->mu);
}

void mcp_tasks_free(mcp_tasks *t) {
  if (t == NULL) return;
  mcp_tasks_cancel_all(t);
  pthread_mutex_lock(&t->mu);
  while (t->running > 0) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  for (unsigned i = 0; i < t->max; i++) drop(&t->v[i]);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t->v);
  free(t);
}

/* Tasks past their time to live (t->mu held): a running one is cancelled
 * (it is dropped when its work ends), a finished one dropped now. */
static void expire(mcp_tasks *t) {
  double now = sm_monotonic_ms();
  for (unsigned i = 0; i < t->max; i++) {
    mcp_task *k = &t->v[i];
    if (!k->used || now < k->deadline) continue;
    if (k->running) k->cancel = 1;
    else drop(k);
  }
}

static int new_id(char id[MCP_TASK_ID_LEN + 1]) {
  unsigned char raw[MCP_TASK_ID_LEN / 2];
  if (RAND_bytes(raw, sizeof raw) != 1) return -1;
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof raw; i++) {
    id[2 * i] = hex[raw[i] >> 4];
    id[2 * i + 1] = hex[raw[i] & 15];
  }
  id[MCP_TASK_ID_LEN] = '\0';
  return 0;
}

mcp_task *mcp_tasks_create(mcp_tasks *t, int era, int64_t ttl_ms, char id[MCP_TASK_ID_LEN + 1]) {
  int64_t ttl = ttl_ms > 0 ? ttl_ms : t->ttl_ms;
  int64_t least = MCP_TASK_TTL_MIN_MS < t->ttl_ms ? MCP_TASK_TTL_MIN_MS : t->ttl_ms;
  if (ttl > t->ttl_ms) ttl = t->ttl_ms;
  if (ttl < least) ttl = least;
  pthread_mutex_lock(&t->mu);
  expire(t);
  mcp_task *k = NULL;
  for (unsigned i = 0; i < t->max && k == NULL; i++)
    if (!t->v[i].used) k = &t->v[i];
  if (k && new_id(k->id) == 0) {
    k->used = 1;
    k->running = 1;
    k->era = era;
    k->status = MCP_TASK_WORKING;
    k->ttl_ms = ttl;
    k->deadline = sm_monotonic_ms() + (double)ttl;
    k->created = k->updated = sm_now();
    k->cancel = 0;
    t->running++;
    snprintf(id, MCP_TASK_ID_LEN + 1, "%s", k->id);
  } else {
    k = NULL;
  }
  pthread_mutex_unlock(&t->mu);
  return k;
}

volatile int *mcp_task_cancel_flag(mcp_task *k) { return &k->cancel; }

void mcp_tasks_finish(mcp_tasks *t, mcp_task *k, json_object *result, json_object *error) {
  pthread_mutex_lock(&t->mu);
  k->running = 0;
  t->running--;
  if (sm_monotonic_ms() >= k->deadline) {
    drop(k); /* nobody may read it any more */
    json_object_put(result);
    json_object_put(error);
  } else if (k->status == MCP_TASK_CANCELLED) {
    json_object_put(result);
    json_object_put(error);
  } else {
    k->status = error ? MCP_TASK_FAILED : MCP_TASK_COMPLETED;
    k->result = error ? NULL : result;
    k->error = error;
    if (error) json_object_put(result);
    k->updated = sm_now();
  }
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

void mcp_tasks_discard(mcp_tasks *t, mcp_task *k) {
  pthread_mutex_lock(&t->mu);
  t->running--;
  drop(k);
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

/* ---- what the client sees ---- */

static const char *status_name(int s) {
  switch (s) {
  case MCP_TASK_COMPLETED: return "completed";
  case MCP_TASK_FAILED: return "failed";
  case MCP_TASK_CANCELLED: return "cancelled";
  default: return "working";
  }
}

/* ISO 8601 with milliseconds, UTC. */
static json_object *timestamp(double epoch) {
  char day[32], out[40];
  sm_format_time(epoch, day, sizeof day); /* ...T..:..:..Z */
  size_t n = strlen(day);
  if (n > 0 && day[n - 1] == 'Z') day[n - 1] = '\0';
  long ms = (long)((epoch - (double)(time_t)epoch) * 1000.0);
  snprintf(out, sizeof out, "%s.%03ldZ", day, ms < 0 ? 0 : ms > 999 ? 999 : ms);
  return json_object_new_string(out);
}

/* A copy of a kept result (t->mu held): answers are written and freed on
 * other threads, and json-c's reference counts are not atomic, so nothing
 * kept here is shared with them. */
static json_object *copy(json_object *o) {
  json_object *c = NULL;
  if (json_object_deep_copy(o, &c, NULL) != 0) return NULL;
  return c;
}

/* The task's fields (t->mu held). */
static json_object *render(const mcp_task *k, int detailed) {
  json_object *o = json_object_new_object();
  int legacy = k->era == MCP_TASK_LEGACY;
  json_object_object_add(o, "taskId", json_object_new_string(k->id));
  json_object_object_add(o, "status", json_object_new_string(status_name(k->status)));
  if (k->status == MCP_TASK_CANCELLED)
    json_object_object_add(o, "statusMessage", json_object_new_string("the task was cancelled"));
  else if (k->status == MCP_TASK_FAILED)
    json_object_object_add(o, "statusMessage", json_object_new_string("the tool call failed"));
  json_object_object_add(o, "createdAt", timestamp(k->created));
  json_object_object_add(o, "lastUpdatedAt", timestamp(k->updated));
  json_object_object_add(o, legacy ? "ttl" : "ttlMs", json_object_new_int64(k->ttl_ms));
  if (k->status == MCP_TASK_WORKING)
    json_object_object_add(o, legacy ? "pollInterval" : "pollIntervalMs",
                           json_object_new_int(MCP_TASK_POLL_MS));
  if (detailed && k->status == MCP_TASK_COMPLETED && k->result)
    json_object_object_add(o, "result", copy(k->result));
  if (detailed && k->status == MCP_TASK_FAILED && k->error)
    json_object_object_add(o, "error", copy(k->error));
  return o;
}

/* The live task id of era (t->mu held), or NULL. */
static mcp_task *find(mcp_tasks *t, const char *id, int era) {
  if (id == NULL) return NULL;
  expire(t);
  for (unsigned i = 0; i < t->max; i++) {
    mcp_task *k = &t->v[i];
    if (k->used && k->era == era && sm_monotonic_ms() < k->deadline && strcmp(k->id, id) == 0)
      return k;
  }
  return NULL;
}

json_object *mcp_tasks_get(mcp_tasks *t, const char *id, int era, int detailed) {
  pthread_mutex_lock(&t->mu);
  mcp_task *k = find(t, id, era);
  json_object *o = k ? render(k, detailed) : NULL;
  pthread_mutex_unlock(&t->mu);
  return o;
}

int mcp_tasks_cancel(mcp_tasks *t, const char *id, int era, json_object **out) {
  if (out) *out = NULL;
  pthread_mutex_lock(&t->mu);
  mcp_task *k = find(t, id, era);
  int rc = k == NULL ? -1 : k->status != MCP_TASK_WORKING ? -2 : 0;
  if (rc == 0) {
    /* Cancelled at once, whatever the work does next: it is told to stop,
     * and what it ends with is dropped. */
    k->cancel = 1;
    k->status = MCP_TASK_CANCELLED;
    k->updated = sm_now();
    pthread_cond_broadcast(&t->cv);
  }
  if (k && out) *out = render(k, 0);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int mcp_tasks_wait(mcp_tasks *t, const char *id, volatile int *stop, json_object **result,
                   json_object **error) {
  *result = *error = NULL;
  pthread_mutex_lock(&t->mu);
  mcp_task *k;
  while ((k = find(t, id, MCP_TASK_LEGACY)) != NULL && k->status == MCP_TASK_WORKING) {
    if (stop && *stop) {
      pthread_mutex_unlock(&t->mu);
      return -2;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += WAIT_SLICE_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
  }
  int rc = k ? 0 : -1;
  if (k && k->status == MCP_TASK_COMPLETED) *result = copy(k->result);
  else if (k) *error = k->error ? copy(k->error) : NULL;
  pthread_mutex_unlock(&t->mu);
  return rc;
}

json_object *mcp_tasks_list(mcp_tasks *t) {
  json_object *a = json_object_new_array();
  pthread_mutex_lock(&t->mu);
  expire(t);
  for (unsigned i = 0; i < t->max; i++)
    if (t->v[i].used && t->v[i].era == MCP_TASK_LEGACY) json_object_array_add(a, render(&t->v[i], 0));
  pthread_mutex_unlock(&t->mu);
  return a;
}

int mcp_tasks_busy(mcp_tasks *t) {
  pthread_mutex_lock(&t->mu);
  expire(t);
  int busy = t->running > 0;
  for (unsigned i = 0; i < t->max && !busy; i++) busy = t->v[i].used;
  pthread_mutex_unlock(&t->mu);
  return busy;
}
