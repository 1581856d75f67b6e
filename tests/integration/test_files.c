/* The files API (sandman/files.h) against the real engine: binary round
 * trips by hash, every path that tries to leave the workspace (.., absolute
 * paths, links the sandbox planted on the way or at the end), listing,
 * glob, grep, stat, mkdir, delete, tar upload and download, the workspace
 * sync of a files call, and the agent session used from the sandbox's
 * second call. One per_run sandbox serves every check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include <sandman/files.h>
#include <sandman/sandman.h>

#include "support/itest.h"

static sm_engine *engine;
static sm_runner *runner;
static char inst[160];

static void print_log(sm_log_level level, const char *request_id, const char *line, void *ud) {
  fprintf(stderr, "log: %s\n", line);
}

static int setup(void **state) {
  (void)state;
  snprintf(inst, sizeof inst, "%s-%ld", itest_instance("test_files"), (long)getpid());
  setenv("SANDMAN_INSTANCE", inst, 1);
  engine = itest_engine();
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&runner, &o, &err) != 0) fail_msg("runner: %s", err.message);
  /* A long-running process: keyed sandboxes get agent sessions. */
  sm_runner_set_background_removal(runner, 1);
  if (getenv("SANDMAN_TEST_DEBUG")) {
    sm_log_set_level(SM_LOG_DEBUG);
    sm_log_set_handler(print_log, NULL);
  }
  itest_remove_instance(engine, inst);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sm_runner_free(runner);
  if (engine) itest_remove_instance(engine, inst);
  sm_engine_free(engine);
  return 0;
}

static void base_req(sm_run_request *req, const char *run_id) {
  sm_run_request_init(req);
  req->settings.mode = SM_MODE_PER_RUN;
  snprintf(req->settings.image, sizeof req->settings.image, "%s", ITEST_IMAGE);
  req->run_id = run_id;
  req->settings.timeout_s = 300;
}

/* A shell command in the same sandbox; its stdout (owned) or NULL. */
static char *sh(const char *run_id, const char *script, int *exit_code) {
  sm_run_request req;
  base_req(&req, run_id);
  const char *argv[] = {"/bin/sh", "-c", script};
  req.argv = argv;
  req.argc = 3;
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(runner, &req, &r, &err), 0);
  if (r.failure_kind != SM_FAIL_NONE && r.failure_kind != SM_FAIL_TOOL)
    fail_msg("%s: %s", script, r.error);
  if (exit_code) *exit_code = r.exit_code;
  char *out = strdup(r.stdout_data ? r.stdout_data : "");
  sm_run_result_dispose(&r);
  return out;
}

/* ---- streamed content with a hash on both ends ---- */

typedef struct gen {
  uint64_t state;
  int64_t left;
  EVP_MD_CTX *md;
} gen;

static ssize_t gen_read(void *ud, char *buf, size_t len) {
  gen *g = ud;
  if (g->left == 0) return 0;
  size_t n = (int64_t)len < g->left ? len : (size_t)g->left;
  for (size_t i = 0; i < n; i++) {
    g->state = g->state * 6364136223846793005ULL + 1442695040888963407ULL;
    buf[i] = (char)(g->state >> 56);
  }
  EVP_DigestUpdate(g->md, buf, n);
  g->left -= (int64_t)n;
  return (ssize_t)n;
}

typedef struct sink {
  EVP_MD_CTX *md;
  int64_t got, size, count;
} sink;

static int sink_size(void *ud, int64_t size, int64_t count) {
  sink *s = ud;
  s->size = size;
  s->count = count;
  return 0;
}

static int sink_write(void *ud, const char *data, size_t len) {
  sink *s = ud;
  EVP_DigestUpdate(s->md, data, len);
  s->got += (int64_t)len;
  return 0;
}

