/* What the operations need from the state directory: the reaper key,
 * known names, forget, and last-used writes from many threads at once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/state.h>

static char dir[] = "/tmp/sandman-ops-state-XXXXXX";

static void test_key_try(void **state) {
  (void)state;
  sm_state_lock *a = NULL, *b = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_state_key_try(dir, "reap-sb1", &a, &err), 0);
  /* Held in this process through another descriptor: flock excludes it too. */
  assert_int_equal(sm_state_key_try(dir, "reap-sb1", &b, &err), SM_EBUSY);
  assert_non_null(strstr(err.message, "reap-sb1"));
  sm_state_unlock(a);
  assert_int_equal(sm_state_key_try(dir, "reap-sb1", &b, &err), 0);
  sm_state_unlock(b);
  assert_int_equal(sm_state_key_try(dir, "../x", &b, &err), SM_EINVAL);
}

static int has(char **names, size_t n, const char *want) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], want) == 0) return 1;
  return 0;
}

static void test_known_and_forget(void **state) {
  (void)state;
  char **names = NULL;
  size_t n = 99;
  char empty[] = "/tmp/sandman-ops-empty-XXXXXX";
  assert_non_null(mkdtemp(empty));
  assert_int_equal(sm_state_known(empty, &names, &n, NULL), 0);
  assert_int_equal(n, 0);
  rmdir(empty);

  assert_int_equal(sm_state_touch(dir, "sb-a", 1, NULL), 0);
  assert_int_equal(sm_state_touch(dir, "sb-b", 2, NULL), 0);
  /* A temporary file left by a crash mid-write is not a sandbox. */
  char path[512];
  snprintf(path, sizeof path, "%s/last-used/sb-c.tmp-abcdef", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(sm_state_known(dir, &names, &n, NULL), 0);
  assert_int_equal(n, 2);
  assert_true(has(names, n, "sb-a"));
  assert_true(has(names, n, "sb-b"));
  sm_state_names_free(names, n);

  /* forget drops the last-used time and the workspace manifest. */
  snprintf(path, sizeof path, "%s/workspaces", dir);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/workspaces/sb-a.manifest", dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  sm_state_forget(dir, "sb-a");
  assert_true(sm_state_last_used(dir, "sb-a") < 0);
  assert_int_not_equal(access(path, F_OK), 0);
  assert_int_equal(sm_state_known(dir, &names, &n, NULL), 0);
  assert_int_equal(n, 1);
  sm_state_names_free(names, n);
}

static void *toucher(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < 200; i++)
    if (sm_state_touch(dir, "shared", (double)(id * 1000 + i), NULL) != 0) return (void *)1;
  return NULL;
}

/* The runner service touches from many threads: no write may fail and no
 * temporary file may be left behind. */
static void test_touch_threads(void **state) {
  (void)state;
  pthread_t t[4];
  for (long i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, toucher, (void *)i), 0);
  for (int i = 0; i < 4; i++) {
    void *rv = NULL;
    pthread_join(t[i], &rv);
    assert_null(rv);
  }
  double v = sm_state_last_used(dir, "shared");
  assert_true(v >= 0);
  char path[512];
  snprintf(path, sizeof path, "%s/last-used", dir);
  DIR *d = opendir(path);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    assert_null(strstr(e->d_name, ".tmp-") != NULL && strstr(e->d_name, "shared") ? e->d_name : NULL);
  closedir(d);
}

int main(void) {
  if (mkdtemp(dir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key_try),
      cmocka_unit_test(test_known_and_forget),
      cmocka_unit_test(test_touch_threads),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0) {
    pid_t p = fork();
    if (p == 0) {
      execlp("rm", "rm", "-rf", dir, (char *)NULL);
      _exit(127);
    }
    waitpid(p, NULL, 0);
  }
  return rc;
}
