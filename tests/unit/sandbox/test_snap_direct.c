/* A snapshot's read of /workspace from its volume on the host
 * (src/lib/sandbox/snap_direct.c): when it is taken (a unix socket, no
 * rootless or userns engine, /workspace a local volume with a Source, the
 * folder the engine's own by mode and mtime) and what it writes (a tree of
 * every kind of entry; links never followed; a tree too deep left to the
 * engine). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/snap_direct.h"
#include "sandbox/snap_manifest.h"

static json_object *parse(const char *text) {
  json_object *o = json_tokener_parse(text);
  assert_non_null(o);
  return o;
}

#define GOOD_INFO "{\"SecurityOptions\":[\"name=apparmor\",\"name=seccomp,profile=default\"]}"
#define GOOD_INSP                                                                                      \
  "{\"Mounts\":[{\"Type\":\"tmpfs\",\"Destination\":\"/tmp\"},{\"Type\":\"volume\",\"Name\":\"s-ws\"," \
  "\"Source\":\"/var/lib/docker/volumes/s-ws/_data\",\"Destination\":\"/workspace\",\"Driver\":\"local\"}]}"

/* The verdict for host, info and inspect; why into why. */
static int verdict(const char *host, const char *info, const char *insp, char *source, char *why) {
  json_object *i = info ? parse(info) : NULL, *c = parse(insp);
  int ok = sandbox_snap_direct_eligible(host, i, c, source, PATH_MAX, why, 300);
  json_object_put(i);
  json_object_put(c);
  return ok;
}

static void test_eligible(void **state) {
  (void)state;
  char source[PATH_MAX], why[300];
  assert_int_equal(verdict("unix:///var/run/docker.sock", GOOD_INFO, GOOD_INSP, source, why), 1);
  assert_string_equal(source, "/var/lib/docker/volumes/s-ws/_data");
}

static void test_not_eligible(void **state) {
  (void)state;
  char source[PATH_MAX], why[300];
  /* another machine */
  assert_int_equal(verdict("tcp://10.0.0.5:2376", GOOD_INFO, GOOD_INSP, source, why), 0);
  assert_non_null(strstr(why, "not a unix socket"));
  assert_string_equal(source, "");
  assert_int_equal(verdict("ssh://me@there", GOOD_INFO, GOOD_INSP, source, why), 0);
  assert_int_equal(verdict(NULL, GOOD_INFO, GOOD_INSP, source, why), 0);
  /* owners shifted on disk */
  assert_int_equal(
      verdict("unix:///run/user/1000/docker.sock",
              "{\"SecurityOptions\":[\"name=seccomp,profile=default\",\"name=rootless\"]}",
              GOOD_INSP, source, why),
      0);
  assert_non_null(strstr(why, "name=rootless"));
  assert_int_equal(
      verdict("unix:///var/run/docker.sock",
              "{\"SecurityOptions\":[\"name=userns\",\"name=seccomp,profile=default\"]}", GOOD_INSP,
              source, why),
      0);
  assert_non_null(strstr(why, "name=userns"));
  /* a word that only starts like one is not one */
  assert_int_equal(verdict("unix:///var/run/docker.sock",
                           "{\"SecurityOptions\":[\"name=usernsish\"]}", GOOD_INSP, source, why),
                   1);
  /* no /info */
  assert_int_equal(verdict("unix:///var/run/docker.sock", NULL, GOOD_INSP, source, why), 0);
  /* the mount's shape */
  assert_int_equal(verdict("unix:///var/run/docker.sock", GOOD_INFO, "{\"Mounts\":[]}", source,
                           why),
                   0);
  assert_non_null(strstr(why, "no mount at /workspace"));
  assert_int_equal(verdict("unix:///var/run/docker.sock", GOOD_INFO, "{}", source, why), 0);
  assert_int_equal(
      verdict(
          "unix:///var/run/docker.sock", GOOD_INFO,
          "{\"Mounts\":[{\"Type\":\"bind\",\"Source\":\"/home/me\",\"Destination\":\"/workspace\"}]}",
          source, why),
      0);
  assert_non_null(strstr(why, "bind mount"));
  assert_int_equal(
      verdict("unix:///var/run/docker.sock", GOOD_INFO,
              "{\"Mounts\":[{\"Type\":\"volume\",\"Source\":\"/x\",\"Destination\":\"/workspace\","
              "\"Driver\":\"nfs-plugin\"}]}",
              source, why),
      0);
  assert_non_null(strstr(why, "driver nfs-plugin"));
  assert_int_equal(
      verdict("unix:///var/run/docker.sock", GOOD_INFO,
              "{\"Mounts\":[{\"Type\":\"volume\",\"Source\":\"\",\"Destination\":\"/workspace\","
              "\"Driver\":\"local\"}]}",
              source, why),
      0);
  assert_int_equal(verdict("unix:///var/run/docker.sock", GOOD_INFO,
                           "{\"Mounts\":[{\"Type\":\"volume\",\"Source\":\"relative/path\","
                           "\"Destination\":\"/workspace\",\"Driver\":\"local\"}]}",
                           source, why),
                   0);
  assert_non_null(strstr(why, "no usable Source"));
  /* a mount at /workspace/sub is not /workspace */
  assert_int_equal(
      verdict(
          "unix:///var/run/docker.sock", GOOD_INFO,
          "{\"Mounts\":[{\"Type\":\"volume\",\"Source\":\"/x\",\"Destination\":\"/workspace/sub\","
          "\"Driver\":\"local\"}]}",
          source, why),
      0);
}

