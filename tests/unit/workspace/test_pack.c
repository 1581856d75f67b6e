/* The packer's producer thread and bounded ring: a full stream comes out
 * intact, a reader that stops early makes the producer stop and be joined,
 * and a producer that fails mid-way hands its error to the reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/check.h"

#include <fcntl.h>
#include <locale.h>
#include <sandman/sandman.h>

#include "workspace/ws.h"
#include "tarbuild.h"

#include "support/xalloc.h"

#define BIG_FILES 24
#define BIG_SIZE (256 * 1024) /* 6 MiB in all: more than the ring holds */

typedef struct fx {
  char root[256];
  int root_fd;
  ws_manifest m;
  ws_entry **items;
  size_t n;
} fx;

/* The packer a test has running: a test stopped by a failed assertion
 * leaves it, and teardown frees it (joining its producer) before the
 * manifest its producer writes into goes. */
static ws_packer *live;

static void packer_free(ws_packer *p) {
  if (live == p) live = NULL;
  workspace_packer_free(p);
}

static void write_big(const char *dir, const char *name, size_t size, char fill) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  char block[4096];
  memset(block, fill, sizeof block);
  for (size_t done = 0; done < size; done += sizeof block)
    assert_int_equal(write(fd, block, sizeof block), (ssize_t)sizeof block);
  close(fd);
}

