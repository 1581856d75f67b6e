/* Workspace sync against the real engine: a container of our own (read-only
 * root, user 1000, a tmpfs volume at /workspace, this test's instance
 * labels), commands run in it through the engine client as "the tool", and
 * the host workspace checked after every copy. Everything is removed at the
 * end. WS_IT_ONLY=<glob> runs a subset (the TLS script runs the round trip
 * against the TLS engine). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/agent.h"
#include "support/itest.h"
#include "workspace/workspace_box.h"
#include "workspace/ws.h"
#include "unit/workspace/tarbuild.h"

static const char *instance(void) {
  return itest_instance("test_workspace");
}

typedef struct box {
  sm_engine *e;
  char id[SM_ENGINE_ID_MAX];
  char volume[128];
  char dir[256];      /* temporary directory for this test */
  char host[300];     /* the host workspace */
  char manifest[300];
  char unpacker[128];
  sm_workspace_target t;
} box;

static json_object *labels(void) {
  json_object *l = json_object_new_object();
  json_object_object_add(l, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(l, "io.sandman.instance", json_object_new_string(instance()));
  return l;
}

static int setup(void **state) {
  static int seq;
  box *b = calloc(1, sizeof *b);
  b->e = itest_engine();
  const char *tls = getenv("DOCKER_TLS_VERIFY");
  if (tls && strcmp(tls, "1") == 0) assert_true(sm_engine_uses_tls(b->e));
  sm_error err = SM_ERROR_INIT;
  snprintf(b->volume, sizeof b->volume, "sm-it-ws-%d-%d", (int)getpid(), seq++);
  json_object *opts = json_object_new_object();
  json_object_object_add(opts, "type", json_object_new_string("tmpfs"));
  json_object_object_add(opts, "device", json_object_new_string("tmpfs"));
  json_object_object_add(opts, "o", json_object_new_string("size=256m,uid=1000,gid=1000,mode=0755"));
  json_object *vl = labels();
  int rc = sm_engine_volume_create(b->e, b->volume, "local", opts, vl, &err);
  json_object_put(opts);
  json_object_put(vl);
  if (rc) fail_msg("volume: %s", err.message);
  json_object *c = json_object_new_object();
  json_object_object_add(c, "Image", json_object_new_string(ITEST_IMAGE));
  json_object *cmd = json_object_new_array();
  json_object_array_add(cmd, json_object_new_string("sleep"));
  json_object_array_add(cmd, json_object_new_string("3600"));
  json_object_object_add(c, "Cmd", cmd);
  json_object_object_add(c, "User", json_object_new_string("1000:1000"));
  json_object_object_add(c, "Labels", labels());
  json_object *hc = json_object_new_object();
  json_object_object_add(hc, "NetworkMode", json_object_new_string("none"));
  json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(1));
  json_object *mounts = json_object_new_array();
  json_object *m = json_object_new_object();
  json_object_object_add(m, "Type", json_object_new_string("volume"));
  json_object_object_add(m, "Source", json_object_new_string(b->volume));
  json_object_object_add(m, "Target", json_object_new_string("/workspace"));
  json_object_array_add(mounts, m);
  json_object_object_add(hc, "Mounts", mounts);
  /* sandman's own area, as in its sandboxes: the unpacker goes there. */
  json_object *tmpfs = json_object_new_object();
  json_object_object_add(tmpfs, "/.sandman", json_object_new_string("size=8m,mode=0755,exec"));
  json_object_object_add(tmpfs, "/tmp", json_object_new_string("size=8m,mode=1777"));
  json_object_object_add(hc, "Tmpfs", tmpfs);
  json_object_object_add(c, "HostConfig", hc);
  rc = sm_engine_container_create(b->e, NULL, c, b->id, NULL, &err);
  json_object_put(c);
  if (rc) fail_msg("create: %s", err.message);
  rc = sm_engine_container_start(b->e, b->id, &err);
  if (rc) fail_msg("start: %s", err.message);
  snprintf(b->dir, sizeof b->dir, "/tmp/sm-it-ws-XXXXXX");
  assert_non_null(mkdtemp(b->dir));
  snprintf(b->host, sizeof b->host, "%s/host", b->dir);
  snprintf(b->manifest, sizeof b->manifest, "%s/manifest", b->dir);
  mkdir(b->host, 0755);
  b->t.engine = b->e;
  b->t.container_id = b->id;
  b->t.sandbox_path = "/workspace";
  b->t.uid = 1000;
  b->t.gid = 1000;
  /* The copy in's unpacker, installed as the sandbox layer does it. */
  sandbox_agent_binary_path(b->unpacker, sizeof b->unpacker);
  b->t.unpacker = b->unpacker;
  if (sandbox_agent_install(NULL, b->e, b->id, &err) != 0) fail_msg("unpacker: %s", err.message);
  *state = b;
  return 0;
}

static int teardown(void **state) {
  box *b = *state;
  sm_error err = SM_ERROR_INIT;
  if (b->id[0]) sm_engine_container_remove(b->e, b->id, 1, 1, &err);
  sm_engine_volume_remove(b->e, b->volume, 1, &err);
  tf_rm_rf(b->dir);
  sm_engine_free(b->e);
  free(b);
  return 0;
}

typedef struct capture {
  common_buf out;
} capture;

static int on_out(void *ud, int stream, const char *data, size_t len) {
  capture *c = ud;
  if (stream == 1) common_buf_append_capped(&c->out, data, len);
  return 0;
}

/* Runs a shell script in the sandbox as the tool would (user 1000, in
 * /workspace). Returns its exit code; *out (if given) gets stdout. */
