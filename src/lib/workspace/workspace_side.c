/* Picks a copy's side (the engine's or a scratch folder's, by its target)
 * and opens what it needs. */
#include <sandman/error.h>
#include <sandman/workspace.h>

#include "workspace/workspace_side.h"

void workspace_side_init(side *d, const sm_workspace_target *t) {
  d->ops = t->engine ? &ws_side_engine : &ws_side_scratch;
  d->t = t;
  d->fd = -1;
}

/* Opens a scratch folder (made on demand) into *fd, which the caller
 * closes; the engine's side has nothing to open. */
int workspace_side_open(side *d, int *fd, sm_error *err) {
  if (!d->ops->local) return 0;
  *fd = workspace_scratch_open(d->t->sandbox_path, err);
  if (*fd < 0) return *fd;
  d->fd = *fd;
  return 0;
}
