/* Credential leases: a lease names services whose credentials one tool may
 * receive, a number of uses and an expiry. Taking one use is atomic under
 * the store's mutex, so two calls racing for a single-use lease cannot
 * both win. A use taken is pending until its call settles it: used (the
 * credentials reached the sandbox) or given back (the call never got that
 * far), so a call refused before it ran does not use the lease up, and a
 * use is never handed out twice. Times are passed in so tests control the
 * clock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "server/server_internal.h"

typedef struct lease {
  char id[SM_LEASE_ID_LEN + 1];
  double expires;
  int uses_left;
  int pending;    /* uses taken whose calls have not settled them yet */
  server_lease_params p;
  int live;
} lease;

struct server_lease_store {
  pthread_mutex_t mu;
  lease *items;
  size_t max;
};

server_lease_store *server_lease_store_new(size_t max_leases) {
  server_lease_store *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->items = calloc(max_leases ? max_leases : 1, sizeof *s->items);
  if (s->items == NULL) {
    free(s);
    return NULL;
  }
  s->max = max_leases ? max_leases : 1;
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

void server_lease_store_free(server_lease_store *s) {
  if (s == NULL) return;
  OPENSSL_cleanse(s->items, s->max * sizeof *s->items);
  free(s->items);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Caller holds the mutex. Drops expired leases and used-up ones no call
 * may give a use back to. */
static void sweep(server_lease_store *s, double now) {
  for (size_t i = 0; i < s->max; i++) {
    lease *l = &s->items[i];
    if (l->live && (now >= l->expires || (l->uses_left <= 0 && l->pending <= 0))) {
      OPENSSL_cleanse(l, sizeof *l);
    }
  }
}

int server_lease_create(server_lease_store *s, const server_lease_params *p, double now,
                        char out_id[SM_LEASE_ID_LEN + 1], double *out_expires, sm_error *err) {
  if (p->max_uses < 1 || p->max_uses > SM_LEASE_USES_MAX || p->ttl_s < 1 ||
      p->ttl_s > SM_LEASE_TTL_MAX)
    return sm_error_set(err, SM_EINVAL, "lease uses or ttl out of range");
  pthread_mutex_lock(&s->mu);
  sweep(s, now);
  lease *slot = NULL;
  for (size_t i = 0; i < s->max && slot == NULL; i++)
    if (!s->items[i].live) slot = &s->items[i];
  if (slot == NULL) {
    pthread_mutex_unlock(&s->mu);
    return sm_error_set(err, SM_EBUSY, "too many live leases (%zu): try again later", s->max);
  }
  memset(slot, 0, sizeof *slot);
  server_random_hex(slot->id, SM_LEASE_ID_LEN / 2);
  slot->expires = now + p->ttl_s;
  slot->uses_left = p->max_uses;
  slot->p = *p;
  slot->live = 1;
  memcpy(out_id, slot->id, sizeof slot->id);
  *out_expires = slot->expires;
  pthread_mutex_unlock(&s->mu);
  return 0;
}

#define LEASE_NOT_USABLE "the lease is unknown, expired, used up, or for another tool or worker"

int server_lease_consume(server_lease_store *s, const char *id, const char *tool,
                         const char *worker_key, double now, server_lease_params *out,
                         sm_error *err) {
  if (id == NULL || strlen(id) != SM_LEASE_ID_LEN) return sm_error_set(err, SM_EPOLICY, LEASE_NOT_USABLE);
  pthread_mutex_lock(&s->mu);
  sweep(s, now);
  lease *found = NULL;
  /* Every live id is compared in full so the time taken does not tell an
   * attacker how much of a guessed id matched. */
  for (size_t i = 0; i < s->max; i++) {
    lease *l = &s->items[i];
    if (l->live && CRYPTO_memcmp(l->id, id, SM_LEASE_ID_LEN) == 0) found = l;
  }
  int rc = SM_EPOLICY;
  if (found != NULL && found->uses_left > 0 && tool != NULL && strcmp(found->p.tool, tool) == 0 &&
      (found->p.worker_key[0] == '\0' ||
       (worker_key != NULL && strcmp(found->p.worker_key, worker_key) == 0))) {
    *out = found->p;
    found->uses_left--;
    found->pending++;
    rc = 0;
  }
  pthread_mutex_unlock(&s->mu);
  return rc ? sm_error_set(err, rc, LEASE_NOT_USABLE) : 0;
}

#define LEASE_NOT_PENDING "the lease expired, or has no use pending"

int server_lease_settle(server_lease_store *s, const char *id, int used, double now,
                        sm_error *err) {
  if (id == NULL || strlen(id) != SM_LEASE_ID_LEN)
    return sm_error_set(err, SM_ENOTFOUND, LEASE_NOT_PENDING);
  pthread_mutex_lock(&s->mu);
  lease *found = NULL;
  for (size_t i = 0; i < s->max; i++) {
    lease *l = &s->items[i];
    if (l->live && l->pending > 0 && CRYPTO_memcmp(l->id, id, SM_LEASE_ID_LEN) == 0) found = l;
  }
  int rc = SM_ENOTFOUND; /* expired meanwhile: nothing to give back */
  if (found != NULL && now < found->expires) {
    found->pending--;
    if (!used) found->uses_left++;
    rc = 0;
  }
  sweep(s, now);
  pthread_mutex_unlock(&s->mu);
  return rc ? sm_error_set(err, rc, LEASE_NOT_PENDING) : 0;
}

size_t server_lease_live(server_lease_store *s, double now) {
  pthread_mutex_lock(&s->mu);
  sweep(s, now);
  size_t n = 0;
  for (size_t i = 0; i < s->max; i++) n += s->items[i].live && s->items[i].uses_left > 0 ? 1 : 0;
  pthread_mutex_unlock(&s->mu);
  return n;
}