static int box_sh(box *b, const char *script, char **out) {
  json_object *cfg = json_object_new_object();
  json_object *cmd = json_object_new_array();
  json_object_array_add(cmd, json_object_new_string("sh"));
  json_object_array_add(cmd, json_object_new_string("-c"));
  json_object_array_add(cmd, json_object_new_string(script));
  json_object_object_add(cfg, "Cmd", cmd);
  json_object_object_add(cfg, "User", json_object_new_string("1000:1000"));
  json_object_object_add(cfg, "WorkingDir", json_object_new_string("/workspace"));
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  char xid[SM_ENGINE_ID_MAX];
  sm_error err = SM_ERROR_INIT;
  int rc = sm_engine_exec_create(b->e, b->id, cfg, xid, &err);
  json_object_put(cfg);
  if (rc) fail_msg("exec create: %s", err.message);
  capture c;
  common_buf_init(&c.out, (size_t)16 << 20);
  common_buf_append(&c.out, "", 0);
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.output = on_out;
  io.output_ud = &c;
  io.timeout_s = 120;
  rc = sm_engine_exec_start(b->e, xid, &io, &err);
  if (rc) fail_msg("exec start: %s", err.message);
  int code = -1;
  rc = sm_engine_exec_inspect(b->e, xid, NULL, &code, NULL, &err);
  if (rc) fail_msg("exec inspect: %s", err.message);
  if (out) *out = common_buf_steal(&c.out, NULL);
  else common_buf_dispose(&c.out);
  return code;
}

/* The sandbox's tree, one line per entry (type, size, mode, owner, hash). */
static const char LIST_SCRIPT[] =
    "cd /workspace && find . -mindepth 1 | sort | while IFS= read -r f; do "
    "if [ -L \"$f\" ]; then echo \"$f|l|$(readlink \"$f\")|$(stat -c '%u:%g' \"$f\")\"; "
    "elif [ -d \"$f\" ]; then echo \"$f|d|$(stat -c '%a|%u:%g' \"$f\")\"; "
    "else echo \"$f|f|$(stat -c '%s|%a|%u:%g' \"$f\")|$(sha256sum < \"$f\" | cut -c1-16)\"; fi; "
    "done";

static char *box_list(box *b) {
  char *out = NULL;
  assert_int_equal(box_sh(b, LIST_SCRIPT, &out), 0);
  return out;
}

static int cmp_s(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void host_collect(const char *root, const char *rel, char ***v, size_t *n, size_t *cap) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s%s%s", root, rel[0] ? "/" : "", rel);
  DIR *d = opendir(dir);
  if (d == NULL) return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    char r[4096];
    snprintf(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
    if (*n == *cap) {
      *cap = *cap ? *cap * 2 : 64;
      *v = realloc(*v, *cap * sizeof **v);
    }
    (*v)[(*n)++] = strdup(r);
    if (de->d_type == DT_DIR) host_collect(root, r, v, n, cap);
  }
  closedir(d);
}

/* The same listing of a host directory; owner: "1000:1000" or NULL to
 * print the real one. */
static char *host_list(const char *root, const char *owner) {
  char **v = NULL;
  size_t n = 0, cap = 0;
  host_collect(root, "", &v, &n, &cap);
  char **dotted = calloc(n + 1, sizeof *dotted);
  for (size_t i = 0; i < n; i++) {
    dotted[i] = malloc(strlen(v[i]) + 3);
    sprintf(dotted[i], "./%s", v[i]);
    free(v[i]);
  }
  free(v);
  qsort(dotted, n, sizeof *dotted, cmp_s);
  common_buf b;
  common_buf_init(&b, (size_t)16 << 20);
  common_buf_append(&b, "", 0);
  for (size_t i = 0; i < n; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, dotted[i] + 2);
    struct stat st;
    lstat(p, &st);
    char own[64];
    snprintf(own, sizeof own, "%u:%u", (unsigned)st.st_uid, (unsigned)st.st_gid);
    const char *o = owner ? owner : own;
    if (S_ISLNK(st.st_mode)) {
      char l[4096];
      ssize_t k = readlink(p, l, sizeof l - 1);
      l[k > 0 ? k : 0] = '\0';
      common_buf_printf(&b, "%s|l|%s|%s\n", dotted[i], l, o);
    } else if (S_ISDIR(st.st_mode)) {
      common_buf_printf(&b, "%s|d|%o|%s\n", dotted[i], (unsigned)(st.st_mode & 07777), o);
    } else {
      unsigned char h[32];
      char hex[65];
      int fd = open(p, O_RDONLY);
      workspace_hash_fd_ok(fd, h, NULL);
      close(fd);
      workspace_hex(h, 32, hex);
      hex[16] = '\0';
      common_buf_printf(&b, "%s|f|%lld|%o|%s|%s\n", dotted[i], (long long)st.st_size,
                        (unsigned)(st.st_mode & 07777), o, hex);
    }
    free(dotted[i]);
  }
  free(dotted);
  return common_buf_steal(&b, NULL);
}

/* Drops the owner field so host and sandbox listings compare. */
static char *no_owner(const char *list) {
  size_t n = strlen(list);
  char *o = malloc(n + 1);
  size_t k = 0;
  const char *p = list;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    /* The owner is the field after the mode (files: before the hash). */
    char line[8192];
    snprintf(line, sizeof line, "%.*s", (int)len, p);
    char *own = strstr(line, "|1000:1000");
    if (own == NULL) own = strstr(line, "|0:0");
    if (own) {
      char *end = strchr(own + 1, '|');
      memmove(own, end ? end : own + strlen(own), strlen(end ? end : own + strlen(own)) + 1);
    }
    k += (size_t)snprintf(o + k, n + 1 - k, "%s\n", line);
    p += len + (nl ? 1 : 0);
  }
  o[k] = '\0';
  return o;
}

