/* The shape an agent's /workspace tar must have to be kept as a snapshot's
 * (snap_tar_check.h). The agent runs as the sandbox's user beside the
 * tool's processes, and a fork puts its tar back through the engine's
 * upload as root, which follows a link an earlier entry made: each
 * crafted tar here would write outside the fork's /workspace (or plant
 * what a real folder cannot hold) and must be refused, while the engine's
 * own tars (read without the check) are taken as they are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "sandbox/snap_manifest.h"
#include "unit/workspace/tarbuild.h"

/* The tar in t into a file; the manifest of it (checked or not): rc. */
static int manifest(tb *t, int checked, int64_t *files) {
  tb_close(t);
  char path[] = "/tmp/sm-tar-check-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(write(fd, t->out.data, t->out.len), (ssize_t)t->out.len);
  lseek(fd, 0, SEEK_SET);
  json_object *m = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = checked ? sandbox_snap_manifest_of_agent_tar(fd, &m, files, &err)
                   : sandbox_snap_manifest_of_tar(fd, &m, files, &err);
  close(fd);
  json_object_put(m);
  common_buf_dispose(&t->out);
  return rc;
}

typedef void (*build_fn)(tb *t);

/* Refused when checked; taken (as the engine's tar would be) when not. */
static void refused(build_fn build) {
  tb t;
  tb_open(&t);
  build(&t);
  assert_int_equal(manifest(&t, 1, NULL), SM_EPROTOCOL);
  tb_open(&t);
  build(&t);
  assert_int_equal(manifest(&t, 0, NULL), 0);
}

static void root(tb *t) { tb_dir(t, "./"); }

static void through_link(tb *t) {
  root(t);
  tb_symlink(t, "./d", "/etc");
  tb_file(t, "./d/cron.hourly", "planted");
}

static void dot_dot(tb *t) {
  root(t);
  tb_file(t, "./../outside", "x");
}

static void twice(tb *t) {
  root(t);
  tb_file(t, "./a", "one");
  tb_symlink(t, "./a", "/etc");
}

static void dir_then_link(tb *t) {
  root(t);
  tb_dir(t, "./d/");
  tb_symlink(t, "./d", "/etc");
  tb_file(t, "./d/x", "x");
}

static void no_root(tb *t) { tb_file(t, "./a", "a"); }

static void bare_name(tb *t) {
  root(t);
  tb_file(t, "a", "a");
}

static void absolute(tb *t) {
  root(t);
  tb_file(t, "/etc/passwd", "x");
}

static void hard_link(tb *t) {
  root(t);
  tb_file(t, "./a", "a");
  tb_add(t, "./b", AE_IFREG, 0644, NULL, "./a", NULL, 0);
}

static void device(tb *t) {
  root(t);
  tb_add(t, "./null", AE_IFCHR, 0666, NULL, NULL, NULL, 0);
}

static void under_file(tb *t) {
  root(t);
  tb_file(t, "./f", "f");
  tb_file(t, "./f/x", "x");
}

static void before_folder(tb *t) {
  root(t);
  tb_file(t, "./a/b", "b");
}

static void other_owner(tb *t) {
  root(t);
  struct archive_entry *e = archive_entry_new();
  archive_entry_copy_pathname(e, "./rootfile");
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 04755);
  archive_entry_set_uid(e, 0);
  archive_entry_set_gid(e, 0);
  archive_entry_set_size(e, 1);
  archive_write_header(t->a, e);
  archive_write_data(t->a, "x", 1);
  archive_entry_free(e);
}

static void empty_part(tb *t) {
  root(t);
  tb_file(t, ".//a", "a");
}

static void test_refused(void **state) {
  (void)state;
  refused(through_link);
  refused(dot_dot);
  refused(twice);
  refused(dir_then_link);
  refused(no_root);
  refused(bare_name);
  refused(absolute);
  refused(hard_link);
  refused(device);
  refused(under_file);
  refused(before_folder);
  refused(other_owner);
  refused(empty_part);
}

static void test_taken(void **state) {
  (void)state;
  tb t;
  tb_open(&t);
  root(&t);
  tb_dir(&t, "./a/");
  tb_file(&t, "./a/b", "b");
  tb_symlink(&t, "./a/l", "../../etc/passwd"); /* a link is kept as a link */
  tb_dir(&t, "./a/c");
  tb_file(&t, "./top", "t");
  int64_t files = 0;
  assert_int_equal(manifest(&t, 1, &files), 0);
  assert_int_equal(files, 5);
  /* Nothing at all is not a tar of /workspace. */
  tb_open(&t);
  assert_int_equal(manifest(&t, 1, NULL), SM_EPROTOCOL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_taken),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
