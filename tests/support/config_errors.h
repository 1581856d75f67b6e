/* Shared by the cmocka tests of configuration sections: YAML texts that
 * must be refused (SM_ECONFIG) with a message that starts as given, e.g.
 * "t.yaml:2:9: audit.keep: expected ...". Include after <cmocka.h>. */
#ifndef SANDMAN_TESTS_CONFIG_ERRORS_H
#define SANDMAN_TESTS_CONFIG_ERRORS_H

#include <string.h>

#include <sandman/config.h>

typedef struct tc_config_error {
  const char *text, *want;
} tc_config_error;

static inline void tc_config_errors(const tc_config_error *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    sm_config *cfg = NULL;
    sm_error err = SM_ERROR_INIT;
    int rc = sm_config_load_string(&cfg, "t.yaml", cases[i].text, strlen(cases[i].text), &err);
    sm_config_free(cfg);
    assert_int_equal(rc, SM_ECONFIG);
    if (strncmp(err.message, cases[i].want, strlen(cases[i].want)) != 0)
      fail_msg("case %zu: got '%s', want prefix '%s'", i, err.message, cases[i].want);
  }
}

#endif