static void hput(box *b, const char *rel, const char *data) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", b->host, rel);
  tf_write_str(p, data);
}

static void hmkdir(box *b, const char *rel) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", b->host, rel);
  assert_int_equal(mkdir(p, 0755), 0);
}

static char *hget(box *b, const char *rel) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", b->host, rel);
  return tf_read(p, NULL);
}

static int hexists(box *b, const char *rel) {
  char p[1024];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", b->host, rel);
  return lstat(p, &st) == 0;
}

static void make_tree(box *b) {
  char p[1024];
  hput(b, "plain.txt", "hello\n");
  hput(b, "empty", "");
  hput(b, "name with spaces ünïcødé.txt", "utf-8\n");
  snprintf(p, sizeof p, "%s/bin.dat", b->host);
  FILE *f = fopen(p, "wb");
  for (int i = 0; i < 3 * 1024 * 1024; i++) fputc((i * 2654435761u) >> 24, f);
  fclose(f);
  hput(b, "run.sh", "#!/bin/sh\necho ran\n");
  snprintf(p, sizeof p, "%s/run.sh", b->host);
  chmod(p, 0755);
  snprintf(p, sizeof p, "%s/emptydir", b->host);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/src", b->host);
  mkdir(p, 0750);
  snprintf(p, sizeof p, "%s/src/deep", b->host);
  mkdir(p, 0755);
  hput(b, "src/deep/main.c", "int main(void) { return 0; }\n");
  snprintf(p, sizeof p, "%s/src/link", b->host);
  assert_int_equal(symlink("deep/main.c", p), 0);
  snprintf(p, sizeof p, "%s/hostlink", b->host);
  assert_int_equal(symlink("/etc/hostname", p), 0);
  /* Aged, as a real workspace is: then mtimes alone decide. */
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "find '%s' -exec touch -h -d '2024-01-02 03:04:05' {} +", b->host);
  assert_int_equal(system(cmd), 0);
}

static sm_workspace_sync *new_sync(box *b, const sm_string_list *ex, const sm_workspace_limits *lim) {
  sm_workspace_sync *s = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_workspace_sync_new(&s, b->host, b->manifest, ex, lim, &err)) fail_msg("%s", err.message);
  return s;
}

static void sync_in(sm_workspace_sync *s, box *b) {
  sm_error err = SM_ERROR_INIT;
  if (sm_workspace_sync_in(s, &b->t, &err)) fail_msg("sync in: %s", err.message);
}

static char *sync_out(sm_workspace_sync *s, box *b, char **conflicts_out) {
  char **ch = NULL, **cf = NULL;
  size_t nch = 0, ncf = 0;
  sm_error err = SM_ERROR_INIT;
  if (sm_workspace_sync_out(s, &b->t, &ch, &nch, &cf, &ncf, &err)) fail_msg("sync out: %s", err.message);
  common_buf o;
  common_buf_init(&o, 1 << 20);
  common_buf_append(&o, "", 0);
  for (size_t i = 0; i < nch; i++) common_buf_printf(&o, "%s%s", i ? "," : "", ch[i]);
  if (conflicts_out) {
    common_buf c;
    common_buf_init(&c, 1 << 20);
    common_buf_append(&c, "", 0);
    for (size_t i = 0; i < ncf; i++) common_buf_printf(&c, "%s%s", i ? "," : "", cf[i]);
    *conflicts_out = common_buf_steal(&c, NULL);
  }
  sm_workspace_free_list(ch, nch);
  sm_workspace_free_list(cf, ncf);
  return common_buf_steal(&o, NULL);
}

static void assert_same_tree(box *b) {
  char *in = box_list(b);
  char *hl = host_list(b->host, NULL);
  char *x = no_owner(in), *y = no_owner(hl);
  assert_string_equal(x, y);
  free(in);
  free(hl);
  free(x);
  free(y);
}

static void test_round_trip(void **state) {
  box *b = *state;
  make_tree(b);
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  /* Everything arrived, owned by the sandbox user. */
  char *in = box_list(b);
  char *expect = host_list(b->host, "1000:1000");
  assert_string_equal(in, expect);
  free(in);
  free(expect);
  int64_t bi, ei;
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 11);

  /* The tool modifies, adds, deletes, makes an executable and a link. */
  assert_int_equal(box_sh(b, "echo changed > plain.txt && printf 'new\\n' > 'new file ü.txt' && "
                             "rm empty && mkdir -p made/empty && printf x > made/tool.sh && "
                             "chmod 700 made/tool.sh && ln -s ../plain.txt made/lnk && "
                             "rm -r src/deep && rm src/link",
                          NULL),
                   0);
  char *changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "empty,made,made/empty,made/lnk,made/tool.sh,new file ü.txt,"
                               "plain.txt,src/deep,src/deep/main.c,src/link");
  free(changed);
  assert_true(workspace_sync_last_out_listed(s));
  assert_same_tree(b);
  char *c = hget(b, "plain.txt");
  assert_string_equal(c, "changed\n");
  free(c);
  struct stat st;
  char p[1024];
  snprintf(p, sizeof p, "%s/made/tool.sh", b->host);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);

  /* Nothing changed: nothing moves, nothing is reported. */
  sync_in(s, b);
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 0);
  assert_int_equal(bi, 0);
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  assert_true(workspace_sync_last_out_listed(s));

  /* Content changed with size and mtime kept (the tool sets the mtime
   * back): the ctime gives it away. */
  assert_int_equal(box_sh(b, "printf H | dd of=plain.txt bs=1 count=1 conv=notrunc 2>/dev/null && "
                             "touch -d '2024-01-02 03:04:05' plain.txt",
                          NULL),
                   0);
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "plain.txt");
  free(changed);
  char *pc = hget(b, "plain.txt");
  assert_string_equal(pc, "Hhanged\n");
  free(pc);

  /* A listing the tool's user cannot make (an unreadable directory): the
   * whole workspace is read instead, with the same result. */
  assert_int_equal(box_sh(b, "mkdir -p locked && echo in > locked/f && chmod 000 locked", NULL), 0);
  changed = sync_out(s, b, NULL);
  assert_false(workspace_sync_last_out_listed(s));
  assert_string_equal(changed, "locked,locked/f");
  free(changed);
  assert_int_equal(box_sh(b, "chmod 755 locked", NULL), 0);
  sm_workspace_sync_free(s);
}

