/* The copy-out listing: parsing the sandbox's find/stat output (hostile
 * input: anything odd means "do a full copy") and deciding what to fetch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "common/unconst.h"
#include "workspace/ws.h"

static int parse(const char *text, ws_manifest *m) {
  sm_error err = SM_ERROR_INIT;
  return workspace_probe_parse(text, strlen(text), 1000, 4096, m, &err);
}

static void test_parse_good(void **state) {
  (void)state;
  ws_manifest m;
  workspace_manifest_init(&m);
  const char *text =
      "6|1700000000|1795314400|2026-11-22 02:26:40.123456789 +0000|81a4|./a b.txt\n"
      "0|1700000000|1795314400|2026-11-22 02:26:40.5 +0000|41ed|./dir\n"
      "5|1700000000|1795314401|2026-11-22 02:26:41 +0000|a1ff|./dir/l|ink\n"
      "0|1|2|x|c1ed|./sock\n"
      "0|1|2|x|11a4|./fifo\n";
  assert_int_equal(parse(text, &m), 0);
  assert_int_equal(m.n, 5); /* the socket too: it is refused from the listing */
  assert_int_equal(workspace_manifest_get(&m, "sock")->type, 's');
  ws_entry *e = workspace_manifest_get(&m, "a b.txt");
  assert_non_null(e);
  assert_int_equal(e->type, 'f');
  assert_int_equal(e->size, 6);
  assert_int_equal(e->mode, 0644);
  assert_int_equal(e->ctime, 1795314400123456789LL);
  e = workspace_manifest_get(&m, "dir");
  assert_int_equal(e->type, 'd');
  /* Without 9 digits of nanoseconds: the whole second. */
  assert_int_equal(e->ctime, 1795314400000000000LL);
  e = workspace_manifest_get(&m, "dir/l|ink");
  assert_non_null(e);
  assert_int_equal(e->type, 'l');
  assert_int_equal(workspace_manifest_get(&m, "fifo")->type, 'p');
  workspace_manifest_dispose(&m);
}

static void test_parse_bad(void **state) {
  (void)state;
  const char *bad[] = {
      "not a listing\n",
      "6|1|2|x|81a4|a.txt\n",              /* no ./ */
      "6|1|2|x|81a4|./a/../../b\n",        /* .. */
      "6|1|2|x|81a4|./a//b\n",             /* not normalised */
      "6|1|2|x|81a4|./\n",                 /* empty */
      "6|1|2|x|zz|./a\n",                  /* mode */
      "-6|1|2|x|81a4|./a\n",               /* size */
      "6|1|2|x|81a4|./a\n6|1|2|x|81a4|./a\n", /* twice */
      "6|1|2|x|81a4|./first line of a name\nwith a newline\n",
      "99999999999999999999|1|2|x|81a4|./a\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ws_manifest m;
    workspace_manifest_init(&m);
    if (parse(bad[i], &m) == 0) fail_msg("accepted: %s", bad[i]);
    workspace_manifest_dispose(&m);
  }
  /* Over the entry cap. */
  ws_manifest m;
  workspace_manifest_init(&m);
  sm_error err = SM_ERROR_INIT;
  const char *two = "1|1|1|x|81a4|./a\n1|1|1|x|81a4|./b\n";
  assert_int_equal(workspace_probe_parse(two, strlen(two), 1, 4096, &m, &err), SM_ETOOBIG);
  /* An empty workspace is an empty listing. */
  assert_int_equal(workspace_probe_parse("", 0, 1, 4096, &m, &err), 0);
  assert_int_equal(m.n, 0);
  workspace_manifest_dispose(&m);
}

static void add(ws_manifest *m, const char *path, char type, int64_t size, int64_t mtime,
                int64_t ctime, const char *link) {
  ws_entry e;
  memset(&e, 0, sizeof e);
  e.path = SM_UNCONST(path);
  e.type = type;
  e.size = size;
  e.box_mtime = mtime;
  e.box_ctime = ctime;
  e.ctime = ctime;
  e.mode = type == 'd' ? 0755 : 0644;
  e.link = SM_UNCONST(link);
  e.stage = -1;
  assert_int_equal(workspace_manifest_add(m, &e, NULL), 0);
}

