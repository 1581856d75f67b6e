/* `sandman-agent watch` (agent_watch.h): inotify on a folder of the workspace
 * (and, recursively, the folders below it), each event written as a
 * record as it is read.
 *
 * inotify names a directory by path; the watcher never gives it one from
 * the sandbox: it opens each folder with O_NOFOLLOW from ROOT's descriptor
 * (agent_fs_open_dir, one name at a time) or from its parent's, changes
 * into it (fchdir) and watches "." with IN_DONT_FOLLOW | IN_ONLYDIR, so a
 * link planted on the way is never followed. A folder made (or moved in)
 * later is opened the same way, watched, and what it already holds is
 * told as created: files made in it before its watch was in place are not
 * lost (one may be told twice). A rename within the tree is one "moved"
 * event (IN_MOVED_FROM and IN_MOVED_TO paired by their cookie); out of it,
 * "deleted"; into it, "created". Consecutive modifications of one file in
 * one read are told once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/fs.h"
#include "agent/agent_watch.h"
#include "common/io.h"

#define MASK                                                                                 \
  (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |         \
   IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
#define PAIR_WAIT_MS 10 /* for the IN_MOVED_TO of a rename read alone */
#define OUT_MAX (64u << 10)

typedef struct watched {
  int wd;
  char *rel; /* relative to ROOT, "" for ROOT itself */
} watched;

static watched dirs[AGENT_WATCH_DIRS_MAX];
static int n_dirs, ifd = -1, root_fd = -1, recursive, base_wd = -1, lost;
static char out_buf[OUT_MAX + SM_FS_PATH_MAX * 2 + 64];
static size_t out_len;
/* a move read without its other half yet */
static struct {
  int have;
  uint32_t cookie;
  int dir;
  char path[SM_FS_PATH_MAX + 1];
} pending;
/* the last event written in this read: repeated modifications go once */
static char last_modified[SM_FS_PATH_MAX + 1];

static void flush_out(void) {
  if (out_len && common_write_all(1, out_buf, out_len) != 0) _exit(3); /* the host is gone */
  out_len = 0;
}

static void record(char kind, int dir, const char *path, const char *to) {
  size_t pl = strlen(path), tl = to ? strlen(to) : 0;
  if (out_len > OUT_MAX) flush_out();
  out_len += (size_t)snprintf(out_buf + out_len, sizeof out_buf - out_len, "e %c %d %zu %zu\n",
                              kind, dir ? 1 : 0, pl, tl);
  memcpy(out_buf + out_len, path, pl);
  out_len += pl;
  if (tl) memcpy(out_buf + out_len, to, tl);
  out_len += tl;
  if (kind != 'm') last_modified[0] = '\0';
}

static int fail(int e, const char *path, const char *why) {
  char msg[400];
  int n = snprintf(msg, sizeof msg, "%s: %s", path[0] ? path : ".", why ? why : strerror(e));
  for (int i = 0; i < n && i < (int)sizeof msg; i++)
    if (msg[i] == '\n' || msg[i] == '\r') msg[i] = '?';
  const char *name = e == ENOENT ? "ENOENT" : e == ENOTDIR ? "ENOTDIR" : e == ELOOP ? "ELOOP"
                     : e == EXDEV ? "EXDEV" : e == EACCES ? "EACCES" : e == ENOSPC ? "ENOSPC"
                     : e == ENAMETOOLONG ? "ENAMETOOLONG" : "EIO";
  out_len += (size_t)snprintf(out_buf + out_len, sizeof out_buf - out_len, "err %s %s\n", name, msg);
  flush_out();
  return 1;
}

static int join(char *out, size_t len, const char *a, const char *b) {
  int n = snprintf(out, len, "%s%s%s", a, a[0] && b[0] ? "/" : "", b);
  return n >= 0 && (size_t)n < len && (size_t)n <= SM_FS_PATH_MAX ? 0 : -1;
}

static watched *by_wd(int wd) {
  for (int i = 0; i < n_dirs; i++)
    if (dirs[i].wd == wd) return &dirs[i];
  return NULL;
}

/* Watches the open folder fd (named rel); its folders below too when
 * recursive; with tell, what they hold is told as created. 0, or an errno
 * (ENOSPC: past AGENT_WATCH_DIRS_MAX). Takes fd. */
