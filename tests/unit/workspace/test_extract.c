/* The extractor against hostile archives built in memory. An entry that is
 * not safe to write is refused on its own (with its reason) and the rest
 * applies; a cap or a stream that is not a valid tar fails the whole copy
 * and nothing in or around the target changes. Nothing outside the target
 * ever changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "workspace/ws.h"
#include "tarbuild.h"

#include "support/xalloc.h"

typedef struct fixture {
  char parent[256];
  char target[300];
  char outside[300];
} fixture;

static int setup(void **state) {
  fixture *f = xcalloc(1, sizeof *f);
  snprintf(f->parent, sizeof f->parent, "/tmp/sm-ws-extract-XXXXXX");
  assert_non_null(mkdtemp(f->parent));
  snprintf(f->target, sizeof f->target, "%s/ws", f->parent);
  snprintf(f->outside, sizeof f->outside, "%s/outside", f->parent);
  assert_int_equal(mkdir(f->target, 0755), 0);
  assert_int_equal(mkdir(f->outside, 0755), 0);
  char p[400];
  snprintf(p, sizeof p, "%s/secret.txt", f->outside);
  tf_write_str(p, "do not touch\n");
  snprintf(p, sizeof p, "%s/x", f->parent);
  tf_write_str(p, "parent file\n");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  tf_rm_rf(f->parent);
  free(f);
  return 0;
}

/* Extracts t's archive into the target; expects the whole copy to fail
 * with code and a message containing needle, and the parent tree unchanged. */
static void expect_failed(fixture *f, tb *t, sm_workspace_limits *lim, int code, const char *needle) {
  char *before = snapshot(f->parent);
  mem_reader m = {t->out.data, t->out.len, 0, 0};
  sm_error err = SM_ERROR_INIT;
  ws_apply_result res = {0};
  int rc = workspace_unpack_dir(f->target, read_mem, &m, lim, &res, NULL, &err);
  workspace_apply_result_dispose(&res);
  char *after = snapshot(f->parent);
  if (rc != code) fail_msg("expected %d, got %d: %s", code, rc, err.message);
  if (strstr(err.message, needle) == NULL) fail_msg("'%s' not in '%s'", needle, err.message);
  assert_string_equal(before, after);
  free(before);
  free(after);
  common_buf_dispose(&t->out);
}

/* Everything outside the target: its siblings and the directory beside it. */
static char *around(fixture *f) {
  char p[400];
  snprintf(p, sizeof p, "%s/x", f->parent);
  char *x = tf_read(p, NULL);
  char *o = snapshot(f->outside);
  size_t n = strlen(x) + strlen(o) + 2;
  char *s = xmalloc(n);
  snprintf(s, n, "%s|%s", x, o);
  free(x);
  free(o);
  return s;
}

/* Extracts t's archive into a fresh target; expects success with exactly
 * the refusals "path=reason,..." (sorted by path), nothing outside the
 * target changed, and *applied (when given) what the target holds. */
static void expect_refused(fixture *f, tb *t, sm_workspace_limits *lim, const char *refusals,
                           const char *applied) {
  tf_rm_rf(f->target);
  assert_int_equal(mkdir(f->target, 0755), 0);
  char *before = around(f);
  mem_reader m = {t->out.data, t->out.len, 0, 0};
  sm_error err = SM_ERROR_INIT;
  ws_apply_result res = {0};
  ws_refusal_list refused = {0};
  int rc = workspace_unpack_dir(f->target, read_mem, &m, lim, &res, &refused, &err);
  workspace_apply_result_dispose(&res);
  if (rc != 0) fail_msg("the copy failed: %s", err.message);
  char got[4096] = "";
  size_t used = 0;
  for (size_t i = 0; i < refused.n; i++)
    used += (size_t)snprintf(got + used, sizeof got - used, "%s%s=%s", i ? "," : "",
                             refused.v[i].path, refused.v[i].reason);
  workspace_refusal_list_dispose(&refused);
  assert_string_equal(got, refusals);
  char *after = around(f);
  assert_string_equal(before, after);
  free(before);
  free(after);
  if (applied) {
    char *in = snapshot(f->target);
    /* The names only: each line's first field. */
    char names[4096] = "";
    size_t k = 0;
    for (char *line = in; line && *line;) {
      char *nl = strchr(line, '\n');
      char *sp = strchr(line, ' ');
      size_t len = sp && (!nl || sp < nl) ? (size_t)(sp - line) : nl ? (size_t)(nl - line) : strlen(line);
      k += (size_t)snprintf(names + k, sizeof names - k, "%s%.*s", k ? "," : "", (int)len, line);
      line = nl ? nl + 1 : NULL;
    }
    free(in);
    assert_string_equal(names, applied);
  }
  common_buf_dispose(&t->out);
}

