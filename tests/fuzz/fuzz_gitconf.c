/* Fuzz target for the git configuration scan (src/lib/workspace/gitconf.c):
 * any text is answered without crashing or reading past it, and a section
 * that names a command, added after any text and a blank line, is always
 * found: no text before it can hide it (git itself would read it there or
 * refuse the whole file). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workspace/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  (void)workspace_gitconf_runs_text((const char *)data, size);
  static const char tail[] = "\n\n[core]\n\tfsmonitor = x\n";
  char *both = malloc(size + sizeof tail);
  if (both == NULL) return 0;
  memcpy(both, data, size);
  memcpy(both + size, tail, sizeof tail - 1);
  if (!workspace_gitconf_runs_text(both, size + sizeof tail - 1)) abort();
  free(both);
  return 0;
}
