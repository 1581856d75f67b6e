/* Busy locks end with the process that holds them; last-used is atomic. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/sandman.h>

static char dir[] = "/tmp/sandman-state-test-XXXXXX";

static void test_busy_lock_dies_with_process(void **state) {
  (void)state;
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    sm_state_lock *l = NULL;
    if (sm_state_busy_acquire(dir, "sb1", &l, NULL) != 0) _exit(1);
    if (write(ready[1], "x", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
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
  close(ready[1]);
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

int main(void) {
  if (mkdtemp(dir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_busy_lock_dies_with_process),
      cmocka_unit_test(test_last_used),
      cmocka_unit_test(test_names_cannot_escape),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0 && strncmp(dir, "/tmp/sandman-state-test-", 24) == 0) {
    char *argv[] = {"rm", "-rf", dir, NULL};
    pid_t p = fork();
    if (p == 0) { execvp("rm", argv); _exit(127); }
    waitpid(p, NULL, 0);
  }
  return rc;
}
