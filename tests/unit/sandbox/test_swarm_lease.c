/* The swarm backend's pure pieces: lease labels (live, expired, dropped,
 * last use) and service names that fit the swarm's 63 characters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "sandbox/sandbox_settings.h"
#include "sandbox/backend_swarm_box.h"
#include "sandbox/swarm_spec.h"

static const char *label(json_object *l, const char *k) {
  json_object *v = NULL;
  return json_object_object_get_ex(l, k, &v) ? json_object_get_string(v) : NULL;
}

static void test_leases(void **s) {
  (void)s;
  json_object *l = json_tokener_parse("{\"io.sandman.managed\":\"true\","
                                      "\"io.sandman.lease.old\":\"900\","
                                      "\"io.sandman.lease.live\":\"2000\"}");
  /* At 1000: one lease is past its deadline, one holds. */
  assert_int_equal(sandbox_swarm_live_leases(l, 1000), 1);
  assert_int_equal(sandbox_swarm_live_leases(l, 2000), 0);
  /* Taking a lease drops the expired ones on the way (a dead runner's). */
  sandbox_swarm_labels_lease(l, "mine", 1600, NULL, 0, 1000);
  assert_null(label(l, "io.sandman.lease.old"));
  assert_string_equal(label(l, "io.sandman.lease.mine"), "1600");
  assert_string_equal(label(l, "io.sandman.lease.live"), "2000");
  assert_int_equal(sandbox_swarm_live_leases(l, 1000), 2);
  assert_null(label(l, SM_SWARM_LABEL_LAST_USED));
  /* Ending it drops only it and records the last use. */
  sandbox_swarm_labels_lease(l, NULL, 0, "mine", 1234, 1100);
  assert_null(label(l, "io.sandman.lease.mine"));
  assert_string_equal(label(l, "io.sandman.lease.live"), "2000");
  assert_string_equal(label(l, SM_SWARM_LABEL_LAST_USED), "1234");
  assert_string_equal(label(l, "io.sandman.managed"), "true");
  assert_int_equal(sandbox_swarm_live_leases(l, 1100), 1);
  /* A garbled deadline is no lease. */
  json_object_object_add(l, "io.sandman.lease.bad", json_object_new_string("soon"));
  assert_int_equal(sandbox_swarm_live_leases(l, 1100), 1);
  assert_int_equal(sandbox_swarm_live_leases(NULL, 1100), 0);
  json_object_put(l);
}

static void test_service_names(void **s) {
  (void)s;
  char out[SM_SWARM_SERVICE_NAME_MAX + 1];
  sandbox_swarm_service_name("sandman-ci-per_run-0123456789abcdef", out);
  assert_string_equal(out, "sandman-ci-per_run-0123456789abcdef");
  /* A long instance makes a long name: a digest of it, 56 characters,
   * different for different names. */
  const char *a = "sandman-it-7dd925-test_swarm-per_run-b394822429546484f88d2233e455364d";
  const char *b = "sandman-it-7dd925-test_swarm-per_run-b394822429546484f88d2233e455364e";
  char oa[SM_SWARM_SERVICE_NAME_MAX + 1], ob[SM_SWARM_SERVICE_NAME_MAX + 1];
  sandbox_swarm_service_name(a, oa);
  sandbox_swarm_service_name(b, ob);
  assert_int_equal(strlen(oa), 8 + 48);
  assert_int_equal(strncmp(oa, "sandman-", 8), 0);
  assert_string_not_equal(oa, ob);
  char hex[65];
  sandbox_sha256_hex(a, strlen(a), hex);
  assert_memory_equal(oa + 8, hex, 48);
  assert_true(engine_swarm_ref_valid(oa));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_leases),
      cmocka_unit_test(test_service_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