static void round_trip(const char *run_id, const char *path, int64_t size) {
  sm_run_request base;
  base_req(&base, run_id);
  gen g = {.state = (uint64_t)size * 7919 + 1, .left = size, .md = EVP_MD_CTX_new()};
  EVP_DigestInit_ex(g.md, EVP_sha256(), NULL);
  sm_files_write_opts wo = SM_FILES_WRITE_OPTS_INIT;
  wo.read = gen_read;
  wo.ud = &g;
  wo.mode = 0600;
  int64_t written = -1;
  sm_error err = SM_ERROR_INIT;
  if (sm_files_write(runner, &base, path, &wo, &written, NULL, &err) != 0)
    fail_msg("write %s (%lld bytes): %s", path, (long long)size, err.message);
  assert_int_equal(written, size);
  unsigned char want[32], have[32];
  EVP_DigestFinal_ex(g.md, want, NULL);
  EVP_MD_CTX_free(g.md);

  sink s = {.md = EVP_MD_CTX_new()};
  EVP_DigestInit_ex(s.md, EVP_sha256(), NULL);
  sm_files_read_opts ro = {0, -1, sink_size, sink_write, &s};
  if (sm_files_read(runner, &base, path, &ro, NULL, &err) != 0)
    fail_msg("read %s: %s", path, err.message);
  EVP_DigestFinal_ex(s.md, have, NULL);
  EVP_MD_CTX_free(s.md);
  assert_int_equal(s.size, size);
  assert_int_equal(s.count, size);
  assert_int_equal(s.got, size);
  assert_memory_equal(want, have, 32);

  sm_file_entry e;
  assert_int_equal(sm_files_stat(runner, &base, path, &e, NULL, &err), 0);
  assert_int_equal(e.type, 'f');
  assert_int_equal(e.size, size);
  assert_int_equal(e.mode, 0600);
  sm_file_entry_dispose(&e);
}

static void test_binary_round_trips(void **state) {
  (void)state;
  round_trip("files", "empty.bin", 0);
  round_trip("files", "one.bin", 1);
  round_trip("files", "bin/five-mib.bin", 5 << 20);
  /* The same content read back in pieces: offset and length. */
  sm_run_request base;
  base_req(&base, "files");
  char *a = NULL, *b = NULL;
  size_t alen = 0, blen = 0;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_files_read_all(runner, &base, "bin/five-mib.bin", 0, -1, 6 << 20, &a, &alen,
                                     NULL, &err), 0);
  assert_int_equal(alen, 5 << 20);
  assert_int_equal(sm_files_read_all(runner, &base, "/workspace/bin/five-mib.bin", 1000000, 4096,
                                     1 << 20, &b, &blen, NULL, &err), 0);
  assert_int_equal(blen, 4096);
  assert_memory_equal(a + 1000000, b, 4096);
  free(b);
  /* Past the end: nothing; over the cap: refused. */
  assert_int_equal(sm_files_read_all(runner, &base, "bin/five-mib.bin", 6 << 20, -1, 10, &b, &blen,
                                     NULL, &err), 0);
  assert_int_equal(blen, 0);
  free(b);
  assert_int_equal(sm_files_read_all(runner, &base, "bin/five-mib.bin", 0, -1, 1 << 20, &b, &blen,
                                     NULL, &err), SM_ETOOBIG);
  free(a);
}

static void test_large_round_trip(void **state) {
  (void)state;
  round_trip("files", "big.bin", (int64_t)200 << 20);
  sm_run_request base;
  base_req(&base, "files");
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_files_delete(runner, &base, "big.bin", 0, NULL, NULL, &err), 0);
}

