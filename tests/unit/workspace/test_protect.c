/* Protected-path globs: the parser (a table of good and bad globs) and the
 * matcher (a table of paths against globs: `**`, directories and what is
 * under them, anchoring, case and other spellings, spaces, the "reaches
 * into" rule for non-directories), and the depth-first walk agreeing with
 * one-off checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "workspace/ws.h"

static ws_protect *compile(const char *const *globs, size_t n) {
  sm_string_list l;
  memset(&l, 0, sizeof l);
  for (size_t i = 0; i < n; i++) assert_int_equal(sm_string_list_add(&l, globs[i], NULL), 0);
  ws_protect *p = NULL;
  sm_error err = SM_ERROR_INIT;
  if (workspace_protect_new(&p, &l, &err) != 0) fail_msg("%s", err.message);
  return p;
}

static void test_glob_syntax(void **state) {
  (void)state;
  static const char *const good[] = {
      ".git/hooks/**", "/.envrc", "*.pem", "a/**/b", "**", "[abc]x", "[!a-z]*", "\\[x\\]",
      "name with spaces/*", "a//b/", "**/**/x", "[]]",
  };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    sm_error err = SM_ERROR_INIT;
    if (workspace_protect_glob_check(good[i], &err) != 0) fail_msg("%s: %s", good[i], err.message);
  }
  static const char *const bad[] = {"", "/", "//", "a/../b", "./x", "[abc", "x/[", "a/./b"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    sm_error err = SM_ERROR_INIT;
    if (workspace_protect_glob_check(bad[i], &err) != SM_EINVAL)
      fail_msg("'%s' was accepted", bad[i]);
    assert_non_null(strstr(err.message, "protect glob"));
  }
  /* 63 components at most. */
  char deep[400];
  for (int i = 0; i < 64; i++) memcpy(deep + 2 * i, "a/", 2);
  deep[128] = '\0';
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(workspace_protect_glob_check(deep, &err), SM_EINVAL);
}

typedef struct row {
  const char *glob;
  const char *path;
  int is_dir;
  int expect;
} row;

static const row rows[] = {
    /* `**` and directories */
    {".git/hooks/**", ".git/hooks/pre-commit", 0, 1},
    {".git/hooks/**", ".git/hooks", 1, 1},
    {".git/hooks/**", ".git/hooks/sub/deeper/x", 0, 1},
    {".git/hooks/**", ".git/hooksx/pre-commit", 0, 0},
    {".git/hooks/**", ".git/objects/ab/cd", 0, 0},
    {".git/hooks/**", ".git", 1, 0},
    {".git/hooks/**", "sub/repo/.git/hooks/post-checkout", 0, 1},
    {"a/**/b", "a/b", 0, 1},
    {"a/**/b", "a/x/y/b", 0, 1},
    {"a/**/b", "a/x/y/c", 0, 0},
    {"a/**/b", "a/x/b/c", 0, 1},
    {"**", "anything/at/all", 0, 1},
    /* a directory match covers its contents */
    {".idea", ".idea/workspace.xml", 0, 1},
    {".vscode/**", ".vscode", 1, 1},
    {".vscode/**", ".vscode/tasks.json", 0, 1},
    /* plain names at any depth; anchored names at the root only */
    {".envrc", ".envrc", 0, 1},
    {".envrc", "deep/er/.envrc", 0, 1},
    {".envrc", ".envrc.bak", 0, 0},
    {"/.envrc", ".envrc", 0, 1},
    {"/.envrc", "sub/.envrc", 0, 0},
    {"/build/out", "build/out/x", 0, 1},
    {"/build/out", "src/build/out", 0, 0},
    {"*.pem", "keys/server.pem", 0, 1},
    {"*.pem", "keys/server.pem.txt", 0, 0},
    /* case and other spellings of the same name on some file systems */
    {".git/hooks/**", ".GIT/Hooks/pre-commit", 0, 1},
    {".git/config", ".Git/CONFIG", 0, 1},
    {".git/config", ".git./config", 0, 1},
    {".git/config", ".git /config ", 0, 1},
    {".git/config", ".g\xe2\x80\x8cit/config", 0, 1},
    {".git/config", "\xef\xbb\xbf.git/config", 0, 1},
    {".envrc", ".ENVRC", 0, 1},
    /* spaces in names */
    {"my docs/*.txt", "my docs/a b.txt", 0, 1},
    {"my docs/*.txt", "my  docs/a.txt", 0, 0},
    /* classes, ?, escapes */
    {"f[0-9]?", "f1x", 0, 1},
    {"f[!0-9]", "f1", 0, 0},
    {"f[!0-9]", "fa", 0, 1},
    {"\\*", "*", 0, 1},
    {"\\*", "x", 0, 0},
    /* a non-directory where a glob reaches further down */
    {".git/hooks/**", ".git", 0, 1},
    {".git/hooks/**", ".git/hooks", 0, 1},
    {".git/config", ".git", 0, 1},
    {".git/config", "sub/.git", 0, 1},
    {".git/config", ".gitx", 0, 0},
    {".envrc", ".envrc", 1, 1},
    {"a/**/b", "a", 0, 1},
    {"a/**/b", "a/x", 0, 0},
    {"a/**/b", "a/x", 1, 0},
};

