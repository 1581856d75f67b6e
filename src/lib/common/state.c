/* Busy locks and last-used times kept under the state directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/state.h>

#include "common/cleanup.h"
#include "common/io.h"

/* A lock is a flock(2) on a file of the state directory. Lock files are
 * removed with what they describe (sm_state_unlock_remove, and
 * sm_state_forget for locks nobody holds), which is safe across processes
 * because of two rules: a file is unlinked only by a process holding its
 * lock exclusively, after checking that the name still leads to the very
 * file it locked; and a locker, once it has the lock, checks the same and
 * starts again if the file was unlinked (or replaced) while it waited. So
 * two processes never hold the lock of one name on two different files. */
struct sm_state_lock {
  int fd;
  char *path;
};

int sm_state_default_dir(char *buf, size_t len, sm_error *err) {
  const char *env = getenv("SANDMAN_STATE_DIR");
  int n;
  if (env && *env) {
    n = snprintf(buf, len, "%s", env);
  } else if (geteuid() == 0) {
    n = snprintf(buf, len, "/var/lib/sandman");
  } else if ((env = getenv("XDG_STATE_HOME")) && *env) {
    n = snprintf(buf, len, "%s/sandman", env);
  } else if ((env = getenv("HOME")) && *env) {
    n = snprintf(buf, len, "%s/.local/state/sandman", env);
  } else {
    return sm_error_set(err, SM_EINVAL, "no state directory: set SANDMAN_STATE_DIR or HOME");
  }
  if (n < 0 || (size_t)n >= len) return sm_error_set(err, SM_EINVAL, "state directory path too long");
  return 0;
}

/* mkdir -p with mode 0700 for every component we create. */
static int make_dirs(const char *path, sm_error *err) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
    return sm_error_set(err, SM_EINVAL, "path too long: %s", path);
  if (common_mkdirs(tmp) != 0) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", tmp);
  return 0;
}

/* Names become file names: refuse anything that could leave the folder. */
static int valid_name(const char *name) {
  if (name == NULL || *name == '\0' || strlen(name) > 200) return 0;
  if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return 0;
  for (const char *p = name; *p; p++)
    if (*p == '/' || (unsigned char)*p < 0x20) return 0;
  return 1;
}

static int state_path(const char *state_dir, const char *sub, const char *name,
                      const char *suffix, char *out, size_t len, sm_error *err) {
  char base[PATH_MAX];
  if (state_dir == NULL) {
    int rc = sm_state_default_dir(base, sizeof base, err);
    if (rc) return rc;
    state_dir = base;
  }
  if (!valid_name(name)) return sm_error_set(err, SM_EINVAL, "invalid sandbox name for state: '%s'", name ? name : "");
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/%s", state_dir, sub) >= (int)sizeof dir)
    return sm_error_set(err, SM_EINVAL, "state path too long");
  int rc = make_dirs(dir, err);
  if (rc) return rc;
  if (snprintf(out, len, "%s/%s%s", dir, name, suffix) >= (int)len)
    return sm_error_set(err, SM_EINVAL, "state path too long");
  return 0;
}

/* Does path still name the file open as fd? */
static int still_named(int fd, const char *path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Opens path (made when missing, unless no_create) and locks it with
 * flock's how, again as long as the file it got was removed meanwhile.
 * With no_create, a missing file is SM_ENOTFOUND. */
static int lock_file_fd(const char *path, int how, int no_create, int *out_fd, sm_error *err) {
  for (int attempt = 0; attempt < 1000; attempt++) {
    int fd = open(path, no_create ? O_RDWR | O_CLOEXEC : O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    /* flock needs no write access: an operator who may only read the state
     * directory (list as another user) still sees what is busy. */
    if (fd < 0 && errno == EACCES) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && no_create)
      return sm_error_set(err, SM_ENOTFOUND, "no lock %s", path);
    if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "opening lock %s", path);
    int rc;
    do {
      rc = flock(fd, how);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int e = errno;
      close(fd);
      if (e == EWOULDBLOCK) return sm_error_set(err, SM_EBUSY, "a call is in flight (%s)", path);
      return sm_error_set_errno(err, SM_EIO, e, "locking %s", path);
    }
    if (still_named(fd, path)) {
      *out_fd = fd;
      return 0;
    }
    /* Removed (by the holder we waited for) while we waited: a new file. */
    close(fd);
  }
  return sm_error_set(err, SM_EIO, "locking %s: the file keeps being replaced", path);
}

