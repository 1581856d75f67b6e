/* Workspace sync is built in parallel with this module: until
 * src/workspace provides these functions, references stay weak so the
 * library links, and a call with a workspace says the build lacks it. */
#ifndef SANDMAN_SANDBOX_WS_WEAK_H
#define SANDMAN_SANDBOX_WS_WEAK_H
#include <sandman/workspace.h>
#pragma weak sm_workspace_sync_new
#pragma weak sm_workspace_sync_in
#pragma weak sm_workspace_sync_out
#pragma weak sm_workspace_sync_free
static inline int sm_ws_linked(void) {
  return sm_workspace_sync_new != NULL && sm_workspace_sync_in != NULL &&
         sm_workspace_sync_out != NULL && sm_workspace_sync_free != NULL;
}
#endif