static int add_tree(int fd, const char *rel, int depth, int tell) {
  if (n_dirs >= AGENT_WATCH_DIRS_MAX) {
    close(fd);
    return ENOSPC;
  }
  int wd = fchdir(fd) == 0 ? inotify_add_watch(ifd, ".", MASK) : -1;
  if (wd < 0) {
    int e = errno;
    close(fd);
    return e;
  }
  watched *w = by_wd(wd); /* the same folder reached twice keeps one entry */
  if (w == NULL) {
    w = &dirs[n_dirs];
    w->rel = strdup(rel);
    if (w->rel == NULL) {
      close(fd);
      return ENOMEM;
    }
    w->wd = wd;
    n_dirs++;
  }
  int e = 0;
  if (recursive || tell) {
    DIR *d = fdopendir(dup(fd));
    struct dirent *de;
    while (d && e == 0 && (de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      char child[SM_FS_PATH_MAX + 2];
      if (join(child, sizeof child, rel, de->d_name) != 0) {
        if (tell) record('o', 0, "", NULL); /* too long to tell */
        continue;
      }
      struct stat st;
      int is_dir = fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      if (tell) record('c', is_dir, child, NULL);
      if (!is_dir || !recursive || depth >= SM_FS_DEPTH_MAX) continue;
      int cfd = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (cfd >= 0) e = add_tree(cfd, child, depth + 1, tell);
      if (e == ENOENT || e == ELOOP || e == ENOTDIR || e == EACCES) e = 0; /* gone or not ours */
    }
    if (d) closedir(d);
  }
  close(fd);
  return e;
}

/* The process's working folder goes back to ROOT: a watched folder that
 * stayed it would be held, and its removal never told (IN_DELETE_SELF
 * comes once nothing holds it). */
static void leave_tree(void) {
  if (fchdir(root_fd) != 0) _exit(3);
}

/* A folder that appeared at path: watched (and what it holds told). */
static void add_new_dir(const char *path) {
  int fd;
  char canon[SM_FS_PATH_MAX + 1];
  if (agent_fs_open_dir(root_fd, path, &fd, canon, sizeof canon) != 0) return;
  int depth = 0;
  for (const char *p = canon; *p; p++) depth += *p == '/';
  int e = add_tree(fd, canon, depth, 1);
  leave_tree();
  if (e == ENOSPC && !lost) {
    lost = 1; /* told once: some folders are not watched */
    record('o', 0, "", NULL);
  }
}

/* A folder moved within the tree: the watches below it have new names. */
static void rename_dirs(const char *from, const char *to) {
  size_t fl = strlen(from);
  for (int i = 0; i < n_dirs; i++) {
    const char *r = dirs[i].rel;
    if (strncmp(r, from, fl) != 0 || (r[fl] != '\0' && r[fl] != '/')) continue;
    char renamed[SM_FS_PATH_MAX * 2 + 2];
    if (join(renamed, sizeof renamed, to, r[fl] ? r + fl + 1 : "") != 0) continue;
    char *copy = strdup(renamed);
    if (copy == NULL) continue;
    free(dirs[i].rel);
    dirs[i].rel = copy;
  }
}

/* A folder moved out of the tree: its watches (and those below) go, so
 * that nothing is told under a name it no longer has. */
static void drop_dirs(const char *path) {
  size_t pl = strlen(path);
  for (int i = 0; i < n_dirs;) {
    const char *r = dirs[i].rel;
    if (strncmp(r, path, pl) == 0 && (r[pl] == '\0' || r[pl] == '/') && dirs[i].wd != base_wd) {
      inotify_rm_watch(ifd, dirs[i].wd);
      free(dirs[i].rel);
      dirs[i] = dirs[--n_dirs];
      continue;
    }
    i++;
  }
}

static void flush_pending(void) {
  if (!pending.have) return;
  record('d', pending.dir, pending.path, NULL);
  if (pending.dir) drop_dirs(pending.path);
  pending.have = 0;
}

static void forget(int wd) {
  for (int i = 0; i < n_dirs; i++) {
    if (dirs[i].wd != wd) continue;
    free(dirs[i].rel);
    dirs[i] = dirs[--n_dirs];
    return;
  }
}

/* One event; 1 when the watch is over (the watched folder went away). */
static int handle(const struct inotify_event *ev) {
  if (ev->mask & IN_Q_OVERFLOW) {
    flush_pending();
    record('o', 0, "", NULL);
    return 0;
  }
  if (ev->mask & IN_IGNORED) {
    forget(ev->wd);
    return ev->wd == base_wd;
  }
  watched *w = by_wd(ev->wd);
  if (w == NULL) return 0;
  if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) return ev->wd == base_wd;
  char path[SM_FS_PATH_MAX + 2];
  if (ev->len == 0) return 0;
  if (join(path, sizeof path, w->rel, ev->name) != 0) {
    record('o', 0, "", NULL); /* a path too long to tell: lost, and said so */
    return 0;
  }
  int dir = (ev->mask & IN_ISDIR) != 0;
  if (pending.have && !((ev->mask & IN_MOVED_TO) && ev->cookie == pending.cookie))
    flush_pending();
  if (ev->mask & IN_MOVED_FROM) {
    pending.have = 1;
    pending.cookie = ev->cookie;
    pending.dir = dir;
    snprintf(pending.path, sizeof pending.path, "%s", path);
  } else if (ev->mask & IN_MOVED_TO) {
    if (pending.have) {
      record('v', dir, pending.path, path);
      if (dir) rename_dirs(pending.path, path);
      pending.have = 0;
    } else {
      record('c', dir, path, NULL);
      if (dir && recursive) add_new_dir(path);
    }
  } else if (ev->mask & IN_CREATE) {
    record('c', dir, path, NULL);
    if (dir && recursive) add_new_dir(path);
  } else if (ev->mask & IN_MODIFY) {
    if (strcmp(last_modified, path) != 0) record('m', dir, path, NULL);
    snprintf(last_modified, sizeof last_modified, "%s", path);
  } else if (ev->mask & IN_DELETE) {
    record('d', dir, path, NULL);
  }
  return 0;
}

