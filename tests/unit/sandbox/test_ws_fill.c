/* The choice of who puts a saved /workspace back (src/lib/sandbox/ws_fill.c):
 * the agent's unpacker only for a tar it makes exactly as the engine's
 * upload would (entries it takes, owned by the sandbox's user); anything
 * else, hostile or just unusual, goes to the engine whole, decided before
 * a byte is written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/ws_fill.h"
#include "unit/workspace/tarbuild.h"

#include "support/xalloc.h"

/* The verdict on the tar t built, scanned for uid:gid; why into why. */
static int verdict_of(tb *t, long uid, long gid, long max, char *why, size_t why_len) {
  char path[] = "/tmp/sm-wsfill-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(write(fd, t->out.data, t->out.len), (ssize_t)t->out.len);
  int verdict = -1;
  sm_error err = SM_ERROR_INIT;
  int rc = sandbox_ws_fill_scan(fd, uid, gid, max, &verdict, why, why_len, &err);
  if (rc) fail_msg("the scan failed: %s", err.message);
  /* pread only: the offset is where the write left it */
  assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)t->out.len);
  close(fd);
  common_buf_dispose(&t->out);
  return verdict;
}

/* What the engine's archive of a /workspace holds: "./" names, files,
 * directories, links, hard links to a file before them, long names. */
static void test_agent_takes_the_engines_tar(void **state) {
  (void)state;
  tb t;
  tb_open(&t);
  tb_dir(&t, ".");
  tb_dir(&t, "./a");
  tb_file(&t, "./a/f", "data\n");
  tb_symlink(&t, "./a/l", "/etc/passwd");
  tb_add(&t, "./h", AE_IFREG, 0644, NULL, "./a/f", NULL, 0);
  char longname[400];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  char lp[420];
  snprintf(lp, sizeof lp, "./a/%.200s", longname);
  tb_file(&t, lp, "long\n");
  tb_close(&t);
  char why[160] = "";
  assert_int_equal(verdict_of(&t, 1000, 1000, 0, why, sizeof why), WS_FILL_AGENT);
  assert_string_equal(why, "");
}

/* Each of these sends the tar to the engine, with the reason said. */
static void test_engine_takes_the_rest(void **state) {
  (void)state;
  struct {
    const char *what, *name;
    unsigned type, perm;
    const char *hard;
    long uid; /* the sandbox's user the scan is asked about */
    const char *reason;
  } cases[] = {
      {"a fifo", "./p", AE_IFIFO, 0644, NULL, 1000, "type '6'"},
      {"a device", "./c", AE_IFCHR, 0644, NULL, 1000, "type '3'"},
      {"a setuid file", "./s", AE_IFREG, 04755, NULL, 1000, "setuid"},
      {"another owner", "./o", AE_IFREG, 0644, NULL, 1001, "owned by"},
      {"a hard link to a later file", "./h", AE_IFREG, 0644, "./later", 1000, "hard link"},
      {"a hard link to a directory", "./h", AE_IFREG, 0644, "./d", 1000, "hard link"},
      {"a hard link out", "./h", AE_IFREG, 0644, "../outside/x", 1000, "hard link"},
      {"a hard link to an absolute path", "./h", AE_IFREG, 0644, "/etc/passwd", 1000, "hard link"},
      {"a path climbing out", "a/../../x", AE_IFREG, 0644, NULL, 1000, "refuses"},
      {"an absolute path", "/etc/x", AE_IFREG, 0644, NULL, 1000, "refuses"},
      {"a path twice", "./d", AE_IFDIR, 0755, NULL, 1000, "twice"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tb t;
    tb_open(&t);
    tb_dir(&t, "./d");
    tb_file(&t, "./d/f", "x\n");
    tb_add(&t, cases[i].name, cases[i].type, cases[i].perm, NULL, cases[i].hard, "x", -1);
    tb_file(&t, "./later", "y\n");
    tb_close(&t);
    char why[160] = "";
    /* every entry is 1000's (tarbuild): "another owner" scans for 1001 */
    int v = verdict_of(&t, cases[i].uid, 1000, 0, why, sizeof why);
    if (v != WS_FILL_ENGINE) fail_msg("%s: the agent was chosen", cases[i].what);
    if (strstr(why, cases[i].reason) == NULL) fail_msg("%s: the reason is '%s'", cases[i].what, why);
  }
}

/* A pax record the unpacker would drop (an extended attribute), a tar cut
 * short, junk, and more entries than allowed: the engine. */
static void test_engine_takes_what_the_unpacker_drops(void **state) {
  (void)state;
  char why[160] = "";
  tb t;
  tb_open(&t);
  struct archive_entry *e = archive_entry_new();
  archive_entry_copy_pathname(e, "./x");
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_uid(e, 1000);
  archive_entry_set_gid(e, 1000);
  archive_entry_set_size(e, 0);
  archive_entry_xattr_add_entry(e, "user.mark", "v", 1);
  archive_write_header(t.a, e);
  archive_entry_free(e);
  tb_close(&t);
  assert_int_equal(verdict_of(&t, 1000, 1000, 0, why, sizeof why), WS_FILL_ENGINE);
  assert_non_null(strstr(why, "pax record"));

  tb_open(&t);
  tb_file(&t, "./a", "0123456789");
  tb_close(&t);
  t.out.len = 512 + 3; /* the header and part of the data */
  assert_int_equal(verdict_of(&t, 1000, 1000, 0, why, sizeof why), WS_FILL_ENGINE);
  assert_non_null(strstr(why, "cut short"));

  common_buf_init(&t.out, 4096);
  char junk[1024];
  memset(junk, 'j', sizeof junk);
  assert_int_equal(common_buf_append(&t.out, junk, sizeof junk), 0);
  assert_int_equal(verdict_of(&t, 1000, 1000, 0, why, sizeof why), WS_FILL_ENGINE);
  assert_non_null(strstr(why, "header"));

  tb_open(&t);
  for (int i = 0; i < 5; i++) {
    char name[16];
    snprintf(name, sizeof name, "./f%d", i);
    tb_file(&t, name, "x");
  }
  tb_close(&t);
  assert_int_equal(verdict_of(&t, 1000, 1000, 4, why, sizeof why), WS_FILL_ENGINE);
  assert_non_null(strstr(why, "too many"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_agent_takes_the_engines_tar),
      cmocka_unit_test(test_engine_takes_the_rest),
      cmocka_unit_test(test_engine_takes_what_the_unpacker_drops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
