/* Snapshots without an engine: names, the manifest of a /workspace tar
 * (every file's SHA-256, sorted, the folder itself left out), the
 * difference of two manifests, and the store: a half-made folder is never
 * listed, another owner's snapshot is missing, a name two owners use is
 * ambiguous without an owner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <cmocka.h>

#include "support/check.h"

#include "common/rmtree.h"
#include "sandbox/snap_manifest.h"
#include "sandbox/snap_store.h"

static void test_names(void **state) {
  (void)state;
  assert_true(sandbox_snap_name_valid("snap-1.ok_2"));
  assert_false(sandbox_snap_name_valid(""));
  assert_false(sandbox_snap_name_valid(NULL));
  assert_false(sandbox_snap_name_valid("../x"));
  assert_false(sandbox_snap_name_valid("a/b"));
  assert_false(sandbox_snap_name_valid(".hidden"));
  assert_false(sandbox_snap_name_valid("-flag"));
  char long_name[SM_SNAPSHOT_NAME_MAX + 1];
  memset(long_name, 'a', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  assert_false(sandbox_snap_name_valid(long_name));
}

static void add_entry(struct archive *a, const char *path, mode_t type, const char *data) {
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, path);
  archive_entry_set_filetype(e, type);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, data && type == AE_IFREG ? (la_int64_t)strlen(data) : 0);
  if (type == AE_IFLNK) archive_entry_set_symlink(e, data);
  assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
  if (data && type == AE_IFREG) archive_write_data(a, data, strlen(data));
  archive_entry_free(e);
}

/* A tar as the engine's archive of /workspace: entries "workspace/...". */
static int tar_of(const char *changed) {
  char path[] = "/tmp/sandman-test-snapshot-tar-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  struct archive *a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
  add_entry(a, "workspace", AE_IFDIR, NULL);
  add_entry(a, "workspace/z", AE_IFREG, "hello\n");
  add_entry(a, "workspace/d", AE_IFDIR, NULL);
  add_entry(a, "workspace/d/link", AE_IFLNK, "../z");
  if (changed) add_entry(a, "workspace/d/new", AE_IFREG, changed);
  else add_entry(a, "workspace/gone", AE_IFREG, "bye\n");
  archive_write_close(a);
  archive_write_free(a);
  lseek(fd, 0, SEEK_SET);
  return fd;
}

static const char *field(json_object *o, const char *k) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "";
}

static void test_manifest(void **state) {
  (void)state;
  int fd = tar_of(NULL);
  json_object *m = NULL;
  int64_t n = 0;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sandbox_snap_manifest_of_tar(fd, &m, &n, &err), 0);
  close(fd);
  assert_int_equal(n, 4); /* d, d/link, gone, z: the folder itself left out */
  json_object *files = NULL;
  assert_true(json_object_object_get_ex(m, "files", &files));
  assert_string_equal(field(json_object_array_get_idx(files, 0), "path"), "d");
  assert_string_equal(field(json_object_array_get_idx(files, 1), "path"), "d/link");
  assert_string_equal(field(json_object_array_get_idx(files, 1), "target"), "../z");
  json_object *z = json_object_array_get_idx(files, 3);
  assert_string_equal(field(z, "path"), "z");
  /* sha256("hello\n") */
  assert_string_equal(field(z, "sha256"),
                      "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
  json_object_put(m);
}

static void test_diff(void **state) {
  (void)state;
  json_object *before = NULL, *after = NULL;
  sm_error err = SM_ERROR_INIT;
  int fd = tar_of(NULL);
  assert_int_equal(sandbox_snap_manifest_of_tar(fd, &before, NULL, &err), 0);
  close(fd);
  fd = tar_of("new file\n");
  assert_int_equal(sandbox_snap_manifest_of_tar(fd, &after, NULL, &err), 0);
  close(fd);
  json_object *d = sandbox_snap_manifest_diff(before, after), *a = NULL, *m = NULL, *del = NULL;
  assert_true(json_object_object_get_ex(d, "added", &a));
  assert_true(json_object_object_get_ex(d, "modified", &m));
  assert_true(json_object_object_get_ex(d, "deleted", &del));
  assert_int_equal(json_object_array_length(a), 1);
  assert_string_equal(field(json_object_array_get_idx(a, 0), "path"), "d/new");
  assert_string_equal(field(json_object_array_get_idx(a, 0), "size"), "9");
  assert_int_equal(json_object_array_length(m), 0);
  assert_int_equal(json_object_array_length(del), 1);
  assert_string_equal(field(json_object_array_get_idx(del, 0), "path"), "gone");
  json_object_put(d);
  /* The same tree: nothing changed. */
  d = sandbox_snap_manifest_diff(before, before);
  assert_true(json_object_object_get_ex(d, "added", &a));
  assert_true(json_object_object_get_ex(d, "modified", &m));
  assert_int_equal(json_object_array_length(a) + json_object_array_length(m), 0);
  json_object_put(d);
  json_object_put(before);
  json_object_put(after);
}

