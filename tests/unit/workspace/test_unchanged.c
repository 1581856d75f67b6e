/* The copy out's quick check: `sandman-agent wsdigest` run on this machine
 * against the digest the host works out from a manifest (the two must
 * agree on an unchanged folder and differ on every change a copy out
 * acts on), which manifests allow the check, and that a listing equal to
 * the expected one is one workspace_probe_plan has nothing to fetch in. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "support/files.h"
#include "support/xalloc.h"
#include "common/unconst.h"
#include "unit/workspace/tarbuild.h"
#include "workspace/digest.h"
#include "workspace/ws.h"

#ifndef SANDMAN_AGENT_PATH
#error "SANDMAN_AGENT_PATH must name the built sandman-agent"
#endif

typedef struct fx {
  char dir[64];
} fx;

static int setup(void **state) {
  fx *f = xcalloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/sm-wsdigest-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  tf_rm_rf(f->dir);
  free(f);
  return 0;
}

/* Runs `sandman-agent wsdigest DIR MAX [EXCLUDE...]`: its exit code, its
 * stdout in out (cap len). */
static int agent_digest(const char *dir, const char *max, const char *const *excl, char *out,
                        size_t len) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    const char *argv[16] = {SANDMAN_AGENT_PATH, "wsdigest", dir, max};
    int n = 4;
    for (int i = 0; excl && excl[i] && n < 15; i++) argv[n++] = excl[i];
    argv[n] = NULL;
    dup2(p[1], 1);
    close(p[0]);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    execv(SANDMAN_AGENT_PATH, SM_UNCONST(argv));
    _exit(127);
  }
  close(p[1]);
  size_t got = 0;
  ssize_t n;
  while (got + 1 < len && (n = read(p[0], out + got, len - 1 - got)) > 0) got += (size_t)n;
  out[got] = '\0';
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The manifest a copy would have left for dir (excludes as given): the
 * host's walk, with the sandbox's side of every entry as lstat shows it
 * now, as a listing after the copy records it. */
static void manifest_of(const char *dir, const sm_string_list *excl, ws_manifest *m) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  assert_true(fd >= 0);
  ws_scan_opts so = {excl, (int64_t)1 << 30, 100000, 4096, 0};
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(workspace_scan(fd, dir, &so, m, &err), 0);
  for (size_t i = 0; i < m->n; i++) {
    ws_entry *e = &m->v[i];
    struct stat st;
    assert_int_equal(fstatat(fd, e->path, &st, AT_SYMLINK_NOFOLLOW), 0);
    e->box_mtime = st.st_mtim.tv_sec;
    e->box_ctime = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
  }
  close(fd);
}

static void expect_hex(const ws_manifest *base, const ws_manifest *held,
                       const sm_string_list *excl, char *line, size_t len) {
  char hex[65];
  uint64_t count = 0;
  assert_int_equal(workspace_unchanged_expect(base, held, excl, hex, &count), 1);
  snprintf(line, len, WS_DIGEST_PREFIX "%s %llu\n", hex, (unsigned long long)count);
}

static void put(const char *dir, const char *rel, const char *data) {
  assert_int_equal(tf_write_at(dir, rel, data), 0);
}

static void sub(const char *dir, const char *rel) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  assert_int_equal(mkdir(p, 0755), 0);
}

/* A tree with names whose bytewise order differs from a plain strcmp of
 * whole paths ("a-b" after "a/"), a link, an empty folder, odd bytes. */
static void tree(const char *dir) {
  sub(dir, "a");
  put(dir, "a/x", "x\n");
  sub(dir, "a/deep");
  put(dir, "a/deep/y", "yy\n");
  put(dir, "a-b", "ab\n");
  put(dir, "a.c", "ac\n");
  put(dir, "Z", "upper\n");
  put(dir, "\xc3\xa9t\xc3\xa9 \x01 odd", "bytes\n");
  sub(dir, "empty");
  char p[512];
  snprintf(p, sizeof p, "%s/a/link", dir);
  assert_int_equal(symlink("../a-b", p), 0);
  snprintf(p, sizeof p, "%s/a/deep", dir);
  chmod(p, 0750);
}