static void test_matches(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    ws_protect *p = compile(&rows[i].glob, 1);
    int got = workspace_protected(p, rows[i].path, rows[i].is_dir);
    if (got != rows[i].expect)
      fail_msg("glob '%s', %s '%s': expected %d, got %d", rows[i].glob,
               rows[i].is_dir ? "directory" : "entry", rows[i].path, rows[i].expect, got);
    workspace_protect_free(p);
  }
}

static void test_empty_list_protects_nothing(void **state) {
  (void)state;
  ws_protect *p = compile(NULL, 0);
  assert_int_equal(workspace_protect_count(p), 0);
  assert_int_equal(workspace_protected(p, ".git/hooks/pre-commit", 0), 0);
  workspace_protect_free(p);
}

static int cmp_paths(const void *a, const void *b) {
  return workspace_path_cmp(*(const char *const *)a, *(const char *const *)b);
}

/* The walk (states kept from one path to the next) says what one-off
 * checks say, in depth-first order and in any order. */
static void test_walk_agrees(void **state) {
  (void)state;
  static const char *const globs[] = {".git/hooks/**", ".git/config", ".envrc", "a/**/b", "/top"};
  ws_protect *p = compile(globs, 5);
  const char *paths[] = {
      ".git", ".git/config", ".git/hooks", ".git/hooks/x", ".git-x", ".git/objects/aa",
      "a", "a/b", "a/c", "a/c/b", "a/c/d", "a-b", "top", "top/x", "x/top", "x/.envrc",
      "x/.git/config", "x/.git", "x/.git/objects", "y/z/w/.git/hooks/h",
  };
  size_t n = sizeof paths / sizeof *paths;
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) qsort(paths, n, sizeof *paths, cmp_paths);
    ws_protect_walk w;
    workspace_protect_walk_init(&w, p);
    for (size_t i = 0; i < n; i++)
      for (int dir = 0; dir < 2; dir++) {
        int one = workspace_protected(p, paths[i], dir);
        int walked = workspace_protect_walk_path(&w, paths[i], dir);
        if (one != walked) fail_msg("%s (dir %d): walk %d, one-off %d", paths[i], dir, walked, one);
      }
    workspace_protect_walk_dispose(&w);
  }
  workspace_protect_free(p);
}

static void test_path_order(void **state) {
  (void)state;
  const char *v[] = {"a/b", "a-c", "a", "a/b/c", "b", "a.d"};
  qsort(v, 6, sizeof *v, cmp_paths);
  assert_string_equal(v[0], "a");
  assert_string_equal(v[1], "a/b");
  assert_string_equal(v[2], "a/b/c");
  assert_string_equal(v[3], "a-c");
  assert_string_equal(v[4], "a.d");
  assert_string_equal(v[5], "b");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_glob_syntax),
      cmocka_unit_test(test_matches),
      cmocka_unit_test(test_empty_list_protects_nothing),
      cmocka_unit_test(test_walk_agrees),
      cmocka_unit_test(test_path_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
