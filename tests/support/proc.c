/* A process as /proc says it is (proc.h). */
#include <stdio.h>
#include <string.h>

#include "support/proc.h"

int tp_stat(pid_t pid, char *state, pid_t *ppid) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  /* The name in parentheses may hold anything: read after the last ')'. */
  const char *paren = strrchr(line, ')');
  char st = '?';
  int parent = 0;
  if (paren == NULL || sscanf(paren + 1, " %c %d", &st, &parent) != 2) return -1;
  if (state) *state = st;
  if (ppid) *ppid = (pid_t)parent;
  return 0;
}
