/* `sandman-agent untar DIR` run on this machine: the copy in's unpacker.
 * Streams come from the workspace's own packer (what sandman sends) or
 * from tarbuild.h; the destination holds what a tool could have planted. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "unit/workspace/tarbuild.h"
#include "workspace/ws.h"

#include "support/xalloc.h"

#ifndef SANDMAN_AGENT_PATH
#error "SANDMAN_AGENT_PATH must name the built sandman-agent"
#endif

typedef struct fx {
  char dir[64];
  char src[128], dst[128], out[128];
} fx;

static int setup(void **state) {
  fx *f = xcalloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/sm-untar-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->src, sizeof f->src, "%s/src", f->dir);
  snprintf(f->dst, sizeof f->dst, "%s/dst", f->dir);
  snprintf(f->out, sizeof f->out, "%s/outside", f->dir);
  mkdir(f->src, 0755);
  mkdir(f->dst, 0755);
  mkdir(f->out, 0755);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  tf_rm_rf(f->dir);
  free(f);
  return 0;
}

/* Runs the unpacker on data; its exit code, stderr in *err_out (may be NULL). */
static int untar(const char *dst, const char *data, size_t len, char **err_out) {
  int in[2], er[2];
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(er), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(er[1], 2);
    close(in[1]);
    close(er[0]);
    execl(SANDMAN_AGENT_PATH, SANDMAN_AGENT_PATH, "untar", dst, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(er[1]);
  signal(SIGPIPE, SIG_IGN);
  for (size_t off = 0; off < len;) {
    ssize_t n = write(in[1], data + off, len - off);
    if (n <= 0) break;
    off += (size_t)n;
  }
  close(in[1]);
  common_buf e;
  common_buf_init(&e, 1 << 20);
  common_buf_append(&e, "", 0);
  char buf[4096];
  ssize_t n;
  while ((n = read(er[0], buf, sizeof buf)) > 0) common_buf_append(&e, buf, (size_t)n);
  close(er[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (err_out) *err_out = common_buf_steal(&e, NULL);
  else common_buf_dispose(&e);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* What sandman sends for everything under src: the real packer's stream. */
static char *pack_all(const char *src, size_t *len) {
  int fd = open(src, O_RDONLY | O_DIRECTORY);
  assert_true(fd >= 0);
  ws_manifest m;
  workspace_manifest_init(&m);
  ws_scan_opts so = {NULL, (int64_t)1 << 30, 100000, 4096, 0};
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(workspace_scan(fd, src, &so, &m, &err), 0);
  ws_entry **items = xcalloc(m.n + 1, sizeof *items);
  for (size_t i = 0; i < m.n; i++) items[i] = &m.v[i];
  ws_packer *pk = NULL;
  assert_int_equal(workspace_packer_new(&pk, fd, items, m.n, "", 1000, 1000, &err), 0);
  common_buf out;
  common_buf_init(&out, (size_t)64 << 20);
  char buf[65536];
  ssize_t n;
  while ((n = workspace_packer_read(pk, buf, sizeof buf)) > 0)
    common_buf_append(&out, buf, (size_t)n);
  assert_int_equal(n, 0);
  workspace_packer_free(pk);
  free(items);
  workspace_manifest_dispose(&m);
  close(fd);
  return common_buf_steal(&out, len);
}

static void put(const char *root, const char *rel, const char *data, mode_t mode) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  tf_write_str(p, data);
  chmod(p, mode);
}

static void mkd(const char *root, const char *rel, mode_t mode) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  mkdir(p, mode);
  chmod(p, mode);
}

static struct stat lst(const char *root, const char *rel) {
  char p[512];
  struct stat st;
  memset(&st, 0, sizeof st);
  snprintf(p, sizeof p, "%s/%s", root, rel);
  if (lstat(p, &st) != 0) st.st_mode = 0;
  return st;
}

/* Everything comes out as sent: content, modes, mtimes, links, long and
 * non-ASCII names (pax headers), empty directories; the root is left as it is. */
/* The unpacker refuses t's tar (exit 1, its message on stderr); t's
 * buffer is freed. */
static void expect_refused(const char *dst, tb *t, const char *what) {
  char *err = NULL;
  int rc = untar(dst, t->out.data, t->out.len, &err);
  if (rc != 1) fail_msg("%s: exit %d (%s)", what, rc, err);
  assert_non_null(strstr(err, "untar"));
  free(err);
  common_buf_dispose(&t->out);
}

static void test_round_trip(void **state) {
  fx *f = *state;
  char longname[300];
  memset(longname, 'n', 150);
  longname[150] = '\0';
  char longdir[400];
  snprintf(longdir, sizeof longdir, "deep/%s", longname);
  mkd(f->src, "deep", 0750);
  mkd(f->src, longdir, 0755);
  char longfile[600];
  snprintf(longfile, sizeof longfile, "%s/%s.txt", longdir, longname);
  put(f->src, longfile, "long\n", 0600);
  put(f->src, "plain.txt", "hello\n", 0640);
  put(f->src, "empty", "", 0644);
  put(f->src, "run.sh", "#!/bin/sh\n", 0755);
  put(f->src, "ünïcødé name.txt", "u\n", 0644);
  mkd(f->src, "emptydir", 0700);
  /* Sizes around a block and past the unpacker's 1 MiB input buffer. */
  static const size_t sizes[] = {511, 512, 513, 10245, ((size_t)1 << 20) + 3, (size_t)3 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char *big = xmalloc(sizes[i] + 1);
    assert_non_null(big);
    for (size_t k = 0; k < sizes[i]; k++) big[k] = (char)('a' + (k * 7 + i) % 26);
    big[sizes[i]] = '\0';
    char name[64];
    snprintf(name, sizeof name, "size-%zu.bin", sizes[i]);
    put(f->src, name, big, 0644);
    free(big);
  }
  char p[512];
  snprintf(p, sizeof p, "%s/deep/link", f->src);
  assert_int_equal(symlink("../plain.txt", p), 0);
  snprintf(p, sizeof p, "%s/up", f->src);
  assert_int_equal(symlink("../../elsewhere", p), 0);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "find '%s' -mindepth 1 -exec touch -h -d '2024-01-02 03:04:05.5' {} +",
           f->src);
  assert_int_equal(system(cmd), 0);
  chmod(f->dst, 0711);
  size_t len = 0;
  char *data = pack_all(f->src, &len);
  char *err = NULL;
  assert_int_equal(untar(f->dst, data, len, &err), 0);
  assert_string_equal(err, "");
  free(err);
  free(data);
  char *a = snapshot(f->src), *b = snapshot(f->dst);
  assert_string_equal(a, b);
  free(a);
  free(b);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char ps[512], pd[512];
    snprintf(ps, sizeof ps, "%s/size-%zu.bin", f->src, sizes[i]);
    snprintf(pd, sizeof pd, "%s/size-%zu.bin", f->dst, sizes[i]);
    char *want = tf_read(ps, NULL), *got = tf_read(pd, NULL);
    assert_non_null(want);
    assert_non_null(got);
    assert_string_equal(want, got);
    free(want);
    free(got);
  }
  struct stat st = lst(f->dst, "plain.txt");
  assert_int_equal(st.st_mode & 07777, 0640);
  st = lst(f->dst, "deep");
  assert_int_equal(st.st_mode & 07777, 0750);
  assert_int_equal(st.st_mtim.tv_sec, lst(f->src, "deep").st_mtim.tv_sec);
  st = lst(f->dst, "run.sh");
  assert_int_equal(st.st_mtim.tv_sec, lst(f->src, "run.sh").st_mtim.tv_sec);
  st = lst(f->dst, "");
  assert_int_equal(st.st_mode & 07777, 0711);
}

