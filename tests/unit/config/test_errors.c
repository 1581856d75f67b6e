/* Golden messages for broken files: every tests/fixtures/config/X.yaml
 * (other than ok_*.yaml) must fail to load with exactly the text of
 * X.expected, "X.yaml:LINE:COLUMN: key: message"; every ok_*.yaml must load. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "support/files.h"
#include "support/xalloc.h"

#define MAX_FILES 128

static char names[MAX_FILES][256];

static void read_expected(const char *yaml, char *out, size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%.*s.expected", (int)(strlen(yaml) - 5), yaml);
  char *text = tf_read(path, NULL);
  if (!text) fail_msg("%s: no %s beside it", yaml, path);
  size_t n = (size_t)snprintf(out, len, "%s", text);
  if (n >= len) n = len - 1;
  free(text);
  while (n > 0 && out[n - 1] == '\n') out[--n] = '\0';
}

static void run_file(void **state) {
  const char *name = *state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_config_load(&cfg, name, &err);
  if (strncmp(name, "ok_", 3) == 0) {
    if (rc) fail_msg("%s should load: %s", name, err.message);
    assert_string_equal(sm_config_path(cfg), name);
    sm_config_free(cfg);
    return;
  }
  if (rc == 0) fail_msg("%s loaded but should fail", name);
  assert_int_equal(rc, SM_ECONFIG);
  assert_null(cfg);
  char want[1024];
  read_expected(name, want, sizeof want);
  assert_string_equal(err.message, want);
  /* Every message starts with FILE:LINE:COLUMN: */
  unsigned line = 0, col = 0;
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s:%%u:%%u: ", name);
  assert_int_equal(sscanf(err.message, prefix, &line, &col), 2);
  assert_true(line > 0 && col > 0);
}

/* The same text through sm_config_load_string gives the same message. */
static void test_string_matches_file(void **state) {
  (void)state;
  const char *text = "defaults:\n  mode: per_tool\n  memroy: 1g\n";
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&cfg, "unknown_key.yaml", text, strlen(text), &err),
                   SM_ECONFIG);
  char want[1024];
  read_expected("unknown_key.yaml", want, sizeof want);
  assert_string_equal(err.message, want);
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

int main(void) {
  const char *src = getenv("SANDMAN_SOURCE_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/fixtures/config", src ? src : ".");
  if (chdir(dir) != 0) {
    fprintf(stderr, "cannot enter %s (set SANDMAN_SOURCE_DIR)\n", dir);
    return 1;
  }
  size_t n = 0;
  DIR *d = opendir(".");
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL && n < MAX_FILES) {
    size_t len = strlen(de->d_name);
    if (len > 5 && strcmp(de->d_name + len - 5, ".yaml") == 0)
      snprintf(names[n++], sizeof names[0], "%s", de->d_name);
  }
  if (d) closedir(d);
  qsort(names, n, sizeof names[0], by_name);
  struct CMUnitTest *tests = xcalloc(n + 1, sizeof *tests);
  for (size_t i = 0; i < n; i++) {
    tests[i].name = names[i];
    tests[i].test_func = run_file;
    tests[i].initial_state = names[i];
  }
  tests[n].name = "string_matches_file";
  tests[n].test_func = test_string_matches_file;
  int rc = _cmocka_run_group_tests("config_errors", tests, n + 1, NULL, NULL);
  free(tests);
  return rc;
}