static void test_agent_and_host_agree(void **state) {
  fx *f = *state;
  tree(f->dir);
  ws_manifest m;
  workspace_manifest_init(&m);
  manifest_of(f->dir, NULL, &m);
  char want[160], got[160];
  expect_hex(&m, NULL, NULL, want, sizeof want);
  assert_int_equal(agent_digest(f->dir, "1000", NULL, got, sizeof got), 0);
  assert_string_equal(got, want);
  char hex[65];
  uint64_t count = 0;
  assert_int_equal(workspace_unchanged_parse(got, strlen(got), hex, &count), 0);
  assert_int_equal(count, m.n);
  workspace_manifest_dispose(&m);
}

/* Every change the copy out acts on gives another digest. */
static void test_changes_show(void **state) {
  fx *f = *state;
  tree(f->dir);
  ws_manifest m;
  workspace_manifest_init(&m);
  manifest_of(f->dir, NULL, &m);
  char want[160], got[160];
  expect_hex(&m, NULL, NULL, want, sizeof want);
  struct {
    const char *what;
    const char *script; /* run with the folder as $1 */
  } changes[] = {
      /* Content changed, size and mtime set back: only the ctime tells
       * (rewritten until the clock's tick has moved on). */
      {"content", "cd \"$1\" && m=$(stat -c %Y a/x) && c=$(stat -c %z a/x) && i=0 && "
                  "while [ $i -lt 10000 ] && [ \"$(stat -c %z a/x)\" = \"$c\" ]; do "
                  "printf 'X\\n' > a/x; touch -d @$m a/x; i=$((i+1)); done"},
      {"chmod file", "chmod 0600 \"$1\"/a-b"},
      {"chmod folder", "chmod 0700 \"$1\"/a/deep"},
      {"new file", "touch \"$1\"/a/deep/new"},
      {"new folder", "mkdir \"$1\"/empty/sub"},
      {"deleted", "rm \"$1\"/a.c"},
      {"link retargeted", "cd \"$1\" && ln -sfn ../a.c a/link"},
      {"renamed", "cd \"$1\" && mv Z Y"},
      {"fifo", "mkfifo \"$1\"/a/fifo"},
  };
  for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
    char cmd[1024];
    /* The script has single quotes of its own: run it through a file. */
    char script[600];
    snprintf(script, sizeof script, "%s/../wsd-change.sh", f->dir);
    assert_int_equal(tf_write_str(script, changes[i].script), 0);
    snprintf(cmd, sizeof cmd, "sh '%s' '%s'", script, f->dir);
    assert_int_equal(system(cmd), 0);
    unlink(script);
    assert_int_equal(agent_digest(f->dir, "1000", NULL, got, sizeof got), 0);
    if (strcmp(got, want) == 0) fail_msg("the digest missed: %s", changes[i].what);
    /* The next change is measured against this state (a fifo, the last,
     * is no entry of a host walk). */
    if (i + 1 == sizeof changes / sizeof changes[0]) break;
    workspace_manifest_clear(&m);
    manifest_of(f->dir, NULL, &m);
    expect_hex(&m, NULL, NULL, want, sizeof want);
    assert_string_equal(got, want);
  }
  workspace_manifest_dispose(&m);
}