static void test_paths_that_leave_the_workspace(void **state) {
  (void)state;
  sm_run_request base;
  base_req(&base, "files");
  sm_error err = SM_ERROR_INIT;
  /* The sandbox plants links: a folder link, a file link, a link on a deeper level. */
  free(sh("files",
          "cd /workspace && mkdir -p deep && ln -sfn /etc etc && ln -sfn /etc/passwd pw && "
          "ln -sfn /tmp deep/tmp && ln -sfn ../.. up && echo secret > /tmp/outside",
          NULL));
  char *data = NULL;
  size_t len = 0;
  const char *refused[] = {"../etc/passwd", "/etc/passwd", "etc/passwd", "pw", "deep/tmp/outside",
                           "up/etc/passwd", "a/../../etc/passwd", "/workspace/../etc/passwd"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    int rc = sm_files_read_all(runner, &base, refused[i], 0, -1, 1 << 20, &data, &len, NULL, &err);
    if (rc != SM_EUNSAFE) fail_msg("read %s: %d (%s), wanted SM_EUNSAFE", refused[i], rc, err.message);
  }
  /* Writes through a link go nowhere; a link at the end is replaced, not followed. */
  const char *w_refused[] = {"deep/tmp/planted", "etc/planted", "../planted"};
  for (size_t i = 0; i < sizeof w_refused / sizeof w_refused[0]; i++) {
    int rc = sm_files_write_all(runner, &base, w_refused[i], "x", 1, 0644, NULL, &err);
    if (rc != SM_EUNSAFE) fail_msg("write %s: %d (%s)", w_refused[i], rc, err.message);
  }
  int code = -1;
  char *out = sh("files", "ls /tmp/planted /etc/planted 2>&1; cat /tmp/outside", &code);
  assert_non_null(strstr(out, "secret"));
  assert_null(strstr(out, "planted\n"));
  free(out);
  assert_int_equal(sm_files_write_all(runner, &base, "pw", "mine", 4, 0644, NULL, &err), 0);
  out = sh("files", "ls -l /workspace/pw | cut -c1; head -c 4 /etc/passwd", NULL);
  assert_string_equal(out, "-\nroot");
  free(out);
  /* Deletes, mkdir, listings and greps do not go through links either. */
  assert_int_equal(sm_files_delete(runner, &base, "deep/tmp/outside", 0, NULL, NULL, &err), SM_EUNSAFE);
  assert_int_equal(sm_files_mkdir(runner, &base, "etc/x", -1, 1, NULL, &err), SM_EUNSAFE);
  sm_file_list l;
  assert_int_equal(sm_files_list(runner, &base, "etc/", 1, 0, &l, NULL, &err), 0);
  assert_int_equal(l.n, 1); /* a link lists as itself */
  assert_int_equal(l.v[0].type, 'l');
  assert_string_equal(l.v[0].link, "/etc");
  sm_file_list_dispose(&l);
  assert_int_equal(sm_files_list(runner, &base, "etc/ssl", 1, 0, &l, NULL, &err), SM_EUNSAFE);
  sm_grep_opts go = {.pattern = "root"};
  sm_grep_result gr;
  assert_int_equal(sm_files_grep(runner, &base, "etc", &go, &gr, NULL, &err), SM_EUNSAFE);
  assert_int_equal(sm_files_grep(runner, &base, ".", &go, &gr, NULL, &err), 0);
  assert_int_equal(gr.n, 0); /* links are listed, never searched through */
  sm_grep_result_dispose(&gr);
  /* Deleting the link removes the link, not its target. */
  assert_int_equal(sm_files_delete(runner, &base, "deep", 1, NULL, NULL, &err), 0);
  out = sh("files", "cat /tmp/outside; ls /workspace", NULL);
  assert_non_null(strstr(out, "secret"));
  assert_null(strstr(out, "deep"));
  free(out);
  assert_int_equal(sm_files_delete(runner, &base, "etc", 0, NULL, NULL, &err), 0);
  out = sh("files", "ls /etc/passwd", NULL);
  assert_string_equal(out, "/etc/passwd\n");
  free(out);
  free(sh("files", "rm -f /workspace/up /workspace/pw", NULL));
}

static int has_path(const sm_file_list *l, const char *path, char type) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i].path, path) == 0 && l->v[i].type == type) return 1;
  return 0;
}

