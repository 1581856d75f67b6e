/* Reading the trail: the rotated files oldest first, then the live file;
 * following it across rotations. Lines are parsed with a hard cap; a line
 * that is not a JSON object (cut short by a crash) is skipped. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sandman/audit.h>

#include "audit/audit_internal.h"
#include "common/buf.h"

#define READ_CHUNK 65536

static const char *unmapped_str(json_object *ev, const char *key) {
  json_object *um = NULL, *v = NULL;
  if (!json_object_object_get_ex(ev, "unmapped", &um) || !json_object_object_get_ex(um, key, &v) ||
      !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

int sm_audit_filter_match(const sm_audit_filter *f, json_object *ev) {
  if (f == NULL) return 1;
  if (!json_object_is_type(ev, json_type_object)) return 0;
  if (f->since > 0) {
    json_object *t = NULL;
    if (!json_object_object_get_ex(ev, "time", &t)) return 0;
    if ((double)json_object_get_int64(t) < f->since * 1000.0) return 0;
  }
  if (f->agent) {
    const char *a = unmapped_str(ev, "agent");
    if (a == NULL || strcmp(a, f->agent) != 0) return 0;
  }
  if (f->run_id) {
    const char *r = unmapped_str(ev, "run_id");
    if (r == NULL || strcmp(r, f->run_id) != 0) return 0;
  }
  if (f->denied_only) {
    json_object *d = NULL;
    if (!json_object_object_get_ex(ev, "disposition_id", &d) || json_object_get_int(d) != 2) return 0;
  }
  return 1;
}

/* Splits what was read into lines; a partial last line waits in lines. */
typedef struct line_reader {
  common_lines lines;
  const sm_audit_filter *filter;
  sm_audit_event_fn fn;
  void *ud;
  size_t skipped;
  sm_error *err; /* the reader's caller's */
} line_reader;

static int emit_line(line_reader *lr, const char *s, size_t n) {
  if (n == 0) return 0;
  json_tokener *tok = json_tokener_new_ex(32);
  if (tok == NULL) return sm_error_set(lr->err, SM_ENOMEM, "audit: out of memory parsing an event");
  json_object *ev = json_tokener_parse_ex(tok, s, (int)n);
  int ok = ev != NULL && json_tokener_get_error(tok) == json_tokener_success &&
           json_object_is_type(ev, json_type_object);
  json_tokener_free(tok);
  int rc = 0;
  if (!ok) lr->skipped++;
  else if (sm_audit_filter_match(lr->filter, ev)) rc = lr->fn(lr->ud, ev);
  json_object_put(ev);
  return rc;
}

/* A line to emit_line; one over the cap is counted as skipped. */
static int on_line(void *ud, const char *s, size_t n) {
  line_reader *lr = ud;
  if (s == NULL) {
    lr->skipped++;
    return 0;
  }
  return emit_line(lr, s, n);
}

static int feed(line_reader *lr, const char *data, size_t len) {
  return common_lines_feed(&lr->lines, data, len, on_line, lr);
}

/* Reads fd to its current end. */
static int drain(line_reader *lr, int fd, sm_error *err, const char *path) {
  char *buf = malloc(READ_CHUNK);
  if (buf == NULL) return sm_error_set(err, SM_ENOMEM, "audit: out of memory");
  int rc = 0;
  for (;;) {
    ssize_t n = read(fd, buf, READ_CHUNK);
    if (n < 0) {
      if (errno == EINTR) continue;
      rc = sm_error_set_errno(err, SM_EIO, errno, "audit: reading %s", path);
      break;
    }
    if (n == 0) break;
    if ((rc = feed(lr, buf, (size_t)n)) != 0) break;
  }
  free(buf);
  return rc;
}

/* The last line of a finished file may lack its newline (a crash). */
static int flush_pending(line_reader *lr) { return common_lines_flush(&lr->lines, on_line, lr); }

