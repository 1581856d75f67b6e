/* See rmtree.h. Plain libc: this file is also built into sandman-agent. */
#include "common/rmtree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 512

static int remove_depth(int dir_fd, const char *name, int depth) {
  if (unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT) return 0;
  if (errno != EISDIR && errno != EPERM) return -errno;
  if (depth > MAX_DEPTH) return -ELOOP;
  int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == EACCES) {
    /* Its owner may always open it up again. */
    if (fchmodat(dir_fd, name, 0700, 0) == 0)
      fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    else
      errno = EACCES;
  }
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700) fchmod(fd, (st.st_mode & 07777) | 0700);
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    int e = errno;
    close(fd);
    return -e;
  }
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    int r = remove_depth(dirfd(d), de->d_name, depth + 1);
    if (r != 0 && rc == 0) rc = r;
  }
  closedir(d);
  if (rc != 0) return rc;
  if (unlinkat(dir_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) return -errno;
  return 0;
}

int common_rmtree_at(int dir_fd, const char *name) { return remove_depth(dir_fd, name, 0); }
