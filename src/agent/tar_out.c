/* See tar_out.h. Plain libc: the static agent. Every entry is looked at
 * with fstatat(AT_SYMLINK_NOFOLLOW) and opened with O_NOFOLLOW, and a file
 * opened is checked to be the one looked at: a link is written as a link,
 * never read through. */
#include "agent/tar_out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/proc_stop.h"

#define BLOCK 512
#define OUT_CAP ((size_t)1 << 20)
#define TAR_PATH_MAX 4096
#define TAR_DEPTH_MAX 256
#define USTAR_NAME 100
#define OCTAL11_MAX 077777777777LL /* a 12-byte number field */
#define OCTAL7_MAX 07777777LL      /* an 8-byte one */

static unsigned char tar_out_buf[OUT_CAP];
static size_t tar_out_len;

/* 0, or 1 when stdout fails (the host is gone). */
static int tar_out_flush(void) {
  size_t off = 0;
  while (off < tar_out_len) {
    ssize_t n = write(1, tar_out_buf + off, tar_out_len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 1;
    off += (size_t)n;
  }
  tar_out_len = 0;
  return 0;
}

static int tar_out_put(const void *p, size_t n) {
  while (n > 0) {
    if (tar_out_len == OUT_CAP && tar_out_flush()) return 1;
    size_t take = OUT_CAP - tar_out_len < n ? OUT_CAP - tar_out_len : n;
    memcpy(tar_out_buf + tar_out_len, p, take);
    tar_out_len += take;
    p = (const char *)p + take;
    n -= take;
  }
  return 0;
}

static int tar_out_pad(int64_t size) {
  static const char zero[BLOCK];
  size_t pad = (size_t)((BLOCK - size % BLOCK) % BLOCK);
  return pad ? tar_out_put(zero, pad) : 0;
}

static int tar_out_cannot(const char *what, const char *path, int e) {
  fprintf(stderr, "tar: %s '%s'%s%s\n", what, path, e ? ": " : "", e ? strerror(e) : "");
  return AGENT_TAR_CANNOT;
}

/* "LEN key=value\n", LEN counting itself. */
static size_t tar_out_record(char *out, size_t cap, const char *key, const char *val) {
  size_t body = strlen(key) + strlen(val) + 3, len = body + 1;
  while (snprintf(NULL, 0, "%zu", len) + body != len) len++;
  int n = snprintf(out, cap, "%zu %s=%s\n", len, key, val);
  return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static void tar_out_number(unsigned char *f, size_t width, uint64_t v) {
  char tmp[24];
  snprintf(tmp, sizeof tmp, "%0*llo", (int)width - 1, (unsigned long long)v);
  memcpy(f, tmp, width - 1);
}

static int tar_out_header(const char *name, char type, unsigned mode, const struct stat *st,
                          int64_t size, const char *link) {
  unsigned char h[BLOCK];
  memset(h, 0, sizeof h);
  memcpy(h, name, strnlen(name, USTAR_NAME));
  tar_out_number(h + 100, 8, mode & 07777);
  tar_out_number(h + 108, 8, st && st->st_uid <= OCTAL7_MAX ? st->st_uid : 0);
  tar_out_number(h + 116, 8, st && st->st_gid <= OCTAL7_MAX ? st->st_gid : 0);
  tar_out_number(h + 124, 12, size <= OCTAL11_MAX ? (uint64_t)size : 0);
  int64_t mt = st ? (int64_t)st->st_mtim.tv_sec : 0;
  tar_out_number(h + 136, 12, mt >= 0 && mt <= OCTAL11_MAX ? (uint64_t)mt : 0);
  h[156] = (unsigned char)type;
  if (link) memcpy(h + 157, link, strnlen(link, USTAR_NAME));
  memcpy(h + 257, "ustar\0" "00", 8);
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < BLOCK; i++) sum += h[i];
  char ck[8];
  snprintf(ck, sizeof ck, "%06o", sum);
  memcpy(h + 148, ck, 7);
  return tar_out_put(h, sizeof h);
}

/* One entry's header(s): a pax one first where ustar falls short. */
static int tar_out_entry(const char *path, char type, const struct stat *st, int64_t size,
                         const char *link) {
  char pax[3 * TAR_PATH_MAX], num[32];
  size_t n = 0;
  if (strlen(path) > USTAR_NAME) n += tar_out_record(pax + n, sizeof pax - n, "path", path);
  if (link && strlen(link) > USTAR_NAME) n += tar_out_record(pax + n, sizeof pax - n, "linkpath", link);
  if (size > OCTAL11_MAX) {
    snprintf(num, sizeof num, "%lld", (long long)size);
    n += tar_out_record(pax + n, sizeof pax - n, "size", num);
  }
  int64_t mt = (int64_t)st->st_mtim.tv_sec;
  if (mt < 0 || mt > OCTAL11_MAX) {
    snprintf(num, sizeof num, "%lld", (long long)mt);
    n += tar_out_record(pax + n, sizeof pax - n, "mtime", num);
  }
  if (st->st_uid > OCTAL7_MAX) {
    snprintf(num, sizeof num, "%lu", (unsigned long)st->st_uid);
    n += tar_out_record(pax + n, sizeof pax - n, "uid", num);
  }
  if (st->st_gid > OCTAL7_MAX) {
    snprintf(num, sizeof num, "%lu", (unsigned long)st->st_gid);
    n += tar_out_record(pax + n, sizeof pax - n, "gid", num);
  }
  if (n > 0 && (tar_out_header("./PaxHeaders/entry", 'x', 0644, NULL, (int64_t)n, NULL) ||
                tar_out_put(pax, n) || tar_out_pad((int64_t)n)))
    return 1;
  return tar_out_header(path, type, st->st_mode, st, size, link);
}

/* A regular file's header and data: exactly the size looked at. */
static int tar_out_file(int dfd, const char *name, const char *path, const struct stat *st) {
  if (st->st_nlink > 1) return tar_out_cannot("a file with more than one hard link:", path, 0);
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return tar_out_cannot("cannot open", path, errno);
  struct stat again;
  if (fstat(fd, &again) != 0 || again.st_ino != st->st_ino || again.st_dev != st->st_dev ||
      !S_ISREG(again.st_mode)) {
    close(fd);
    return tar_out_cannot("changed while read:", path, 0);
  }
  int rc = tar_out_entry(path, '0', st, (int64_t)st->st_size, NULL);
  int64_t left = (int64_t)st->st_size;
  while (rc == 0 && left > 0) {
    if (tar_out_len == OUT_CAP && (rc = tar_out_flush()) != 0) break;
    size_t want = OUT_CAP - tar_out_len;
    if ((int64_t)want > left) want = (size_t)left;
    ssize_t got = read(fd, tar_out_buf + tar_out_len, want);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) rc = tar_out_cannot(got < 0 ? "cannot read" : "shorter than its size:", path, got < 0 ? errno : 0);
    else tar_out_len += (size_t)got, left -= got;
  }
  close(fd);
  return rc ? rc : tar_out_pad((int64_t)st->st_size);
}

