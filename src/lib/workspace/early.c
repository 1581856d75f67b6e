/* The upload started before the scan (early.h). */
#include <stdio.h>
#include <string.h>

#include <sandman/log.h>

#include "common/thread.h"
#include "workspace/workspace_box.h"
#include "workspace/early.h"

static void *early_main(void *ud) {
  ws_early_put *u = ud;
  if (u->request_id[0]) sm_log_set_request_id(u->request_id);
  if (u->pre) workspace_prelist_wait_attached(u->pre);
  /* A fresh keyed sandbox has no unpacker yet: installed first, while the
   * caller scans. */
  u->rc =
      u->t->untouched || u->t->install == NULL ? 0 : workspace_box_install_unpacker(u->t, &u->err);
  int missing = 0;
  if (u->rc == 0)
    u->rc = workspace_box_put(u->t, workspace_packer_read, u->pk, &missing, u->listing, &u->err);
  return NULL;
}

int workspace_early_start(ws_early_put *u, const sm_workspace_target *t, int root_fd,
                          int64_t budget, ws_prelist *pre, common_buf *listing) {
  memset(u, 0, sizeof *u);
  u->t = t;
  u->pre = pre;
  u->listing = listing;
  sm_error_clear(&u->err);
  sm_error perr = SM_ERROR_INIT;
  if (workspace_packer_new_deferred(&u->pk, root_fd, t->uid, t->gid, &perr) != 0) return -1;
  if (budget >= 0) workspace_packer_abort_after(u->pk, budget);
  const char *rid = sm_log_request_id();
  if (rid) snprintf(u->request_id, sizeof u->request_id, "%s", rid);
  int r = common_thread_start(&u->th, NULL, early_main, u);
  if (r != 0) {
    workspace_packer_free(u->pk);
    u->pk = NULL;
    return -1;
  }
  return 0;
}

void workspace_early_join(ws_early_put *u) {
  pthread_join(u->th, NULL);
  if (u->rc) workspace_packer_reason(u->pk, &u->err);
}

void workspace_early_cancel(ws_early_put *u, int code) {
  workspace_packer_abandon(u->pk, code);
  workspace_early_join(u);
  workspace_packer_free(u->pk);
  u->pk = NULL;
}
