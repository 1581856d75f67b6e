/* Fuzzes the agent's untar (src/agent/untar.c, `sandman-agent untar DIR`):
 * the input is its stdin. It runs in a child chrooted into a folder of its
 * own (root: chroot; otherwise a user namespace), extracting into /root
 * there, so that whatever a bug would write through a link or a ".." lands
 * in that folder, where it is caught: afterwards the folder must hold
 * nothing but /root. A crash or a signal in the child aborts. Without a
 * way to isolate it the target says so once and runs nothing. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "agent/untar.h"
#include "support/files.h"

static int write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* In the child: the jail becomes "/". */
static int isolate(const char *jail) {
  if (geteuid() != 0) {
    uid_t uid = geteuid();
    gid_t gid = getegid();
    char map[64];
    if (unshare(CLONE_NEWUSER) != 0) return -1;
    write_text("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "0 %d 1", (int)uid);
    if (write_text("/proc/self/uid_map", map) != 0) return -1;
    snprintf(map, sizeof map, "0 %d 1", (int)gid);
    if (write_text("/proc/self/gid_map", map) != 0) return -1;
  }
  return chroot(jail) == 0 && chdir("/") == 0 ? 0 : -1;
}

/* 1: the jail holds "root" alone. */
static int only_root(const char *jail) {
  DIR *d = opendir(jail);
  int ok = d != NULL;
  for (struct dirent *de; d && (de = readdir(d)) != NULL;)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
        strcmp(de->d_name, "root") != 0)
      ok = 0;
  if (d) closedir(d);
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int unusable;
  if (unusable) return 0;
  char jail[4096], root[4200];
  /* A tmpfs when there is one: a few thousand small trees made and removed. */
  snprintf(jail, sizeof jail, "%s/sandman-fuzz-untar-XXXXXX",
           access("/dev/shm", W_OK) == 0 ? "/dev/shm"
           : getenv("TMPDIR")            ? getenv("TMPDIR")
                                         : "/tmp");
  if (mkdtemp(jail) == NULL) abort();
  snprintf(root, sizeof root, "%s/root", jail);
  if (mkdir(root, 0755) != 0) abort();
  int in = memfd_create("untar-input", MFD_CLOEXEC);
  if (in < 0 || (size && write(in, data, size) != (ssize_t)size) || lseek(in, 0, SEEK_SET) != 0)
    abort();
  /* Its stderr is kept: a sanitizer's report there fails the input (their
   * exit code could pass for untar's own 1). */
  int errs = memfd_create("untar-stderr", MFD_CLOEXEC);
  if (errs < 0) abort();
  pid_t pid = fork();
  if (pid == 0) {
    int quiet = open("/dev/null", O_WRONLY);
    if (isolate(jail) != 0) _exit(100);
    dup2(in, 0);
    dup2(quiet, 1);
    dup2(errs, 2);
    _exit(agent_untar("/root", 1) == 0 ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) abort();
  close(in);
  static char said[65536];
  ssize_t n = pread(errs, said, sizeof said - 1, 0);
  close(errs);
  said[n > 0 ? n : 0] = '\0';
  if (strstr(said, "runtime error:") || strstr(said, "Sanitizer")) {
    fprintf(stderr, "fuzz_untar: a sanitizer spoke:\n%s", said);
    abort();
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 100) {
    fprintf(stderr, "fuzz_untar: no chroot nor user namespace here: nothing is run\n");
    unusable = 1;
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
    fprintf(stderr, "fuzz_untar: the extraction died (status %d)\n", status);
    abort();
  } else if (!only_root(jail)) {
    fprintf(stderr, "fuzz_untar: something was written outside the folder (%s)\n", jail);
    abort();
  }
  tf_rm_rf(jail);
  return 0;
}
