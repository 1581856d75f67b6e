/* `sandman-agent tar DIR` run on this machine (never with --stop here: on
 * the host that would stop every process of the user): the snapshot's
 * reader of /workspace. Its tar goes back through `sandman-agent untar`
 * and through the library's manifest of an agent's tar (the check of its
 * shape included), file by file. What it cannot read or represent ends it
 * with exit 3, the sign for the host to read /workspace another way. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "common/buf.h"
#include "common/sha256.h"
#include "sandbox/snap_manifest.h"
#include "support/files.h"
#include "support/xalloc.h"

#ifndef SANDMAN_AGENT_PATH
#error "SANDMAN_AGENT_PATH must name the built sandman-agent"
#endif

#define MAGIC "sandman-tar 1\n"
#define NOBODY 65534

typedef struct fx {
  char dir[64];
  char src[128], dst[128];
} fx;

static int setup(void **state) {
  fx *f = xcalloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/sm-agent-tar-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  chmod(f->dir, 0755); /* read as nobody in the unreadable case */
  snprintf(f->src, sizeof f->src, "%s/src", f->dir);
  snprintf(f->dst, sizeof f->dst, "%s/dst", f->dir);
  mkdir(f->src, 0755);
  mkdir(f->dst, 0755);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  tf_rm_rf(f->dir);
  free(f);
  return 0;
}

/* Runs the agent's tar of dir (as uid when >= 0), its stdout in *out
 * (the magic line checked and taken off when it exits 0); its exit code. */
