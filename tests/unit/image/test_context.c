/* The build context stream and image references, without an engine: a
 * directory tree is packed through sm_image_context_read in small reads and
 * read back with libarchive. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <archive.h>
#include <archive_entry.h>

#include <sandman/image.h>

#include "support/files.h"
#include "support/xalloc.h"

#define BIG_SIZE (300 * 1024 + 7)

static char tmpdir[256];

static void path_of(char *out, size_t len, const char *rel) {
  snprintf(out, len, "%s/%s", tmpdir, rel);
}

static void write_file(const char *rel, const char *data, size_t len) {
  char path[512];
  path_of(path, sizeof path, rel);
  assert_int_equal(tf_write(path, data, len), 0);
}

static char pattern(size_t i) { return (char)('a' + i % 26); }

static const char *const dirs[] = {"ctx", "ctx/sub", "root", "root/bin"};

static int setup(void **state) {
  (void)state;
  const char *t = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/sm-image-test-XXXXXX", t ? t : "/tmp");
  if (mkdtemp(tmpdir) == NULL) return -1;
  char path[512], other[512];
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    path_of(path, sizeof path, dirs[i]);
    if (mkdir(path, 0755) != 0) return -1;
  }
  write_file("ctx/Dockerfile", "FROM scratch\nCOPY rootfs/ /\n", 28);
  write_file("ctx/sub/small.txt", "hello\n", 6);
  /* Bigger than one read chunk, with a recognisable pattern. */
  char *data = xmalloc(BIG_SIZE);
  if (data == NULL) return -1;
  for (size_t i = 0; i < BIG_SIZE; i++) data[i] = pattern(i);
  write_file("root/bin/big", data, BIG_SIZE);
  free(data);
  path_of(path, sizeof path, "root/bin/big");
  path_of(other, sizeof other, "root/bin/big2");
  if (link(path, other) != 0) return -1;
  path_of(other, sizeof other, "root/bin/sh");
  if (symlink("big", other) != 0) return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  static const char *const files[] = {"root/bin/sh", "root/bin/big2", "root/bin/big",
                                      "ctx/sub/small.txt", "ctx/Dockerfile"};
  char path[512];
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    path_of(path, sizeof path, files[i]);
    unlink(path);
  }
  for (size_t i = sizeof dirs / sizeof dirs[0]; i > 0; i--) {
    path_of(path, sizeof path, dirs[i - 1]);
    rmdir(path);
  }
  rmdir(tmpdir);
  return 0;
}

/* Packs through odd-sized reads into memory. */
static char *pack(sm_image_context *ctx, size_t *out_len) {
  size_t cap = 4u << 20, len = 0;
  char *buf = xmalloc(cap);
  assert_non_null(buf);
  for (;;) {
    assert_true(len + 1000 <= cap);
    ssize_t n = sm_image_context_read(ctx, buf + len, 997);
    assert_true(n >= 0);
    if (n == 0) break;
    len += (size_t)n;
  }
  *out_len = len;
  return buf;
}

static void test_pack_two_dirs(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  sm_image_context *ctx = NULL;
  char ctxdir[512], rootdir[512];
  path_of(ctxdir, sizeof ctxdir, "ctx");
  path_of(rootdir, sizeof rootdir, "root/");
  assert_int_equal(sm_image_context_new(&ctx, &err), 0);
  assert_int_equal(sm_image_context_add_dir(ctx, ctxdir, "", &err), 0);
  assert_int_equal(sm_image_context_add_dir(ctx, rootdir, "rootfs", &err), 0);
  size_t len = 0;
  char *tar = pack(ctx, &len);
  assert_int_equal(len % 512, 0);
  uint64_t entries = 0, bytes = 0;
  sm_image_context_stats(ctx, &entries, &bytes);
  assert_int_equal(entries, 8);
  assert_int_equal(bytes, 6 + 28 + BIG_SIZE);
  /* A read after the end stays at the end. */
  char one;
  assert_int_equal(sm_image_context_read(ctx, &one, 1), 0);
  sm_image_context_free(ctx);

  struct archive *a = archive_read_new();
  archive_read_support_format_tar(a);
  assert_int_equal(archive_read_open_memory(a, tar, len), ARCHIVE_OK);
  struct archive_entry *e;
  int seen_docker = 0, seen_small = 0, seen_big = 0, seen_link = 0, seen_sym = 0, seen_root = 0;
  int n = 0;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    const char *name = archive_entry_pathname(e);
    n++;
    assert_true(name[0] != '/');
    assert_null(strstr(name, tmpdir));
    if (strcmp(name, "Dockerfile") == 0) seen_docker = 1;
    else if (strcmp(name, "sub/small.txt") == 0) {
      char buf[16] = {0};
      assert_int_equal(archive_read_data(a, buf, sizeof buf), 6);
      assert_string_equal(buf, "hello\n");
      seen_small = 1;
    } else if (strcmp(name, "rootfs/") == 0 || strcmp(name, "rootfs") == 0) {
      assert_int_equal(archive_entry_filetype(e), AE_IFDIR);
      seen_root = 1;
    } else if (strcmp(name, "rootfs/bin/sh") == 0) {
      assert_int_equal(archive_entry_filetype(e), AE_IFLNK);
      assert_string_equal(archive_entry_symlink(e), "big");
      seen_sym = 1;
    } else if (strcmp(name, "rootfs/bin/big") == 0 || strcmp(name, "rootfs/bin/big2") == 0) {
      if (archive_entry_hardlink(e)) {
        /* The second name points at the first, inside the context. */
        assert_true(strncmp(archive_entry_hardlink(e), "rootfs/bin/big", 14) == 0);
        seen_link = 1;
      } else {
        assert_int_equal(archive_entry_size(e), BIG_SIZE);
        char *data = xmalloc(BIG_SIZE + 1);
        size_t got = 0;
        la_ssize_t r;
        while ((r = archive_read_data(a, data + got, BIG_SIZE + 1 - got)) > 0) got += (size_t)r;
        assert_int_equal(got, BIG_SIZE);
        for (size_t i = 0; i < BIG_SIZE; i++) {
          if (data[i] != pattern(i)) fail_msg("byte %zu differs", i);
        }
        free(data);
        seen_big = 1;
      }
    }
  }
  assert_int_equal(n, 8);
  assert_true(seen_docker && seen_small && seen_big && seen_link && seen_sym && seen_root);
  archive_read_free(a);
  free(tar);
}

