/* Turns of code runs: see code_queue.h. A list in arrival order under one
 * lock; a waiter looks for an earlier ticket of its context. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/error.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "server/code_queue.h"

#define WAKE_MS 200 /* how often a waiter looks at its cancel flag */

struct code_ticket {
  char *sandbox, *context;
  code_ticket *next;
};

struct code_queue {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  code_ticket *head, *tail;
};

code_queue *server_code_queue_new(void) {
  code_queue *q = calloc(1, sizeof *q);
  if (q == NULL) return NULL;
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  return q;
}

static void ticket_free(code_ticket *t) {
  if (t == NULL) return;
  free(t->sandbox);
  free(t->context);
  free(t);
}
static void ticket_freep(code_ticket **t) { ticket_free(*t); }
#define cleanup_ticket __attribute__((cleanup(ticket_freep)))

void server_code_queue_free(code_queue *q) {
  if (q == NULL) return;
  while (q->head) {
    code_ticket *t = q->head;
    q->head = t->next;
    ticket_free(t);
  }
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->cv);
  free(q);
}

static void unlink_ticket(code_queue *q, code_ticket *t) {
  code_ticket **pp = &q->head, *prev = NULL;
  while (*pp && *pp != t) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (*pp == NULL) return;
  *pp = t->next;
  if (q->tail == t) q->tail = prev;
}

/* 1 when an earlier ticket holds t's context. */
static int behind(const code_queue *q, const code_ticket *t) {
  for (const code_ticket *x = q->head; x && x != t; x = x->next)
    if (strcmp(x->sandbox, t->sandbox) == 0 && strcmp(x->context, t->context) == 0) return 1;
  return 0;
}

int server_code_queue_enter(code_queue *q, const char *sandbox, const char *context, size_t max,
                            volatile int *cancel, code_ticket **out, double *waited_ms,
                            sm_error *err) {
  double t0 = sm_monotonic_ms();
  *out = NULL;
  cleanup_ticket code_ticket *t = calloc(1, sizeof *t);
  if (t == NULL || (t->sandbox = strdup(sandbox)) == NULL || (t->context = strdup(context)) == NULL)
    return sm_error_set(err, SM_ENOMEM, "out of memory queueing a code run");
  pthread_mutex_lock(&q->mu);
  size_t n = 0;
  for (const code_ticket *x = q->head; x; x = x->next)
    if (strcmp(x->sandbox, sandbox) == 0) n++;
  if (n >= max) {
    pthread_mutex_unlock(&q->mu);
    return sm_error_set(err, SM_EBUSY, "the sandbox already has %zu code runs waiting or running",
                        max);
  }
  if (q->tail) q->tail->next = t;
  else q->head = t;
  q->tail = t;
  int rc = 0;
  while (behind(q, t)) {
    if (cancel && *cancel) {
      rc = SM_ECANCELLED;
      break;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)WAKE_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&q->cv, &q->mu, &ts);
  }
  if (rc != 0) {
    unlink_ticket(q, t);
    pthread_cond_broadcast(&q->cv);
  }
  pthread_mutex_unlock(&q->mu);
  if (waited_ms) *waited_ms = sm_monotonic_ms() - t0;
  if (rc != 0) return sm_error_set(err, rc, "the client went away while the run waited for its turn");
  *out = steal_pointer(&t);
  return 0;
}

size_t server_code_queue_waiting(code_queue *q, const char *sandbox, const char *context) {
  size_t n = 0;
  pthread_mutex_lock(&q->mu);
  for (const code_ticket *x = q->head; x; x = x->next)
    if (strcmp(x->sandbox, sandbox) == 0 && strcmp(x->context, context) == 0) n++;
  pthread_mutex_unlock(&q->mu);
  return n > 0 ? n - 1 : 0; /* the first of its context has its turn */
}

void server_code_queue_leave(code_queue *q, code_ticket *t) {
  if (t == NULL) return;
  pthread_mutex_lock(&q->mu);
  unlink_ticket(q, t);
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  ticket_free(t);
}
