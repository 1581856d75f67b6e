/* The runner's turns of code runs (server/code_queue.c): runs of one
 * context wait for the one before them, other contexts do not, a sandbox
 * holds at most its limit of runs, and server_code_queue_waiting counts the runs
 * of a context that wait (what a context's "queued" adds). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include <sandman/error.h>

#include "server/code_queue.h"

typedef struct second_run {
  code_queue *q;
  code_ticket *t;
  volatile int cancel;
  int rc;
} second_run;

static void *enter_second(void *arg) {
  second_run *s = arg;
  s->rc = server_code_queue_enter(s->q, "sb1", "c", 3, &s->cancel, &s->t, NULL, NULL);
  return NULL;
}

/* A bounded poll (30 s) until the context has `want` runs waiting. */
static int wait_waiting(code_queue *q, const char *sandbox, const char *context, size_t want) {
  struct timespec pause = {0, 10 * 1000000L};
  for (int i = 0; i < 3000; i++) {
    if (server_code_queue_waiting(q, sandbox, context) == want) return 1;
    nanosleep(&pause, NULL);
  }
  return 0;
}

static void turns_and_limit(void **state) {
  (void)state;
  code_queue *q = server_code_queue_new();
  assert_non_null(q);
  code_ticket *first = NULL, *other = NULL, *refused = NULL;
  assert_int_equal(server_code_queue_enter(q, "sb1", "c", 3, NULL, &first, NULL, NULL), 0);
  assert_int_equal(server_code_queue_waiting(q, "sb1", "c"), 0);

  second_run s = {q, NULL, 0, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, enter_second, &s), 0);
  assert_true(wait_waiting(q, "sb1", "c", 1)); /* behind the first */

  /* Another context of the sandbox is not behind c's runs. */
  assert_int_equal(server_code_queue_enter(q, "sb1", "d", 3, NULL, &other, NULL, NULL), 0);
  assert_int_equal(server_code_queue_waiting(q, "sb1", "d"), 0);
  assert_int_equal(server_code_queue_waiting(q, "sb2", "c"), 0);
  /* Three runs held: a fourth takes nothing. */
  assert_int_equal(server_code_queue_enter(q, "sb1", "e", 3, NULL, &refused, NULL, NULL), SM_EBUSY);
  assert_null(refused);
  /* Another sandbox has its own limit. */
  code_ticket *elsewhere = NULL;
  assert_int_equal(server_code_queue_enter(q, "sb2", "c", 3, NULL, &elsewhere, NULL, NULL), 0);

  server_code_queue_leave(q, first);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(s.rc, 0);
  assert_non_null(s.t);
  assert_int_equal(server_code_queue_waiting(q, "sb1", "c"), 0);
  server_code_queue_leave(q, s.t);
  server_code_queue_leave(q, other);
  server_code_queue_leave(q, elsewhere);
  server_code_queue_free(q);
}

static void cancelled_wait(void **state) {
  (void)state;
  code_queue *q = server_code_queue_new();
  assert_non_null(q);
  code_ticket *first = NULL;
  assert_int_equal(server_code_queue_enter(q, "sb1", "c", 3, NULL, &first, NULL, NULL), 0);
  second_run s = {q, NULL, 0, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, enter_second, &s), 0);
  assert_true(wait_waiting(q, "sb1", "c", 1));
  s.cancel = 1; /* the client went away while it waited */
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(s.rc, SM_ECANCELLED);
  assert_null(s.t);
  assert_int_equal(server_code_queue_waiting(q, "sb1", "c"), 0);
  server_code_queue_leave(q, first);
  server_code_queue_free(q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(turns_and_limit),
      cmocka_unit_test(cancelled_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