static void test_list_glob_grep_stat_mkdir_delete(void **state) {
  (void)state;
  sm_run_request base;
  base_req(&base, "files");
  sm_error err = SM_ERROR_INIT;
  const char *c1 = "int main(void) { return 0; }\n// TODO later\n";
  const char *c2 = "x\nnothing here\nTODO: more\n";
  assert_int_equal(sm_files_write_all(runner, &base, "src/a.c", c1, strlen(c1), -1, NULL, &err), 0);
  assert_int_equal(sm_files_write_all(runner, &base, "src/lib/b.c", c2, strlen(c2), -1, NULL, &err), 0);
  assert_int_equal(sm_files_write_all(runner, &base, "src/lib/b.h", "h\n", 2, -1, NULL, &err), 0);
  assert_int_equal(sm_files_mkdir(runner, &base, "src/empty", 0700, 0, NULL, &err), 0);
  assert_int_equal(sm_files_mkdir(runner, &base, "src/empty", 0700, 0, NULL, &err), SM_ECONFLICT);
  assert_int_equal(sm_files_mkdir(runner, &base, "src/empty", 0700, 1, NULL, &err), 0);

  sm_file_list l;
  assert_int_equal(sm_files_list(runner, &base, "src", 1, 0, &l, NULL, &err), 0);
  assert_int_equal(l.n, 3);
  assert_true(has_path(&l, "src/a.c", 'f') && has_path(&l, "src/lib", 'd') && has_path(&l, "src/empty", 'd'));
  sm_file_list_dispose(&l);
  assert_int_equal(sm_files_list(runner, &base, "src", 0, 0, &l, NULL, &err), 0);
  assert_int_equal(l.n, 5);
  sm_file_list_dispose(&l);
  assert_int_equal(sm_files_list(runner, &base, "src", 0, 2, &l, NULL, &err), 0);
  assert_int_equal(l.n, 2);
  assert_true(l.truncated);
  sm_file_list_dispose(&l);

  assert_int_equal(sm_files_glob(runner, &base, ".", "src/**/*.c", 0, &l, NULL, &err), 0);
  assert_int_equal(l.n, 2);
  assert_true(has_path(&l, "src/a.c", 'f') && has_path(&l, "src/lib/b.c", 'f'));
  sm_file_list_dispose(&l);
  assert_int_equal(sm_files_glob(runner, &base, "src", "*.c", 0, &l, NULL, &err), 0);
  assert_int_equal(l.n, 1);
  sm_file_list_dispose(&l);

  sm_grep_opts go = {.pattern = "TODO[: ]", .include = "**/*.c"};
  sm_grep_result gr;
  assert_int_equal(sm_files_grep(runner, &base, "src", &go, &gr, NULL, &err), 0);
  assert_int_equal(gr.n, 2);
  assert_string_equal(gr.v[0].path, "src/a.c");
  assert_int_equal(gr.v[0].line, 2);
  assert_string_equal(gr.v[0].text, "// TODO later");
  assert_string_equal(gr.v[1].path, "src/lib/b.c");
  assert_int_equal(gr.v[1].line, 3);
  sm_grep_result_dispose(&gr);
  sm_grep_opts gf = {.pattern = "todo", .fixed = 1, .ignore_case = 1, .max_matches = 1};
  assert_int_equal(sm_files_grep(runner, &base, "src", &gf, &gr, NULL, &err), 0);
  assert_int_equal(gr.n, 1);
  assert_true(gr.truncated);
  sm_grep_result_dispose(&gr);
  sm_grep_opts bad = {.pattern = "(unclosed"};
  assert_int_equal(sm_files_grep(runner, &base, "src", &bad, &gr, NULL, &err), SM_EINVAL);

  sm_file_entry e;
  assert_int_equal(sm_files_stat(runner, &base, "src/empty", &e, NULL, &err), 0);
  assert_int_equal(e.type, 'd');
  assert_int_equal(e.mode, 0700);
  sm_file_entry_dispose(&e);
  assert_int_equal(sm_files_stat(runner, &base, "nope", &e, NULL, &err), SM_ENOTFOUND);
  assert_int_equal(sm_files_read_all(runner, &base, "src", 0, -1, 10, &(char *){NULL}, &(size_t){0},
                                     NULL, &err), SM_EINVAL);

  assert_int_equal(sm_files_delete(runner, &base, "src/lib", 0, NULL, NULL, &err), SM_EINVAL);
  int64_t removed = 0;
  assert_int_equal(sm_files_delete(runner, &base, "src", 1, &removed, NULL, &err), 0);
  assert_int_equal(removed, 6);
  assert_int_equal(sm_files_delete(runner, &base, "src", 1, &removed, NULL, &err), SM_ENOTFOUND);
  assert_int_equal(sm_files_delete(runner, &base, ".", 1, &removed, NULL, &err), SM_EINVAL);
  /* Exclusive writes and modes. */
  assert_int_equal(sm_files_write_all(runner, &base, "once", "1", 1, 0640, NULL, &err), 0);
  sm_files_write_opts wo = SM_FILES_WRITE_OPTS_INIT;
  wo.exclusive = 1;
  wo.read = gen_read;
  gen g = {.left = 1, .md = EVP_MD_CTX_new()};
  EVP_DigestInit_ex(g.md, EVP_sha256(), NULL);
  wo.ud = &g;
  assert_int_equal(sm_files_write(runner, &base, "once", &wo, NULL, NULL, &err), SM_ECONFLICT);
  EVP_MD_CTX_free(g.md);
  /* A write over its cap leaves nothing behind: neither a new file nor a
   * change to an existing one (the helper renames only a complete file). */
  assert_int_equal(sm_files_write_all(runner, &base, "kept.txt", "old", 3, -1, NULL, &err), 0);
  const char *targets[] = {"kept.txt", "never.txt"};
  for (size_t i = 0; i < 2; i++) {
    gen big = {.left = 200000, .md = EVP_MD_CTX_new()};
    EVP_DigestInit_ex(big.md, EVP_sha256(), NULL);
    sm_files_write_opts co = SM_FILES_WRITE_OPTS_INIT;
    co.read = gen_read;
    co.ud = &big;
    co.max_bytes = 100000;
    assert_int_equal(sm_files_write(runner, &base, targets[i], &co, NULL, NULL, &err), SM_ETOOBIG);
    EVP_MD_CTX_free(big.md);
  }
  char *kept = NULL;
  size_t klen = 0;
  assert_int_equal(sm_files_read_all(runner, &base, "kept.txt", 0, -1, 100, &kept, &klen, NULL, &err), 0);
  assert_string_equal(kept, "old");
  free(kept);
  sm_file_entry none;
  assert_int_equal(sm_files_stat(runner, &base, "never.txt", &none, NULL, &err), SM_ENOTFOUND);
  char *left = sh("files", "ls -a /workspace | grep -c sandman-write || true", NULL);
  assert_string_equal(left, "0\n");
  free(left);
}

