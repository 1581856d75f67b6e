/* Fuzz target for protected-path globs: the input is a glob, a newline and
 * a path. Any glob either compiles or is refused with SM_EINVAL and a
 * message; a compiled one answers for any path without crashing, and the
 * depth-first walk answers as the one-off check does, for the path and for
 * each directory above it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workspace/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char glob[SM_NAME_MAX];
  char path[1024];
  const uint8_t *nl = memchr(data, '\n', size);
  size_t whole = nl ? (size_t)(nl - data) : size;
  size_t gl = whole < sizeof glob ? whole : sizeof glob - 1;
  memcpy(glob, data, gl);
  glob[gl] = '\0';
  /* The path's length from the glob's whole length, not the cut one. */
  size_t pl = nl ? size - whole - 1 : 0;
  if (pl >= sizeof path) pl = sizeof path - 1;
  if (nl) memcpy(path, nl + 1, pl);
  path[pl] = '\0';
  if (memchr(glob, '\0', gl) || memchr(path, '\0', pl)) return 0;
  sm_string_list l;
  memset(&l, 0, sizeof l);
  memcpy(l.items[0], glob, gl + 1);
  l.n = 1;
  ws_protect *p = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = workspace_protect_new(&p, &l, &err);
  if (rc != 0) {
    if (rc != SM_EINVAL || err.message[0] == '\0') abort();
    if (workspace_protect_glob_check(glob, &err) != SM_EINVAL) abort();
    return 0;
  }
  if (workspace_protect_glob_check(glob, &err) != 0) abort();
  char *norm = NULL;
  if (pl > 0 && workspace_path_normalize(path, &norm, &err) == 0 && norm[0]) {
    ws_protect_walk w;
    workspace_protect_walk_init(&w, p);
    for (size_t i = 0, n = strlen(norm); i <= n; i++) {
      if (norm[i] != '/' && norm[i] != '\0') continue;
      char c = norm[i];
      norm[i] = '\0';
      for (int dir = 0; dir < 2; dir++)
        if (workspace_protect_walk_path(&w, norm, dir) != workspace_protected(p, norm, dir))
          abort();
      norm[i] = c;
    }
    workspace_protect_walk_dispose(&w);
  }
  free(norm);
  workspace_protect_free(p);
  return 0;
}
