/* Fuzz target for the workspace extractor: any byte string is fed as a tar
 * stream into a fresh directory. Whatever happens, nothing may appear or
 * change next to that directory, and no staging directory may be left. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/sandman.h>

#include "support/memio.h"
#include "workspace/ws.h"

static char parent[64];
static char target[128];
static char sentinel[128];

static void clear_dir(int dfd) {
  DIR *d = fdopendir(dup(dfd));
  if (d == NULL) return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    workspace_remove_tree(dfd, de->d_name);
  }
  closedir(d);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/* Leaves no folder behind in /tmp after a replay or a fuzzing session. */
static void remove_parent(void) {
  int dfd = open(target, O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    clear_dir(dfd);
    close(dfd);
  }
  rmdir(target);
  unlink(sentinel);
  rmdir(parent);
}

static void init_once(void) {
  if (parent[0]) return;
  atexit(remove_parent);
  snprintf(parent, sizeof parent, "/tmp/sm-fuzz-extract-XXXXXX");
  if (mkdtemp(parent) == NULL) abort();
  snprintf(target, sizeof target, "%s/ws", parent);
  snprintf(sentinel, sizeof sentinel, "%s/sentinel", parent);
  if (mkdir(target, 0700) != 0) abort();
  FILE *f = fopen(sentinel, "w");
  if (f == NULL) abort();
  fputs("untouched\n", f);
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  init_once();
  /* Small, uneven pieces exercise the reader's buffering. */
  mem_reader s = {(const char *)data, size, 0, 4093};
  sm_workspace_limits lim = {4 << 20, 2000, 1024};
  sm_error err = SM_ERROR_INIT;
  ws_apply_result res = {0};
  workspace_unpack_dir(target, read_mem, &s, &lim, &res, NULL, &err);
  workspace_apply_result_dispose(&res);
  /* The invariants: the parent holds exactly the target and the sentinel,
   * the sentinel is unchanged, the target has no staging directory left. */
  if (count_entries(parent) != 2) abort();
  struct stat st;
  if (lstat(sentinel, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 10) abort();
  DIR *d = opendir(target);
  if (d == NULL) abort();
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, WS_STAGE_PREFIX, strlen(WS_STAGE_PREFIX)) == 0) abort();
  int dfd = dup(dirfd(d));
  closedir(d);
  clear_dir(dfd);
  close(dfd);
  return 0;
}