/* ---- tar ---- */

typedef struct membuf {
  char *data;
  size_t len, off;
} membuf;

static la_ssize_t mem_write_cb(struct archive *a, void *ud, const void *buf, size_t len) {
  membuf *m = ud;
  m->data = realloc(m->data, m->len + len);
  memcpy(m->data + m->len, buf, len);
  m->len += len;
  return (la_ssize_t)len;
}

static void tar_add(struct archive *a, const char *name, int type, const char *content,
                    const char *link) {
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, name);
  archive_entry_set_filetype(e, (unsigned)type);
  archive_entry_set_perm(e, type == AE_IFDIR ? 0755 : 0644);
  size_t len = content ? strlen(content) : 0;
  archive_entry_set_size(e, (la_int64_t)len);
  if (link) archive_entry_set_symlink(e, link);
  archive_write_header(a, e);
  if (len) archive_write_data(a, content, len);
  archive_entry_free(e);
}

static membuf make_tar(int evil) {
  membuf m = {0};
  struct archive *a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open(a, &m, NULL, mem_write_cb, NULL);
  tar_add(a, "./", AE_IFDIR, NULL, NULL);
  tar_add(a, "docs/", AE_IFDIR, NULL, NULL);
  tar_add(a, "docs/readme.md", AE_IFREG, "# hello\n", NULL);
  tar_add(a, "./top.txt", AE_IFREG, "top\n", NULL);
  if (evil == 1) tar_add(a, "docs/link", AE_IFLNK, NULL, "/etc/passwd");
  if (evil == 2) tar_add(a, "../escape.txt", AE_IFREG, "x", NULL);
  if (evil == 3) tar_add(a, "/abs.txt", AE_IFREG, "x", NULL);
  archive_write_close(a);
  archive_write_free(a);
  return m;
}

static ssize_t mem_read(void *ud, char *buf, size_t len) {
  membuf *m = ud;
  size_t n = m->len - m->off < len ? m->len - m->off : len;
  memcpy(buf, m->data + m->off, n);
  m->off += n;
  return (ssize_t)n;
}

static int mem_write(void *ud, const char *data, size_t len) {
  membuf *m = ud;
  mem_write_cb(NULL, m, data, len);
  return 0;
}