static void test_incremental(void **state) {
  box *b = *state;
  make_tree(b);
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  char *changed = sync_out(s, b, NULL);
  free(changed);
  sm_workspace_sync_free(s);

  /* A later call of the same run (a new sync object, the saved manifest):
   * host changes go in, and only those. */
  hput(b, "plain.txt", "host edit\n");
  hput(b, "src/added.c", "/* added on the host */\n");
  char p[1024];
  snprintf(p, sizeof p, "%s/bin.dat", b->host);
  unlink(p);
  snprintf(p, sizeof p, "%s/emptydir", b->host);
  rmdir(p);
  s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  int64_t bi, ei;
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 2);
  assert_int_equal(bi, 10 + 24);
  assert_same_tree(b);

  /* Sandbox changes come back while the host changes something else. */
  assert_int_equal(box_sh(b, "echo tool > src/tool.txt && rm run.sh", NULL), 0);
  hput(b, "host-during-call.txt", "host\n");
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "run.sh,src/tool.txt");
  free(changed);
  assert_true(hexists(b, "host-during-call.txt"));
  assert_false(hexists(b, "run.sh"));

  /* Both sides edit the same file during a call: the host's stays, the
   * tool's lands beside it. */
  sync_in(s, b);
  assert_int_equal(box_sh(b, "echo 'tool version' > plain.txt", NULL), 0);
  hput(b, "plain.txt", "host version\n");
  char *conf = NULL;
  changed = sync_out(s, b, &conf);
  assert_string_equal(conf, "plain.txt.sandman-conflict");
  free(conf);
  free(changed);
  char *c = hget(b, "plain.txt");
  assert_string_equal(c, "host version\n");
  free(c);
  c = hget(b, "plain.txt.sandman-conflict");
  assert_string_equal(c, "tool version\n");
  free(c);
  /* The next call hands the host's version back to the sandbox. */
  sync_in(s, b);
  assert_same_tree(b);
  sm_workspace_sync_free(s);
}

/* The refusals of the last copy out as "path=reason,...". */
static char *refusals(sm_workspace_sync *s) {
  const sm_workspace_refusal *v = NULL;
  size_t n = sm_workspace_sync_refused(s, &v);
  common_buf o;
  common_buf_init(&o, 1 << 20);
  common_buf_append(&o, "", 0);
  for (size_t i = 0; i < n; i++)
    common_buf_printf(&o, "%s%s=%s", i ? "," : "", v[i].path, v[i].reason);
  return common_buf_steal(&o, NULL);
}

/* Links the tool made that leave the workspace are refused one by one; the
 * rest of its work comes back; a refusal is reported once; once the tool
 * removes the link, nothing more is said. */
static void test_planted_symlink(void **state) {
  box *b = *state;
  hput(b, "a.txt", "a\n");
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  assert_int_equal(box_sh(b, "echo edit > a.txt && ln -s /etc/passwd evil && mkdir -p d && "
                             "ln -s ../../.. d/up && mkfifo pipe",
                          NULL),
                   0);
  char *changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "a.txt,d");
  free(changed);
  char *r = refusals(s);
  assert_string_equal(r, "d/up=link_outside,evil=link_absolute,pipe=fifo");
  free(r);
  assert_false(hexists(b, "evil"));
  assert_false(hexists(b, "d/up"));
  assert_false(hexists(b, "pipe"));
  char *c = hget(b, "a.txt");
  assert_string_equal(c, "edit\n");
  free(c);
  /* Unchanged: refused again without a word (and without a fetch). */
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  r = refusals(s);
  assert_string_equal(r, "");
  free(r);
  assert_true(workspace_sync_last_out_listed(s));
  /* The next copy in leaves them in the sandbox. */
  sync_in(s, b);
  char *out = NULL;
  assert_int_equal(box_sh(b, "readlink evil && readlink d/up && test -p pipe", &out), 0);
  assert_string_equal(out, "/etc/passwd\n../../..\n");
  free(out);
  /* Once the tool removes them, nothing more is said. */
  assert_int_equal(box_sh(b, "rm evil d/up pipe", NULL), 0);
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  r = refusals(s);
  assert_string_equal(r, "");
  free(r);
  sm_workspace_sync_free(s);
}

