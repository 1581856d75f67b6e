/* The allocation wrappers of alloc_fail.h. Only a program linked with
 * --wrap for these functions uses this file (nothing else references it),
 * so the __real_ names always exist where it is linked. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "support/alloc_fail.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static atomic_long target, counted;
static atomic_int reached, env_read;
static const char *report_path;

/* At exit, SANDMAN_ALLOC_FAIL_REPORT=FILE gets a line "PID REACHED COUNTED":
 * whether the allocation set to fail was reached, and how many were
 * counted (scripts/alloc-fail.py stops raising N for a program whose run
 * no longer reaches it, as curl's torture does). Appended, one write:
 * a forked child that exits normally adds its own line. */
static void env_report(void) {
  char line[96];
  int n = snprintf(line, sizeof line, "%ld %d %ld\n", (long)getpid(), atomic_load(&reached),
                   atomic_load(&counted));
  int fd = open(report_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (write(fd, line, (size_t)n) != n) n = -1;
  close(fd);
}

/* SANDMAN_ALLOC_FAIL_AT=N: the Nth allocation of the program fails, once
 * (scripts/alloc-fail.py runs the unit tier so). Read at the first
 * allocation; getenv and strtol allocate nothing (atexit neither, for the
 * few handlers glibc keeps in place). af_fail_at wins. */
static void env_init(void) {
  if (atomic_exchange(&env_read, 1)) return;
  const char *s = getenv("SANDMAN_ALLOC_FAIL_AT");
  long n = s && *s ? strtol(s, NULL, 10) : 0;
  if (n > 0) atomic_store(&target, n);
  report_path = getenv("SANDMAN_ALLOC_FAIL_REPORT");
  if (n > 0 && report_path && *report_path) atexit(env_report);
}

void af_fail_at(long n) {
  atomic_store(&env_read, 1);
  atomic_store(&target, 0);
  atomic_store(&counted, 0);
  atomic_store(&reached, 0);
  atomic_store(&target, n);
}

long af_count(void) { return atomic_load(&counted); }
int af_failed(void) { return atomic_load(&reached); }

/* Counts one allocation; 1 when it is the one to fail. */
static int fail_now(void) {
  if (!atomic_load(&env_read)) env_init();
  long t = atomic_load(&target);
  if (t <= 0) return 0;
  if (atomic_fetch_add(&counted, 1) + 1 != t) return 0;
  atomic_store(&reached, 1);
  errno = ENOMEM;
  return 1;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fail_now() ? NULL : __real_strndup(s, n); }

int af_torture(int (*op)(void *ud), void *ud, long *allocs) {
  for (long n = 1;; n++) {
    af_fail_at(n);
    int rc = op(ud);
    int hit = af_failed();
    long made = af_count();
    af_fail_at(0);
    if (!hit) {
      if (allocs) *allocs = made;
      return rc;
    }
  }
}