static void test_traversal(void **state) {
  fixture *f = *state;
  tb t;
  tb_open(&t);
  tb_file(&t, "ok.txt", "fine");
  tb_file(&t, "../x", "overwrite the parent");
  tb_close(&t);
  expect_refused(f, &t, NULL, "../x=unsafe_path", NULL);
  tb_open(&t);
  tb_dir(&t, "a");
  tb_file(&t, "a/../../outside/secret.txt", "owned");
  tb_file(&t, "a/ok", "fine");
  tb_close(&t);
  expect_refused(f, &t, NULL, "a/../../outside/secret.txt=unsafe_path", NULL);
}

static void test_absolute(void **state) {
  fixture *f = *state;
  char abs[400];
  snprintf(abs, sizeof abs, "%s/secret.txt", f->outside);
  tb t;
  tb_open(&t);
  tb_file(&t, abs, "owned");
  tb_file(&t, "rest.txt", "applies");
  tb_close(&t);
  char want[600];
  snprintf(want, sizeof want, "%s=unsafe_path", abs);
  expect_refused(f, &t, NULL, want, NULL);
}

static void test_symlink_then_file_under_it(void **state) {
  fixture *f = *state;
  tb t;
  /* A link that stays inside, then a file through it. */
  tb_open(&t);
  tb_symlink(&t, "l", ".");
  tb_file(&t, "l/x", "through the link");
  tb_close(&t);
  expect_refused(f, &t, NULL, "l/x=unsafe_path", NULL);
  /* A link out, then a file through it: both refused, nothing written. */
  tb_open(&t);
  tb_symlink(&t, "out", "../outside");
  tb_file(&t, "out/secret.txt", "owned");
  tb_file(&t, "kept.txt", "applies");
  tb_close(&t);
  expect_refused(f, &t, NULL, "out=link_outside,out/secret.txt=unsafe_path", NULL);
}

static void test_symlinks_leaving(void **state) {
  fixture *f = *state;
  const char *bad[][3] = {
      {"abs", "/etc/passwd", "link_absolute"}, {"up", "..", "link_outside"},
      {"sub/up2", "../../outside", "link_outside"}, {"sneaky", "sub/../..", "link_outside"},
      {"dotdot", "sub/..", "link_outside"}, {"empty", "", "unsafe_path"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tb t;
    tb_open(&t);
    tb_dir(&t, "sub");
    tb_symlink(&t, bad[i][0], bad[i][1]);
    tb_file(&t, "sub/kept", "applies");
    tb_close(&t);
    char want[200];
    snprintf(want, sizeof want, "%s=%s", bad[i][0], bad[i][2]);
    expect_refused(f, &t, NULL, want, "sub,sub/kept");
  }
}

static void test_hardlink_outside(void **state) {
  fixture *f = *state;
  const char *targets[] = {"/etc/passwd", "../outside/secret.txt", "missing.txt", "sub"};
  for (size_t i = 0; i < 4; i++) {
    tb t;
    tb_open(&t);
    tb_dir(&t, "sub");
    tb_add(&t, "h", AE_IFREG, 0644, NULL, targets[i], NULL, 0);
    tb_close(&t);
    expect_refused(f, &t, NULL, "h=hard_link", "sub");
  }
}

static void test_device_and_fifo(void **state) {
  fixture *f = *state;
  tb t;
  tb_open(&t);
  tb_add(&t, "null", AE_IFCHR, 0666, NULL, NULL, NULL, 0);
  tb_add(&t, "blk", AE_IFBLK, 0666, NULL, NULL, NULL, 0);
  tb_file(&t, "before.txt", "x");
  tb_add(&t, "pipe", AE_IFIFO, 0644, NULL, NULL, NULL, 0);
  tb_file(&t, "after.txt", "y");
  tb_close(&t);
  expect_refused(f, &t, NULL, "blk=device,null=device,pipe=fifo", "after.txt,before.txt");
}

static void test_setuid_stripped(void **state) {
  fixture *f = *state;
  tb t;
  tb_open(&t);
  tb_add(&t, "suid", AE_IFREG, 04755, NULL, NULL, "#!/bin/sh\n", -1);
  tb_add(&t, "sgid", AE_IFREG, 02775, NULL, NULL, "x", -1);
  tb_add(&t, "dir", AE_IFDIR, 03777, NULL, NULL, NULL, 0);
  tb_close(&t);
  mem_reader m = {t.out.data, t.out.len, 0, 0};
  sm_error err = SM_ERROR_INIT;
  ws_apply_result res = {0};
  assert_int_equal(workspace_unpack_dir(f->target, read_mem, &m, NULL, &res, NULL, &err), 0);
  assert_int_equal(res.n_changed, 3);
  workspace_apply_result_dispose(&res);
  char p[400];
  struct stat st;
  snprintf(p, sizeof p, "%s/suid", f->target);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0755);
  snprintf(p, sizeof p, "%s/sgid", f->target);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0775);
  snprintf(p, sizeof p, "%s/dir", f->target);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0777);
  common_buf_dispose(&t.out);
}

