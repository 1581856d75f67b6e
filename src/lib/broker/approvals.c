/* Pending approvals: each waiting call has an entry with a random id; the
 * runner's GET /v1/approvals lists them and POST /v1/approvals/{id}
 * answers one. A waiter wakes on the answer, at its deadline, or every
 * 250 ms to look at its cancel flag (the sandbox's caller went away). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/util.h>

#include "broker/approvals.h"
#include "broker/ids.h"

#define MAX_PENDING 256

typedef struct pending {
  char id[33];
  const char *tool, *agent, *sandbox, *call_id;
  json_object *arguments;
  double created, expires;
  int answered, approve;
  char who[128];
  struct pending *next;
} pending;

struct bk_approvals {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pending *head;
  size_t n;
  int closing;
  int waiters;
};

int broker_approvals_new(bk_approvals **out) {
  bk_approvals *a = calloc(1, sizeof *a);
  if (!a) return -1;
  pthread_mutex_init(&a->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&a->cv, &ca);
  pthread_condattr_destroy(&ca);
  *out = a;
  return 0;
}

void broker_approvals_close(bk_approvals *a) {
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  a->closing = 1;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

void broker_approvals_free(bk_approvals *a) {
  if (!a) return;
  broker_approvals_close(a);
  pthread_mutex_lock(&a->mu);
  while (a->waiters > 0) pthread_cond_wait(&a->cv, &a->mu);
  pthread_mutex_unlock(&a->mu);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
  free(a);
}

static void unlink_entry(bk_approvals *a, pending *p) {
  for (pending **pp = &a->head; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      a->n--;
      return;
    }
}

static struct timespec mono_in(double s) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long ns = ts.tv_nsec + (long long)(s * 1e9);
  ts.tv_sec += (time_t)(ns / 1000000000LL);
  ts.tv_nsec = (long)(ns % 1000000000LL);
  return ts;
}

bk_verdict broker_approvals_wait(bk_approvals *a, const bk_approval_req *req,
                                 void (*on_open)(void *ud, const char *id), void *ud, char id[33],
                                 char who[128]) {
  pending p = {.tool = req->tool, .agent = req->agent, .sandbox = req->sandbox,
               .call_id = req->call_id, .arguments = req->arguments};
  who[0] = '\0';
  broker_random_id(p.id, sizeof p.id, "", 16);
  snprintf(id, 33, "%s", p.id);
  p.created = sm_now();
  p.expires = p.created + req->timeout_s;
  pthread_mutex_lock(&a->mu);
  if (a->closing || a->n >= MAX_PENDING) {
    pthread_mutex_unlock(&a->mu);
    json_object_put(req->arguments);
    return a->closing ? BK_ABANDONED : BK_EXPIRED;
  }
  p.next = a->head;
  a->head = &p;
  a->n++;
  a->waiters++;
  pthread_mutex_unlock(&a->mu);
  if (on_open) on_open(ud, p.id);
  pthread_mutex_lock(&a->mu);
  bk_verdict v = BK_EXPIRED;
  for (;;) {
    if (p.answered) {
      v = p.approve ? BK_APPROVED : BK_DENIED;
      snprintf(who, 128, "%s", p.who);
      break;
    }
    if (a->closing || (req->cancel && *req->cancel)) {
      v = BK_ABANDONED;
      break;
    }
    double left = p.expires - sm_now();
    if (left <= 0) break;
    struct timespec ts = mono_in(left < 0.25 ? left : 0.25);
    pthread_cond_timedwait(&a->cv, &a->mu, &ts);
  }
  unlink_entry(a, &p);
  a->waiters--;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  json_object_put(p.arguments);
  return v;
}

json_object *broker_approvals_list(bk_approvals *a) {
  json_object *arr = json_object_new_array();
  if (!arr) return NULL;
  pthread_mutex_lock(&a->mu);
  for (pending *p = a->head; p; p = p->next) {
    if (p->answered) continue;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(p->id));
    json_object_object_add(o, "tool", json_object_new_string(p->tool));
    json_object_object_add(o, "agent", json_object_new_string(p->agent));
    json_object_object_add(o, "sandbox", json_object_new_string(p->sandbox));
    json_object_object_add(o, "call_id", json_object_new_string(p->call_id));
    json_object_object_add(o, "arguments", json_object_get(p->arguments));
    json_object_object_add(o, "created", json_object_new_double(p->created));
    json_object_object_add(o, "expires", json_object_new_double(p->expires));
    json_object_array_add(arr, o);
  }
  pthread_mutex_unlock(&a->mu);
  return arr;
}

int broker_approvals_answer(bk_approvals *a, const char *id, int approve, const char *who,
                            sm_error *err) {
  pthread_mutex_lock(&a->mu);
  pending *p = a->head;
  while (p && (p->answered || strcmp(p->id, id) != 0)) p = p->next;
  if (p && sm_now() >= p->expires) p = NULL; /* expiring: its waiter refuses it */
  if (p) {
    p->answered = 1;
    p->approve = approve;
    snprintf(p->who, sizeof p->who, "%s", who ? who : "");
    pthread_cond_broadcast(&a->cv);
  }
  int found = p != NULL;
  pthread_mutex_unlock(&a->mu);
  if (!found) return sm_error_set(err, SM_ENOTFOUND, "no pending approval '%.64s'", id);
  return 0;
}