static void test_bad_dirs(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  sm_image_context *ctx = NULL;
  char path[512];
  assert_int_equal(sm_image_context_new(&ctx, &err), 0);
  path_of(path, sizeof path, "no-such-dir");
  assert_int_equal(sm_image_context_add_dir(ctx, path, "", &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "no-such-dir"));
  path_of(path, sizeof path, "ctx/Dockerfile");
  assert_int_equal(sm_image_context_add_dir(ctx, path, "", &err), SM_EINVAL);
  path_of(path, sizeof path, "ctx");
  assert_int_equal(sm_image_context_add_dir(ctx, path, "../up", &err), SM_EINVAL);
  assert_int_equal(sm_image_context_add_dir(ctx, path, "/abs", &err), SM_EINVAL);
  /* Only an empty archive's trailer comes out of an empty context. */
  sm_image_context_free(ctx);
  assert_int_equal(sm_image_context_new(&ctx, &err), 0);
  size_t len = 0;
  char *tar = pack(ctx, &len);
  assert_true(len > 0 && len % 512 == 0);
  for (size_t i = 0; i < len; i++) assert_int_equal(tar[i], 0);
  free(tar);
  sm_image_context_free(ctx);
}

static void test_ref_parse(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  sm_image_ref r;
  const char *hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char ref[400];

  assert_int_equal(sm_image_ref_parse("sandman/general", &r, &err), 0);
  assert_string_equal(r.name, "sandman/general");
  assert_string_equal(r.tag, "");
  assert_string_equal(r.digest, "");

  assert_int_equal(sm_image_ref_parse("sandman/general:1.2-rc", &r, &err), 0);
  assert_string_equal(r.name, "sandman/general");
  assert_string_equal(r.tag, "1.2-rc");

  snprintf(ref, sizeof ref, "localhost:5000/x/y:t@sha256:%s", hex);
  assert_int_equal(sm_image_ref_parse(ref, &r, &err), 0);
  assert_string_equal(r.name, "localhost:5000/x/y");
  assert_string_equal(r.tag, "t");
  assert_string_equal(r.digest + 7, hex);

  snprintf(ref, sizeof ref, "localhost:5000/x@sha256:%s", hex);
  assert_int_equal(sm_image_ref_parse(ref, &r, &err), 0);
  assert_string_equal(r.name, "localhost:5000/x");
  assert_string_equal(r.tag, "");

  assert_int_equal(sm_image_ref_parse("", &r, &err), SM_EINVAL);
  assert_int_equal(sm_image_ref_parse(":tag", &r, &err), SM_EINVAL);
  assert_int_equal(sm_image_ref_parse("a b", &r, &err), SM_EINVAL);
  assert_int_equal(sm_image_ref_parse("name:", &r, &err), SM_EINVAL);
  assert_int_equal(sm_image_ref_parse("a//b", &r, &err), SM_EINVAL);
  assert_int_equal(sm_image_ref_parse("name@sha256:abc", &r, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "64"));
  snprintf(ref, sizeof ref, "name@md5:%s", hex);
  assert_int_equal(sm_image_ref_parse(ref, &r, &err), SM_EINVAL);
  snprintf(ref, sizeof ref, "name@sha256:%.63sA", hex);
  assert_int_equal(sm_image_ref_parse(ref, &r, &err), SM_EINVAL);

  char digest[100];
  snprintf(digest, sizeof digest, "sha256:%s", hex);
  assert_true(sm_image_digest_valid(digest));
  assert_false(sm_image_digest_valid("sha256:"));
  assert_false(sm_image_digest_valid(NULL));
  digest[10] = 'G';
  assert_false(sm_image_digest_valid(digest));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pack_two_dirs),
      cmocka_unit_test(test_bad_dirs),
      cmocka_unit_test(test_ref_parse),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