static int agent_tar(const char *dir, long uid, common_buf *out) {
  int o[2];
  assert_int_equal(pipe(o), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(o[1], 1);
    close(o[0]);
    if (uid >= 0 && (setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0)) _exit(126);
    execl(SANDMAN_AGENT_PATH, SANDMAN_AGENT_PATH, "tar", dir, (char *)NULL);
    _exit(127);
  }
  close(o[1]);
  common_buf_init(out, (size_t)64 << 20);
  char buf[65536];
  ssize_t n;
  while ((n = read(o[0], buf, sizeof buf)) > 0) assert_int_equal(common_buf_append(out, buf, (size_t)n), 0);
  close(o[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (code == 0) {
    assert_true(out->len >= strlen(MAGIC));
    assert_memory_equal(out->data, MAGIC, strlen(MAGIC));
    memmove(out->data, out->data + strlen(MAGIC), out->len - strlen(MAGIC));
    out->len -= strlen(MAGIC);
  }
  return code;
}

/* `sandman-agent untar dst` of data: its exit code. */
static int agent_untar(const char *dst, const char *data, size_t len) {
  int in[2];
  assert_int_equal(pipe(in), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[1]);
    execl(SANDMAN_AGENT_PATH, SANDMAN_AGENT_PATH, "untar", dst, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  signal(SIGPIPE, SIG_IGN);
  for (size_t off = 0; off < len;) {
    ssize_t n = write(in[1], data + off, len - off);
    if (n <= 0) break;
    off += (size_t)n;
  }
  close(in[1]);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The library's manifest of an agent's tar held in buf. */
static int manifest_of(const common_buf *buf, json_object **out) {
  char path[] = "/tmp/sm-agent-tar-m-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(write(fd, buf->data, buf->len), (ssize_t)buf->len);
  lseek(fd, 0, SEEK_SET);
  sm_error err = SM_ERROR_INIT;
  int rc = sandbox_snap_manifest_of_agent_tar(fd, out, NULL, &err);
  close(fd);
  return rc;
}

static json_object *entry(json_object *m, const char *path) {
  json_object *files = NULL;
  assert_true(json_object_object_get_ex(m, "files", &files));
  for (size_t i = 0; i < json_object_array_length(files); i++) {
    json_object *e = json_object_array_get_idx(files, i), *p = NULL;
    if (json_object_object_get_ex(e, "path", &p) && strcmp(json_object_get_string(p), path) == 0) return e;
  }
  return NULL;
}

static const char *field(json_object *e, const char *k) {
  json_object *v = NULL;
  return e && json_object_object_get_ex(e, k, &v) ? json_object_get_string(v) : "";
}

static void hex_sha256(const char *data, size_t len, char out[65]) {
  unsigned char d[32];
  common_sha256 c;
  common_sha256_init(&c);
  common_sha256_update(&c, data, len);
  common_sha256_final(&c, d);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void put(const char *root, const char *rel, const char *data, size_t len) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  assert_int_equal(tf_write(p, data, len), 0);
}

/* The same file in src and dst, and in the manifest by its hash. */
static void same_file(const fx *f, json_object *m, const char *rel) {
  char a[1024], b[1024], h[65];
  snprintf(a, sizeof a, "%s/%s", f->src, rel);
  snprintf(b, sizeof b, "%s/%s", f->dst, rel);
  size_t la = 0, lb = 0;
  char *da = tf_read(a, &la), *db = tf_read(b, &lb);
  assert_non_null(da);
  assert_non_null(db);
  assert_int_equal(la, lb);
  assert_memory_equal(da, db, la);
  hex_sha256(da, la, h);
  assert_string_equal(field(entry(m, rel), "sha256"), h);
  free(da);
  free(db);
}

static void test_round_trip(void **state) {
  fx *f = *state;
  char name[1024], big_dir[256], long_name[256];
  /* A path over 100 bytes (a pax path), one over 255 (over ustar's
   * prefix and name together), a file over the 1 MiB buffer. */
  memset(big_dir, 'd', 150);
  big_dir[150] = '\0';
  memset(long_name, 'n', 200);
  long_name[200] = '\0';
  snprintf(name, sizeof name, "%s/%s", f->src, big_dir);
  mkdir(name, 0750);
  char rel_long[512];
  snprintf(rel_long, sizeof rel_long, "%s/%s", big_dir, long_name);
  put(f->src, rel_long, "long", 4);
  put(f->src, "plain", "hello\n", 6);
  size_t big = (3u << 20) + 123;
  char *data = xmalloc(big);
  for (size_t i = 0; i < big; i++) data[i] = (char)(i * 7 + 3);
  put(f->src, "big.bin", data, big);
  free(data);
  put(f->src, "empty", "", 0);
  snprintf(name, sizeof name, "%s/sub", f->src);
  mkdir(name, 0755);
  put(f->src, "sub/x", "x", 1);
  snprintf(name, sizeof name, "%s/sub/x", f->src);
  chmod(name, 0600);
  snprintf(name, sizeof name, "%s/to-etc", f->src);
  assert_int_equal(symlink("/etc/passwd", name), 0);
  char target[200];
  memset(target, 't', 150);
  target[150] = '\0';
  snprintf(name, sizeof name, "%s/sub/long-link", f->src);
  assert_int_equal(symlink(target, name), 0);

  common_buf out;
  assert_int_equal(agent_tar(f->src, -1, &out), 0);
  json_object *m = NULL;
  assert_int_equal(manifest_of(&out, &m), 0);
  assert_int_equal(agent_untar(f->dst, out.data, out.len), 0);
  common_buf_dispose(&out);

  same_file(f, m, "plain");
  same_file(f, m, "big.bin");
  same_file(f, m, "empty");
  same_file(f, m, "sub/x");
  same_file(f, m, rel_long);
  /* Links stay links, never read through. */
  char got[512];
  struct stat st;
  snprintf(name, sizeof name, "%s/to-etc", f->dst);
  assert_int_equal(lstat(name, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  ssize_t n = readlink(name, got, sizeof got - 1);
  assert_true(n > 0);
  got[n] = '\0';
  assert_string_equal(got, "/etc/passwd");
  assert_string_equal(field(entry(m, "to-etc"), "type"), "link");
  assert_string_equal(field(entry(m, "to-etc"), "target"), "/etc/passwd");
  snprintf(name, sizeof name, "%s/sub/long-link", f->dst);
  n = readlink(name, got, sizeof got - 1);
  assert_int_equal(n, 150);
  got[n] = '\0';
  assert_string_equal(got, target);
  /* Modes as they were. */
  assert_string_equal(field(entry(m, "sub/x"), "mode"), "0600");
  assert_string_equal(field(entry(m, big_dir), "mode"), "0750");
  snprintf(name, sizeof name, "%s/sub/x", f->dst);
  assert_int_equal(lstat(name, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  /* Nothing more, nothing less: 5 files, 2 links, 2 folders. */
  json_object *files = NULL;
  json_object_object_get_ex(m, "files", &files);
  assert_int_equal(json_object_array_length(files), 9);
  json_object_put(m);
}

/* What it cannot read or represent: exit 3, never a tar missing it. */
static void cannot(fx *f, long uid) {
  common_buf out;
  assert_int_equal(agent_tar(f->src, uid, &out), 3);
  common_buf_dispose(&out);
}

static void test_cannot(void **state) {
  fx *f = *state;
  char p[512], q[512];
  put(f->src, "ok", "ok", 2);
  snprintf(p, sizeof p, "%s/fifo", f->src);
  assert_int_equal(mkfifo(p, 0644), 0);
  cannot(f, -1);
  unlink(p);

  put(f->src, "a", "a", 1);
  snprintf(p, sizeof p, "%s/a", f->src);
  snprintf(q, sizeof q, "%s/b", f->src);
  assert_int_equal(link(p, q), 0);
  cannot(f, -1); /* a hard link, which this does not represent */
  unlink(q);

  /* A file the user may not read: as nobody (root reads anything). */
  put(f->src, "secret", "s", 1);
  snprintf(p, sizeof p, "%s/secret", f->src);
  chmod(p, 0);
  long uid = geteuid() == 0 ? NOBODY : -1;
  cannot(f, uid);
  /* And a folder it may not read. */
  chmod(p, 0644);
  snprintf(p, sizeof p, "%s/closed", f->src);
  mkdir(p, 0700);
  if (uid >= 0) cannot(f, uid);
  rmdir(p);
  common_buf out;
  assert_int_equal(agent_tar(f->src, uid, &out), 0); /* all readable again */
  common_buf_dispose(&out);
}

static void test_usage(void **state) {
  (void)state;
  common_buf out;
  assert_int_equal(agent_tar("/nonexistent-sm-agent-tar", -1, &out), 3);
  common_buf_dispose(&out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cannot, setup, teardown),
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