static int read_all(line_reader *lr, const char *file, int keep, int *out_fd, sm_error *err) {
  if (keep < 0) keep = SM_AUDIT_DEFAULT_KEEP;
  if (keep > SM_AUDIT_MAX_KEEP) keep = SM_AUDIT_MAX_KEEP;
  char path[PATH_MAX];
  for (int i = keep; i >= 0; i--) {
    if (audit_rotated_path(file, i, path, sizeof path) != 0)
      return sm_error_set(err, SM_EINVAL, "audit file path too long");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      return sm_error_set_errno(err, SM_EIO, errno, "audit: opening %s", path);
    }
    int rc = drain(lr, fd, err, path);
    if (rc == 0 && (i > 0 || out_fd == NULL)) rc = flush_pending(lr);
    if (i == 0 && out_fd != NULL && rc == 0) {
      *out_fd = fd; /* the live file: the follower goes on from here */
    } else {
      close(fd);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

int sm_audit_read(const char *file, int keep, const sm_audit_filter *filter, sm_audit_event_fn fn,
                  void *ud, size_t *out_skipped, sm_error *err) {
  if (file == NULL || *file == '\0') return sm_error_set(err, SM_EINVAL, "audit: no file to read");
  line_reader lr = {.filter = filter, .fn = fn, .ud = ud, .err = err};
  common_buf_init(&lr.lines.line, SM_AUDIT_MAX_LINE);
  int rc = read_all(&lr, file, keep, NULL, err);
  common_buf_dispose(&lr.lines.line);
  if (out_skipped) *out_skipped = lr.skipped;
  return rc;
}

static void nap(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The file we had (now rotated) is FILE.k: reads FILE.k-1 .. FILE.1. */
static int read_rotated_after(line_reader *lr, const char *file, int keep, const struct stat *had,
                              sm_error *err) {
  if (keep < 0) keep = SM_AUDIT_DEFAULT_KEEP;
  if (keep > SM_AUDIT_MAX_KEEP) keep = SM_AUDIT_MAX_KEEP;
  char path[PATH_MAX];
  int k = 0;
  for (int i = 1; i <= keep && k == 0; i++) {
    struct stat st;
    if (audit_rotated_path(file, i, path, sizeof path) == 0 && stat(path, &st) == 0 &&
        st.st_ino == had->st_ino && st.st_dev == had->st_dev)
      k = i;
  }
  for (int i = k - 1; i >= 1; i--) {
    if (audit_rotated_path(file, i, path, sizeof path) != 0) continue;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    int rc = drain(lr, fd, err, path);
    if (rc == 0) rc = flush_pending(lr);
    close(fd);
    if (rc != 0) return rc;
  }
  return 0;
}

int sm_audit_follow(const char *file, int keep, const sm_audit_filter *filter, sm_audit_event_fn fn,
                    void *ud, volatile int *stop, int poll_ms, sm_error *err) {
  if (file == NULL || *file == '\0') return sm_error_set(err, SM_EINVAL, "audit: no file to read");
  if (poll_ms <= 0) poll_ms = 250;
  line_reader lr = {.filter = filter, .fn = fn, .ud = ud, .err = err};
  common_buf_init(&lr.lines.line, SM_AUDIT_MAX_LINE);
  int fd = -1;
  int rc = read_all(&lr, file, keep, &fd, err);
  while (rc == 0 && !(stop && *stop)) {
    nap(poll_ms);
    if (fd >= 0 && (rc = drain(&lr, fd, err, file)) != 0) break;
    /* Rotated (or created)? Finish the old file, then start on the new. */
    struct stat now, cur;
    if (stat(file, &now) != 0) continue;
    if (fd >= 0 && fstat(fd, &cur) == 0 && cur.st_ino == now.st_ino && cur.st_dev == now.st_dev)
      continue;
    if (fd >= 0) {
      if ((rc = drain(&lr, fd, err, file)) != 0) break;
      if ((rc = flush_pending(&lr)) != 0) break;
      close(fd);
      /* Several rotations between two polls: the files made after ours
       * are now FILE.k-1 .. FILE.1, complete; read them in order. */
      if ((rc = read_rotated_after(&lr, file, keep, &cur, err)) != 0) {
        fd = -1;
        break;
      }
    }
    fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) rc = drain(&lr, fd, err, file);
  }
  if (fd >= 0) close(fd);
  common_buf_dispose(&lr.lines.line);
  return rc;
}
