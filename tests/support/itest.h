/* Shared by the C integration tests: a real engine is required. Outside CI
 * a missing engine skips the test; in CI (CI=true) it fails it. */
#ifndef SANDMAN_TESTS_ITEST_H
#define SANDMAN_TESTS_ITEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/sandman.h>

static inline int itest_in_ci(void) {
  const char *ci = getenv("CI");
  return ci != NULL && (strcmp(ci, "true") == 0 || strcmp(ci, "1") == 0);
}

/* A negotiated engine client, or skip (fail in CI). Caller frees it. */
static inline sm_engine *itest_engine(void) {
  sm_engine_options opts = SM_ENGINE_OPTIONS_INIT;
  sm_engine *engine = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_new(&engine, &opts, &err) == 0 && sm_engine_negotiate(engine, &err) == 0)
    return engine;
  sm_engine_free(engine);
  if (itest_in_ci()) fail_msg("CI=true and no engine answers: %s", err.message);
  print_message("no engine answers (%s): skipped\n", err.message);
  skip();
  return NULL;
}

/* The image the tests use: built by scripts/setup.sh. */
#define ITEST_IMAGE "sandman/minimal:latest"

#endif