static void put(const char *state_dir, const char *owner, const char *name, double at) {
  sm_snapshot s;
  memset(&s, 0, sizeof s);
  snprintf(s.name, sizeof s.name, "%s", name);
  snprintf(s.owner, sizeof s.owner, "%s", owner);
  sandbox_snap_key("unit-snap", owner, name, s.key);
  s.created_at = at;
  char dir[4096];
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sandbox_snap_dir(state_dir, s.key, dir, sizeof dir, &err), 0);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(sandbox_snap_meta_write(dir, "unit-snap", &s, NULL, &err), 0);
}

static void test_store(void **state) {
  (void)state;
  char state_dir[] = "/tmp/sandman-test-snapshot-XXXXXX";
  assert_non_null(mkdtemp(state_dir));
  put(state_dir, "worker:k1", "one", 100);
  put(state_dir, "worker:k2", "one", 200);
  put(state_dir, "worker:k1", "two", 300);
  /* What a crash in the middle leaves. */
  char tmp[4096];
  sm_error err = SM_ERROR_INIT;
  int held = -1;
  assert_int_equal(sandbox_snap_tmp_dir(state_dir, "0123456789abcdef", tmp, sizeof tmp, &held, &err), 0);
  assert_true(held >= 0);

  sm_snapshot_list l;
  assert_int_equal(sandbox_snap_list(state_dir, "unit-snap", NULL, &l, &err), 0);
  assert_int_equal(l.n, 3);
  assert_string_equal(l.items[0].name, "two"); /* newest first */
  sm_snapshot_list_dispose(&l);
  assert_int_equal(sandbox_snap_list(state_dir, "unit-snap", "worker:k2", &l, &err), 0);
  assert_int_equal(l.n, 1);
  sm_snapshot_list_dispose(&l);
  assert_int_equal(sandbox_snap_list(state_dir, "another-instance", NULL, &l, &err), 0);
  assert_int_equal(l.n, 0);
  sm_snapshot_list_dispose(&l);

  sm_snapshot s;
  assert_int_equal(sandbox_snap_find(state_dir, "unit-snap", "two", "worker:k1", &s, &err), 0);
  assert_int_equal(sandbox_snap_find(state_dir, "unit-snap", "two", "worker:k2", &s, &err),
                   SM_ENOTFOUND);
  assert_int_equal(sandbox_snap_find(state_dir, "unit-snap", "one", NULL, &s, &err), SM_ECONFLICT);
  assert_int_equal(sandbox_snap_find(state_dir, "unit-snap", "one", "worker:k2", &s, &err), 0);
  assert_string_equal(s.owner, "worker:k2");

  /* A sweep leaves the folder of a snapshot being made (held), removes it
   * at once when its maker is gone (its hold with it); a diff's tar file
   * only once it is an hour old. */
  char root[4096], diff[4200];
  assert_int_equal(sandbox_snap_root(state_dir, root, sizeof root, &err), 0);
  snprintf(diff, sizeof diff, "%s/.tmp-diff-1-0x1", root);
  int f = open(diff, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true(f >= 0);
  close(f);
  double now = (double)time(NULL);
  assert_int_equal(sandbox_snap_tmp_sweep(root, now), 0);
  assert_int_equal(access(tmp, F_OK), 0);
  assert_int_equal(access(diff, F_OK), 0);
  close(held);
  assert_int_equal(sandbox_snap_tmp_sweep(root, now), 1);
  assert_int_equal(access(tmp, F_OK), -1);
  assert_int_equal(access(diff, F_OK), 0);
  assert_int_equal(sandbox_snap_tmp_sweep(root, now + 3601), 1);
  assert_int_equal(access(diff, F_OK), -1);
  assert_int_equal(sandbox_snap_list(state_dir, "unit-snap", NULL, &l, &err), 0);
  assert_int_equal(l.n, 3); /* the made ones stay */
  sm_snapshot_list_dispose(&l);
  assert_int_equal(common_rmtree_at(AT_FDCWD, state_dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_manifest),
      cmocka_unit_test(test_diff),
      cmocka_unit_test(test_store),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