static sm_engine_path_info engine_of(const struct stat *st) {
  sm_engine_path_info e;
  memset(&e, 0, sizeof e);
  e.mode = st->st_mode & (S_IFMT | 07777);
  e.size = st->st_size;
  e.has_mtime = 1;
  e.mtime_s = st->st_mtim.tv_sec;
  e.mtime_ns = st->st_mtim.tv_nsec;
  return e;
}

static void test_identity(void **state) {
  (void)state;
  char dir[] = "/tmp/sm-direct-XXXXXX";
  assert_non_null(mkdtemp(dir));
  struct stat st;
  assert_int_equal(stat(dir, &st), 0);
  sm_engine_path_info e = engine_of(&st);
  char why[PATH_MAX + 300];
  assert_int_equal(sandbox_snap_direct_same(&st, &e, why, sizeof why), 1);
  int fd = sandbox_snap_direct_open(dir, &e, why, sizeof why);
  assert_true(fd >= 0);
  close(fd);
  /* a nanosecond apart: another folder */
  sm_engine_path_info off = e;
  off.mtime_ns = (off.mtime_ns + 1) % 1000000000L;
  assert_int_equal(sandbox_snap_direct_same(&st, &off, why, sizeof why), 0);
  assert_non_null(strstr(why, "mtime"));
  assert_int_equal(sandbox_snap_direct_open(dir, &off, why, sizeof why), -1);
  assert_non_null(strstr(why, "not the engine's /workspace"));
  /* another mode */
  off = e;
  off.mode ^= 0002;
  assert_int_equal(sandbox_snap_direct_same(&st, &off, why, sizeof why), 0);
  assert_non_null(strstr(why, "mode"));
  /* another size (a folder's: its entries) */
  off = e;
  off.size += 20;
  assert_int_equal(sandbox_snap_direct_same(&st, &off, why, sizeof why), 0);
  assert_non_null(strstr(why, "size"));
  /* no mtime from the engine: never taken for the same */
  off = e;
  off.has_mtime = 0;
  assert_int_equal(sandbox_snap_direct_same(&st, &off, why, sizeof why), 0);
  /* the engine's is a file */
  off = e;
  off.mode = S_IFREG | (e.mode & 07777);
  assert_int_equal(sandbox_snap_direct_same(&st, &off, why, sizeof why), 0);
  /* a symlink to the folder is never opened through */
  char link[PATH_MAX];
  snprintf(link, sizeof link, "%s.link", dir);
  assert_int_equal(symlink(dir, link), 0);
  assert_int_equal(sandbox_snap_direct_open(link, &e, why, sizeof why), -1);
  assert_non_null(strstr(why, "cannot open"));
  unlink(link);
  /* the test-only variable points the check elsewhere: a mismatch */
  char other[] = "/tmp/sm-direct-o-XXXXXX";
  assert_non_null(mkdtemp(other));
  struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 6789}};
  assert_int_equal(utimensat(AT_FDCWD, other, ts, 0), 0);
  setenv(SANDBOX_SNAP_DIRECT_TEST_SOURCE_ENV, other, 1);
  assert_int_equal(sandbox_snap_direct_open(dir, &e, why, sizeof why), -1);
  assert_non_null(strstr(why, other));
  unsetenv(SANDBOX_SNAP_DIRECT_TEST_SOURCE_ENV);
  rmdir(other);
  rmdir(dir);
}

static void put(const char *dir, const char *name, const char *data) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(data, f);
  fclose(f);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* The test's own temporary folder, depth first, never following a link. */