static int tar_out_dir(int fd, char *path, size_t plen, int depth);

static int tar_out_one(int dfd, const char *name, char *path, size_t plen, int depth) {
  size_t nlen = strlen(name);
  if (plen + nlen + 2 >= TAR_PATH_MAX) return tar_out_cannot("a path too long under", path, 0);
  memcpy(path + plen, name, nlen + 1);
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return tar_out_cannot("cannot look at", path, errno);
  if (S_ISREG(st.st_mode)) return tar_out_file(dfd, name, path, &st);
  if (S_ISLNK(st.st_mode)) {
    char target[TAR_PATH_MAX];
    ssize_t n = readlinkat(dfd, name, target, sizeof target);
    if (n < 0 || (size_t)n >= sizeof target) return tar_out_cannot("cannot read the link", path, n < 0 ? errno : 0);
    target[n] = '\0';
    return tar_out_entry(path, '2', &st, 0, target);
  }
  if (!S_ISDIR(st.st_mode)) return tar_out_cannot("not a file, folder or link:", path, 0);
  if (depth >= TAR_DEPTH_MAX) return tar_out_cannot("folders nested too deep at", path, 0);
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return tar_out_cannot("cannot open the folder", path, errno);
  path[plen + nlen] = '/';
  path[plen + nlen + 1] = '\0';
  int rc = tar_out_entry(path, '5', &st, 0, NULL);
  if (rc == 0) return tar_out_dir(fd, path, plen + nlen + 1, depth + 1);
  close(fd);
  return rc;
}

/* The entries of the folder open as fd (taken), path[0..plen) its name
 * with a '/' at the end. */
static int tar_out_dir(int fd, char *path, size_t plen, int depth) {
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return tar_out_cannot("cannot read the folder", path, errno);
  }
  int rc = 0;
  for (;;) {
    errno = 0;
    struct dirent *de = readdir(d);
    if (de == NULL) {
      if (errno) rc = tar_out_cannot("cannot read the folder", path, errno);
      break;
    }
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if ((rc = tar_out_one(dirfd(d), de->d_name, path, plen, depth)) != 0) break;
    path[plen] = '\0';
  }
  closedir(d);
  return rc;
}

static int tar_out_tree(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return tar_out_cannot("cannot open the folder", dir, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return tar_out_cannot("cannot look at", dir, errno);
  }
  char path[TAR_PATH_MAX] = "./";
  int rc = tar_out_entry(path, '5', &st, 0, NULL);
  if (rc == 0) rc = tar_out_dir(fd, path, 2, 0);
  else close(fd);
  static const char end[2 * BLOCK];
  if (rc == 0) rc = tar_out_put(end, sizeof end);
  if (rc == 0) rc = tar_out_flush();
  return rc;
}

/* The host's word (a byte, or the end of stdin: the host gone). */
static void tar_out_wait_go(void) {
  char c;
  while (read(0, &c, 1) < 0 && errno == EINTR) continue;
}

int agent_tar_main(int argc, char **argv) {
  int stop = argc == 3 && strcmp(argv[2], "--stop") == 0;
  if (argc != 2 && !stop) {
    fprintf(stderr, "usage: sandman-agent tar DIR [--stop]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN); /* a host gone is a write that fails */
  agent_proc_stop stopped = {0};
  if (stop && agent_proc_stop_all(&stopped) != 0) return AGENT_TAR_CANNOT;
  /* The host's sign that this is the tar, and that the processes are
   * stopped from here on (src/lib/sandbox/snap_agent.c). */
  static const char magic[] = "sandman-tar 1\n";
  int rc = tar_out_put(magic, sizeof magic - 1);
  if (rc == 0) rc = tar_out_flush();
  if (rc == 0) rc = tar_out_tree(argv[1]);
  if (stop && rc == 0) tar_out_wait_go();
  if (stop) agent_proc_continue_all(&stopped);
  return rc;
}