static int setup(void **state) {
  fx *f = xcalloc(1, sizeof *f);
  snprintf(f->root, sizeof f->root, "/tmp/sm-ws-pack-XXXXXX");
  assert_non_null(mkdtemp(f->root));
  for (int i = 0; i < BIG_FILES; i++) {
    char name[32];
    snprintf(name, sizeof name, "f%02d", i);
    write_big(f->root, name, BIG_SIZE, (char)('a' + i));
  }
  f->root_fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(f->root_fd >= 0);
  workspace_manifest_init(&f->m);
  ws_scan_opts o = {.max_bytes = WS_DEFAULT_MAX_BYTES,
                    .max_entries = WS_DEFAULT_MAX_ENTRIES,
                    .max_path = WS_DEFAULT_MAX_PATH};
  sm_error err = SM_ERROR_INIT;
  if (workspace_scan(f->root_fd, f->root, &o, &f->m, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(f->m.n, BIG_FILES);
  f->n = f->m.n;
  f->items = xcalloc(f->n + 1, sizeof *f->items);
  for (size_t i = 0; i < f->n; i++) f->items[i] = &f->m.v[i];
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  if (live) packer_free(live);
  free(f->items);
  workspace_manifest_dispose(&f->m);
  close(f->root_fd);
  tf_rm_rf(f->root);
  free(f);
  return 0;
}

static ws_packer *new_packer(fx *f) {
  ws_packer *p = NULL;
  sm_error err = SM_ERROR_INIT;
  if (workspace_packer_new(&p, f->root_fd, f->items, f->n, "ws", 1000, 1000, &err) != 0)
    fail_msg("%s", err.message);
  live = p;
  return p;
}

/* The whole stream, extracted as a copy in does it, is the tree; every file
 * got its hash. */
static void test_full_stream(void **state) {
  fx *f = *state;
  ws_packer *p = NULL;
  sm_error err = SM_ERROR_INIT;
  if (workspace_packer_new(&p, f->root_fd, f->items, f->n, "", 1000, 1000, &err) != 0)
    fail_msg("%s", err.message);
  live = p;
  char dest[300];
  snprintf(dest, sizeof dest, "%s.out", f->root);
  mkdir(dest, 0755);
  int dfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(dfd >= 0);
  char *stage = NULL;
  int sfd = workspace_stage_create(dfd, dest, &stage, &err);
  assert_true(sfd >= 0);
  ws_extract x;
  workspace_extract_init(&x);
  x.stage_fd = sfd;
  x.root_fd = dfd;
  x.trusted = 1;
  if (workspace_extract_run(&x, workspace_packer_read, p, &err) != 0) fail_msg("%s", err.message);
  ws_apply_result res = {0};
  if (workspace_apply(dfd, &x, 0, 0, &res, &err) != 0) fail_msg("%s", err.message);
  workspace_apply_result_dispose(&res);
  workspace_stage_remove(dfd, stage, sfd);
  free(stage);
  workspace_extract_dispose(&x);
  close(dfd);
  int64_t bytes = 0, entries = 0;
  workspace_packer_stats(p, &bytes, &entries);
  assert_int_equal(entries, BIG_FILES);
  assert_int_equal(bytes, (int64_t)BIG_FILES * BIG_SIZE);
  assert_int_equal(workspace_packer_error(p)->code, 0);
  /* Reads after the end keep saying end. */
  char c;
  assert_int_equal(workspace_packer_read(p, &c, 1), 0);
  packer_free(p);
  for (size_t i = 0; i < f->n; i++) assert_true(f->m.v[i].has_hash);
  char *a = snapshot(f->root);
  char *b = snapshot(dest);
  assert_string_equal(a, b);
  free(a);
  free(b);
  tf_rm_rf(dest);
}

/* The upload stops after a few bytes (closed reader): freeing the packer
 * stops the producer, which never packed the whole tree (the ring is
 * bounded), and joins it. */
static void test_reader_closes_early(void **state) {
  fx *f = *state;
  for (int round = 0; round < 3; round++) {
    ws_packer *p = new_packer(f);
    char buf[4096];
    int64_t got = 0;
    while (got < 10000) {
      ssize_t r = workspace_packer_read(p, buf, sizeof buf);
      assert_true(r > 0);
      got += r;
    }
    assert_int_equal(workspace_packer_produced(p), got);
    if (round == 0) {
      /* Stats stop and join first; the producer was held by the ring. */
      int64_t bytes = 0, entries = 0;
      workspace_packer_stats(p, &bytes, &entries);
      assert_true(bytes < (int64_t)BIG_FILES * BIG_SIZE);
      assert_true(entries < BIG_FILES);
      assert_int_equal(workspace_packer_error(p)->code, 0);
    }
    /* round 1: straight to free; round 2: free while the producer runs. */
    packer_free(p);
  }
  /* A packer freed before any read never started a thread. */
  packer_free(new_packer(f));
}

/* The test hook aborts the reader mid-stream: the error is the reader's,
 * the producer is joined, and later reads keep failing. */
static void test_reader_abort_hook(void **state) {
  fx *f = *state;
  ws_packer *p = new_packer(f);
  workspace_packer_abort_after(p, 300000);
  char buf[65536];
  ssize_t r;
  int64_t got = 0;
  while ((r = workspace_packer_read(p, buf, sizeof buf)) > 0) got += r;
  assert_int_equal(r, SM_ECANCELLED);
  assert_true(got <= 300000);
  assert_int_equal(workspace_packer_read(p, buf, sizeof buf), SM_ECANCELLED);
  assert_int_equal(workspace_packer_error(p)->code, SM_ECANCELLED);
  int64_t entries = 0;
  workspace_packer_stats(p, NULL, &entries);
  assert_true(entries < BIG_FILES);
  packer_free(p);
}

/* The producer fails mid-way (a path that cannot be opened, after files
 * worth more than the ring): the reader first gets the bytes packed before,
 * then the producer's error code, and the message names the path. */
static void test_producer_fails(void **state) {
  fx *f = *state;
  char longname[400];
  memset(longname, 'x', 300); /* longer than NAME_MAX: openat fails */
  longname[300] = '\0';
  ws_entry bad = {0};
  bad.path = longname;
  bad.type = 'f';
  bad.mode = 0644;
  bad.size = 1;
  size_t half = f->n / 2;
  ws_entry **items = xcalloc(f->n + 1, sizeof *items);
  for (size_t i = 0; i < half; i++) items[i] = f->items[i];
  items[half] = &bad;
  for (size_t i = half; i < f->n; i++) items[i + 1] = f->items[i];
  ws_packer *p = NULL;
  sm_error err = SM_ERROR_INIT;
  if (workspace_packer_new(&p, f->root_fd, items, f->n + 1, "", 0, 0, &err) != 0)
    fail_msg("%s", err.message);
  live = p;
  char buf[65536];
  ssize_t r;
  int64_t got = 0;
  while ((r = workspace_packer_read(p, buf, sizeof buf)) > 0) got += r;
  assert_int_equal(r, SM_EIO);
  assert_true(got >= (int64_t)half * BIG_SIZE);
  assert_int_equal(workspace_packer_read(p, buf, sizeof buf), SM_EIO);
  const sm_error *pe = workspace_packer_error(p);
  assert_int_equal(pe->code, SM_EIO);
  assert_non_null(strstr(pe->message, "xxxxxxxx"));
  int64_t entries = 0;
  workspace_packer_stats(p, NULL, &entries);
  assert_int_equal(entries, (int64_t)half);
  packer_free(p);
  free(items);
}

/* The producer fails through a sync: the extractor's cap stops reading
 * (the other side fails first) and the packer is joined; nothing leaks. */
static void test_extractor_cap_stops_producer(void **state) {
  fx *f = *state;
  ws_packer *p = NULL;
  sm_error perr = SM_ERROR_INIT;
  /* Named as a copy out's full read would be extracted into dest: no prefix. */
  if (workspace_packer_new(&p, f->root_fd, f->items, f->n, "", 1000, 1000, &perr) != 0)
    fail_msg("%s", perr.message);
  live = p;
  char dest[300];
  snprintf(dest, sizeof dest, "%s.cap", f->root);
  mkdir(dest, 0755);
  ws_apply_result res = {0};
  sm_error err = SM_ERROR_INIT;
  sm_workspace_limits lim = {0};
  lim.max_bytes = BIG_SIZE * 2;
  int rc = workspace_unpack_dir(dest, workspace_packer_read, p, &lim, &res, NULL, &err);
  assert_int_equal(rc, SM_ETOOBIG);
  workspace_apply_result_dispose(&res);
  assert_int_equal(workspace_packer_error(p)->code, 0);
  packer_free(p);
  tf_rm_rf(dest);
}


/* A deferred stream: "./" comes at once (the upload can start), the items
 * when supplied, whether before or after the first read; abandoned, it
 * fails with the caller's code; freed while waiting, its producer ends. */
static void test_deferred(void **state) {
  fx *f = *state;
  for (int round = 0; round < 4; round++) {
    ws_packer *p = NULL;
    sm_error err = SM_ERROR_INIT;
    if (workspace_packer_new_deferred(&p, f->root_fd, 1000, 1000, &err) != 0)
      fail_msg("%s", err.message);
    live = p;
    if (round == 3) {
      /* Never read: no thread was started. */
      packer_free(p);
      continue;
    }
    if (round == 0) workspace_packer_supply(p, f->items, f->n);
    common_buf b;
    common_buf_init(&b, (size_t)64 << 20);
    char buf[512];
    /* The lead entry needs no items. */
    while (b.len < 512) {
      ssize_t r = workspace_packer_read(p, buf, 512 - b.len);
      assert_true(r > 0);
      common_buf_append(&b, buf, (size_t)r);
    }
    assert_string_equal(b.data, "./");
    assert_int_equal(b.data[156], '5'); /* a directory */
    if (round == 2) {
      workspace_packer_abandon(p, SM_ETOOBIG);
      assert_int_equal(workspace_packer_read(p, buf, sizeof buf), SM_ETOOBIG);
      packer_free(p);
      common_buf_dispose(&b);
      continue;
    }
    if (round == 1) workspace_packer_supply(p, f->items, f->n);
    char big[65536];
    ssize_t r;
    while ((r = workspace_packer_read(p, big, sizeof big)) > 0)
      common_buf_append(&b, big, (size_t)r);
    assert_int_equal(r, 0);
    int64_t bytes = 0, entries = 0;
    workspace_packer_stats(p, &bytes, &entries);
    assert_int_equal(entries, BIG_FILES);
    assert_int_equal(bytes, (int64_t)BIG_FILES * BIG_SIZE);
    packer_free(p);
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    assert_int_equal(archive_read_open_memory(a, b.data, b.len), ARCHIVE_OK);
    struct archive_entry *ae;
    int n = 0;
    while (archive_read_next_header(a, &ae) == ARCHIVE_OK) {
      if (n == 0) assert_string_equal(archive_entry_pathname(ae), "./");
      else assert_string_equal(archive_entry_pathname(ae), f->items[n - 1]->path);
      n++;
    }
    assert_int_equal(n, BIG_FILES + 1);
    archive_read_free(a);
    common_buf_dispose(&b);
  }
  /* Freed while its producer waits for the items: it ends, nothing hangs. */
  ws_packer *p = NULL;
  sm_error err = SM_ERROR_INIT;
  if (workspace_packer_new_deferred(&p, f->root_fd, 0, 0, &err) != 0) fail_msg("%s", err.message);
  live = p;
  char c;
  assert_int_equal(workspace_packer_read(p, &c, 1), 1);
  packer_free(p);
}

/* Packs all of f's tree into memory. */
static char *pack_all(int root_fd, ws_entry **items, size_t n, size_t *len) {
  ws_packer *p = NULL;
  sm_error err = SM_ERROR_INIT;
  if (workspace_packer_new(&p, root_fd, items, n, "", 1000, 1000, &err) != 0)
    fail_msg("%s", err.message);
  live = p;
  common_buf b;
  common_buf_init(&b, (size_t)64 << 20);
  char buf[70000];
  ssize_t r;
  while ((r = workspace_packer_read(p, buf, sizeof buf)) > 0)
    assert_int_equal(common_buf_append(&b, buf, (size_t)r), 0);
  assert_int_equal(r, 0);
  packer_free(p);
  *len = b.len;
  return common_buf_steal(&b, NULL);
}

/* The stream the engine unpacks: a plain ustar header for ordinary entries
 * (no pax header each: the engine parses one per entry and moves a tenth
 * more bytes), and names and link targets as the very bytes the host has,
 * whatever the process locale (valid UTF-8, invalid UTF-8, long names). */
static void test_stream_format(void **state) {
  (void)state;
  char root[64];
  snprintf(root, sizeof root, "/tmp/sm-ws-fmt-XXXXXX");
  assert_non_null(mkdtemp(root));
  char p[1024];
  /* Ordinary entries first: their stream is ustar, byte for byte. */
  snprintf(p, sizeof p, "%s/src", root);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s/src/main.c", root);
  tf_write_str(p, "int main(void) { return 0; }\n");
  snprintf(p, sizeof p, "%s/empty", root);
  tf_write_str(p, "");
  snprintf(p, sizeof p, "%s/src/link", root);
  assert_int_equal(symlink("main.c", p), 0);
  int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(fd >= 0);
  ws_scan_opts o = {.max_bytes = WS_DEFAULT_MAX_BYTES,
                    .max_entries = WS_DEFAULT_MAX_ENTRIES,
                    .max_path = WS_DEFAULT_MAX_PATH};
  sm_error err = SM_ERROR_INIT;
  ws_manifest m;
  workspace_manifest_init(&m);
  if (workspace_scan(fd, root, &o, &m, &err) != 0) fail_msg("%s", err.message);
  ws_entry **items = xcalloc(m.n + 1, sizeof *items);
  for (size_t i = 0; i < m.n; i++) items[i] = &m.v[i];
  size_t len = 0;
  char *tar = pack_all(fd, items, m.n, &len);
  /* 4 headers, one data block (the 29-byte file), two end blocks. */
  assert_int_equal(m.n, 4);
  assert_int_equal(len, (size_t)(4 * 512 + 512 + 1024));
  free(tar);
  free(items);
  workspace_manifest_dispose(&m);

  /* Odd names: non-ASCII (valid and invalid UTF-8), too long for ustar,
   * link targets alike. The caller's locale does not matter. */
  const char *saved = setlocale(LC_ALL, NULL);
  char *saved_copy = xstrdup(saved ? saved : "C");
  setlocale(LC_ALL, "C.UTF-8");
  static const char *const names[] = {"na\xc3\xafve.txt", "bad-\xff\xfe.txt",
                                      "\xe6\x97\xa5\xe6\x9c\xac"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/%s", root, names[i]);
    tf_write_str(p, names[i]);
  }
  char longname[201];
  memset(longname, 'n', 200);
  longname[200] = '\0';
  snprintf(p, sizeof p, "%s/%s", root, longname);
  tf_write_str(p, "long");
  char target[300];
  snprintf(target, sizeof target, "src/%s/../../t\xc3\xa4rget-\xff", longname);
  snprintf(p, sizeof p, "%s/oddlink", root);
  assert_int_equal(symlink(target, p), 0);
  workspace_manifest_init(&m);
  if (workspace_scan(fd, root, &o, &m, &err) != 0) fail_msg("%s", err.message);
  items = xcalloc(m.n + 1, sizeof *items);
  for (size_t i = 0; i < m.n; i++) items[i] = &m.v[i];
  tar = pack_all(fd, items, m.n, &len);
  setlocale(LC_ALL, saved_copy);
  free(saved_copy);
  struct archive *a = archive_read_new();
  archive_read_support_format_tar(a);
  assert_int_equal(archive_read_open_memory(a, tar, len), ARCHIVE_OK);
  struct archive_entry *ae;
  size_t seen = 0, odd = 0;
  while (archive_read_next_header(a, &ae) == ARCHIVE_OK) {
    const char *name = archive_entry_pathname(ae);
    char bare[512];
    snprintf(bare, sizeof bare, "%s", name);
    size_t bl = strlen(bare);
    if (bl > 0 && bare[bl - 1] == '/') bare[bl - 1] = '\0';
    assert_non_null(workspace_manifest_get(&m, bare));
    for (size_t i = 0; i < 3; i++)
      if (strcmp(bare, names[i]) == 0) odd++;
    if (strcmp(bare, longname) == 0) odd++;
    if (strcmp(bare, "oddlink") == 0) {
      assert_string_equal(archive_entry_symlink(ae), target);
      odd++;
    }
    seen++;
  }
  assert_int_equal(seen, m.n);
  assert_int_equal(odd, 5);
  archive_read_free(a);
  free(tar);
  free(items);
  workspace_manifest_dispose(&m);
  close(fd);
  tf_rm_rf(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_full_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reader_closes_early, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reader_abort_hook, setup, teardown),
      cmocka_unit_test_setup_teardown(test_producer_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_extractor_cap_stops_producer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deferred, setup, teardown),
      cmocka_unit_test(test_stream_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
