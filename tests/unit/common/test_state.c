/* Busy locks end with the process that holds them; last-used is atomic. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "support/files.h"

static char dir[] = "/tmp/sandman-state-test-XXXXXX";

static void test_busy_lock_dies_with_process(void **state) {
  (void)state;
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    /* Ends with the test even when an assertion stops it before the kill. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sm_state_lock *l = NULL;
    if (sm_state_busy_acquire(dir, "sb1", &l, NULL) != 0) _exit(1);
    if (write(ready[1], "x", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  /* Only the child writes: a child that failed (an allocation) ends the read. */
  close(ready[1]);
  char c;
  assert_int_equal(read(ready[0], &c, 1), 1);
  assert_int_equal(sm_state_is_busy(dir, "sb1"), 1);
  sm_state_lock *l = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_state_exclusive_try(dir, "sb1", &l, &err), SM_EBUSY);
  /* Shared holders do not exclude each other. */
  assert_int_equal(sm_state_busy_acquire(dir, "sb1", &l, &err), 0);
  sm_state_unlock(l);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  assert_int_equal(sm_state_is_busy(dir, "sb1"), 0);
  assert_int_equal(sm_state_exclusive_try(dir, "sb1", &l, &err), 0);
  sm_state_unlock(l);
  close(ready[0]);
}

static void test_last_used(void **state) {
  (void)state;
  assert_true(sm_state_last_used(dir, "sb2") < 0);
  assert_int_equal(sm_state_touch(dir, "sb2", 1234.5, NULL), 0);
  assert_true(sm_state_last_used(dir, "sb2") == 1234.5);
  assert_int_equal(sm_state_touch(dir, "sb2", 2000, NULL), 0);
  assert_true(sm_state_last_used(dir, "sb2") == 2000);
  sm_state_forget(dir, "sb2");
  assert_true(sm_state_last_used(dir, "sb2") < 0);
}

static void test_names_cannot_escape(void **state) {
  (void)state;
  sm_state_lock *l = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_state_busy_acquire(dir, "../evil", &l, &err), SM_EINVAL);
  assert_int_equal(sm_state_touch(dir, "..", 1, &err), SM_EINVAL);
  assert_int_equal(sm_state_key_lock(dir, "", &l, &err), SM_EINVAL);
}

static int file_exists(const char *sub, const char *name) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s/%s", dir, sub, name);
  return stat(p, &st) == 0;
}

/* Issue 25.15: lock files go with what they describe. The last holder
 * removes one; a held one stays; sm_state_forget removes the free ones;
 * asking whether a sandbox is busy leaves none behind. */
static void test_lock_files_removed(void **state) {
  (void)state;
  sm_state_lock *a = NULL, *b = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_state_busy_acquire(dir, "sb3", &a, &err), 0);
  assert_int_equal(sm_state_busy_acquire(dir, "sb3", &b, &err), 0);
  assert_true(file_exists("busy", "sb3.lock"));
  /* Another holder (the second open file): the file stays. */
  sm_state_unlock_remove(a);
  assert_true(file_exists("busy", "sb3.lock"));
  sm_state_unlock_remove(b);
  assert_false(file_exists("busy", "sb3.lock"));
  assert_int_equal(sm_state_is_busy(dir, "sb3"), 0);
  assert_false(file_exists("busy", "sb3.lock"));
  assert_int_equal(sm_state_key_lock(dir, "create-sb3", &a, &err), 0);
  sm_state_unlock(a);
  assert_int_equal(sm_state_busy_acquire(dir, "sb3", &a, &err), 0);
  sm_state_unlock(a);
  assert_true(file_exists("keys", "create-sb3.lock"));
  sm_state_forget(dir, "sb3");
  assert_false(file_exists("keys", "create-sb3.lock"));
  assert_false(file_exists("busy", "sb3.lock"));
  /* One still held is not removed by a forget. */
  assert_int_equal(sm_state_busy_acquire(dir, "sb3", &a, &err), 0);
  sm_state_forget(dir, "sb3");
  assert_true(file_exists("busy", "sb3.lock"));
  assert_int_equal(sm_state_exclusive_try(dir, "sb3", &b, &err), SM_EBUSY);
  sm_state_unlock_remove(a);
}

static void *take_shared(void *arg) {
  sm_state_lock **out = arg;
  sm_error err = SM_ERROR_INIT;
  if (sm_state_busy_acquire(dir, "sb4", out, &err) != 0) *out = NULL;
  return NULL;
}

/* Is someone waiting for a flock (a "->" line of /proc/locks)? */
static int a_lock_waits(void) {
  FILE *f = fopen("/proc/locks", "r");
  if (f == NULL) return 1;
  char line[512];
  int waits = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, "->") && strstr(line, "FLOCK")) waits = 1;
  fclose(f);
  return waits;
}

/* The race removal must not open: a process waits for the lock while its
 * holder removes the file. The waiter then holds the lock of the file
 * the name leads to (a new one), not of the removed one: a third process
 * cannot lock the name as well. */
static void test_waiter_relocks_after_removal(void **state) {
  (void)state;
  int go[2], held[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(held), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    /* Ends with the test even when an assertion stops it before the kill. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(held[0]);
    close(go[1]);
    sm_state_lock *l = NULL;
    if (sm_state_exclusive_try(dir, "sb4", &l, NULL) != 0) _exit(1);
    char c;
    if (write(held[1], "x", 1) != 1 || read(go[0], &c, 1) != 1) _exit(1);
    sm_state_unlock_remove(l);
    _exit(0);
  }
  /* Only the child's ends: a child that failed (out of memory) is an end
   * of file here, never a wait without end. */
  close(held[1]);
  close(go[0]);
  char c;
  assert_int_equal(read(held[0], &c, 1), 1);
  sm_state_lock *mine = NULL;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, take_shared, &mine), 0);
  for (int i = 0; i < 5000 && !a_lock_waits(); i++) usleep(1000);
  assert_int_equal(write(go[1], "x", 1), 1);
  waitpid(child, NULL, 0);
  pthread_join(t, NULL);
  assert_non_null(mine);
  assert_true(file_exists("busy", "sb4.lock"));
  pid_t third = fork();
  assert_true(third >= 0);
  if (third == 0) {
    sm_state_lock *l = NULL;
    sm_error err = SM_ERROR_INIT;
    _exit(sm_state_exclusive_try(dir, "sb4", &l, &err) == SM_EBUSY ? 0 : 1);
  }
  int status = 0;
  waitpid(third, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  sm_state_unlock_remove(mine);
  assert_false(file_exists("busy", "sb4.lock"));
  close(go[1]);
  close(held[0]);
}

int main(void) {
  if (mkdtemp(dir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_busy_lock_dies_with_process),
      cmocka_unit_test(test_last_used),
      cmocka_unit_test(test_names_cannot_escape),
      cmocka_unit_test(test_lock_files_removed),
      cmocka_unit_test(test_waiter_relocks_after_removal),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0 && strncmp(dir, "/tmp/sandman-state-test-", 24) == 0) tf_rm_rf(dir);
  return rc;
}
