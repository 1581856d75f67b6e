/* The engine's thaw of a frozen sandbox beside its call (thaw_job.h).
 *
 * A job is the call's until it waits for it (sandbox_thaw_job_wait: joined
 * and freed there) or leaves it (sandbox_thaw_job_leave: the thread, now
 * detached, frees it when the thaw has ended). Either way it leaves the
 * runner's list of jobs (sandbox_thaws) last, so sandbox_thaws_free, the
 * first thing sm_runner_free does, returns only when no job can touch the
 * runner's state any more.
 *
 * Locks: a job's mu, and the list's mu, never both at once. */
#include "sandbox/thaw_job.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/state.h>

#include "common/thread.h"
#include "sandbox/rest.h"

struct sandbox_thaws {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  sandbox_thaw_job *running; /* every job not ended, through next */
};

struct sandbox_thaw_job {
  const sandbox_ctx *ctx;
  sm_engine *e; /* a clone: the call's own client goes on beside it */
  char name[SM_NAME_MAX];
  char id[SM_ENGINE_ID_MAX];
  json_object *who;
  sm_state_lock *busy; /* the job's own hold: no pause until it ends */
  pthread_t thread;
  pthread_mutex_t mu;
  int done, left;
  int rc, thawed;
  sm_error err;
  sandbox_thaw_job *next; /* under the list's mu */
  int answered;           /* under the list's mu: its call was answered */
};

sandbox_thaws *sandbox_thaws_new(void) {
  sandbox_thaws *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  return t;
}

void sandbox_thaws_free(sandbox_thaws *t) {
  if (t == NULL) return;
  /* Each waits for the engine's answer to one unpause, which has the
   * engine client's own timeout. */
  pthread_mutex_lock(&t->mu);
  while (t->running) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

void sandbox_thaws_wait(sandbox_thaws *t, const char *name) {
  if (t == NULL) return;
  pthread_mutex_lock(&t->mu);
  for (;;) {
    sandbox_thaw_job *j = t->running;
    while (j && name && strcmp(j->name, name) != 0) j = j->next;
    if (j == NULL) break;
    pthread_cond_wait(&t->cv, &t->mu);
  }
  pthread_mutex_unlock(&t->mu);
}

int sandbox_thaws_answered(sandbox_thaws *t, const char *name) {
  if (t == NULL) return 0;
  pthread_mutex_lock(&t->mu);
  sandbox_thaw_job *j = t->running;
  while (j && !(j->answered && strcmp(j->name, name) == 0)) j = j->next;
  pthread_mutex_unlock(&t->mu);
  return j != NULL;
}

/* Its hold goes first, then it leaves the list: a call waiting for it
 * (sandbox_thaws_wait) finds the record written. */
static void job_free(sandbox_thaw_job *j) {
  sandbox_thaws *t = j->ctx->thaws;
  sm_state_unlock(j->busy);
  sm_engine_free(j->e);
  json_object_put(j->who);
  pthread_mutex_destroy(&j->mu);
  pthread_mutex_lock(&t->mu);
  sandbox_thaw_job **p = &t->running;
  while (*p && *p != j) p = &(*p)->next;
  if (*p) *p = j->next;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  free(j);
}

static void warn_late(const char *name, const sm_error *err) {
  sm_log(SM_LOG_WARN, "sandbox %s: the engine's unpause, answered after its call's: %s", name,
         err->message);
}

static void *job_run(void *ud) {
  sandbox_thaw_job *j = ud;
  j->rc = sandbox_rest_thaw_finish(j->ctx, j->e, j->name, j->id, j->who, &j->thawed, &j->err);
  pthread_mutex_lock(&j->mu);
  j->done = 1;
  int left = j->left;
  pthread_mutex_unlock(&j->mu);
  if (left) {
    /* Nobody waits for it: its failure is said here (the call had its
     * answer from the agent, which the sandbox ran). */
    if (j->rc) warn_late(j->name, &j->err);
    job_free(j);
  }
  return NULL;
}

int sandbox_thaw_job_start(const sandbox_ctx *ctx, sm_engine *e, const char *name, const char *id,
                           json_object *who, sandbox_thaw_job **out, sm_error *err) {
  *out = NULL;
  sandbox_thaw_job *j = ctx->thaws ? calloc(1, sizeof *j) : NULL;
  if (j == NULL) {
    json_object_put(who);
    return ctx->thaws ? sm_error_set(err, SM_ENOMEM, NULL)
                      : sm_error_set(err, SM_EUNSUPPORTED, "no thaws beside calls here");
  }
  j->ctx = ctx;
  j->who = who;
  j->err = (sm_error)SM_ERROR_INIT;
  snprintf(j->name, sizeof j->name, "%s", name);
  snprintf(j->id, sizeof j->id, "%s", id);
  pthread_mutex_init(&j->mu, NULL);
  pthread_mutex_lock(&ctx->thaws->mu);
  j->next = ctx->thaws->running; /* out in job_free, whatever happens */
  ctx->thaws->running = j;
  pthread_mutex_unlock(&ctx->thaws->mu);
  int rc = sm_state_busy_acquire(ctx->state_dir, name, &j->busy, err);
  if (rc == 0) rc = sm_engine_clone(&j->e, e, err);
  if (rc == 0 && common_thread_start(&j->thread, NULL, job_run, j) != 0)
    rc = sm_error_set(err, SM_ENOMEM, "no thread for the thaw");
  if (rc) {
    job_free(j);
    return rc;
  }
  *out = j;
  return 0;
}

int sandbox_thaw_job_done(sandbox_thaw_job *j) {
  pthread_mutex_lock(&j->mu);
  int done = j->done;
  pthread_mutex_unlock(&j->mu);
  return done;
}

int sandbox_thaw_job_wait(sandbox_thaw_job *j, int *thawed, sm_error *err) {
  pthread_join(j->thread, NULL);
  int rc = j->rc;
  *thawed = j->thawed;
  if (rc) *err = j->err;
  job_free(j);
  return rc;
}

void sandbox_thaw_job_leave(sandbox_thaw_job *j) {
  sandbox_thaws *t = j->ctx->thaws;
  pthread_mutex_lock(&t->mu);
  j->answered = 1;
  pthread_mutex_unlock(&t->mu);
  pthread_t thread = j->thread; /* j may be gone once mu is let go */
  pthread_mutex_lock(&j->mu);
  int done = j->done;
  j->left = !done;
  pthread_mutex_unlock(&j->mu);
  if (!done) {
    pthread_detach(thread); /* it frees itself (job_run) */
    return;
  }
  char name[SM_NAME_MAX];
  snprintf(name, sizeof name, "%s", j->name);
  int thawed = 0;
  sm_error err = SM_ERROR_INIT;
  if (sandbox_thaw_job_wait(j, &thawed, &err) != 0) warn_late(name, &err);
}
