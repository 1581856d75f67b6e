/* Files and folders for the tests (files.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/files.h"

#define READ_MAX ((size_t)64 << 20)

int tf_write(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = errno;
      close(fd);
      errno = saved;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return close(fd) == 0 ? 0 : -1;
}

int tf_write_str(const char *path, const char *text) { return tf_write(path, text, strlen(text)); }

int tf_write_at(const char *dir, const char *name, const char *text) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return tf_write_str(path, text);
}

char *tf_read(const char *path, size_t *len) {
  if (len) *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf != NULL) {
    if (n + 1 >= cap) {
      char *bigger = cap < READ_MAX ? realloc(buf, cap * 2) : NULL;
      if (bigger == NULL) {
        free(buf);
        buf = NULL;
        errno = EFBIG;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      free(buf);
      buf = NULL;
      break;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (buf == NULL) return NULL;
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

char *tf_read_at(const char *dir, const char *name) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return NULL;
  return tf_read(path, NULL);
}

int tf_rm_rf(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
  if (S_ISDIR(st.st_mode)) {
    chmod(path, 0700);
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      char p[4096];
      if ((size_t)snprintf(p, sizeof p, "%s/%s", path, de->d_name) < sizeof p) tf_rm_rf(p);
    }
    if (d) closedir(d);
    return rmdir(path);
  }
  return unlink(path);
}

int tf_temp_dir(char *out, size_t len, const char *name) {
  const char *t = getenv("TMPDIR");
  if ((size_t)snprintf(out, len, "%s/%s-XXXXXX", t && *t ? t : "/tmp", name) >= len) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return mkdtemp(out) ? 0 : -1;
}