static void test_claims_one_terabyte(void **state) {
  fixture *f = *state;
  tb t;
  /* libarchive would pad the entry to 1 TB on close: cut the stream instead
   * (unblocked output, so everything written so far is in the buffer). */
  tb_open_blocked(&t, 0);
  tb_file(&t, "small", "x");
  struct archive_entry *e = archive_entry_new();
  archive_entry_copy_pathname(e, "huge");
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, 1LL << 40);
  archive_write_header(t.a, e);
  archive_write_data(t.a, "tiny", 4);
  archive_entry_free(e);
  /* No close: that would write 1 TB of padding. Take what is buffered. */
  char *copy = xmalloc(t.out.len + 8192);
  memcpy(copy, t.out.data, t.out.len);
  memset(copy + t.out.len, 0, 8192);
  size_t len = t.out.len + 8192;
  archive_write_free(t.a);
  common_buf_dispose(&t.out);
  common_buf_init(&t.out, (size_t)1 << 30);
  common_buf_append(&t.out, copy, len);
  free(copy);
  expect_failed(f, &t, NULL, SM_ETOOBIG, "claims 1099511627776 bytes");
}

static void test_million_entries(void **state) {
  fixture *f = *state;
  /* A million empty files against a small cap: refused at the cap, long
   * before the stream ends. */
  char *before = snapshot(f->parent);
  genstream g;
  gen_open(&g, 1000000, 0);
  sm_workspace_limits lim = {0, 1000, 0};
  sm_error err = SM_ERROR_INIT;
  ws_apply_result res = {0};
  int rc = workspace_unpack_dir(f->target, gen_read, &g, &lim, &res, NULL, &err);
  assert_int_equal(rc, SM_ETOOBIG);
  assert_non_null(strstr(err.message, "more than 1000 entries"));
  assert_true(g.made < 5000);
  gen_free(&g);
  /* A million empty directories against the default cap (100000). */
  gen_open(&g, 1000000, 1);
  rc = workspace_unpack_dir(f->target, gen_read, &g, NULL, &res, NULL, &err);
  assert_int_equal(rc, SM_ETOOBIG);
  assert_non_null(strstr(err.message, "more than 100000 entries"));
  assert_true(g.made < 110000);
  gen_free(&g);
  char *after = snapshot(f->parent);
  assert_string_equal(before, after);
  free(before);
  free(after);
}