static void test_tar_upload_and_download(void **state) {
  (void)state;
  sm_run_request base;
  base_req(&base, "files");
  sm_error err = SM_ERROR_INIT;
  membuf t = make_tar(0);
  sm_files_tar_stats st = {0};
  if (sm_files_upload_tar(runner, &base, "up", mem_read, &t, 0, 0, &st, NULL, &err) != 0)
    fail_msg("upload: %s", err.message);
  assert_int_equal(st.files, 2);
  assert_int_equal(st.bytes, 12);
  free(t.data);
  char *data = NULL;
  size_t len = 0;
  assert_int_equal(sm_files_read_all(runner, &base, "up/docs/readme.md", 0, -1, 100, &data, &len, NULL, &err), 0);
  assert_string_equal(data, "# hello\n");
  free(data);

  for (int evil = 1; evil <= 3; evil++) {
    t = make_tar(evil);
    int rc = sm_files_upload_tar(runner, &base, "evil", mem_read, &t, 0, 0, &st, NULL, &err);
    free(t.data);
    if (rc != SM_EUNSAFE) fail_msg("evil tar %d: %d (%s)", evil, rc, err.message);
  }
  char *out = sh("files", "ls /workspace; ls /escape.txt /abs.txt 2>&1 | wc -l", NULL);
  assert_null(strstr(out, "escape"));
  free(out);
  /* Too much content for the limit. */
  t = make_tar(0);
  assert_int_equal(sm_files_upload_tar(runner, &base, "small", mem_read, &t, 5, 0, &st, NULL, &err), SM_ETOOBIG);
  free(t.data);

  free(sh("files", "ln -sfn /etc /workspace/up/etclink", NULL));
  membuf got = {0};
  const char *paths[] = {"up", "one.bin"};
  if (sm_files_download_tar(runner, &base, paths, 2, 0, mem_write, &got, &st, NULL, &err) != 0)
    fail_msg("download: %s", err.message);
  assert_int_equal(st.files, 3);
  struct archive *a = archive_read_new();
  archive_read_support_format_tar(a);
  assert_int_equal(archive_read_open_memory(a, got.data, got.len), ARCHIVE_OK);
  struct archive_entry *e;
  int files = 0, dirs = 0, links = 0, readme = 0;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    const char *name = archive_entry_pathname(e);
    if (archive_entry_filetype(e) == AE_IFREG) files++;
    if (archive_entry_filetype(e) == AE_IFDIR) dirs++;
    if (archive_entry_filetype(e) == AE_IFLNK) {
      links++;
      assert_string_equal(archive_entry_symlink(e), "/etc");
    }
    if (strcmp(name, "up/docs/readme.md") == 0) {
      char buf[64] = {0};
      assert_int_equal(archive_read_data(a, buf, sizeof buf), 8);
      assert_string_equal(buf, "# hello\n");
      readme = 1;
    }
  }
  archive_read_free(a);
  free(got.data);
  assert_int_equal(files, 3);
  assert_int_equal(dirs, 2);
  assert_int_equal(links, 1);
  assert_true(readme);
  /* Over the download limit. */
  got = (membuf){0};
  const char *all[] = {"."};
  assert_int_equal(sm_files_download_tar(runner, &base, all, 1, 1000, mem_write, &got, &st, NULL, &err), SM_ETOOBIG);
  free(got.data);
}

static void test_agent_session_and_workspace_sync(void **state) {
  (void)state;
  sm_agent_stats before, after;
  sm_runner_agent_stats(runner, &before);
  sm_run_request base;
  base_req(&base, "files");
  sm_error err = SM_ERROR_INIT;
  char *data = NULL;
  size_t len = 0;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(sm_files_read_all(runner, &base, "one.bin", 0, -1, 10, &data, &len, NULL, &err), 0);
    free(data);
  }
  sm_runner_agent_stats(runner, &after);
  assert_true(after.calls >= before.calls + 3);

  /* A files call with a workspace: copied in before, out after. */
  char dir[] = "/tmp/sandman-files-ws-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/host.txt", dir);
  FILE *f = fopen(path, "w");
  fputs("from the host\n", f);
  fclose(f);
  base_req(&base, "files-ws");
  base.workspace = dir;
  assert_int_equal(sm_files_read_all(runner, &base, "host.txt", 0, -1, 100, &data, &len, NULL, &err), 0);
  assert_string_equal(data, "from the host\n");
  free(data);
  sm_run_result call;
  assert_int_equal(sm_files_write_all(runner, &base, "made/in-box.txt", "box\n", 4, 0644, &call, &err), 0);
  /* The new folder and the file in it, as for any call. */
  assert_int_equal(call.n_files_changed, 2);
  assert_string_equal(call.files_changed[1], "made/in-box.txt");
  sm_run_result_dispose(&call);
  snprintf(path, sizeof path, "%s/made/in-box.txt", dir);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 4);
  assert_int_equal(unlink(path), 0);
  snprintf(path, sizeof path, "%s/made", dir);
  assert_int_equal(rmdir(path), 0);
  snprintf(path, sizeof path, "%s/host.txt", dir);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
}

static void test_keyed_modes_only(void **state) {
  (void)state;
  sm_run_request base;
  base_req(&base, "files");
  base.settings.mode = SM_MODE_PER_TOOL;
  sm_error err = SM_ERROR_INIT;
  char *data = NULL;
  size_t len = 0;
  assert_int_not_equal(sm_files_read_all(runner, &base, "one.bin", 0, -1, 10, &data, &len, NULL, &err), 0);
  assert_non_null(strstr(err.message, "per_run or per_worker"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_binary_round_trips),
      cmocka_unit_test(test_large_round_trip),
      cmocka_unit_test(test_paths_that_leave_the_workspace),
      cmocka_unit_test(test_list_glob_grep_stat_mkdir_delete),
      cmocka_unit_test(test_tar_upload_and_download),
      cmocka_unit_test(test_agent_session_and_workspace_sync),
      cmocka_unit_test(test_keyed_modes_only),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
