/* A sandbox replaced with its /workspace carried over (src/lib/sandbox's
 * replacement): the manifest of the last copy still says what the new
 * sandbox holds, so it is made to name the new container, and the next
 * copy stays incremental instead of clearing the carried files. */
#include <string.h>

#include <sandman/workspace.h>

#include "workspace/ws.h"

#define RETARGET_MAX_ENTRIES 1000000

int sm_workspace_manifest_retarget(const char *path, const char *old_container,
                                   const char *new_container, sm_error *err) {
  ws_manifest base, held;
  workspace_manifest_init(&base);
  workspace_manifest_init(&held);
  int rc = workspace_manifest_load(&base, &held, path, RETARGET_MAX_ENTRIES, err);
  /* No manifest, or one of another sandbox: nothing to say. */
  if (rc == 0 && base.root && strcmp(base.container, old_container) == 0) {
    /* set_target copies the root before it lets the old one go. */
    rc = workspace_manifest_set_target(&base, new_container, base.root);
    if (rc) sm_error_set(err, rc, NULL);
    else rc = workspace_manifest_save(&base, &held, path, err);
  }
  workspace_manifest_dispose(&base);
  workspace_manifest_dispose(&held);
  return rc;
}