static void test_long_paths(void **state) {
  fixture *f = *state;
  char name[6000];
  size_t o = 0;
  while (o < 5000) o += (size_t)snprintf(name + o, sizeof name - o, "%s", "abcdefghij/");
  snprintf(name + o, sizeof name - o, "f");
  tb t;
  tb_open(&t);
  tb_file(&t, name, "deep");
  tb_close(&t);
  expect_failed(f, &t, NULL, SM_ETOOBIG, "longer than the limit");
  /* One name over 255 bytes: that entry alone. */
  char big[400];
  memset(big, 'n', 300);
  big[300] = '\0';
  tb_open(&t);
  tb_file(&t, big, "x");
  tb_file(&t, "short", "y");
  tb_close(&t);
  char want[400];
  snprintf(want, sizeof want, "%s=name_too_long", big);
  expect_refused(f, &t, NULL, want, "short");
  /* A lower cap: the whole copy. */
  sm_workspace_limits lim = {0, 0, 16};
  tb_open(&t);
  tb_file(&t, "this-name-is-longer-than-16", "x");
  tb_close(&t);
  expect_failed(f, &t, &lim, SM_ETOOBIG, "longer than the limit of 16");
}

static void test_structure(void **state) {
  fixture *f = *state;
  tb t;
  tb_open(&t);
  tb_file(&t, "nodir/x", "parent missing");
  tb_close(&t);
  expect_refused(f, &t, NULL, "nodir/x=unsafe_path", "");
  /* The first of two entries for one path applies, the second is refused. */
  tb_open(&t);
  tb_file(&t, "dup", "1");
  tb_file(&t, "dup", "2");
  tb_close(&t);
  expect_refused(f, &t, NULL, "dup=unsafe_path", "dup");
  char p[400];
  snprintf(p, sizeof p, "%s/dup", f->target);
  char *c = tf_read(p, NULL);
  assert_string_equal(c, "1");
  free(c);
  tb_open(&t);
  tb_file(&t, "f", "a file");
  tb_file(&t, "f/x", "under a file");
  tb_close(&t);
  expect_refused(f, &t, NULL, "f/x=unsafe_path", "f");
  tb_open(&t);
  tb_dir(&t, ".sandman-stage-zz");
  tb_close(&t);
  expect_refused(f, &t, NULL, ".sandman-stage-zz=unsafe_path", "");
}

static void test_total_bytes_cap(void **state) {
  fixture *f = *state;
  tb t;
  tb_open(&t);
  tb_file(&t, "a", "0123456789");
  tb_file(&t, "b", "0123456789");
  tb_close(&t);
  sm_workspace_limits lim = {15, 0, 0};
  expect_failed(f, &t, &lim, SM_ETOOBIG, "over the copy limit");
}

static void test_truncated_and_garbage(void **state) {
  fixture *f = *state;
  tb t;
  tb_open(&t);
  tb_file(&t, "a", "first file");
  char big[20000];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  tb_file(&t, "b", big);
  tb_close(&t);
  t.out.len = 512 * 4 + 3000; /* cut inside b's data */
  expect_failed(f, &t, NULL, SM_EPROTOCOL, "tar stream");
  common_buf_init(&t.out, 4096);
  common_buf_append(&t.out, "this is not a tar archive at all, just words. ", 46);
  for (int i = 0; i < 20; i++) common_buf_append(&t.out, "more words ", 11);
  expect_failed(f, &t, NULL, SM_EPROTOCOL, "tar stream");
}

static void test_good_archive(void **state) {
  fixture *f = *state;
  tb t;
  tb_open(&t);
  tb_dir(&t, "./");
  tb_dir(&t, "dir with space");
  tb_file(&t, "dir with space/héllo wörld.txt", "utf-8 name");
  tb_file(&t, "empty", "");
  tb_add(&t, "run.sh", AE_IFREG, 0755, NULL, NULL, "#!/bin/sh\necho hi\n", -1);
  tb_dir(&t, "emptydir");
  tb_dir(&t, "a");
  tb_dir(&t, "a/b");
  tb_symlink(&t, "a/b/up", "../../run.sh");
  tb_symlink(&t, "a/self", ".");
  tb_add(&t, "a/hard", AE_IFREG, 0644, NULL, "run.sh", NULL, 0);
  tb_close(&t);
  mem_reader m = {t.out.data, t.out.len, 0, 7}; /* odd chunks on purpose */
  sm_error err = SM_ERROR_INIT;
  ws_apply_result res = {0};
  int rc = workspace_unpack_dir(f->target, read_mem, &m, NULL, &res, NULL, &err);
  if (rc) fail_msg("%s", err.message);
  assert_int_equal(res.n_changed, 10);
  workspace_apply_result_dispose(&res);
  char p[600];
  snprintf(p, sizeof p, "%s/dir with space/héllo wörld.txt", f->target);
  char *c = tf_read(p, NULL);
  assert_non_null(c);
  assert_string_equal(c, "utf-8 name");
  free(c);
  struct stat st;
  snprintf(p, sizeof p, "%s/run.sh", f->target);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0755);
  assert_int_equal(st.st_mtime, 1700000000);
  snprintf(p, sizeof p, "%s/a/hard", f->target);
  c = tf_read(p, NULL);
  assert_string_equal(c, "#!/bin/sh\necho hi\n");
  free(c);
  snprintf(p, sizeof p, "%s/a/b/up", f->target);
  char l[100];
  ssize_t n = readlink(p, l, sizeof l);
  assert_int_equal(n, 12);
  snprintf(p, sizeof p, "%s/emptydir", f->target);
  assert_int_equal(lstat(p, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  snprintf(p, sizeof p, "%s/empty", f->target);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_size, 0);
  common_buf_dispose(&t.out);
  /* No staging directory is left behind. */
  DIR *d = opendir(f->target);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) assert_null(strstr(de->d_name, "sandman-stage"));
  closedir(d);
}

