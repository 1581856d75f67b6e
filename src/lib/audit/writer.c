/* Appending events: one write(2) per line under an flock(2) on a lock file
 * beside the trail, shared by every thread and process that writes it; the
 * same lock covers rotation (FILE -> FILE.1 -> ... -> FILE.keep). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/audit.h>
#include <sandman/state.h>

#include "audit/audit_internal.h"
#include "common/io.h"

struct sm_audit {
  pthread_mutex_t mu;
  char *file;
  char *lock;
  int64_t max_bytes;
  int keep;
  int to_stderr;
};

int audit_rotated_path(const char *file, int n, char *out, size_t len) {
  int w = n > 0 ? snprintf(out, len, "%s.%d", file, n) : snprintf(out, len, "%s", file);
  return (w < 0 || (size_t)w >= len) ? -1 : 0;
}

int audit_lock_path(const char *file, char *out, size_t len) {
  const char *slash = strrchr(file, '/');
  int w;
  if (slash)
    w = snprintf(out, len, "%.*s/.%s.lock", (int)(slash - file), file, slash + 1);
  else
    w = snprintf(out, len, ".%s.lock", file);
  return (w < 0 || (size_t)w >= len) ? -1 : 0;
}

/* mkdir -p of FILE's folder; folders it makes are 0700. */
static int make_parent(const char *file, sm_error *err) {
  char dir[PATH_MAX];
  const char *slash = strrchr(file, '/');
  if (slash == NULL || slash == file) return 0;
  if ((size_t)(slash - file) >= sizeof dir) return sm_error_set(err, SM_EINVAL, "audit file path too long");
  memcpy(dir, file, (size_t)(slash - file));
  dir[slash - file] = '\0';
  if (common_mkdirs(dir) != 0)
    return sm_error_set_errno(err, SM_EIO, errno, "audit: creating %s", dir);
  return 0;
}

int sm_audit_default_file(char *buf, size_t len, sm_error *err) {
  char dir[PATH_MAX];
  int rc = sm_state_default_dir(dir, sizeof dir, err);
  if (rc != 0) return rc;
  int w = snprintf(buf, len, "%s/audit/audit.jsonl", dir);
  if (w < 0 || (size_t)w >= len) return sm_error_set(err, SM_EINVAL, "audit file path too long");
  return 0;
}

int sm_audit_open(sm_audit **out, const sm_audit_options *opts, sm_error *err) {
  *out = NULL;
  sm_audit_options def = SM_AUDIT_OPTIONS_INIT;
  if (opts == NULL) opts = &def;
  if (opts->keep > SM_AUDIT_MAX_KEEP)
    return sm_error_set(err, SM_EINVAL, "audit: keep %d is more than %d", opts->keep, SM_AUDIT_MAX_KEEP);
  if (opts->max_bytes < 0) return sm_error_set(err, SM_EINVAL, "audit: negative max size");
  sm_audit *a = calloc(1, sizeof *a);
  if (a == NULL) return sm_error_set(err, SM_ENOMEM, "audit: out of memory");
  pthread_mutex_init(&a->mu, NULL);
  a->max_bytes = opts->max_bytes > 0 ? opts->max_bytes : SM_AUDIT_DEFAULT_MAX_BYTES;
  a->keep = opts->keep >= 0 ? opts->keep : SM_AUDIT_DEFAULT_KEEP;
  a->to_stderr = opts->to_stderr;
  if (opts->file && *opts->file) {
    char lock[PATH_MAX], probe[PATH_MAX];
    if (audit_lock_path(opts->file, lock, sizeof lock) != 0 ||
        audit_rotated_path(opts->file, SM_AUDIT_MAX_KEEP, probe, sizeof probe) != 0) {
      sm_audit_close(a);
      return sm_error_set(err, SM_EINVAL, "audit file path too long");
    }
    int rc = make_parent(opts->file, err);
    if (rc == 0 && ((a->file = strdup(opts->file)) == NULL || (a->lock = strdup(lock)) == NULL))
      rc = sm_error_set(err, SM_ENOMEM, "audit: out of memory");
    if (rc != 0) {
      sm_audit_close(a);
      return rc;
    }
  }
  *out = a;
  return 0;
}

void sm_audit_close(sm_audit *a) {
  if (a == NULL) return;
  pthread_mutex_destroy(&a->mu);
  free(a->file);
  free(a->lock);
  free(a);
}

