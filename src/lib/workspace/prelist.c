/* The listing started ahead of an upload (prelist.h). */
#include <string.h>

#include <sandman/util.h>

#include "common/thread.h"
#include "workspace/workspace_box.h"
#include "workspace/prelist.h"

static ssize_t prelist_stdin(void *ud, char *buf, size_t len) {
  ws_prelist *p = ud;
  pthread_mutex_lock(&p->mu);
  /* Asked for stdin: the engine has answered the exec start. */
  p->attached = 1;
  pthread_cond_broadcast(&p->cv);
  while (p->word == 0) pthread_cond_wait(&p->cv, &p->mu);
  int word = p->word, handed = p->handed;
  p->handed = 1;
  pthread_mutex_unlock(&p->mu);
  if (handed || word < 0 || len < 3) return 0;
  memcpy(buf, "go\n", 3);
  return 3;
}

static void *prelist_main(void *ud) {
  ws_prelist *p = ud;
  p->rc = workspace_box_list(p->engine, p->t, p->max_entries, p->max_path, prelist_stdin, p,
                             &p->listing, &p->err);
  /* An error before stdin was read (create, start) still ends here. */
  pthread_mutex_lock(&p->mu);
  p->attached = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

void workspace_prelist_wait_attached(ws_prelist *p) {
  pthread_mutex_lock(&p->mu);
  while (!p->attached) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

int workspace_prelist_start(ws_prelist *p, const sm_workspace_target *t, int64_t max_entries,
                            int64_t max_path) {
  memset(p, 0, sizeof *p);
  workspace_manifest_init(&p->listing);
  p->t = t;
  p->max_entries = max_entries;
  p->max_path = max_path;
  sm_error_clear(&p->err);
  sm_error cerr = SM_ERROR_INIT;
  if (sm_engine_clone(&p->engine, t->engine, &cerr) != 0) return -1;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if (common_thread_start(&p->th, NULL, prelist_main, p) != 0) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    sm_engine_free(p->engine);
    return -1;
  }
  return 0;
}

void workspace_prelist_finish(ws_prelist *p, int ok) {
  pthread_mutex_lock(&p->mu);
  p->word = ok ? 1 : -1;
  p->t_go = workspace_now_ns();
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->th, NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  sm_engine_free(p->engine);
  p->engine = NULL;
}

void workspace_prelist_drop(ws_prelist *p) {
  workspace_prelist_finish(p, 0);
  workspace_manifest_dispose(&p->listing);
}