static void test_existing_symlink_not_followed(void **state) {
  fixture *f = *state;
  /* The target already holds a link out (the host user's own); an archive
   * writing "through" it must not reach the outside directory. */
  char p[600];
  snprintf(p, sizeof p, "%s/link", f->target);
  assert_int_equal(symlink("../outside", p), 0);
  tb t;
  tb_open(&t);
  tb_dir(&t, "link");
  tb_file(&t, "link/secret.txt", "owned");
  tb_close(&t);
  char *before = snapshot(f->outside);
  mem_reader m = {t.out.data, t.out.len, 0, 0};
  sm_error err = SM_ERROR_INIT;
  ws_apply_result res = {0};
  workspace_unpack_dir(f->target, read_mem, &m, NULL, &res, NULL, &err);
  workspace_apply_result_dispose(&res);
  char *after = snapshot(f->outside);
  assert_string_equal(before, after);
  snprintf(p, sizeof p, "%s/secret.txt", f->outside);
  char *c = tf_read(p, NULL);
  assert_string_equal(c, "do not touch\n");
  free(c);
  free(before);
  free(after);
  common_buf_dispose(&t.out);
}

static void test_paths(void **state) {
  (void)state;
  char *p = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(workspace_path_normalize("./a//b/./c/", &p, &err), 0);
  assert_string_equal(p, "a/b/c");
  free(p);
  assert_int_equal(workspace_path_normalize("a/../b", &p, &err), SM_EUNSAFE);
  assert_int_equal(workspace_path_normalize("/a", &p, &err), SM_EUNSAFE);
  assert_true(workspace_link_inside("a/b/l", "../../x"));
  assert_false(workspace_link_inside("a/b/l", "../../../x"));
  assert_false(workspace_link_inside("l", "x/../.."));
  assert_false(workspace_link_inside("l", "x/.."));
  assert_true(workspace_link_inside("l", "./x/./y"));
  assert_false(workspace_link_inside("l", "/x"));
  sm_string_list ex = {0};
  sm_string_list_add(&ex, "node_modules", NULL);
  sm_string_list_add(&ex, "*.o", NULL);
  assert_true(workspace_excluded(&ex, "node_modules"));
  assert_true(workspace_excluded(&ex, "a/node_modules/b/c.js"));
  assert_true(workspace_excluded(&ex, "src/x.o"));
  assert_false(workspace_excluded(&ex, "src/x.c"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paths),
      cmocka_unit_test_setup_teardown(test_traversal, setup, teardown),
      cmocka_unit_test_setup_teardown(test_absolute, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symlink_then_file_under_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symlinks_leaving, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hardlink_outside, setup, teardown),
      cmocka_unit_test_setup_teardown(test_device_and_fifo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_setuid_stripped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_claims_one_terabyte, setup, teardown),
      cmocka_unit_test_setup_teardown(test_million_entries, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_paths, setup, teardown),
      cmocka_unit_test_setup_teardown(test_structure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_total_bytes_cap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncated_and_garbage, setup, teardown),
      cmocka_unit_test_setup_teardown(test_good_archive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_existing_symlink_not_followed, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