const char *sm_audit_file(const sm_audit *a) { return a ? a->file : NULL; }

/* FILE.keep is dropped, each FILE.i becomes FILE.i+1, FILE becomes FILE.1
 * (with keep 0, FILE is simply dropped). Called under the lock. */
static int rotate(const sm_audit *a, sm_error *err) {
  char from[PATH_MAX], to[PATH_MAX];
  if (a->keep == 0) {
    if (unlink(a->file) != 0 && errno != ENOENT)
      return sm_error_set_errno(err, SM_EIO, errno, "audit: removing %s", a->file);
    return 0;
  }
  audit_rotated_path(a->file, a->keep, to, sizeof to);
  if (unlink(to) != 0 && errno != ENOENT)
    return sm_error_set_errno(err, SM_EIO, errno, "audit: removing %s", to);
  for (int i = a->keep - 1; i >= 0; i--) {
    audit_rotated_path(a->file, i, from, sizeof from);
    audit_rotated_path(a->file, i + 1, to, sizeof to);
    if (rename(from, to) != 0 && errno != ENOENT)
      return sm_error_set_errno(err, SM_EIO, errno, "audit: renaming %s to %s", from, to);
  }
  return 0;
}

static int append_file(sm_audit *a, const char *line, size_t len, sm_error *err) {
  int lfd = open(a->lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lfd < 0) return sm_error_set_errno(err, SM_EIO, errno, "audit: opening %s", a->lock);
  while (flock(lfd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      int e = errno;
      close(lfd);
      return sm_error_set_errno(err, SM_EIO, e, "audit: locking %s", a->lock);
    }
  }
  int rc = 0;
  int fd = open(a->file, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 &&
      (int64_t)st.st_size + (int64_t)len > a->max_bytes) {
    close(fd);
    fd = -1;
    rc = rotate(a, err);
    if (rc == 0) fd = open(a->file, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  }
  if (rc == 0 && fd < 0) rc = sm_error_set_errno(err, SM_EIO, errno, "audit: opening %s", a->file);
  if (rc == 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
    /* A writer that died mid-line left no newline: end that line first so
     * this event stays a line of its own. */
    char last = '\n';
    if (pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n' &&
        common_write_all(fd, "\n", 1) != 0)
      rc = sm_error_set_errno(err, SM_EIO, errno, "audit: writing %s", a->file);
  }
  if (rc == 0 && common_write_all(fd, line, len) != 0)
    rc = sm_error_set_errno(err, SM_EIO, errno, "audit: writing %s", a->file);
  if (fd >= 0) close(fd);
  flock(lfd, LOCK_UN);
  close(lfd);
  return rc;
}

int sm_audit_record(sm_audit *a, const sm_audit_event *ev, sm_error *err) {
  if (a == NULL) return 0;
  json_object *o = NULL;
  int rc = sm_audit_event_to_json(ev, &o, err);
  if (rc != 0) return rc;
  size_t n = 0;
  const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
  if (s == NULL || n + 1 > SM_AUDIT_MAX_LINE) {
    /* Too long: only the caller's free-form detail can make it so. */
    sm_audit_event copy = *ev;
    copy.detail = NULL;
    json_object_put(o);
    o = NULL;
    if ((rc = sm_audit_event_to_json(&copy, &o, err)) != 0) return rc;
    json_object_object_add(json_object_object_get(o, "unmapped"), "detail_dropped",
                           json_object_new_boolean(1));
    s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
    if (s == NULL || n + 1 > SM_AUDIT_MAX_LINE) {
      json_object_put(o);
      return sm_error_set(err, SM_ETOOBIG, "audit: event %s too large", ev->name);
    }
  }
  char *line = malloc(n + 1);
  if (line == NULL) {
    json_object_put(o);
    return sm_error_set(err, SM_ENOMEM, "audit: out of memory");
  }
  memcpy(line, s, n);
  line[n] = '\n';
  json_object_put(o);
  pthread_mutex_lock(&a->mu);
  if (a->file) rc = append_file(a, line, n + 1, err);
  if (a->to_stderr) {
    int e = common_write_all(STDERR_FILENO, line, n + 1);
    if (e != 0 && rc == 0) rc = sm_error_set_errno(err, SM_EIO, errno, "audit: writing to stderr");
  }
  pthread_mutex_unlock(&a->mu);
  free(line);
  return rc;
}