/* What the excludes leave out is not walked: the sandbox may change it. */
static void test_excludes(void **state) {
  fx *f = *state;
  tree(f->dir);
  sub(f->dir, "node_modules");
  put(f->dir, "node_modules/m.js", "m\n");
  put(f->dir, "a/deep/trace.log", "log\n");
  sm_string_list excl = {0};
  sm_string_list_add(&excl, "node_modules", NULL);
  sm_string_list_add(&excl, "*.log", NULL);
  ws_manifest m;
  workspace_manifest_init(&m);
  manifest_of(f->dir, &excl, &m);
  assert_null(workspace_manifest_get(&m, "node_modules"));
  char want[160], got[160];
  expect_hex(&m, NULL, &excl, want, sizeof want);
  const char *ex[] = {"node_modules", "*.log", NULL};
  put(f->dir, "node_modules/new.js", "n\n");
  put(f->dir, "a/other.log", "o\n");
  assert_int_equal(agent_digest(f->dir, "1000", ex, got, sizeof got), 0);
  assert_string_equal(got, want);
  /* Without them the agent walks them: another digest. */
  assert_int_equal(agent_digest(f->dir, "1000", NULL, got, sizeof got), 0);
  assert_string_not_equal(got, want);
  /* A manifest that holds a path the excludes now leave out: no check. */
  sm_string_list more = excl;
  sm_string_list_add(&more, "Z", NULL);
  char hex[65];
  uint64_t count;
  assert_int_equal(workspace_unchanged_expect(&m, NULL, &more, hex, &count), 0);
  workspace_manifest_dispose(&m);
}

/* No digest (exit 3) past the entry cap or the listing's path limit; a
 * link is never followed; usage errors exit 2. */
static void test_agent_limits(void **state) {
  fx *f = *state;
  tree(f->dir);
  char out[160], p[8192];
  assert_int_equal(agent_digest(f->dir, "3", NULL, out, sizeof out), 3);
  assert_string_equal(out, "");
  assert_int_equal(agent_digest(f->dir, "0", NULL, out, sizeof out), 2);
  assert_int_equal(agent_digest(f->dir, "x", NULL, out, sizeof out), 2);
  /* A link to a big folder counts as one entry. */
  snprintf(p, sizeof p, "%s/etc", f->dir);
  assert_int_equal(symlink("/usr", p), 0);
  assert_int_equal(agent_digest(f->dir, "12", NULL, out, sizeof out), 0);
  /* A path of 3,072 bytes is walked; one longer gives no digest: 15
   * folders of 200-byte names, then a name of 57 bytes (15 * 201 + 57). */
  size_t len = (size_t)snprintf(p, sizeof p, "%s", f->dir);
  for (int k = 0; k < 15; k++) {
    p[len++] = '/';
    memset(p + len, 'd', 200);
    len += 200;
    p[len] = '\0';
    assert_int_equal(mkdir(p, 0755), 0);
  }
  size_t name = WS_DIGEST_PATH_MAX - 15 * 201;
  p[len++] = '/';
  memset(p + len, 'f', name);
  p[len + name] = '\0';
  assert_int_equal(tf_write_str(p, "at the limit\n"), 0);
  assert_int_equal(agent_digest(f->dir, "1000", NULL, out, sizeof out), 0);
  unlink(p);
  memset(p + len, 'f', name + 1);
  p[len + name + 1] = '\0';
  assert_int_equal(tf_write_str(p, "past it\n"), 0);
  assert_int_equal(agent_digest(f->dir, "1000", NULL, out, sizeof out), 3);
}

static void add(ws_manifest *m, const char *path, char type, int64_t ctime) {
  ws_entry e;
  memset(&e, 0, sizeof e);
  e.path = SM_UNCONST(path);
  e.type = type;
  e.size = type == 'l' ? 1 : 5;
  e.box_mtime = 100;
  e.box_ctime = ctime;
  e.mode = type == 'd' ? 0755 : 0644;
  e.link = type == 'l' ? SM_UNCONST("x") : NULL;
  e.stage = -1;
  assert_int_equal(workspace_manifest_add(m, &e, NULL), 0);
}