/* Reads what the kernel holds; 1 when the watch is over. */
static int read_events(void) {
  static char buf[64 << 10] __attribute__((aligned(__alignof__(struct inotify_event))));
  ssize_t n = read(ifd, buf, sizeof buf);
  if (n <= 0) return n < 0 && errno != EAGAIN && errno != EINTR;
  int over = 0;
  for (char *p = buf; p < buf + n && !over;) {
    const struct inotify_event *ev = (const struct inotify_event *)p;
    over = handle(ev);
    p += sizeof *ev + ev->len;
  }
  return over;
}

static int start(const char *root, const char *path) {
  root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return fail(errno, root, "the workspace cannot be opened");
  int fd;
  char canon[SM_FS_PATH_MAX + 1];
  int e = agent_fs_open_dir(root_fd, path, &fd, canon, sizeof canon);
  if (e == ELOOP) return fail(e, path, "a symbolic link is on the way (links are never followed)");
  if (e == EXDEV) return fail(e, path, "the path leaves the workspace ('..' or absolute)");
  if (e) return fail(e, path, NULL);
  ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (ifd < 0) return fail(errno, path, "inotify is not available");
  if (fchdir(fd) != 0 || (base_wd = inotify_add_watch(ifd, ".", MASK)) < 0) {
    e = errno;
    close(fd);
    return fail(e, path, NULL);
  }
  e = add_tree(fd, canon, 0, 0);
  leave_tree();
  if (e == ENOSPC) return fail(e, path, "too many folders to watch (more than 8192)");
  if (e) return fail(e, path, NULL);
  out_len += (size_t)snprintf(out_buf + out_len, sizeof out_buf - out_len, "ok\n");
  flush_out();
  return 0;
}

int agent_watch(const char *root, const char *path, const char *flags) {
  signal(SIGPIPE, SIG_IGN);
  recursive = strchr(flags, 'r') != NULL;
  if (start(root, path) != 0) return 1;
  for (;;) {
    /* fd 1 polled for its reader's end: a host that went away ends us. */
    struct pollfd pf[2] = {{ifd, POLLIN, 0}, {1, 0, 0}};
    int n = poll(pf, 2, pending.have ? PAIR_WAIT_MS : -1);
    if (n < 0 && errno != EINTR) break;
    if (n == 0) flush_pending(); /* a rename whose other half never came: out of the tree */
    if (pf[1].revents & (POLLERR | POLLHUP)) break;
    if (n > 0 && (pf[0].revents & POLLIN) && read_events()) {
      flush_pending();
      out_len += (size_t)snprintf(out_buf + out_len, sizeof out_buf - out_len, "end 0 0\n");
      flush_out();
      return 0;
    }
    last_modified[0] = '\0';
    flush_out();
  }
  return 0;
}
