/* Concurrency and rate per sandbox and host tool. The rate is a sliding
 * minute: the times of the last `rate` calls are kept, and a call is
 * refused when the oldest of them is less than 60 s old. The table is
 * bounded: entries with nothing in flight and nothing in the last minute
 * are reused. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/limits.h"

#define LIMITS_MAX_ENTRIES 4096
#define KEY_MAX 192
#define WINDOW_S 60.0

typedef struct entry {
  char key[KEY_MAX];
  int in_flight;
  double *times; /* ring of the last `cap` call times */
  int cap, head, count;
} entry;

struct bk_limits {
  pthread_mutex_t mu;
  entry *e;
  size_t n;
};

int broker_limits_new(bk_limits **out) {
  bk_limits *l = calloc(1, sizeof *l);
  if (!l || !(l->e = calloc(LIMITS_MAX_ENTRIES, sizeof *l->e))) {
    free(l);
    return -1;
  }
  pthread_mutex_init(&l->mu, NULL);
  *out = l;
  return 0;
}

void broker_limits_free(bk_limits *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) free(l->e[i].times);
  free(l->e);
  pthread_mutex_destroy(&l->mu);
  free(l);
}

static void make_key(char *key, const char *sandbox, const char *tool) {
  size_t a = strnlen(sandbox, 127), b = strnlen(tool, 63);
  memcpy(key, sandbox, a);
  key[a] = '\n';
  memcpy(key + a + 1, tool, b);
  key[a + 1 + b] = '\0';
}

static int idle(const entry *e, double now) {
  if (e->in_flight > 0) return 0;
  if (e->count == 0) return 1;
  int newest = (e->head + e->cap - 1) % e->cap;
  return now - e->times[newest] >= WINDOW_S;
}

static entry *find(bk_limits *l, const char *key, int rate, double now) {
  entry *spare = NULL;
  for (size_t i = 0; i < l->n; i++) {
    if (strcmp(l->e[i].key, key) == 0) return &l->e[i];
    if (!spare && idle(&l->e[i], now)) spare = &l->e[i];
  }
  if (!spare && l->n < LIMITS_MAX_ENTRIES) spare = &l->e[l->n++];
  if (!spare) return NULL;
  double *t = realloc(spare->times, (size_t)rate * sizeof *t);
  if (!t) return NULL;
  memset(spare, 0, sizeof *spare);
  spare->times = t;
  spare->cap = rate;
  snprintf(spare->key, sizeof spare->key, "%s", key);
  return spare;
}

int broker_limits_enter(bk_limits *l, const char *sandbox, const char *tool, int concurrency,
                        int rate, double now, const char **why) {
  char key[KEY_MAX];
  make_key(key, sandbox, tool);
  pthread_mutex_lock(&l->mu);
  entry *e = find(l, key, rate, now);
  int rc = 0;
  if (!e) {
    *why = "concurrency";
    rc = -1;
  } else if (e->in_flight >= concurrency) {
    *why = "concurrency";
    rc = -1;
  } else if (e->count >= e->cap && now - e->times[e->head] < WINDOW_S) {
    *why = "rate";
    rc = -1;
  } else {
    e->times[e->head] = now;
    e->head = (e->head + 1) % e->cap;
    if (e->count < e->cap) e->count++;
    e->in_flight++;
  }
  pthread_mutex_unlock(&l->mu);
  return rc;
}

void broker_limits_leave(bk_limits *l, const char *sandbox, const char *tool) {
  char key[KEY_MAX];
  make_key(key, sandbox, tool);
  pthread_mutex_lock(&l->mu);
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->e[i].key, key) == 0 && l->e[i].in_flight > 0) {
      l->e[i].in_flight--;
      break;
    }
  pthread_mutex_unlock(&l->mu);
}
