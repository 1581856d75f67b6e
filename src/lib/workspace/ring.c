/* The copy out's download ring (ring.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/engine.h>
#include <sandman/log.h>

#include "common/thread.h"
#include "workspace/ring.h"

#define RING_BYTES ((size_t)1 << 20)

/* A bounded pipe between the engine (pushing the download) and the
 * extractor thread (pulling through libarchive). */
typedef struct ring {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char *buf;
  size_t head, len;
  int eof, werr, rdone, rfailed;
  int64_t pushed, abort_after;
  ws_extract *x;
  int rc;
  sm_error err;
  char request_id[64];
} ring;

static int ring_write(void *ud, const char *data, size_t len) {
  ring *r = ud;
  pthread_mutex_lock(&r->mu);
  if (r->abort_after >= 0 && r->pushed + (int64_t)len > r->abort_after) {
    pthread_mutex_unlock(&r->mu);
    return SM_ECANCELLED;
  }
  r->pushed += (int64_t)len;
  while (len > 0) {
    while (r->len == RING_BYTES && !r->rdone) pthread_cond_wait(&r->cv, &r->mu);
    if (r->rdone) {
      int failed = r->rfailed;
      pthread_mutex_unlock(&r->mu);
      /* Done early: trailing padding is dropped; failed: stop the download. */
      return failed ? SM_ECANCELLED : 0;
    }
    size_t tail = (r->head + r->len) % RING_BYTES;
    size_t room = RING_BYTES - r->len;
    size_t contig = RING_BYTES - tail;
    size_t n = len < room ? len : room;
    if (n > contig) n = contig;
    memcpy(r->buf + tail, data, n);
    r->len += n;
    data += n;
    len -= n;
    pthread_cond_broadcast(&r->cv);
  }
  pthread_mutex_unlock(&r->mu);
  return 0;
}

static ssize_t ring_read(void *ud, char *buf, size_t len) {
  ring *r = ud;
  pthread_mutex_lock(&r->mu);
  while (r->len == 0 && !r->eof) pthread_cond_wait(&r->cv, &r->mu);
  if (r->len == 0) {
    int werr = r->werr;
    pthread_mutex_unlock(&r->mu);
    return werr ? SM_EIO : 0;
  }
  size_t contig = RING_BYTES - r->head;
  size_t n = r->len < len ? r->len : len;
  if (n > contig) n = contig;
  memcpy(buf, r->buf + r->head, n);
  r->head = (r->head + n) % RING_BYTES;
  r->len -= n;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return (ssize_t)n;
}

static void *extract_thread(void *ud) {
  ring *r = ud;
  if (r->request_id[0]) sm_log_set_request_id(r->request_id);
  int rc = workspace_extract_run(r->x, ring_read, r, &r->err);
  pthread_mutex_lock(&r->mu);
  r->rc = rc;
  r->rdone = 1;
  r->rfailed = rc != 0;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

int workspace_ring_fetch(const sm_workspace_target *t, const char *box_path, ws_extract *x,
                         int64_t budget, int64_t *pushed, sm_error *err) {
  *pushed = 0;
  ring *r = calloc(1, sizeof *r);
  char *buf = malloc(RING_BYTES);
  if (r == NULL || buf == NULL) {
    free(r);
    free(buf);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->buf = buf;
  r->x = x;
  r->abort_after = budget;
  const char *rid = sm_log_request_id();
  if (rid) snprintf(r->request_id, sizeof r->request_id, "%s", rid);
  pthread_t th;
  int rc = 0;
  if (common_thread_start(&th, NULL, extract_thread, r) != 0) {
    rc = sm_error_set(err, SM_ENOMEM, "cannot start the extractor thread");
  } else {
    sm_error gerr = SM_ERROR_INIT;
    int grc = sm_engine_archive_get(t->engine, t->container_id, box_path, ring_write, r, &gerr);
    pthread_mutex_lock(&r->mu);
    r->eof = 1;
    r->werr = grc != 0;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(th, NULL);
    *pushed = r->pushed;
    /* The extractor's refusal explains an aborted download best; otherwise
     * the engine's error does. */
    if (r->rc != 0 && (grc == 0 || grc == SM_ECANCELLED) && budget < 0) {
      *err = r->err;
      rc = r->rc;
    } else if (grc != 0) {
      *err = gerr;
      rc = grc;
    } else if (r->rc != 0) {
      *err = r->err;
      rc = r->rc;
    }
  }
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(buf);
  free(r);
  return rc;
}
