/* The call threads: a bounded queue of jobs (calls, streamed answers,
 * files and /mcp requests) run by srv->opts.threads threads that
 * server.c starts and stops. */
#include <stdlib.h>

#include <sandman/log.h>

#include "server/server_core.h"

int server_submit(sm_server *srv, void (*fn)(void *), void *arg, sm_error *err) {
  server_job *j = malloc(sizeof *j);
  if (j == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory queueing a call");
  j->fn = fn;
  j->arg = arg;
  j->next = NULL;
  pthread_mutex_lock(&srv->mu);
  if (srv->queued >= srv->opts.max_queue || srv->workers_stop) {
    pthread_mutex_unlock(&srv->mu);
    free(j);
    return sm_error_set(err, SM_EBUSY,
                        "the runner is overloaded: too many calls waiting; try again later");
  }
  if (srv->tail) srv->tail->next = j;
  else srv->head = j;
  srv->tail = j;
  srv->queued++;
  pthread_cond_signal(&srv->cv_job);
  pthread_mutex_unlock(&srv->mu);
  return 0;
}

void *server_job_thread(void *arg) {
  sm_server *srv = arg;
  pthread_mutex_lock(&srv->mu);
  for (;;) {
    while (srv->head == NULL && !srv->workers_stop) pthread_cond_wait(&srv->cv_job, &srv->mu);
    if (srv->head == NULL) break;
    server_job *j = srv->head;
    srv->head = j->next;
    if (srv->head == NULL) srv->tail = NULL;
    srv->queued--;
    pthread_mutex_unlock(&srv->mu);
    j->fn(j->arg);
    free(j);
    sm_log_set_request_id(NULL);
    pthread_mutex_lock(&srv->mu);
  }
  pthread_mutex_unlock(&srv->mu);
  return NULL;
}
