/* The preview tokens' table (preview.h): a small array under a lock; every
 * lookup walks it all and compares in constant time, so how long a lookup
 * takes says nothing of a token's digits. */
#include "server/preview.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/auth.h"

struct server_previews {
  pthread_mutex_t mu;
  size_t max_total, max_per_sandbox;
  size_t n;
  server_preview *items; /* max_total of them */
};

server_previews *server_previews_new(size_t max_total, size_t max_per_sandbox) {
  server_previews *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->items = calloc(max_total ? max_total : 1, sizeof *t->items);
  if (t->items == NULL) {
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->mu, NULL);
  t->max_total = max_total;
  t->max_per_sandbox = max_per_sandbox;
  return t;
}

void server_previews_free(server_previews *t) {
  if (t == NULL) return;
  memset(t->items, 0, t->max_total * sizeof *t->items);
  free(t->items);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* Under the lock: item i goes (the last one takes its place). */
static void drop(server_previews *t, size_t i) {
  t->items[i] = t->items[--t->n];
  memset(&t->items[t->n], 0, sizeof t->items[t->n]);
}

static void drop_expired(server_previews *t, double now_ms) {
  for (size_t i = t->n; i-- > 0;)
    if (t->items[i].expires_ms <= now_ms) drop(t, i);
}

int server_previews_add(server_previews *t, const char *container_id, const char *worker_key,
                        unsigned port, double ttl_s, double now_ms, server_preview *out) {
  pthread_mutex_lock(&t->mu);
  drop_expired(t, now_ms);
  size_t mine = 0;
  for (size_t i = 0; i < t->n; i++) mine += strcmp(t->items[i].container_id, container_id) == 0;
  int ok = t->n < t->max_total && mine < t->max_per_sandbox;
  if (ok) {
    server_preview *p = &t->items[t->n++];
    server_random_hex(p->token, SERVER_PREVIEW_TOKEN_BYTES);
    snprintf(p->container_id, sizeof p->container_id, "%s", container_id);
    snprintf(p->worker_key, sizeof p->worker_key, "%s", worker_key ? worker_key : "");
    p->port = port;
    p->expires_ms = now_ms + ttl_s * 1000.0;
    *out = *p;
  }
  pthread_mutex_unlock(&t->mu);
  return ok ? 0 : -1;
}

/* 1 when a and b (b SERVER_PREVIEW_TOKEN_LEN long) are equal; the time
 * depends on b's length only. */
static int same_token(const char *a, const char *b) {
  size_t la = strnlen(a, SERVER_PREVIEW_TOKEN_LEN + 1);
  unsigned char d = la != SERVER_PREVIEW_TOKEN_LEN;
  for (size_t i = 0; i < SERVER_PREVIEW_TOKEN_LEN; i++)
    d |= (unsigned char)((i < la ? a[i] : 0) ^ b[i]);
  return d == 0;
}

int server_previews_find(server_previews *t, const char *token, double now_ms,
                         server_preview *out) {
  pthread_mutex_lock(&t->mu);
  drop_expired(t, now_ms);
  int found = -1;
  for (size_t i = 0; i < t->n; i++)
    if (same_token(token, t->items[i].token)) found = (int)i;
  if (found >= 0) *out = t->items[found];
  pthread_mutex_unlock(&t->mu);
  return found >= 0 ? 0 : -1;
}

size_t server_previews_revoke(server_previews *t, const char *container_id) {
  size_t gone = 0;
  pthread_mutex_lock(&t->mu);
  for (size_t i = t->n; i-- > 0;) {
    if (container_id[0] && strcmp(t->items[i].container_id, container_id) == 0) {
      drop(t, i);
      gone++;
    }
  }
  pthread_mutex_unlock(&t->mu);
  return gone;
}

size_t server_previews_count(server_previews *t) {
  pthread_mutex_lock(&t->mu);
  size_t n = t->n;
  pthread_mutex_unlock(&t->mu);
  return n;
}