/* What a tool planted is replaced, never followed: a link where a
 * directory belongs (pointing out of the destination), a file where a
 * directory belongs, a directory where a file goes, a link where a file
 * goes, a read-only file, and a read-only directory that gets new files. */
static void test_planted_things_are_replaced(void **state) {
  fx *f = *state;
  mkd(f->src, "d", 0755);
  put(f->src, "d/passwd", "host\n", 0644);
  mkd(f->src, "e", 0755);
  put(f->src, "e/x", "x\n", 0644);
  put(f->src, "f", "file\n", 0644);
  put(f->src, "g", "g\n", 0644);
  put(f->src, "ro.txt", "new\n", 0644);
  mkd(f->src, "rodir", 0555);
  put(f->src, "rodir/new", "n\n", 0644);
  char p[512];
  snprintf(p, sizeof p, "%s/d", f->dst);
  assert_int_equal(symlink(f->out, p), 0);
  put(f->dst, "e", "i am a file\n", 0644);
  mkd(f->dst, "f", 0755);
  put(f->dst, "f/inside", "i\n", 0444);
  mkd(f->dst, "f/sub", 0500);
  snprintf(p, sizeof p, "%s/g", f->dst);
  char target[200];
  snprintf(target, sizeof target, "%s/g-target", f->out);
  assert_int_equal(symlink(target, p), 0);
  put(f->dst, "ro.txt", "old\n", 0444);
  mkd(f->dst, "rodir", 0555);
  size_t len = 0;
  char *data = pack_all(f->src, &len);
  char *err = NULL;
  int rc = untar(f->dst, data, len, &err);
  assert_string_equal(err, "");
  assert_int_equal(rc, 0);
  free(err);
  free(data);
  /* Nothing reached outside. */
  char *o = snapshot(f->out);
  assert_string_equal(o, "");
  free(o);
  assert_true(S_ISDIR(lst(f->dst, "d").st_mode));
  char *c = NULL;
  snprintf(p, sizeof p, "%s/d/passwd", f->dst);
  c = tf_read(p, NULL);
  assert_string_equal(c, "host\n");
  free(c);
  assert_true(S_ISDIR(lst(f->dst, "e").st_mode));
  assert_true(S_ISREG(lst(f->dst, "f").st_mode));
  assert_true(S_ISREG(lst(f->dst, "g").st_mode));
  snprintf(p, sizeof p, "%s/ro.txt", f->dst);
  c = tf_read(p, NULL);
  assert_string_equal(c, "new\n");
  free(c);
  assert_int_equal(lst(f->dst, "rodir").st_mode & 07777, 0555);
  assert_true(S_ISREG(lst(f->dst, "rodir/new").st_mode));
  chmod(p, 0644);
  snprintf(p, sizeof p, "%s/rodir", f->dst);
  chmod(p, 0755);
}