/* Which manifests a digest can vouch for. */
static void test_which_manifests(void **state) {
  (void)state;
  ws_manifest base, held;
  workspace_manifest_init(&base);
  workspace_manifest_init(&held);
  char hex[65];
  uint64_t count = 0;
  /* An empty workspace: the digest of nothing. */
  assert_int_equal(workspace_unchanged_expect(&base, NULL, NULL, hex, &count), 1);
  assert_int_equal(count, 0);
  add(&base, "d", 'd', 0);
  add(&base, "d/f", 'f', 1000);
  add(&base, "l", 'l', 1000);
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 1);
  assert_int_equal(count, 3);
  /* A file with no ctime on record, or a racy one: only a listing. */
  workspace_manifest_get(&base, "d/f")->box_ctime = 0;
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 0);
  workspace_manifest_get(&base, "d/f")->box_ctime = 1000;
  workspace_manifest_get(&base, "d/f")->racy = WS_RACY_BOX;
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 0);
  workspace_manifest_get(&base, "d/f")->racy = WS_RACY_HOST; /* the host's side does not matter */
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 1);
  workspace_manifest_get(&base, "d/f")->box_mtime = WS_UNKNOWN_MTIME;
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 0);
  workspace_manifest_get(&base, "d/f")->box_mtime = 100;
  workspace_manifest_get(&base, "l")->box_ctime = 0;
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 0);
  workspace_manifest_get(&base, "l")->box_ctime = 1000;
  /* Held: the sandbox's version counts instead of the base's. */
  char before[65];
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, before, &count), 1);
  add(&held, "l", 'l', 2000);
  workspace_manifest_get(&held, "l")->refusal = WS_R_LINK_ABSOLUTE;
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 1);
  assert_int_equal(count, 3);
  assert_string_not_equal(hex, before);
  /* A held fifo is walked like any entry. */
  add(&held, "d/p", 'p', 3000);
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 1);
  assert_int_equal(count, 4);
  /* A held version the plan would take for the base's: no check. */
  workspace_manifest_get(&held, "l")->box_ctime = 1000;
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 0);
  workspace_manifest_get(&held, "l")->box_ctime = 2000;
  /* A held deletion depends on today's protected list: no check. */
  ws_entry del;
  memset(&del, 0, sizeof del);
  del.path = SM_UNCONST("d/f");
  del.type = WS_DELETED;
  del.refusal = WS_R_PROTECTED;
  assert_int_equal(workspace_manifest_add(&held, &del, NULL), 0);
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 0);
  workspace_manifest_dispose(&held);
  workspace_manifest_init(&held);
  /* A path past what the listing enters: no check. */
  char longp[WS_LIST_PATH_MAX + 2];
  memset(longp, 'p', sizeof longp - 1);
  longp[sizeof longp - 1] = '\0';
  add(&base, longp, 'd', 0);
  assert_int_equal(workspace_unchanged_expect(&base, &held, NULL, hex, &count), 0);
  workspace_manifest_dispose(&base);
}