static void rm_tree(const char *dir) {
  assert_int_equal(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

typedef struct seen {
  char name[256], link[256], hard[256];
  mode_t type;
  int64_t size;
} seen;

static int read_tar(const char *path, seen *out, int max) {
  struct archive *a = archive_read_new();
  archive_read_support_format_tar(a);
  assert_int_equal(archive_read_open_filename(a, path, 10240), ARCHIVE_OK);
  struct archive_entry *ae;
  int n = 0, r;
  while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
    assert_true(n < max);
    seen *s = &out[n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", archive_entry_pathname(ae));
    if (archive_entry_symlink(ae))
      snprintf(s->link, sizeof s->link, "%s", archive_entry_symlink(ae));
    if (archive_entry_hardlink(ae))
      snprintf(s->hard, sizeof s->hard, "%s", archive_entry_hardlink(ae));
    s->type = archive_entry_filetype(ae);
    s->size = archive_entry_size(ae);
  }
  assert_int_equal(r, ARCHIVE_EOF);
  archive_read_free(a);
  return n;
}

static void test_tree(void **state) {
  (void)state;
  char dir[] = "/tmp/sm-direct-t-XXXXXX", out[] = "/tmp/sm-direct-out-XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_non_null(mkdtemp(out));
  char p[PATH_MAX], q[PATH_MAX];
  snprintf(p, sizeof p, "%s/d", dir);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s/d/empty", dir);
  assert_int_equal(mkdir(p, 0700), 0);
  put(dir, "d/f", "shared\n");
  put(dir, "b c", "");
  snprintf(p, sizeof p, "%s/d/f", dir);
  snprintf(q, sizeof q, "%s/h", dir);
  assert_int_equal(link(p, q), 0);
  snprintf(q, sizeof q, "%s/etc", dir);
  assert_int_equal(symlink("/etc", q), 0);
  snprintf(q, sizeof q, "%s/rel", dir);
  assert_int_equal(symlink("d/f", q), 0);
  snprintf(q, sizeof q, "%s/p", dir);
  assert_int_equal(mkfifo(q, 0644), 0);
  assert_int_equal(chmod(p, 04755), 0);
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(root >= 0);
  char tar[PATH_MAX];
  snprintf(tar, sizeof tar, "%s/workspace.tar", out);
  int64_t bytes = 0;
  int fallback = 0;
  sm_error err = SM_ERROR_INIT;
  int rc = sandbox_snap_direct_save(root, tar, -1, &bytes, &fallback, &err);
  if (rc) fail_msg("the save failed: %s", err.message);
  assert_int_equal(fallback, 0);
  struct stat st;
  assert_int_equal(stat(tar, &st), 0);
  assert_int_equal(st.st_size, bytes);
  seen s[16];
  int n = read_tar(tar, s, 16);
  /* sorted by name, the folder itself first, as the engine's archive */
  const char *names[] = {"./",    "./b c", "./d/", "./d/empty/", "./d/f",
                         "./etc", "./h",   "./p",  "./rel"};
  assert_int_equal(n, 9);
  for (int i = 0; i < n; i++) assert_string_equal(s[i].name, names[i]);
  assert_int_equal(s[4].type, AE_IFREG);
  assert_int_equal(s[4].size, 7);
  assert_int_equal(s[5].type, AE_IFLNK);
  assert_string_equal(s[5].link, "/etc"); /* a link, not the host's /etc */
  assert_string_equal(s[6].hard, "./d/f");
  assert_int_equal(s[6].size, 0);
  assert_int_equal(s[7].type, AE_IFIFO);
  assert_string_equal(s[8].link, "d/f");
  /* its manifest types the hard link a file, of no bytes */
  int fd = open(tar, O_RDONLY | O_CLOEXEC);
  json_object *m = NULL;
  int64_t files = 0;
  assert_int_equal(sandbox_snap_manifest_of_tar(fd, &m, &files, &err), 0);
  close(fd);
  assert_int_equal(files, 8);
  json_object *list = json_object_object_get(m, "files");
  json_object *h = json_object_array_get_idx(list, 5);
  assert_string_equal(json_object_get_string(json_object_object_get(h, "path")), "h");
  assert_string_equal(json_object_get_string(json_object_object_get(h, "type")), "file");
  json_object_put(m);
  close(root);
  rm_tree(dir);
  rm_tree(out);
}

/* Deeper than it walks: the engine's archive reads it, nothing is left. */
static void test_too_deep(void **state) {
  (void)state;
  char dir[] = "/tmp/sm-direct-deep-XXXXXX", out[] = "/tmp/sm-direct-dout-XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_non_null(mkdtemp(out));
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < SANDBOX_SNAP_DIRECT_DEPTH_MAX + 2; i++) {
    assert_int_equal(mkdirat(fd, "d", 0755), 0);
    int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(next >= 0);
    close(fd);
    fd = next;
  }
  close(fd);
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char tar[PATH_MAX];
  snprintf(tar, sizeof tar, "%s/workspace.tar", out);
  int fallback = 0;
  sm_error err = SM_ERROR_INIT;
  assert_true(sandbox_snap_direct_save(root, tar, -1, NULL, &fallback, &err) < 0);
  assert_int_equal(fallback, 1);
  assert_non_null(strstr(err.message, "deep"));
  assert_int_equal(access(tar, F_OK), -1);
  close(root);
  rm_tree(dir);
  rm_tree(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eligible), cmocka_unit_test(test_not_eligible),
      cmocka_unit_test(test_identity), cmocka_unit_test(test_tree),
      cmocka_unit_test(test_too_deep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