static int lock_file(const char *path, int how, sm_state_lock **out, sm_error *err) {
  sm_state_lock *l = malloc(sizeof *l);
  char *p = strdup(path);
  if (l == NULL || p == NULL) {
    free(l);
    free(p);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  int rc = lock_file_fd(path, how, 0, &l->fd, err);
  if (rc) {
    free(l);
    free(p);
    return rc;
  }
  l->path = p;
  *out = l;
  return 0;
}

/* Unlinks the lock file open as fd if this process can lock it
 * exclusively (converting a shared hold) and the name still leads to it;
 * the lock goes with fd, closed here. */
static void remove_locked(int fd, const char *path) {
  int rc;
  do {
    rc = flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0 && still_named(fd, path)) unlink(path);
  close(fd);
}

/* Removes the lock file at path unless someone holds it. */
static void remove_if_free(const char *path) {
  int fd = -1;
  sm_error err = SM_ERROR_INIT;
  if (lock_file_fd(path, LOCK_EX | LOCK_NB, 1, &fd, &err) == 0) remove_locked(fd, path);
}

/* Locks <state dir>/<dir>/<name>.lock with flock's op. */
static int lock_named(const char *state_dir, const char *dir, const char *name, int op,
                      sm_state_lock **out, sm_error *err) {
  char path[PATH_MAX];
  int rc = state_path(state_dir, dir, name, ".lock", path, sizeof path, err);
  if (rc) return rc;
  return lock_file(path, op, out, err);
}

int sm_state_busy_acquire(const char *state_dir, const char *sandbox_name, sm_state_lock **out,
                          sm_error *err) {
  return lock_named(state_dir, "busy", sandbox_name, LOCK_SH, out, err);
}

int sm_state_busy_try(const char *state_dir, const char *sandbox_name, sm_state_lock **out,
                      sm_error *err) {
  return lock_named(state_dir, "busy", sandbox_name, LOCK_SH | LOCK_NB, out, err);
}

int sm_state_exclusive_try(const char *state_dir, const char *sandbox_name, sm_state_lock **out,
                           sm_error *err) {
  return lock_named(state_dir, "busy", sandbox_name, LOCK_EX | LOCK_NB, out, err);
}

int sm_state_key_lock(const char *state_dir, const char *key, sm_state_lock **out,
                      sm_error *err) {
  return lock_named(state_dir, "keys", key, LOCK_EX, out, err);
}

void sm_state_unlock(sm_state_lock *lock) {
  if (lock == NULL) return;
  close(lock->fd); /* closing drops the flock */
  free(lock->path);
  free(lock);
}

void sm_state_unlock_remove(sm_state_lock *lock) {
  if (lock == NULL) return;
  remove_locked(lock->fd, lock->path);
  free(lock->path);
  free(lock);
}

int sm_state_is_busy(const char *state_dir, const char *sandbox_name) {
  char path[PATH_MAX];
  sm_error err = SM_ERROR_INIT;
  if (state_path(state_dir, "busy", sandbox_name, ".lock", path, sizeof path, &err) != 0) return 0;
  /* No file, no call: asking makes none. */
  int fd = -1;
  int rc = lock_file_fd(path, LOCK_EX | LOCK_NB, 1, &fd, &err);
  if (rc == 0) close(fd);
  return rc == SM_EBUSY;
}

/* Writes all of buf, retrying short writes and EINTR. */
/* Makes a rename inside dir durable; failure only costs durability. */
static void sync_dir_of(const char *path) {
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return;
  char *slash = strrchr(dir, '/');
  if (slash == NULL) return;
  *slash = '\0';
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

int sm_state_touch(const char *state_dir, const char *sandbox_name, double when, sm_error *err) {
  char path[PATH_MAX], tmp[PATH_MAX + 32];
  int rc = state_path(state_dir, "last-used", sandbox_name, "", path, sizeof path, err);
  if (rc) return rc;
  /* A unique temporary name: several threads of one process (the runner
   * service) may touch the same sandbox at once, so the pid alone is not. */
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
    return sm_error_set(err, SM_EINVAL, "state path too long");
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  char line[64];
  int n = snprintf(line, sizeof line, "%.3f\n", when);
  if (common_write_all(fd, line, (size_t)n) != 0 || fsync(fd) != 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    return sm_error_set_errno(err, SM_EIO, e, "writing %s", tmp);
  }
  if (close(fd) != 0) {
    int e = errno;
    unlink(tmp);
    return sm_error_set_errno(err, SM_EIO, e, "writing %s", tmp);
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return sm_error_set_errno(err, SM_EIO, e, "renaming %s", tmp);
  }
  sync_dir_of(path);
  return 0;
}

double sm_state_last_used(const char *state_dir, const char *sandbox_name) {
  char path[PATH_MAX];
  sm_error err = SM_ERROR_INIT;
  if (state_path(state_dir, "last-used", sandbox_name, "", path, sizeof path, &err) != 0) return -1;
  FILE *f = fopen(path, "re");
  if (f == NULL) return -1;
  double v = -1;
  if (fscanf(f, "%lf", &v) != 1) v = -1;
  fclose(f);
  return v;
}

void sm_state_forget(const char *state_dir, const char *sandbox_name) {
  char path[PATH_MAX];
  sm_error err = SM_ERROR_INIT;
  if (state_path(state_dir, "last-used", sandbox_name, "", path, sizeof path, &err) == 0) unlink(path);
  /* The workspace module keeps its incremental manifest here. */
  if (state_path(state_dir, "workspaces", sandbox_name, ".manifest", path, sizeof path, &err) == 0)
    unlink(path);
  /* Its rest record and saved /workspace (docs/state.md). */
  if (state_path(state_dir, "rest", sandbox_name, ".json", path, sizeof path, &err) == 0) unlink(path);
  if (state_path(state_dir, "rest", sandbox_name, ".ws.tar", path, sizeof path, &err) == 0)
    unlink(path);
  /* Its lock files, where nobody holds them (a holder removes its own with
   * sm_state_unlock_remove). */
  if (state_path(state_dir, "busy", sandbox_name, ".lock", path, sizeof path, &err) == 0)
    remove_if_free(path);
  static const char *const keys[] = {"create-", "reap-"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    char key[256];
    if (snprintf(key, sizeof key, "%s%s", keys[i], sandbox_name) >= (int)sizeof key) continue;
    if (state_path(state_dir, "keys", key, ".lock", path, sizeof path, &err) == 0)
      remove_if_free(path);
  }
}

int sm_state_key_try(const char *state_dir, const char *key, sm_state_lock **out,
                     sm_error *err) {
  char path[PATH_MAX];
  int rc = state_path(state_dir, "keys", key, ".lock", path, sizeof path, err);
  if (rc) return rc;
  rc = lock_file(path, LOCK_EX | LOCK_NB, out, err);
  if (rc == SM_EBUSY) return sm_error_set(err, SM_EBUSY, "another process holds %s", path);
  return rc;
}

int sm_state_known(const char *state_dir, char ***out_names, size_t *out_n, sm_error *err) {
  char base[PATH_MAX], dir[PATH_MAX];
  *out_names = NULL;
  *out_n = 0;
  if (state_dir == NULL) {
    int rc = sm_state_default_dir(base, sizeof base, err);
    if (rc) return rc;
    state_dir = base;
  }
  if (snprintf(dir, sizeof dir, "%s/last-used", state_dir) >= (int)sizeof dir)
    return sm_error_set(err, SM_EINVAL, "state path too long");
  cleanup_dir DIR *d = opendir(dir);
  if (d == NULL) {
    if (errno == ENOENT) return 0;
    return sm_error_set_errno(err, SM_EIO, errno, "reading %s", dir);
  }
  cleanup_strv common_strv names = {0};
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!valid_name(e->d_name) || strstr(e->d_name, ".tmp-") != NULL) continue;
    if (common_strv_add(&names, e->d_name) != 0) return sm_error_set(err, SM_ENOMEM, NULL);
  }
  *out_n = names.n;
  *out_names = steal_pointer(&names.v);
  return 0;
}

void sm_state_names_free(char **names, size_t n) { common_strings_free(names, n); }