static void test_interrupted(void **state) {
  box *b = *state;
  make_tree(b);
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  /* A copy in cut half way is an error, and the next one is complete. */
  workspace_sync_abort_after(s, 1 << 20);
  sm_error err = SM_ERROR_INIT;
  assert_int_not_equal(sm_workspace_sync_in(s, &b->t, &err), 0);
  workspace_sync_abort_after(s, -1);
  sync_in(s, b);
  assert_same_tree(b);
  /* The tool rewrites a lot; the copy out is cut half way: the host
   * workspace is exactly as it was. */
  assert_int_equal(box_sh(b, "dd if=/dev/zero of=bin.dat bs=1024 count=2048 2>/dev/null && "
                             "echo x > plain.txt && rm -r src && echo y > added",
                          NULL),
                   0);
  char *before = host_list(b->host, NULL);
  workspace_sync_abort_after(s, 1 << 20);
  char **ch = NULL, **cf = NULL;
  size_t nch = 0, ncf = 0;
  assert_int_not_equal(sm_workspace_sync_out(s, &b->t, &ch, &nch, &cf, &ncf, &err), 0);
  char *after = host_list(b->host, NULL);
  assert_string_equal(before, after);
  free(after);
  /* A byte cap hit mid-way: the same. */
  workspace_sync_abort_after(s, -1);
  sm_workspace_sync_free(s);
  sm_workspace_limits lim = {1 << 20, 0, 0};
  s = new_sync(b, NULL, &lim);
  assert_int_equal(sm_workspace_sync_out(s, &b->t, &ch, &nch, &cf, &ncf, &err), SM_ETOOBIG);
  assert_non_null(strstr(err.message, "bin.dat"));
  after = host_list(b->host, NULL);
  assert_string_equal(before, after);
  free(after);
  free(before);
  sm_workspace_sync_free(s);
  /* Then a full one goes through. */
  s = new_sync(b, NULL, NULL);
  char *changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "added,bin.dat,plain.txt,src,src/deep,src/deep/main.c,src/link");
  free(changed);
  assert_same_tree(b);
  sm_workspace_sync_free(s);
}

static void test_hardlinks_and_excludes(void **state) {
  box *b = *state;
  hput(b, "keep.txt", "keep\n");
  hput(b, "secret.env", "TOKEN=1\n");
  char p[1024];
  snprintf(p, sizeof p, "%s/node_modules", b->host);
  mkdir(p, 0755);
  hput(b, "node_modules/dep.js", "dep\n");
  sm_string_list ex = {0};
  sm_string_list_add(&ex, "*.env", NULL);
  sm_string_list_add(&ex, "node_modules", NULL);
  sm_workspace_sync *s = new_sync(b, &ex, NULL);
  sync_in(s, b);
  char *list = box_list(b);
  assert_null(strstr(list, "secret.env"));
  assert_null(strstr(list, "node_modules"));
  free(list);
  assert_int_equal(box_sh(b, "ln keep.txt hard.txt && echo v > out.env && mkdir node_modules && "
                             "echo t > node_modules/x.js",
                          NULL),
                   0);
  char *changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "hard.txt");
  free(changed);
  char *c = hget(b, "hard.txt");
  assert_string_equal(c, "keep\n");
  free(c);
  c = hget(b, "secret.env");
  assert_string_equal(c, "TOKEN=1\n");
  free(c);
  assert_false(hexists(b, "out.env"));
  assert_false(hexists(b, "node_modules/x.js"));
  sm_workspace_sync_free(s);
}

static void test_recreated_sandbox(void **state) {
  box *b = *state;
  hput(b, "keep.txt", "keep\n");
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  sm_workspace_sync_free(s);
  /* The manifest now names an older container of the same sandbox, whose
   * volume held a file the host has since deleted. */
  char *m = tf_read(b->manifest, NULL);
  assert_non_null(m);
  char *c = strstr(m, "container ");
  assert_non_null(c);
  memset(c + 10, 'f', 12);
  tf_write_str(b->manifest, m);
  free(m);
  assert_int_equal(box_sh(b, "echo stale > stale.txt", NULL), 0);
  s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  char *list = box_list(b);
  assert_null(strstr(list, "stale.txt"));
  assert_non_null(strstr(list, "keep.txt"));
  free(list);
  char *changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  assert_false(hexists(b, "stale.txt"));
  sm_workspace_sync_free(s);
}

static void test_readonly_dir_in_sandbox(void **state) {
  box *b = *state;
  char p[1024];
  snprintf(p, sizeof p, "%s/ro", b->host);
  mkdir(p, 0755);
  hput(b, "ro/f.txt", "f\n");
  hput(b, "ro/g.txt", "g\n");
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  /* The tool makes the directory read-only; the host then deletes a file
   * in it: the copy in still deletes it in the sandbox. */
  assert_int_equal(box_sh(b, "chmod 555 ro", NULL), 0);
  char *changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "ro");
  free(changed);
  snprintf(p, sizeof p, "%s/ro", b->host);
  chmod(p, 0755);
  snprintf(p, sizeof p, "%s/ro/f.txt", b->host);
  unlink(p);
  sync_in(s, b);
  char *list = box_list(b);
  assert_null(strstr(list, "f.txt"));
  assert_non_null(strstr(list, "g.txt"));
  free(list);
  sm_workspace_sync_free(s);
}

/* The first copy into a fresh sandbox starts its upload before the scan
 * (its stream opens with "./", which the engine skips). A scan that fails
 * (a cap) then ends that upload: nothing lands in the sandbox, the error
 * is the cap's, and the sandbox's root keeps its own mode. The next try
 * copies everything, and its ctimes are recorded (nothing is fetched). */