static void test_parse(void **state) {
  (void)state;
  char hex[65];
  uint64_t count = 0;
  char good[160];
  snprintf(good, sizeof good, WS_DIGEST_PREFIX "%064d 12\n", 0);
  assert_int_equal(workspace_unchanged_parse(good, strlen(good), hex, &count), 0);
  assert_int_equal(count, 12);
  const char *bad[] = {
      "",
      "wsdigest 00 1\n",
      WS_DIGEST_PREFIX "000000000000000000000000000000000000000000000000000000000000000A 1\n",
      WS_DIGEST_PREFIX "0000000000000000000000000000000000000000000000000000000000000000 1",
      WS_DIGEST_PREFIX "0000000000000000000000000000000000000000000000000000000000000000 \n",
      WS_DIGEST_PREFIX "0000000000000000000000000000000000000000000000000000000000000000 1x\n",
      WS_DIGEST_PREFIX "0000000000000000000000000000000000000000000000000000000000000000 1\n"
      WS_DIGEST_PREFIX "0000000000000000000000000000000000000000000000000000000000000000 1\n",
      WS_DIGEST_PREFIX "0000000000000000000000000000000000000000000000000000000000000000 "
                       "99999999999999999999999\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (workspace_unchanged_parse(bad[i], strlen(bad[i]), hex, &count) == 0)
      fail_msg("took: %s", bad[i]);
}

/* The listing the sandbox shows when it holds exactly what a manifest
 * says (the fields no digest covers set at random: a folder's times, a
 * link's mode): workspace_probe_plan must have nothing to fetch in it, take
 * every base entry unchanged and every held one as refused before. */
static void test_plan_agrees(void **state) {
  (void)state;
  srand(27);
  for (int round = 0; round < 200; round++) {
    ws_manifest base, held, list;
    workspace_manifest_init(&base);
    workspace_manifest_init(&held);
    workspace_manifest_init(&list);
    char path[64];
    int n = 1 + rand() % 30;
    for (int i = 0; i < n; i++) {
      snprintf(path, sizeof path, "%s%d", i % 4 ? "d/" : "", i);
      if (i == 0) add(&base, "d", 'd', 0);
      char type = "ffld"[rand() % 4];
      add(&base, path, type, 1000 + rand() % 50);
      ws_entry *b = workspace_manifest_get(&base, path);
      b->mode = type == 'l' ? 0777 : (uint32_t)(0600 + rand() % 0177);
      b->racy = rand() % 3 == 0 ? WS_RACY_HOST : 0;
      if (type != 'd' && rand() % 5 == 0) {
        /* The tool's version of it was refused: the sandbox holds that. */
        add(&held, path, type, 5000 + rand() % 50);
        ws_entry *h = workspace_manifest_get(&held, path);
        h->refusal = WS_R_PROTECTED;
        h->size = b->size + (type == 'f');
      }
    }
    ws_expected *x = NULL;
    if (!workspace_expected_collect(&base, &held, NULL, &x)) fail_msg("round %d: no check", round);
    workspace_expected_free(x);
    for (size_t i = 0; i < base.n; i++) {
      const ws_entry *b = &base.v[i];
      const ws_entry *h = workspace_manifest_get(&held, b->path);
      ws_entry l = h ? *h : *b;
      l.ctime = l.box_ctime;
      l.link = NULL;
      if (l.type == 'l') l.size = (int64_t)strlen((h ? h : b)->link);
      if (l.type == 'd') l.ctime = rand();
      if (l.type == 'l') l.mode = 0777;
      l.refusal = 0;
      assert_int_equal(workspace_manifest_add(&list, &l, NULL), 0);
    }
    ws_extract ex;
    workspace_extract_init(&ex);
    ex.base = &base;
    ex.held = &held;
    char **roots = NULL;
    size_t nroots = 0;
    sm_error err = SM_ERROR_INIT;
    assert_int_equal(workspace_probe_plan(&ex, &list, 8, &roots, &nroots, &err), 0);
    assert_int_equal(nroots, 0);
    assert_int_equal(ex.box.n, base.n);
    for (size_t i = 0; i < ex.box.n; i++) {
      const ws_entry *e = &ex.box.v[i];
      if (workspace_manifest_get(&held, e->path)) assert_true(e->state == WS_REFUSED && e->quiet);
      else
        assert_int_equal(e->state, WS_SAME);
    }
    workspace_probe_free_roots(roots, nroots);
    workspace_extract_dispose(&ex);
    workspace_manifest_dispose(&base);
    workspace_manifest_dispose(&held);
    workspace_manifest_dispose(&list);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_agent_and_host_agree, setup, teardown),
      cmocka_unit_test_setup_teardown(test_changes_show, setup, teardown),
      cmocka_unit_test_setup_teardown(test_excludes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_agent_limits, setup, teardown),
      cmocka_unit_test(test_which_manifests),
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_plan_agrees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