static void test_plan(void **state) {
  (void)state;
  ws_manifest base, list;
  workspace_manifest_init(&base);
  workspace_manifest_init(&list);
  add(&base, "same.txt", 'f', 5, 100, 1000, NULL);
  add(&base, "grown.txt", 'f', 5, 100, 1000, NULL);
  add(&base, "ctime.txt", 'f', 5, 100, 1000, NULL);
  add(&base, "gone.txt", 'f', 5, 100, 1000, NULL);
  add(&base, "d", 'd', 0, 0, 1000, NULL);
  add(&base, "d/in.txt", 'f', 1, 100, 1000, NULL);
  add(&base, "l", 'l', 1, 0, 1000, "x");
  add(&base, "unknown.txt", 'f', 1, 100, 0, NULL);
  add(&list, "same.txt", 'f', 5, 100, 1000, NULL);
  add(&list, "grown.txt", 'f', 6, 100, 1000, NULL);
  add(&list, "ctime.txt", 'f', 5, 100, 1001, NULL); /* content changed, mtime set back */
  add(&list, "d", 'd', 0, 0, 1234, NULL);
  add(&list, "d/in.txt", 'f', 1, 100, 1000, NULL);
  add(&list, "new", 'd', 0, 0, 2000, NULL);
  add(&list, "new/a", 'f', 1, 100, 2000, NULL);
  add(&list, "new/b", 'f', 1, 100, 2000, NULL);
  add(&list, "l", 'l', 1, 0, 1000, NULL);
  add(&list, "unknown.txt", 'f', 1, 100, 1000, NULL); /* no ctime on record: fetched */
  ws_extract x;
  workspace_extract_init(&x);
  x.base = &base;
  char **roots = NULL;
  size_t n = 0;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(workspace_probe_plan(&x, &list, 100, &roots, &n, &err), 0);
  /* A new directory is one fetch; unchanged entries are in the box. */
  assert_int_equal(n, 4);
  assert_string_equal(roots[0], "ctime.txt");
  assert_string_equal(roots[1], "grown.txt");
  assert_string_equal(roots[2], "new");
  assert_string_equal(roots[3], "unknown.txt");
  assert_non_null(workspace_manifest_get(&x.box, "same.txt"));
  assert_non_null(workspace_manifest_get(&x.box, "d/in.txt"));
  assert_non_null(workspace_manifest_get(&x.box, "l"));
  assert_null(workspace_manifest_get(&x.box, "gone.txt"));
  workspace_probe_free_roots(roots, n);
  workspace_extract_dispose(&x);
  /* Too many: the caller copies everything. */
  workspace_extract_init(&x);
  x.base = &base;
  assert_int_equal(workspace_probe_plan(&x, &list, 2, &roots, &n, &err), 1);
  workspace_extract_dispose(&x);
  /* Recording: ctimes kept where the listing agrees, else unknown. */
  workspace_probe_record(&base, &list, -1);
  assert_int_equal(workspace_manifest_get(&base, "same.txt")->box_ctime, 1000);
  assert_int_equal(workspace_manifest_get(&base, "ctime.txt")->box_ctime, 1001);
  assert_int_equal(workspace_manifest_get(&base, "grown.txt")->box_ctime, 0);
  assert_int_equal(workspace_manifest_get(&base, "gone.txt")->box_ctime, 0);
  workspace_manifest_dispose(&base);
  workspace_manifest_dispose(&list);
}

/* Issue 25.9: the listing names an entry whose path passes the limit as
 * "L|./path" (not entered); it is parsed as such, and refused by the plan
 * as path_too_long rather than fetched or taken for a deletion. */
static void test_parse_too_long(void **state) {
  (void)state;
  /* d, then 200-byte names down to the first past the limit; the folders
   * above it listed (and known to the manifest), that one as too long. */
  common_buf text;
  common_buf_init(&text, 1 << 20);
  char path[2 * WS_LIST_PATH_MAX] = "d";
  ws_manifest base;
  workspace_manifest_init(&base);
  ws_entry d;
  memset(&d, 0, sizeof d);
  d.type = 'd';
  d.mode = 0755;
  d.stage = -1;
  for (;;) {
    d.path = path;
    assert_int_equal(workspace_manifest_add(&base, &d, NULL), 0);
    common_buf_printf(&text, "0|1|2|x|41ed|./%s\n", path);
    size_t len = strlen(path);
    path[len] = '/';
    memset(path + len + 1, 'n', 200);
    path[len + 201] = '\0';
    if (len + 201 > WS_LIST_PATH_MAX) break;
  }
  common_buf_printf(&text, "L|./%s\n", path);
  ws_manifest m;
  workspace_manifest_init(&m);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(workspace_probe_parse(text.data, text.len, 1000, 4096, &m, &err), 0);
  const ws_entry *e = workspace_manifest_get(&m, path);
  assert_non_null(e);
  assert_int_equal(e->type, '?');
  ws_extract x;
  workspace_extract_init(&x);
  x.base = &base;
  char **roots = NULL;
  size_t n = 0;
  assert_int_equal(workspace_probe_plan(&x, &m, 8, &roots, &n, &err), 0);
  assert_int_equal(n, 0); /* nothing to fetch */
  const ws_entry *r = workspace_manifest_get(&x.box, path);
  assert_non_null(r);
  assert_int_equal(r->state, WS_REFUSED);
  assert_string_equal(workspace_reason_name(r->refusal), "path_too_long");
  workspace_probe_free_roots(roots, n);
  workspace_extract_dispose(&x);
  workspace_manifest_dispose(&m);
  /* Longer than a pruned entry can be: not a listing. */
  common_buf_reset(&text);
  size_t len = strlen(path);
  path[len] = '/';
  memset(path + len + 1, 'n', 200);
  path[len + 201] = '\0';
  common_buf_printf(&text, "L|./%s\n", path);
  workspace_manifest_init(&m);
  assert_int_equal(workspace_probe_parse(text.data, text.len, 1000, 4096, &m, &err), SM_EPROTOCOL);
  workspace_manifest_dispose(&m);
  workspace_manifest_dispose(&base);
  common_buf_dispose(&text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_good),
      cmocka_unit_test(test_parse_bad),
      cmocka_unit_test(test_parse_too_long),
      cmocka_unit_test(test_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