static void test_first_copy_early_upload(void **state) {
  box *b = *state;
  char p[1024];
  for (int i = 0; i < 40; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "f%02d.txt", i);
    hput(b, rel, rel);
  }
  /* Aged (then mtimes alone decide), and a root mode the sandbox's
   * /workspace does not have. */
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "find '%s' -exec touch -h -d '2024-01-02 03:04:05' {} +", b->host);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(chmod(b->host, 0700), 0);
  sm_workspace_limits lim = {0};
  lim.max_entries = 10;
  sm_workspace_sync *s = new_sync(b, NULL, &lim);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_workspace_sync_in(s, &b->t, &err), SM_ETOOBIG);
  assert_non_null(strstr(err.message, "entries"));
  sm_workspace_sync_free(s);
  char *list = box_list(b);
  assert_string_equal(list, "");
  free(list);
  char *root = NULL;
  assert_int_equal(box_sh(b, "stat -c '%a %u:%g' /workspace", &root), 0);
  assert_string_equal(root, "755 1000:1000\n");
  free(root);

  s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  int64_t bi, ei;
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 40);
  char *in = box_list(b);
  char *expect = host_list(b->host, "1000:1000");
  assert_string_equal(in, expect);
  free(in);
  free(expect);
  assert_int_equal(box_sh(b, "stat -c '%a %u:%g' /workspace", &root), 0);
  assert_string_equal(root, "755 1000:1000\n");
  free(root);
  char *changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  assert_true(workspace_sync_last_out_listed(s));
  sm_workspace_sync_free(s);

  /* A later copy in sends three edited files (old mtimes: no racy rule);
   * the listing after it stats just those, and records their ctimes: the
   * copy out fetches nothing, yet still sees a change that keeps size and
   * mtime. */
  s = new_sync(b, NULL, NULL);
  hput(b, "f01.txt", "F01.txt");
  hput(b, "f02.txt", "F02.txt");
  hput(b, "f03.txt", "F03.txt");
  snprintf(cmd, sizeof cmd, "cd '%s' && touch -d '2024-03-04 05:06:07' f01.txt f02.txt f03.txt",
           b->host);
  assert_int_equal(system(cmd), 0);
  sync_in(s, b);
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 3);
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  assert_true(workspace_sync_last_out_listed(s));
  int64_t bo = -1;
  sm_workspace_sync_stats(s, NULL, NULL, &bo, NULL);
  assert_int_equal(bo, 0);
  assert_int_equal(box_sh(b, "printf X | dd of=f02.txt bs=1 count=1 conv=notrunc 2>/dev/null && "
                             "touch -d '2024-03-04 05:06:07' f02.txt",
                          NULL),
                   0);
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "f02.txt");
  free(changed);
  char *f02 = hget(b, "f02.txt");
  assert_string_equal(f02, "X02.txt");
  free(f02);
  sm_workspace_sync_free(s);
  snprintf(p, sizeof p, "%s", b->host);
  chmod(p, 0755);
}

/* 13.4: a copy in never follows what the sandbox planted. A directory the
 * tool replaced by a link (to /etc, which the engine as root could write,
 * and to /tmp/trap, which the sandbox user could) gets the host's new file
 * inside a real directory; a process of the sandbox swapping the directory
 * for a link again and again while copies run never gets a write through
 * it (a copy may fail then: nothing lands outside /workspace either way). */
static void test_planted_link_copy_in(void **state) {
  box *b = *state;
  hmkdir(b, "d");
  hput(b, "d/a.txt", "a\n");
  hmkdir(b, "r");
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  assert_int_equal(box_sh(b, "mkdir /tmp/trap && rm -rf d && ln -s /etc d", NULL), 0);
  hput(b, "d/passwd", "planted?\n");
  sync_in(s, b);
  char *out = NULL;
  assert_int_equal(box_sh(b, "[ -d d ] && [ ! -L d ] && cat d/passwd && ! [ -e /etc/a.txt ] && "
                             "grep -c planted /etc/passwd",
                          &out),
                   1); /* grep found nothing */
  assert_string_equal(out, "planted?\n0\n");
  free(out);

  /* The racer: swaps r for a link, as fast as it can, while copies run. */
  assert_int_equal(box_sh(b, "sh -c 'echo $$ > /tmp/racer.pid; while :; do rm -rf r; "
                             "ln -s /etc r; rm -rf r; ln -s /tmp/trap r; done' >/dev/null 2>&1 & "
                             "while [ ! -s /tmp/racer.pid ]; do :; done",
                          NULL),
                   0);
  int ok = 0, failed = 0;
  for (int i = 0; i < 20; i++) {
    char rel[32];
    snprintf(rel, sizeof rel, "r/f%02d", i);
    hput(b, rel, "through?\n");
    sm_error err = SM_ERROR_INIT;
    if (sm_workspace_sync_in(s, &b->t, &err) == 0) ok++;
    else failed++;
  }
  assert_int_equal(box_sh(b, "kill $(cat /tmp/racer.pid)", NULL), 0);
  print_message("planted-link race: %d copies in went through, %d failed\n", ok, failed);
  assert_int_equal(box_sh(b, "ls -A /tmp/trap; ls /etc | grep -c '^f[0-9]'", &out), 1);
  assert_string_equal(out, "0\n");
  free(out);
  sm_workspace_sync_free(s);
}

/* ---- the copy out's quick check (sandman-agent wsdigest) ----
 * The sandbox layer hands the workspace an agent session (t->run); here a
 * hook stands in for it: every command goes through an engine exec as
 * without one, and the digest's answer can be recorded and replayed, as a
 * tool that controls what the sandbox's processes print could forge it. */
