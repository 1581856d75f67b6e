/* The lookup cache of keyed sandboxes (lookup.h): a hash table of names,
 * bounded, under its own lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/lookup.h"

#define CACHE_BUCKETS 256
#define CACHE_MAX 4096
#define TOUCH_EVERY_S 1.0

typedef struct cache_entry {
  char *name;
  sandbox_lookup_entry c;
  double touched;            /* epoch seconds of our last last-used write, 0 never */
  struct cache_entry *next;
} cache_entry;

struct sandbox_lookup {
  pthread_mutex_t mu;
  cache_entry *cache[CACHE_BUCKETS];
  size_t n_cache;
};

sandbox_lookup *sandbox_lookup_new(void) {
  sandbox_lookup *l = calloc(1, sizeof *l);
  if (l) pthread_mutex_init(&l->mu, NULL);
  return l;
}

void sandbox_lookup_free(sandbox_lookup *l) {
  if (l == NULL) return;
  for (int b = 0; b < CACHE_BUCKETS; b++) {
    cache_entry *ce = l->cache[b];
    while (ce) {
      cache_entry *next = ce->next;
      free(ce->name);
      free(ce);
      ce = next;
    }
  }
  pthread_mutex_destroy(&l->mu);
  free(l);
}

static unsigned bucket_of(const char *name) {
  unsigned h = 2166136261u;
  for (const unsigned char *s = (const unsigned char *)name; *s; s++) h = (h ^ *s) * 16777619u;
  return h % CACHE_BUCKETS;
}

static cache_entry *cache_find(sandbox_lookup *l, const char *name) {
  for (cache_entry *ce = l->cache[bucket_of(name)]; ce; ce = ce->next)
    if (strcmp(ce->name, name) == 0) return ce;
  return NULL;
}

int sandbox_lookup_get(sandbox_lookup *l, const char *name, const char *hash,
                       sandbox_lookup_entry *out) {
  if (l == NULL) return 0;
  pthread_mutex_lock(&l->mu);
  cache_entry *ce = cache_find(l, name);
  int hit = ce != NULL && strcmp(ce->c.hash, hash) == 0;
  if (hit) *out = ce->c;
  pthread_mutex_unlock(&l->mu);
  return hit;
}

void sandbox_lookup_put(sandbox_lookup *l, const char *name, const sandbox_lookup_entry *entry) {
  if (l == NULL) return;
  pthread_mutex_lock(&l->mu);
  cache_entry *ce = cache_find(l, name);
  if (ce == NULL && l->n_cache < CACHE_MAX) {
    ce = calloc(1, sizeof *ce);
    if (ce && (ce->name = strdup(name)) == NULL) {
      free(ce);
      ce = NULL;
    }
    if (ce) {
      unsigned b = bucket_of(name);
      ce->next = l->cache[b];
      l->cache[b] = ce;
      l->n_cache++;
    }
  }
  if (ce) ce->c = *entry;
  pthread_mutex_unlock(&l->mu);
}

void sandbox_lookup_drop(sandbox_lookup *l, const char *name) {
  if (l == NULL) return;
  pthread_mutex_lock(&l->mu);
  for (cache_entry **pp = &l->cache[bucket_of(name)]; *pp; pp = &(*pp)->next) {
    if (strcmp((*pp)->name, name) == 0) {
      cache_entry *ce = *pp;
      *pp = ce->next;
      free(ce->name);
      free(ce);
      l->n_cache--;
      break;
    }
  }
  pthread_mutex_unlock(&l->mu);
}

void sandbox_lookup_invalidate(sandbox_lookup *l, const char *name) {
  if (l == NULL) return;
  pthread_mutex_lock(&l->mu);
  cache_entry *ce = cache_find(l, name);
  if (ce) ce->c.hash[0] = '\0';
  pthread_mutex_unlock(&l->mu);
}

int sandbox_lookup_touch_due(sandbox_lookup *l, const char *name, double now) {
  if (l == NULL) return 1;
  pthread_mutex_lock(&l->mu);
  cache_entry *ce = cache_find(l, name);
  int due = 1;
  if (ce) {
    due = !(ce->touched > 0 && now - ce->touched >= 0 && now - ce->touched < TOUCH_EVERY_S);
    if (due) ce->touched = now;
  }
  pthread_mutex_unlock(&l->mu);
  return due;
}