/* A stream sandman never writes is refused with a reason, and nothing
 * escapes the destination: absolute names, "..", a header that is not a
 * tar header, a hard link, a device. */
/* `untar DIR --list`: a line for every entry written, in the workspace
 * listing's format, with what the destination really has (the ctime to
 * the nanosecond is what the next copy out compares). */
static void test_listing(void **state) {
  fx *f = *state;
  mkd(f->src, "d", 0750);
  mkd(f->src, "d/e", 0755);
  put(f->src, "d/e/a.txt", "alpha\n", 0640);
  put(f->src, "top.bin", "0123456789", 0755);
  char p[512];
  snprintf(p, sizeof p, "%s/d/ln", f->src);
  assert_int_equal(symlink("e/a.txt", p), 0);
  size_t len = 0;
  char *data = pack_all(f->src, &len);
  char listing[256];
  snprintf(listing, sizeof listing, "%s/listing", f->dir);
  int in[2];
  assert_int_equal(pipe(in), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int out = open(listing, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(in[0], 0);
    dup2(out, 1);
    close(in[1]);
    execl(SANDMAN_AGENT_PATH, SANDMAN_AGENT_PATH, "untar", f->dst, "--list", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  for (size_t off = 0; off < len;) {
    ssize_t n = write(in[1], data + off, len - off);
    assert_true(n > 0);
    off += (size_t)n;
  }
  close(in[1]);
  free(data);
  int st = 0;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char *text = tf_read(listing, NULL);
  assert_non_null(text);
  ws_manifest m;
  workspace_manifest_init(&m);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(workspace_probe_parse(text, strlen(text), 1000, 4096, &m, &err), 0);
  free(text);
  static const char *const paths[] = {"d", "d/e", "d/e/a.txt", "top.bin", "d/ln"};
  assert_int_equal(m.n, sizeof paths / sizeof paths[0]);
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    const ws_entry *e = workspace_manifest_get(&m, paths[i]);
    assert_non_null(e);
    struct stat want = lst(f->dst, paths[i]);
    assert_int_equal(e->size, S_ISDIR(want.st_mode) ? e->size : want.st_size);
    assert_int_equal(e->box_mtime, want.st_mtim.tv_sec);
    assert_int_equal(e->ctime, (int64_t)want.st_ctim.tv_sec * 1000000000 + want.st_ctim.tv_nsec);
    assert_int_equal(e->mode, want.st_mode & 0777);
    assert_int_equal(e->type, S_ISDIR(want.st_mode) ? 'd' : S_ISLNK(want.st_mode) ? 'l' : 'f');
  }
  workspace_manifest_dispose(&m);
}

static void test_bad_streams(void **state) {
  fx *f = *state;
  struct {
    const char *what;
    const char *name;
    unsigned type;
    const char *hard;
  } cases[] = {
      {"absolute", "/tmp/sm-untar-abs", AE_IFREG, NULL},
      {"dotdot", "a/../../outside/x", AE_IFREG, NULL},
      {"fifo", "p", AE_IFIFO, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tb t;
    tb_open(&t);
    tb_file(&t, "plain", "p\n");
    tb_add(&t, cases[i].name, cases[i].type, 0644, NULL, cases[i].hard, "x", -1);
    tb_close(&t);
    expect_refused(f->dst, &t, cases[i].what);
  }
  struct stat st;
  assert_int_not_equal(lstat("/tmp/sm-untar-abs", &st), 0);
  char *o = snapshot(f->out);
  assert_string_equal(o, "");
  free(o);
  /* Not a tar at all. */
  char junk[1024];
  memset(junk, 'j', sizeof junk);
  char *err = NULL;
  assert_int_equal(untar(f->dst, junk, sizeof junk, &err), 1);
  assert_non_null(strstr(err, "header"));
  free(err);
  /* An empty stream is an empty copy. */
  assert_int_equal(untar(f->dst, "", 0, NULL), 0);
}

/* Hard links, as the engine's archive of a /workspace holds them (a fork
 * or a resume puts it back with this): made to the file extracted before,
 * "./" names included. */
static void test_hard_links(void **state) {
  fx *f = *state;
  tb t;
  tb_open(&t);
  tb_dir(&t, "./a");
  tb_file(&t, "./a/f", "same\n");
  tb_dir(&t, "./b");
  tb_add(&t, "./b/h", AE_IFREG, 0644, NULL, "./a/f", NULL, 0);
  tb_add(&t, "top", AE_IFREG, 0644, NULL, "a/f", NULL, 0);
  tb_close(&t);
  char *err = NULL;
  int rc = untar(f->dst, t.out.data, t.out.len, &err);
  if (rc != 0) fail_msg("exit %d (%s)", rc, err);
  free(err);
  common_buf_dispose(&t.out);
  struct stat a = lst(f->dst, "a/f"), h = lst(f->dst, "b/h"), top = lst(f->dst, "top");
  assert_true(S_ISREG(a.st_mode));
  assert_int_equal(a.st_ino, h.st_ino);
  assert_int_equal(a.st_ino, top.st_ino);
  assert_int_equal(lst(f->dst, "a/f").st_nlink, 3);
}

/* A hard link may point only at a regular file this run extracted under
 * DIR: never outside it (by "..", an absolute name, or a directory a link
 * replaced), never at a file it found there, never at a link. Each stream
 * is refused (exit 1) and the file outside keeps one name. */
static void test_hard_link_attacks(void **state) {
  fx *f = *state;
  char secret[256];
  snprintf(secret, sizeof secret, "%s/secret", f->out);
  tf_write_str(secret, "keep\n");
  put(f->dst, "found", "was here\n", 0644);
  char up[300];
  snprintf(up, sizeof up, "../outside/secret");
  struct {
    const char *what, *target;
    int via_link; /* d/secret extracted, then d replaced by a link to outside */
  } cases[] = {
      {"dotdot", up, 0},
      {"absolute", secret, 0},
      {"a file not extracted by this run", "found", 0},
      {"a symbolic link", "sl", 0},
      {"through a directory a link replaced", "d/secret", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tb t;
    tb_open(&t);
    tb_symlink(&t, "sl", secret);
    if (cases[i].via_link) {
      tb_dir(&t, "d");
      tb_file(&t, "d/secret", "inside\n");
      tb_symlink(&t, "d", f->out);
    }
    tb_add(&t, "h", AE_IFREG, 0644, NULL, cases[i].target, NULL, 0);
    tb_close(&t);
    expect_refused(f->dst, &t, cases[i].what);
    struct stat st;
    assert_int_equal(lstat(secret, &st), 0);
    if (st.st_nlink != 1) fail_msg("%s: the file outside got another name", cases[i].what);
    assert_int_equal(lst(f->dst, "found").st_nlink, 1);
    assert_true(lst(f->dst, "h").st_mode == 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_planted_things_are_replaced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_listing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_streams, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hard_links, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hard_link_attacks, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