enum { DIGEST_HONEST, DIGEST_RECORD, DIGEST_FORGE, DIGEST_GARBAGE };

typedef struct quick_hook {
  box *b;
  int mode;
  char recorded[160];
  int digests;  /* wsdigest commands run */
  int others;   /* other commands (the listing, deletes, the unpacker) */
} quick_hook;

static int quick_run(void *ud, const char *const *argv, size_t argc, sm_read_fn in, void *in_ud,
                     sm_output_fn out, void *out_ud, int *exit_code, sm_error *err) {
  quick_hook *h = ud;
  if (argc < 2 || strcmp(argv[1], "wsdigest") != 0) {
    h->others++;
    return 1; /* an engine exec, as without a session */
  }
  h->digests++;
  *exit_code = 0;
  if (h->mode == DIGEST_FORGE) return out(out_ud, 1, h->recorded, strlen(h->recorded));
  if (h->mode == DIGEST_GARBAGE) return out(out_ud, 1, "wsdigest 00 1\n", 14);
  sm_workspace_target plain = h->b->t;
  plain.run = NULL;
  common_buf o;
  common_buf_init(&o, 4096);
  common_buf_append(&o, "", 0);
  int rc = workspace_box_exec(plain.engine, &plain, argv, argc, in, in_ud, &o, exit_code, err);
  if (rc == 0 && h->mode == DIGEST_RECORD) snprintf(h->recorded, sizeof h->recorded, "%s", o.data);
  if (rc == 0) rc = out(out_ud, 1, o.data, o.len);
  common_buf_dispose(&o);
  return rc;
}

static void quick_attach(box *b, quick_hook *h, int mode) {
  memset(h, 0, sizeof *h);
  h->b = b;
  h->mode = mode;
  b->t.run = quick_run;
  b->t.run_ud = h;
}

/* An unchanged workspace: one digest, no listing, nothing moves; a tool's
 * change of any kind is found and comes back as before. */
static void test_quick_unchanged(void **state) {
  box *b = *state;
  make_tree(b);
  quick_hook h;
  quick_attach(b, &h, DIGEST_HONEST);
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  h.others = 0;
  char *changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  assert_true(workspace_sync_last_out_quick(s));
  assert_int_equal(h.digests, 1);
  assert_int_equal(h.others, 0);
  sm_workspace_sync_free(s);

  /* A later call (a new sync over the saved manifest): the same. */
  s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  assert_true(workspace_sync_last_out_quick(s));
  assert_same_tree(b);

  /* Content changed with size and mtime kept: the ctime gives it away. */
  assert_int_equal(box_sh(b, "printf H | dd of=plain.txt bs=1 count=1 conv=notrunc 2>/dev/null && "
                             "touch -d '2024-01-02 03:04:05' plain.txt",
                          NULL),
                   0);
  changed = sync_out(s, b, NULL);
  assert_false(workspace_sync_last_out_quick(s));
  assert_string_equal(changed, "plain.txt");
  free(changed);
  char *c = hget(b, "plain.txt");
  assert_string_equal(c, "Hello\n");
  free(c);
  /* Every other kind of change (a file written within two seconds of a
   * copy is compared by content, with a listing: this one is dated). */
  const char *tools[] = {"chmod 700 src", "touch -d '2024-01-02 03:04:05' src/deep/new.c",
                         "rm empty", "ln -sfn ../run.sh src/link", "mkdir emptydir/sub"};
  const char *want[] = {"src", "src/deep/new.c", "empty", "src/link", "emptydir/sub"};
  for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
    sync_in(s, b);
    changed = sync_out(s, b, NULL);
    assert_true(workspace_sync_last_out_quick(s));
    free(changed);
    assert_int_equal(box_sh(b, tools[i], NULL), 0);
    changed = sync_out(s, b, NULL);
    assert_false(workspace_sync_last_out_quick(s));
    assert_string_equal(changed, want[i]);
    free(changed);
    assert_same_tree(b);
  }
  sm_workspace_sync_free(s);
  b->t.run = NULL;
}

/* A change on the host between calls is still copied in; what was
 * refused before and stands unchanged does not stop the quick check; nor
 * does what the excludes leave out. */
static void test_quick_host_held_excludes(void **state) {
  box *b = *state;
  make_tree(b);
  quick_hook h;
  quick_attach(b, &h, DIGEST_HONEST);
  sm_string_list ex = {0};
  sm_string_list_add(&ex, "node_modules", NULL);
  sm_workspace_sync *s = new_sync(b, &ex, NULL);
  sync_in(s, b);
  free(sync_out(s, b, NULL));
  assert_true(workspace_sync_last_out_quick(s));
  hput(b, "plain.txt", "edited on the host\n");
  /* Dated, or it is compared by content for two seconds (racy). */
  char p[1024];
  snprintf(p, sizeof p, "%s/plain.txt", b->host);
  struct timespec ts[2] = {{1704164645, 0}, {1704164645, 0}};
  assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
  sync_in(s, b);
  int64_t bi, ei;
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  assert_int_equal(ei, 1);
  char *out = NULL;
  assert_int_equal(box_sh(b, "cat plain.txt", &out), 0);
  assert_string_equal(out, "edited on the host\n");
  free(out);
  free(sync_out(s, b, NULL));
  assert_same_tree(b);

  /* The tool's link out of the workspace is refused once, then held. */
  assert_int_equal(box_sh(b, "ln -s /etc/passwd evil && mkdir -p node_modules && "
                             "echo m > node_modules/m.js",
                          NULL),
                   0);
  free(sync_out(s, b, NULL));
  char *r = refusals(s);
  assert_string_equal(r, "evil=link_absolute");
  free(r);
  assert_false(hexists(b, "evil"));
  assert_false(hexists(b, "node_modules"));
  assert_int_equal(box_sh(b, "echo n > node_modules/n.js", NULL), 0);
  sync_in(s, b);
  char *changed = sync_out(s, b, NULL);
  assert_true(workspace_sync_last_out_quick(s));
  assert_string_equal(changed, "");
  free(changed);
  r = refusals(s);
  assert_string_equal(r, "");
  free(r);
  sm_workspace_sync_free(s);
  b->t.run = NULL;
}

/* The attack: the sandbox's answer to the quick check says "nothing
 * changed" (recorded before the tool's changes and replayed, as a tool
 * that ptraces the agent's child could make it say). Nothing of the
 * tool's reaches the host then, and its changes are not lost for the
 * checks: the next honest copy out refuses the hook and the link and
 * reports them, and brings back its ordinary change, checked. A change
 * the tool hid that way while the host changed the same file is the
 * tool's loss: the host's version goes in and stays. */
static void test_quick_forged(void **state) {
  box *b = *state;
  make_tree(b);
  hmkdir(b, ".git");
  hmkdir(b, ".git/hooks");
  hput(b, "other.txt", "other\n");
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "find '%s' -exec touch -h -d '2024-01-02 03:04:05' {} +", b->host);
  assert_int_equal(system(cmd), 0);
  quick_hook h;
  quick_attach(b, &h, DIGEST_RECORD);
  sm_workspace_sync *s = new_sync(b, NULL, NULL);
  sync_in(s, b);
  free(sync_out(s, b, NULL));
  assert_true(workspace_sync_last_out_quick(s));
  assert_true(strncmp(h.recorded, "wsdigest ", 9) == 0);

  assert_int_equal(box_sh(b, "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit && "
                             "chmod 755 .git/hooks/pre-commit && ln -s /etc/shadow evil && "
                             "echo 'tool edit' > plain.txt && "
                             "touch -d '2024-01-02 03:04:05' plain.txt",
                          NULL),
                   0);
  h.mode = DIGEST_FORGE;
  char *changed = sync_out(s, b, NULL);
  assert_true(workspace_sync_last_out_quick(s));
  assert_string_equal(changed, "");
  free(changed);
  assert_false(hexists(b, ".git/hooks/pre-commit"));
  assert_false(hexists(b, "evil"));
  char *c = hget(b, "plain.txt");
  assert_string_equal(c, "hello\n");
  free(c);

  /* The next call, nothing changed on the host, an honest answer. */
  sm_workspace_sync_free(s);
  s = new_sync(b, NULL, NULL);
  h.mode = DIGEST_HONEST;
  sync_in(s, b);
  changed = sync_out(s, b, NULL);
  assert_false(workspace_sync_last_out_quick(s));
  assert_string_equal(changed, "plain.txt");
  free(changed);
  char *r = refusals(s);
  assert_string_equal(r, ".git/hooks/pre-commit=protected,evil=link_absolute");
  free(r);
  assert_false(hexists(b, ".git/hooks/pre-commit"));
  assert_false(hexists(b, "evil"));
  c = hget(b, "plain.txt");
  assert_string_equal(c, "tool edit\n");
  free(c);

  /* Hidden again, while the host edits the same file. */
  sync_in(s, b);
  h.mode = DIGEST_RECORD;
  free(sync_out(s, b, NULL));
  assert_true(workspace_sync_last_out_quick(s));
  assert_int_equal(box_sh(b, "echo 'tool other' > other.txt", NULL), 0);
  h.mode = DIGEST_FORGE;
  free(sync_out(s, b, NULL));
  assert_true(workspace_sync_last_out_quick(s));
  hput(b, "other.txt", "host other\n");
  sync_in(s, b);
  char *out = NULL;
  assert_int_equal(box_sh(b, "cat other.txt", &out), 0);
  assert_string_equal(out, "host other\n");
  free(out);
  h.mode = DIGEST_HONEST;
  changed = sync_out(s, b, NULL);
  assert_string_equal(changed, "");
  free(changed);
  c = hget(b, "other.txt");
  assert_string_equal(c, "host other\n");
  free(c);

  /* An answer that does not parse is no answer: the listing decides. */
  assert_int_equal(box_sh(b, "echo again > plain.txt", NULL), 0);
  h.mode = DIGEST_GARBAGE;
  changed = sync_out(s, b, NULL);
  assert_false(workspace_sync_last_out_quick(s));
  assert_string_equal(changed, "plain.txt");
  free(changed);
  sm_workspace_sync_free(s);
  b->t.run = NULL;
}

int main(void) {
  const char *only = getenv("WS_IT_ONLY");
  if (only && only[0]) cmocka_set_test_filter(only);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_incremental, setup, teardown),
      cmocka_unit_test_setup_teardown(test_planted_symlink, setup, teardown),
      cmocka_unit_test_setup_teardown(test_interrupted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hardlinks_and_excludes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recreated_sandbox, setup, teardown),
      cmocka_unit_test_setup_teardown(test_readonly_dir_in_sandbox, setup, teardown),
      cmocka_unit_test_setup_teardown(test_first_copy_early_upload, setup, teardown),
      cmocka_unit_test_setup_teardown(test_planted_link_copy_in, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quick_unchanged, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quick_host_held_excludes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quick_forged, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
