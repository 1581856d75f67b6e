/* Workspace sync: the public API. Copy in sends a tar of what changed on the
 * host (since the manifest) into the sandbox and deletes there what the host
 * deleted; copy out reads the sandbox's tar through the checking extractor,
 * stages it inside the host workspace and applies it file by file. Mode
 * none runs the very same packer and extractor against a scratch directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <sandman/log.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/thread.h"
#include "workspace/ws.h"

#define RM_BATCH_PATHS 256
#define RM_BATCH_BYTES (96 * 1024)
#define RING_BYTES ((size_t)1 << 20)

struct sm_workspace_sync {
  char *host_dir;
  char *manifest_path;
  sm_string_list excludes;
  int64_t max_bytes, max_entries, max_path;
  ws_manifest base;      /* state of both sides after the last sync */
  ws_manifest held;      /* the sandbox's versions of what the host did not get */
  ws_protect *protect;   /* changes never applied to the host (NULL: none) */
  ws_refusal_list refused; /* what the last copy out reports as not applied */
  ws_redact redact;      /* values log lines must not quote */
  int have_base;         /* base describes base.container / base.root */
  int wipe_first;        /* stale sandbox content may be there: clear it */
  int had_manifest;      /* a manifest was on disk (for some sandbox) */
  int disk_current;      /* the manifest file says what base says */
  int64_t bytes_in, entries_in, bytes_out, entries_out;
  int64_t abort_after;
  int64_t abort_spent;   /* bytes counted against abort_after in this copy */
  int last_out_listed;
};

int ws_sync_last_out_listed(const sm_workspace_sync *sync) { return sync->last_out_listed; }

void ws_sync_abort_after(sm_workspace_sync *sync, int64_t bytes) { sync->abort_after = bytes; }

/* Wall clock in ns: compared with file times, here and in the sandbox. */
static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}


static int64_t abort_budget(const sm_workspace_sync *s) {
  if (s->abort_after < 0) return -1;
  return s->abort_after > s->abort_spent ? s->abort_after - s->abort_spent : 0;
}

int sm_workspace_sync_new(sm_workspace_sync **out, const char *host_dir, const char *manifest_path,
                          const sm_string_list *excludes, const sm_workspace_limits *limits,
                          sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  *out = NULL;
  if (host_dir == NULL || host_dir[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no workspace directory given");
  struct stat st;
  if (stat(host_dir, &st) != 0)
    return sm_error_set_errno(err, SM_EINVAL, errno, "workspace %s: %s", host_dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return sm_error_set(err, SM_EINVAL, "workspace %s is not a directory", host_dir);
  sm_workspace_sync *s = calloc(1, sizeof *s);
  if (s == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  s->host_dir = strdup(host_dir);
  s->manifest_path = manifest_path ? strdup(manifest_path) : NULL;
  if (s->host_dir == NULL || (manifest_path && s->manifest_path == NULL)) {
    sm_workspace_sync_free(s);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  if (excludes) s->excludes = *excludes;
  s->max_bytes = limits && limits->max_bytes > 0 ? limits->max_bytes : WS_DEFAULT_MAX_BYTES;
  s->max_entries = limits && limits->max_entries > 0 ? limits->max_entries : WS_DEFAULT_MAX_ENTRIES;
  s->max_path = limits && limits->max_path > 0 ? limits->max_path : WS_DEFAULT_MAX_PATH;
  s->abort_after = -1;
  ws_manifest_init(&s->base);
  ws_manifest_init(&s->held);
  /* Protected by default: the built-in list until the caller says otherwise. */
  sm_string_list builtin;
  sm_workspace_protect_defaults(&builtin);
  int prc = ws_protect_new(&s->protect, &builtin, err);
  if (prc) {
    sm_workspace_sync_free(s);
    return prc;
  }
  if (s->manifest_path) {
    sm_error lerr = SM_ERROR_INIT;
    if (ws_manifest_load(&s->base, &s->held, s->manifest_path, s->max_entries, &lerr) != 0) {
      sm_log(SM_LOG_WARN, "workspace: ignoring the manifest (%s); the next copy is a full one",
             lerr.message);
      ws_manifest_clear(&s->base);
      s->wipe_first = 1;
    } else {
      s->have_base = s->base.root != NULL;
      s->had_manifest = s->have_base;
      s->disk_current = s->have_base;
    }
  }
  *out = s;
  return 0;
}

void sm_workspace_sync_free(sm_workspace_sync *sync) {
  if (sync == NULL) return;
  ws_manifest_dispose(&sync->base);
  ws_manifest_dispose(&sync->held);
  ws_protect_free(sync->protect);
  ws_refusal_list_dispose(&sync->refused);
  ws_redact_dispose(&sync->redact);
  free(sync->host_dir);
  free(sync->manifest_path);
  free(sync);
}

void sm_workspace_sync_stats(const sm_workspace_sync *s, int64_t *bytes_in, int64_t *entries_in,
                             int64_t *bytes_out, int64_t *entries_out) {
  if (bytes_in) *bytes_in = s->bytes_in;
  if (entries_in) *entries_in = s->entries_in;
  if (bytes_out) *bytes_out = s->bytes_out;
  if (entries_out) *entries_out = s->entries_out;
}

int sm_workspace_sync_set_protect(sm_workspace_sync *s, const sm_string_list *globs,
                                  sm_error *err) {
  ws_protect *p = NULL;
  int rc = ws_protect_new(&p, globs, err);
  if (rc) return rc;
  ws_protect_free(s->protect);
  s->protect = p;
  return 0;
}

int sm_workspace_sync_set_redact(sm_workspace_sync *s, const char *const *kv, size_t n,
                                 sm_error *err) {
  if (ws_redact_set(&s->redact, kv, n) != 0) return sm_error_set(err, SM_ENOMEM, "out of memory");
  return 0;
}

size_t sm_workspace_sync_refused(const sm_workspace_sync *s, const sm_workspace_refusal **out) {
  if (out) *out = s->refused.v;
  return s->refused.n;
}

const char *sm_workspace_refusal_text(const char *reason) {
  return ws_reason_text(ws_reason_parse(reason));
}

int sm_workspace_protect_check(const char *glob, sm_error *err) {
  return ws_protect_glob_check(glob ? glob : "", err);
}

void sm_workspace_free_list(char **list, size_t n) {
  if (list == NULL) return;
  for (size_t i = 0; i < n; i++) free(list[i]);
  free(list);
}

static int check_target(const sm_workspace_target *t, sm_error *err) {
  if (t == NULL || t->sandbox_path == NULL || t->sandbox_path[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no sandbox workspace path given");
  if (t->engine && (t->container_id == NULL || t->container_id[0] == '\0'))
    return sm_error_set(err, SM_EINVAL, "no container given for the workspace copy");
  if (t->engine && t->sandbox_path[0] != '/')
    return sm_error_set(err, SM_EINVAL, "sandbox workspace path '%s' is not absolute",
                        t->sandbox_path);
  return 0;
}

static const char *target_container(const sm_workspace_target *t) {
  return t->engine ? t->container_id : "";
}

/* Does the manifest describe this very sandbox? */
static int base_matches(const sm_workspace_sync *s, const sm_workspace_target *t) {
  return s->have_base && s->base.root && strcmp(s->base.container, target_container(t)) == 0 &&
         strcmp(s->base.root, t->sandbox_path) == 0;
}

static int open_host(const sm_workspace_sync *s, sm_error *err) {
  int fd = open(s->host_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, errno, "workspace %s: %s", s->host_dir, strerror(errno));
  return fd;
}

static const char *last_component(const char *path, char *buf, size_t len) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  size_t start = n;
  while (start > 0 && path[start - 1] != '/') start--;
  snprintf(buf, len, "%.*s", (int)(n - start), path + start);
  return buf;
}

/* ---- commands run in the sandbox (deletions) ---- */

typedef struct exec_out {
  sm_buf err;
  sm_buf *out;      /* stdout kept here when given */
  int overflow;
} exec_out;

static int exec_collect(void *ud, int stream, const char *data, size_t len) {
  exec_out *o = ud;
  if (stream == 1 && o->out) {
    if (sm_buf_append(o->out, data, len) != 0) {
      o->overflow = 1;
      return SM_ETOOBIG;
    }
    return 0;
  }
  sm_buf_append_capped(&o->err, data, len);
  return 0;
}

/* Runs argv in the sandbox as the workspace owner; a non-zero exit is an
 * error quoting stderr (and its code in *code_out, when given). out (may
 * be NULL) receives stdout up to its cap. */
static int box_exec_code(sm_engine *engine, const sm_workspace_target *t, const char *const *argv,
                         size_t argc, sm_read_fn in, void *in_ud, sm_buf *out, int *code_out,
                         sm_error *err) {
  if (code_out) *code_out = 0;
  if (t->run && engine == t->engine) {
    /* The sandbox layer's own way in (its agent): no engine round trips. */
    exec_out o;
    sm_buf_init(&o.err, 4096);
    o.out = out;
    o.overflow = 0;
    int code = 0;
    int rc = t->run(t->run_ud, argv, argc, in, in_ud, exec_collect, &o, &code, err);
    if (rc == 1) {
      sm_buf_dispose(&o.err);
      sm_workspace_target plain = *t;
      plain.run = NULL;
      return box_exec_code(engine, &plain, argv, argc, in, in_ud, out, code_out, err);
    }
    if (o.overflow)
      rc = sm_error_set(err, SM_ETOOBIG, "'%s' in the sandbox printed too much", argv[0]);
    if (rc == 0 && code_out) *code_out = code;
    if (rc == 0 && code != 0)
      rc = sm_error_set(err, SM_ESANDBOX, "'%s' in the sandbox exited with %d: %s", argv[0], code,
                        o.err.data ? o.err.data : "");
    sm_buf_dispose(&o.err);
    return rc;
  }
  cleanup_json json_object *cfg = json_object_new_object();
  json_object *cmd = json_object_new_array();
  for (size_t i = 0; i < argc; i++) json_object_array_add(cmd, json_object_new_string(argv[i]));
  json_object_object_add(cfg, "Cmd", cmd);
  if (t->uid > 0) {
    char user[64];
    snprintf(user, sizeof user, "%d:%d", t->uid, t->gid > 0 ? t->gid : t->uid);
    json_object_object_add(cfg, "User", json_object_new_string(user));
  }
  json_object_object_add(cfg, "AttachStdin", json_object_new_boolean(in != NULL));
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  json_object_object_add(cfg, "Tty", json_object_new_boolean(0));
  json_object_object_add(cfg, "WorkingDir", json_object_new_string("/"));
  char exec_id[SM_ENGINE_ID_MAX];
  int rc = sm_engine_exec_create(engine, t->container_id, cfg, exec_id, err);
  if (rc) return rc;
  exec_out o;
  sm_buf_init(&o.err, 4096);
  o.out = out;
  o.overflow = 0;
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.output = exec_collect;
  io.output_ud = &o;
  io.stdin_read = in;
  io.stdin_ud = in_ud;
  /* With stdin the command first waits for the upload it follows. */
  io.timeout_s = in ? 3600 : 300;
  rc = sm_engine_exec_start(engine, exec_id, &io, err);
  if (o.overflow) rc = sm_error_set(err, SM_ETOOBIG, "'%s' in the sandbox printed too much", argv[0]);
  int code = 0;
  if (rc == 0) rc = sm_engine_exec_inspect(engine, exec_id, NULL, &code, NULL, err);
  if (rc == 0 && code_out) *code_out = code;
  if (rc == 0 && code != 0)
    rc = sm_error_set(err, SM_ESANDBOX, "'%s' in the sandbox exited with %d: %s", argv[0], code,
                      o.err.data ? o.err.data : "");
  sm_buf_dispose(&o.err);
  return rc;
}

static int box_exec_on(sm_engine *engine, const sm_workspace_target *t, const char *const *argv,
                       size_t argc, sm_read_fn in, void *in_ud, sm_buf *out, sm_error *err) {
  return box_exec_code(engine, t, argv, argc, in, in_ud, out, NULL, err);
}

static int box_exec(const sm_workspace_target *t, const char *const *argv, size_t argc,
                    sm_buf *out, sm_error *err) {
  return box_exec_on(t->engine, t, argv, argc, NULL, NULL, out, err);
}

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Deletes paths (relative, sorted) in the sandbox with batched `rm -rf`. */
static int box_delete(const sm_workspace_target *t, char **paths, size_t n, sm_error *err) {
  const char **argv = calloc(RM_BATCH_PATHS + 5, sizeof *argv);
  char **owned = calloc(RM_BATCH_PATHS, sizeof *owned);
  if (argv == NULL || owned == NULL) {
    free(argv);
    free(owned);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  int rc = 0;
  size_t i = 0;
  const char *root = t->sandbox_path;
  size_t rlen = strlen(root);
  while (rlen > 1 && root[rlen - 1] == '/') rlen--;
  while (i < n && rc == 0) {
    size_t argc = 0, bytes = 0, k = 0;
    /* If the tool made a directory read-only, rm alone fails: then make
     * the parents writable for the owner and try once more. */
    argv[argc++] = "sh";
    argv[argc++] = "-c";
    argv[argc++] = "rm -rf -- \"$@\" 2>/dev/null && exit 0; "
                   "for p; do chmod u+rwx -- \"${p%/*}\" 2>/dev/null; "
                   "[ -d \"$p\" ] && chmod -R u+rwx -- \"$p\" 2>/dev/null; done; rm -rf -- \"$@\"";
    argv[argc++] = "sh";
    while (i < n && k < RM_BATCH_PATHS && bytes < RM_BATCH_BYTES) {
      size_t len = rlen + strlen(paths[i]) + 2;
      owned[k] = malloc(len);
      if (owned[k] == NULL) {
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
        break;
      }
      snprintf(owned[k], len, "%.*s/%s", (int)rlen, root, paths[i]);
      argv[argc++] = owned[k++];
      bytes += len;
      i++;
    }
    if (rc == 0) rc = box_exec(t, argv, argc, NULL, err);
    for (size_t j = 0; j < k; j++) free(owned[j]);
  }
  free(argv);
  free(owned);
  if (rc) sm_error_wrap(err, "deleting in the sandbox what was deleted on the host");
  return rc;
}

/* Makes host links the engine's upload would refuse (relative, climbing
 * above the workspace), as the sandbox's user: what was there is replaced,
 * as the upload would. */
static int box_links(const sm_workspace_target *t, ws_entry **links, size_t n, sm_error *err) {
  const char **argv = calloc(2 * RM_BATCH_PATHS + 6, sizeof *argv);
  if (argv == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  int rc = 0;
  size_t i = 0;
  while (i < n && rc == 0) {
    size_t argc = 0, bytes = 0, k = 0;
    argv[argc++] = "sh";
    argv[argc++] = "-c";
    argv[argc++] = "cd -- \"$1\" && shift && while [ $# -ge 2 ]; do "
                   "rm -rf -- \"$2\" && ln -s -- \"$1\" \"$2\" || exit 1; shift 2; done";
    argv[argc++] = "sh";
    argv[argc++] = t->sandbox_path;
    while (i < n && k < RM_BATCH_PATHS && bytes < RM_BATCH_BYTES) {
      argv[argc++] = links[i]->link;
      argv[argc++] = links[i]->path;
      bytes += strlen(links[i]->link) + strlen(links[i]->path) + 2;
      k++;
      i++;
    }
    rc = box_exec(t, argv, argc, NULL, err);
  }
  free(argv);
  if (rc) sm_error_wrap(err, "making the workspace's links that leave it");
  return rc;
}

static int box_wipe(const sm_workspace_target *t, sm_error *err) {
  const char *argv[] = {"sh", "-c", "cd -- \"$1\" && rm -rf -- * .[!.]* ..?*", "sh",
                        t->sandbox_path};
  int rc = box_exec(t, argv, 5, NULL, err);
  if (rc) sm_error_wrap(err, "clearing the sandbox workspace");
  return rc;
}

/* Empties a scratch directory (mode none), keeping stage directories. */
static int scratch_wipe(int fd, sm_error *err) {
  int dfd = dup(fd);
  if (dfd < 0) return sm_error_set_errno(err, SM_EIO, errno, "clearing the scratch directory");
  DIR *d = fdopendir(dfd);
  if (d == NULL) {
    close(dfd);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(d)) != NULL && rc == 0) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (ws_is_reserved(de->d_name)) continue;
    int r = ws_remove_tree(fd, de->d_name);
    if (r) rc = sm_error_set_errno(err, SM_EIO, -r, "clearing the scratch directory: %s",
                                   strerror(-r));
  }
  closedir(d);
  return rc;
}

static int open_scratch(const char *path, sm_error *err) {
  /* Made on demand (0700), like mkdir -p. */
  cleanup_free char *p = strdup(path);
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  for (char *c = p + 1; *c; c++) {
    if (*c != '/') continue;
    *c = '\0';
    mkdir(p, 0700);
    *c = '/';
  }
  mkdir(p, 0700);
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, errno, "scratch directory %s: %s", path,
                              strerror(errno));
  return fd;
}

/* ---- copy in ---- */

static int ancestor_listed(const ws_manifest *set, const char *path) {
  size_t len = strlen(path);
  char *buf = malloc(len + 1);
  if (buf == NULL) return 0;
  memcpy(buf, path, len + 1);
  int hit = 0;
  for (size_t i = len; i > 0 && !hit; i--) {
    if (buf[i - 1] != '/') continue;
    buf[i - 1] = '\0';
    hit = ws_manifest_get(set, buf) != NULL;
  }
  free(buf);
  return hit;
}

/* Is the host entry e the same as what the sandbox has (base entry b)? */
static int same_as_base(int root_fd, ws_dircache *dc, ws_entry *e, const ws_entry *b) {
  if (b == NULL || b->type != e->type || b->mode != e->mode) return 0;
  if (e->type == 'd') return 1;
  if (e->type == 'l') return strcmp(b->link, e->link) == 0;
  if (b->size != e->size || !b->has_hash || b->box_mtime == WS_UNKNOWN_MTIME) return 0;
  if (b->host_mtime_ns == e->host_mtime_ns && !(b->racy & WS_RACY_HOST)) return 1;
  /* Touched but maybe not changed: a hash decides, no re-send if equal. The
   * sandbox keeps its mtime; box_mtime stays what it has. */
  const char *name;
  int dfd = ws_dircache_parent(dc, e->path, &name, 0);
  int fd = dfd >= 0 ? openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
  if (fd < 0) return 0;
  unsigned char h[32];
  int64_t n = 0;
  int ok = ws_hash_fd(fd, h, &n) == 0 && n == e->size && memcmp(h, b->hash, 32) == 0;
  close(fd);
  (void)root_fd;
  return ok;
}

/* Would the manifest file say the same for e as it says for b? (Every
 * field it saves.) */
static int same_record(const ws_entry *e, const ws_entry *b) {
  if (b == NULL || e->type != b->type || e->racy != b->racy || e->mode != b->mode ||
      e->size != b->size || e->host_mtime_ns != b->host_mtime_ns ||
      e->box_mtime != b->box_mtime || e->box_ctime != b->box_ctime ||
      e->has_hash != b->has_hash || (e->has_hash && memcmp(e->hash, b->hash, 32) != 0))
    return 0;
  if (!e->link || !b->link) return e->link == b->link;
  return strcmp(e->link, b->link) == 0;
}

static int copy_in_local(sm_workspace_sync *s, const sm_workspace_target *t, int scratch_fd,
                         ws_packer *pk, sm_error *err) {
  cleanup_free char *stage = NULL;
  int stage_fd = ws_stage_create(scratch_fd, t->sandbox_path, &stage, err);
  if (stage_fd < 0) return stage_fd;
  ws_extract x;
  ws_extract_init(&x);
  x.stage_fd = stage_fd;
  x.root_fd = scratch_fd;
  x.trusted = 1;
  x.max_bytes = s->max_bytes;
  x.max_entries = s->max_entries;
  x.max_path = s->max_path;
  int rc = ws_extract_run(&x, ws_packer_read, pk, err);
  if (rc && ws_packer_error(pk)->code) *err = *ws_packer_error(pk);
  ws_apply_result res = {0};
  if (rc == 0) rc = ws_apply(scratch_fd, &x, 0, 0, &res, err);
  ws_apply_result_dispose(&res);
  ws_stage_remove(scratch_fd, stage, stage_fd);
  ws_extract_dispose(&x);
  return rc;
}

static int list_engine(const sm_workspace_sync *s, const sm_workspace_target *t,
                       ws_manifest *listing, sm_error *err);
static int list_sent_engine(const sm_workspace_sync *s, const sm_workspace_target *t,
                            ws_entry **sent, size_t n, ws_manifest *listing, sm_error *err);
static int list_local(const sm_workspace_sync *s, int sfd, const char *path, int64_t base_total,
                      ws_manifest *listing, sm_error *err);

static int list_engine_on(sm_engine *engine, const sm_workspace_sync *s,
                          const sm_workspace_target *t, sm_read_fn in, void *in_ud,
                          ws_manifest *listing, sm_error *err);

/* The listing after an upload, started before it: creating and starting an
 * exec costs the engine tens of ms, which then overlap the scan, and the
 * engine starts no exec in a container while it extracts an archive into
 * it. The exec's script waits on stdin and lists only once told that the
 * upload has ended well, so every ctime it reads is after our writes. */
typedef struct prelist {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int word;       /* 0: upload running; 1: list; -1: do not */
  int handed;     /* the word went to stdin */
  int attached;   /* the exec was started (or failed): an upload may begin */
  sm_engine *engine;
  const sm_workspace_sync *s;
  const sm_workspace_target *t;
  ws_manifest listing;
  sm_error err;
  int rc;
  int64_t t_go;
} prelist;

static ssize_t prelist_stdin(void *ud, char *buf, size_t len) {
  prelist *p = ud;
  pthread_mutex_lock(&p->mu);
  /* Asked for stdin: the engine has answered the exec start. */
  p->attached = 1;
  pthread_cond_broadcast(&p->cv);
  while (p->word == 0) pthread_cond_wait(&p->cv, &p->mu);
  int word = p->word, handed = p->handed;
  p->handed = 1;
  pthread_mutex_unlock(&p->mu);
  if (handed || word < 0 || len < 3) return 0;
  memcpy(buf, "go\n", 3);
  return 3;
}

static void *prelist_main(void *ud) {
  prelist *p = ud;
  p->rc = list_engine_on(p->engine, p->s, p->t, prelist_stdin, p, &p->listing, &p->err);
  /* An error before stdin was read (create, start) still ends here. */
  pthread_mutex_lock(&p->mu);
  p->attached = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Until the listing's exec is started: the engine holds a container while
 * it extracts an archive into it, and an exec start that came second would
 * wait for the whole upload and then cost its startup after it. */
static void prelist_wait_attached(prelist *p) {
  pthread_mutex_lock(&p->mu);
  while (!p->attached) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

/* Starts the waiting listing; 0 when it runs. */
static int prelist_start(prelist *p, const sm_workspace_sync *s, const sm_workspace_target *t) {
  memset(p, 0, sizeof *p);
  ws_manifest_init(&p->listing);
  p->s = s;
  p->t = t;
  sm_error_clear(&p->err);
  sm_error cerr = SM_ERROR_INIT;
  if (sm_engine_clone(&p->engine, t->engine, &cerr) != 0) return -1;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if (sm_thread_start(&p->th, NULL, prelist_main, p) != 0) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    sm_engine_free(p->engine);
    return -1;
  }
  return 0;
}

/* Tells the listing whether to run (ok) and waits for it; its result is
 * p->rc, p->listing and p->err. */
static void prelist_finish(prelist *p, int ok) {
  pthread_mutex_lock(&p->mu);
  p->word = ok ? 1 : -1;
  p->t_go = now_ns();
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->th, NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  sm_engine_free(p->engine);
  p->engine = NULL;
}

/* Ends a listing that is not wanted. */
static void prelist_drop(prelist *p) {
  prelist_finish(p, 0);
  ws_manifest_dispose(&p->listing);
}

/* Notes the ctime each entry just sent has in the sandbox, so that the copy
 * out can tell the tool's changes from ours exactly. Without a listing the
 * sent entries are compared in full next time. */
static void record_sent(const sm_workspace_sync *s, const sm_workspace_target *t, int scratch_fd,
                        prelist *pre, ws_manifest *cur, ws_entry **sent, size_t nsent) {
  ws_manifest listing;
  ws_manifest_init(&listing);
  sm_error lerr = SM_ERROR_INIT;
  int64_t t0 = now_ns();
  int rc;
  if (pre) {
    prelist_finish(pre, 1);
    t0 = pre->t_go;
    rc = pre->rc;
    lerr = pre->err;
    ws_manifest_dispose(&listing);
    listing = pre->listing;
    ws_manifest_init(&pre->listing);
  } else {
    rc = t->engine ? list_sent_engine(s, t, sent, nsent, &listing, &lerr)
                   : list_local(s, scratch_fd, t->sandbox_path, cur->total_size, &listing, &lerr);
  }
  if (rc) sm_log(SM_LOG_DEBUG, "workspace: no listing after the copy in (%s)", lerr.message);
  else
    sm_log(SM_LOG_DEBUG, "workspace: listing after the copy in: %zu entries in %" PRId64 " ms",
           listing.n, (now_ns() - t0) / 1000000);
  ws_probe_record(cur, rc == 0 ? &listing : NULL, WS_CHANGED);
  for (size_t i = 0; i < cur->n; i++) cur->v[i].state = WS_SAME;
  ws_manifest_dispose(&listing);
}

/* The first copy into a fresh sandbox sends everything and clears nothing
 * first, so its upload starts before the scan, from a deferred packer (its
 * first entry is "./", which the engine skips): the engine's setup for an
 * archive (mounts, starting its unpacker) then overlaps the scan. */
typedef struct early_put {
  pthread_t th;
  ws_packer *pk;
  const sm_workspace_target *t;
  prelist *pre;   /* started before the upload, or NULL */
  int rc;
  sm_error err;
  char request_id[64];
} early_put;

/* Exit code of the unpacker's wrapper when the unpacker is not there. */
#define UNPACKER_MISSING 112

/* How a copy in reaches the sandbox (upload.c says why): the engine's
 * upload into an untouched sandbox; else sandman's unpacker, run as the
 * sandbox's user with the stream on its stdin. *missing: it is not
 * installed (nothing was extracted). */
static int put_stream(const sm_workspace_target *t, sm_read_fn reader, void *ud, int *missing,
                      sm_error *err) {
  *missing = 0;
  if (t->untouched)
    return sm_engine_archive_put(t->engine, t->container_id, t->sandbox_path, reader, ud, err);
  if (t->unpacker == NULL || t->unpacker[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no unpacker to copy into a sandbox that may run "
                                        "processes (sm_workspace_target.unpacker)");
  const char *argv[] = {"/bin/sh", "-c", "[ -x \"$1\" ] || exit 112; exec \"$@\"", "sh",
                        t->unpacker, "untar", t->sandbox_path};
  int code = 0;
  int rc = box_exec_code(t->engine, t, argv, 7, reader, ud, NULL, &code, err);
  if (rc == SM_ESANDBOX && code == UNPACKER_MISSING) *missing = 1;
  return rc;
}

static int install_unpacker(const sm_workspace_target *t, sm_error *err) {
  if (t->install == NULL)
    return sm_error_set(err, SM_ESANDBOX, "sandman's unpacker %s is not in the sandbox",
                        t->unpacker);
  int rc = t->install(t->install_ud, err);
  if (rc) sm_error_wrap(err, "installing sandman's unpacker in the sandbox");
  return rc;
}

/* The packer's own failure explains a cut stream best. */
static void packer_reason(ws_packer *pk, sm_error *err) {
  const sm_error *pe = ws_packer_error(pk);
  if (pe->code && pe->code != SM_ECANCELLED) *err = *pe;
}

/* Sends pack (a packer each try: a missing unpacker is installed once and
 * the copy starts again). */
static int put_entries(sm_workspace_sync *s, const sm_workspace_target *t, int root_fd,
                       ws_entry **pack, size_t npack, sm_error *err) {
  for (int attempt = 0;; attempt++) {
    ws_packer *pk = NULL;
    int rc = ws_packer_new(&pk, root_fd, pack, npack, "", t->uid, t->gid, err);
    if (rc) return rc;
    if (s->abort_after >= 0) ws_packer_abort_after(pk, abort_budget(s));
    int missing = 0;
    rc = put_stream(t, ws_packer_read, pk, &missing, err);
    if (rc) packer_reason(pk, err);
    ws_packer_stats(pk, &s->bytes_in, &s->entries_in);
    ws_packer_free(pk);
    if (!missing || attempt > 0) return rc;
    sm_error_clear(err);
    rc = install_unpacker(t, err);
    if (rc) return rc;
  }
}

static void *early_main(void *ud) {
  early_put *u = ud;
  if (u->request_id[0]) sm_log_set_request_id(u->request_id);
  if (u->pre) prelist_wait_attached(u->pre);
  /* A fresh keyed sandbox has no unpacker yet: installed first, while the
   * caller scans. */
  u->rc = u->t->untouched || u->t->install == NULL ? 0 : install_unpacker(u->t, &u->err);
  int missing = 0;
  if (u->rc == 0) u->rc = put_stream(u->t, ws_packer_read, u->pk, &missing, &u->err);
  return NULL;
}

/* 0 when the upload runs; it uses t->engine until early_join. */
static int early_start(early_put *u, sm_workspace_sync *s, const sm_workspace_target *t,
                       int root_fd, prelist *pre) {
  memset(u, 0, sizeof *u);
  u->t = t;
  u->pre = pre;
  sm_error_clear(&u->err);
  sm_error perr = SM_ERROR_INIT;
  if (ws_packer_new_deferred(&u->pk, root_fd, t->uid, t->gid, &perr) != 0) return -1;
  if (s->abort_after >= 0) ws_packer_abort_after(u->pk, abort_budget(s));
  const char *rid = sm_log_request_id();
  if (rid) snprintf(u->request_id, sizeof u->request_id, "%s", rid);
  int r = sm_thread_start(&u->th, NULL, early_main, u);
  if (r != 0) {
    ws_packer_free(u->pk);
    u->pk = NULL;
    return -1;
  }
  return 0;
}

/* Waits for the upload; its result is u->rc and u->err (the packer's own
 * error, when it has one, says more). */
static void early_join(early_put *u) {
  pthread_join(u->th, NULL);
  if (u->rc) packer_reason(u->pk, &u->err);
}

/* Ends an upload that is not wanted (the scan failed): the engine gets a
 * broken stream and extracts nothing. */
static void early_cancel(early_put *u, int code) {
  ws_packer_abandon(u->pk, code);
  early_join(u);
  ws_packer_free(u->pk);
  u->pk = NULL;
}

int sm_workspace_sync_in(sm_workspace_sync *s, const sm_workspace_target *t, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  int rc = check_target(t, err);
  if (rc) return rc;
  s->bytes_in = s->entries_in = 0;
  s->abort_spent = 0;
  int64_t stamp = now_ns();
  cleanup_fd int root_fd = open_host(s, err);
  if (root_fd < 0) return root_fd;
  ws_stage_sweep(root_fd);

  /* Without a base everything is sent: the listing's exec starts now, to be
   * running before the upload. With one, what is sent is often little and
   * the listing comes after the upload as usual. Through the sandbox
   * layer's own way in (t->run) a listing starts in a few ms: no exec
   * ahead of time then. */
  int valid = base_matches(s, t);
  prelist pre;
  int have_pre = t->engine && !t->run && !valid && prelist_start(&pre, s, t) == 0;
  /* A fresh sandbox: nothing to clear first, everything to send. */
  early_put up;
  int early = t->engine && !valid && !s->wipe_first && !s->had_manifest &&
              early_start(&up, s, t, root_fd, have_pre ? &pre : NULL) == 0;

  ws_manifest cur;
  ws_manifest_init(&cur);
  ws_scan_opts so = {&s->excludes, s->max_bytes, s->max_entries, s->max_path, 0};
  rc = ws_scan(root_fd, s->host_dir, &so, &cur, err);
  if (rc) {
    if (early) early_cancel(&up, rc);
    if (have_pre) prelist_drop(&pre);
    ws_manifest_dispose(&cur);
    return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
  }
  /* No usable record of what the sandbox holds, although one existed (the
   * sandbox was recreated, maybe over an old volume), or a scratch
   * directory: clear it, or stale files would come back as the tool's. */
  int wipe = s->wipe_first || (!valid && (s->had_manifest || !t->engine));
  if (!valid) ws_manifest_clear(&s->base);
  if (!valid || wipe) ws_manifest_clear(&s->held);

  /* What to send, and what the sandbox has that the host no longer has. */
  ws_entry **send = calloc(cur.n + 1, sizeof *send);
  char **dels = calloc(s->base.n + 1, sizeof *dels);
  size_t nsend = 0, ndel = 0;
  ws_manifest delset;
  ws_manifest_init(&delset);
  ws_dircache dc;
  ws_dircache_init(&dc, root_fd);
  if (send == NULL || dels == NULL) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  /* The saved manifest already says all there is (nothing to send, nothing
   * gone, every record as it was): it is not written again. */
  int same_records = valid && cur.n == s->base.n;
  for (size_t i = 0; rc == 0 && i < cur.n; i++) {
    ws_entry *e = &cur.v[i];
    const ws_entry *b = ws_manifest_get(&s->base, e->path);
    if (same_as_base(root_fd, &dc, e, b)) {
      e->has_hash = b->has_hash;
      memcpy(e->hash, b->hash, 32);
      e->box_mtime = b->box_mtime;
      e->box_ctime = b->box_ctime;
      e->racy = b->racy;
      /* Checked by content just now: the host side is settled. */
      if (b->racy & WS_RACY_HOST || b->host_mtime_ns != e->host_mtime_ns)
        ws_entry_mark_racy(e, stamp, 1, 0);
      if (same_records) same_records = same_record(e, b);
    } else {
      send[nsend++] = e;
    }
  }
  ws_dircache_dispose(&dc);
  for (size_t i = 0; rc == 0 && i < s->base.n; i++) {
    const ws_entry *b = &s->base.v[i];
    const ws_entry *c = ws_manifest_get(&cur, b->path);
    if (c && c->type == b->type) continue;
    if (ws_excluded(&s->excludes, b->path)) continue;
    dels[ndel++] = b->path;
  }
  /* What the upload carries (with every directory above what is sent),
   * and the links the engine would refuse, made after it. */
  ws_entry **pack = NULL, **later = NULL;
  size_t npack = 0, nlater = 0;
  if (rc == 0)
    rc = ws_upload_plan(&cur, send, nsend, t->engine && t->untouched, &pack, &npack, &later,
                        &nlater, err);
  if (rc == 0 && ndel > 1) qsort(dels, ndel, sizeof *dels, cmp_cstr);
  /* rm -rf of a directory covers what is under it. */
  size_t nkeep = 0;
  for (size_t i = 0; rc == 0 && i < ndel; i++) {
    if (ancestor_listed(&delset, dels[i])) continue;
    ws_entry d;
    memset(&d, 0, sizeof d);
    d.path = dels[i];
    d.type = 'd';
    if (ws_manifest_add(&delset, &d, NULL) != 0) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
    dels[nkeep++] = dels[i];
  }
  ndel = nkeep;

  cleanup_fd int scratch_fd = -1;
  if (rc == 0 && !t->engine) {
    scratch_fd = open_scratch(t->sandbox_path, err);
    if (scratch_fd < 0) rc = scratch_fd;
  }
  if (rc == 0 && wipe) {
    rc = t->engine ? box_wipe(t, err) : scratch_wipe(scratch_fd, err);
    if (rc == 0) s->wipe_first = s->had_manifest = 0;
  }
  if (rc == 0 && ndel > 0) {
    if (t->engine) {
      rc = box_delete(t, dels, ndel, err);
    } else {
      ws_dircache sdc;
      ws_dircache_init(&sdc, scratch_fd);
      for (size_t i = 0; rc == 0 && i < ndel; i++) {
        const char *name;
        int dfd = ws_dircache_parent(&sdc, dels[i], &name, 0);
        if (dfd < 0) continue;
        int r = ws_remove_tree(dfd, name);
        if (r) rc = sm_error_set_errno(err, SM_EIO, -r, "deleting '%s' in the scratch directory: %s",
                                       dels[i], strerror(-r));
      }
      ws_dircache_dispose(&sdc);
    }
  }
  if (rc == 0 && early) {
    /* Nothing was cleared or deleted (a fresh sandbox): the upload under
     * way gets what to send. */
    ws_packer_supply(up.pk, pack, npack);
    early_join(&up);
    early = 0;
    rc = up.rc;
    if (rc) *err = up.err;
    ws_packer_stats(up.pk, &s->bytes_in, &s->entries_in);
    ws_packer_free(up.pk);
    if (rc == 0 && nlater > 0) rc = box_links(t, later, nlater, err);
    for (size_t i = 0; i < nsend; i++) {
      ws_entry_mark_racy(send[i], stamp, 1, 1);
      send[i]->state = WS_CHANGED;
    }
    if (rc == 0 && nsend > 0) {
      record_sent(s, t, scratch_fd, have_pre ? &pre : NULL, &cur, send, nsend);
      have_pre = 0;
    }
  } else if (rc == 0 && nsend > 0) {
    if (t->engine) {
      if (npack > 0) rc = put_entries(s, t, root_fd, pack, npack, err);
    } else {
      ws_packer *pk = NULL;
      rc = ws_packer_new(&pk, root_fd, pack, npack, "", t->uid, t->gid, err);
      if (rc == 0) {
        if (s->abort_after >= 0) ws_packer_abort_after(pk, abort_budget(s));
        rc = copy_in_local(s, t, scratch_fd, pk, err);
        if (rc) packer_reason(pk, err);
        ws_packer_stats(pk, &s->bytes_in, &s->entries_in);
        ws_packer_free(pk);
      }
    }
    if (rc == 0 && nlater > 0) rc = box_links(t, later, nlater, err);
    for (size_t i = 0; i < nsend; i++) {
      ws_entry_mark_racy(send[i], stamp, 1, 1);
      send[i]->state = WS_CHANGED;
    }
    if (rc == 0) {
      record_sent(s, t, scratch_fd, have_pre ? &pre : NULL, &cur, send, nsend);
      have_pre = 0;
    }
  }
  if (early) early_cancel(&up, rc ? rc : SM_ECANCELLED);
  if (have_pre) prelist_drop(&pre);
  /* What was sent, not the directories that came along. */
  s->entries_in = rc == 0 ? (int64_t)nsend : 0;
  free(pack);
  free(later);
  free(send);
  free(dels);
  ws_manifest_dispose(&delset);
  if (rc) {
    /* The sandbox may hold part of the copy: the old manifest still says
     * what to send next time, so it stays. */
    ws_manifest_dispose(&cur);
    return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
  }
  struct stat mst;
  same_records = same_records && nsend == 0 && ndel == 0 && !wipe && s->disk_current &&
                 s->manifest_path && stat(s->manifest_path, &mst) == 0;
  ws_manifest_dispose(&s->base);
  s->base = cur;
  s->have_base = 1;
  s->disk_current = same_records;
  if (ws_manifest_set_target(&s->base, target_container(t), t->sandbox_path) != 0)
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  if (s->manifest_path && !same_records) {
    if (ws_manifest_save(&s->base, &s->held, s->manifest_path, err) != 0)
      return sm_error_wrap(err, "workspace %s (copy in)", s->host_dir);
    s->disk_current = 1;
  }
  sm_log(SM_LOG_DEBUG, "workspace: copied in %" PRId64 " entries, %" PRId64 " bytes; %zu deleted",
         s->entries_in, s->bytes_in, ndel);
  return 0;
}

/* ---- copy out ---- */

/* A bounded pipe between the engine (pushing the download) and the
 * extractor thread (pulling through libarchive). */
typedef struct ring {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char *buf;
  size_t head, len;
  int eof, werr, rdone, rfailed;
  int64_t pushed, abort_after;
  ws_extract *x;
  int rc;
  sm_error err;
  char request_id[64];
} ring;

static int ring_write(void *ud, const char *data, size_t len) {
  ring *r = ud;
  pthread_mutex_lock(&r->mu);
  if (r->abort_after >= 0 && r->pushed + (int64_t)len > r->abort_after) {
    pthread_mutex_unlock(&r->mu);
    return SM_ECANCELLED;
  }
  r->pushed += (int64_t)len;
  while (len > 0) {
    while (r->len == RING_BYTES && !r->rdone) pthread_cond_wait(&r->cv, &r->mu);
    if (r->rdone) {
      int failed = r->rfailed;
      pthread_mutex_unlock(&r->mu);
      /* Done early: trailing padding is dropped; failed: stop the download. */
      return failed ? SM_ECANCELLED : 0;
    }
    size_t tail = (r->head + r->len) % RING_BYTES;
    size_t room = RING_BYTES - r->len;
    size_t contig = RING_BYTES - tail;
    size_t n = len < room ? len : room;
    if (n > contig) n = contig;
    memcpy(r->buf + tail, data, n);
    r->len += n;
    data += n;
    len -= n;
    pthread_cond_broadcast(&r->cv);
  }
  pthread_mutex_unlock(&r->mu);
  return 0;
}

static ssize_t ring_read(void *ud, char *buf, size_t len) {
  ring *r = ud;
  pthread_mutex_lock(&r->mu);
  while (r->len == 0 && !r->eof) pthread_cond_wait(&r->cv, &r->mu);
  if (r->len == 0) {
    int werr = r->werr;
    pthread_mutex_unlock(&r->mu);
    return werr ? SM_EIO : 0;
  }
  size_t contig = RING_BYTES - r->head;
  size_t n = r->len < len ? r->len : len;
  if (n > contig) n = contig;
  memcpy(buf, r->buf + r->head, n);
  r->head = (r->head + n) % RING_BYTES;
  r->len -= n;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return (ssize_t)n;
}

static void *extract_thread(void *ud) {
  ring *r = ud;
  if (r->request_id[0]) sm_log_set_request_id(r->request_id);
  int rc = ws_extract_run(r->x, ring_read, r, &r->err);
  pthread_mutex_lock(&r->mu);
  r->rc = rc;
  r->rdone = 1;
  r->rfailed = rc != 0;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* Streams the sandbox's tar of box_path (the whole workspace, or one path
 * under it) through the extractor. */
static int fetch_engine(sm_workspace_sync *s, const sm_workspace_target *t, ws_extract *x,
                        const char *box_path, sm_error *err) {
  ring *r = calloc(1, sizeof *r);
  char *buf = malloc(RING_BYTES);
  if (r == NULL || buf == NULL) {
    free(r);
    free(buf);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->buf = buf;
  r->x = x;
  r->abort_after = abort_budget(s);
  const char *rid = sm_log_request_id();
  if (rid) snprintf(r->request_id, sizeof r->request_id, "%s", rid);
  pthread_t th;
  int rc = 0;
  if (sm_thread_start(&th, NULL, extract_thread, r) != 0) {
    rc = sm_error_set(err, SM_ENOMEM, "cannot start the extractor thread");
  } else {
    sm_error gerr = SM_ERROR_INIT;
    int grc = sm_engine_archive_get(t->engine, t->container_id, box_path, ring_write, r, &gerr);
    pthread_mutex_lock(&r->mu);
    r->eof = 1;
    r->werr = grc != 0;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(th, NULL);
    s->abort_spent += r->pushed;
    /* The extractor's refusal explains an aborted download best; otherwise
     * the engine's error does. */
    if (r->rc != 0 && (grc == 0 || grc == SM_ECANCELLED) && s->abort_after < 0) {
      *err = r->err;
      rc = r->rc;
    } else if (grc != 0) {
      *err = gerr;
      rc = grc;
    } else if (r->rc != 0) {
      *err = r->err;
      rc = r->rc;
    }
  }
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(buf);
  free(r);
  return rc;
}

/* The sandbox's listing through one exec of find and stat. With in, the
 * script first reads a line from stdin and lists only if it says "go". */
static int list_engine_on(sm_engine *engine, const sm_workspace_sync *s,
                          const sm_workspace_target *t, sm_read_fn in, void *in_ud,
                          ws_manifest *listing, sm_error *err) {
  /* TZ set: stat's %z (read only for its nanoseconds) then does not look
   * for the zone file once per entry, a quarter of the listing's time. */
  static const char script[] =
      "export TZ=UTC0; cd -- \"$1\" && find . -mindepth 1 -exec stat -c '%s|%Y|%Z|%z|%f|%n' {} +";
  static const char waiting[] =
      "export TZ=UTC0; read -r go && [ \"$go\" = go ] && cd -- \"$1\" && "
      "find . -mindepth 1 -exec stat -c '%s|%Y|%Z|%z|%f|%n' {} +";
  const char *argv[] = {"sh", "-c", in ? waiting : script, "sh", t->sandbox_path};
  /* Typical lines are well under 352 bytes; past the cap the full copy
   * (with its own limits) is used instead. */
  int64_t cap = s->max_entries * 352;
  if (cap > ((int64_t)64 << 20)) cap = (int64_t)64 << 20;
  sm_buf out;
  sm_buf_init(&out, (size_t)cap);
  int rc = box_exec_on(engine, t, argv, 5, in, in_ud, &out, err);
  if (rc == 0)
    rc = ws_probe_parse(out.data ? out.data : "", out.len, s->max_entries, s->max_path, listing,
                        err);
  sm_buf_dispose(&out);
  return rc;
}

static int list_engine(const sm_workspace_sync *s, const sm_workspace_target *t,
                       ws_manifest *listing, sm_error *err) {
  return list_engine_on(t->engine, s, t, NULL, NULL, listing, err);
}

/* After an upload only what was sent needs its ctime: when that is a few
 * paths, stat is given them (no walk of the whole workspace); else the
 * whole listing. */
#define LIST_SENT_PATHS 256
#define LIST_SENT_BYTES (96 * 1024)

static int list_sent_engine(const sm_workspace_sync *s, const sm_workspace_target *t,
                            ws_entry **sent, size_t n, ws_manifest *listing, sm_error *err) {
  size_t bytes = 0;
  for (size_t i = 0; i < n && bytes <= LIST_SENT_BYTES; i++) bytes += strlen(sent[i]->path) + 3;
  if (n == 0 || n > LIST_SENT_PATHS || bytes > LIST_SENT_BYTES) return list_engine(s, t, listing, err);
  static const char script[] =
      "export TZ=UTC0; cd -- \"$1\" && shift && exec stat -c '%s|%Y|%Z|%z|%f|%n' -- \"$@\"";
  const char **argv = calloc(n + 5, sizeof *argv);
  char **owned = calloc(n + 1, sizeof *owned);
  int rc = 0;
  if (argv == NULL || owned == NULL) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t argc = 0;
  if (rc == 0) {
    argv[argc++] = "sh";
    argv[argc++] = "-c";
    argv[argc++] = script;
    argv[argc++] = "sh";
    argv[argc++] = t->sandbox_path;
  }
  for (size_t i = 0; rc == 0 && i < n; i++) {
    /* "./" as find prints them: the listing parser wants that form. */
    size_t len = strlen(sent[i]->path) + 3;
    owned[i] = malloc(len);
    if (owned[i] == NULL) {
      rc = sm_error_set(err, SM_ENOMEM, "out of memory");
      break;
    }
    snprintf(owned[i], len, "./%s", sent[i]->path);
    argv[argc++] = owned[i];
  }
  sm_buf out;
  sm_buf_init(&out, (size_t)n * 352 + 4096);
  if (rc == 0) rc = box_exec_on(t->engine, t, argv, argc, NULL, NULL, &out, err);
  if (rc == 0)
    rc = ws_probe_parse(out.data ? out.data : "", out.len, s->max_entries, s->max_path, listing,
                        err);
  sm_buf_dispose(&out);
  for (size_t i = 0; owned && i < n; i++) free(owned[i]);
  free(owned);
  free(argv);
  return rc;
}

/* Mode none: the scratch directory's listing, in the probe's terms. */
static int list_local(const sm_workspace_sync *s, int sfd, const char *path, int64_t base_total,
                      ws_manifest *listing, sm_error *err) {
  ws_scan_opts so = {&s->excludes, s->max_bytes + base_total, s->max_entries, s->max_path, 1};
  int rc = ws_scan(sfd, path, &so, listing, err);
  for (size_t i = 0; rc == 0 && i < listing->n; i++) {
    ws_entry *e = &listing->v[i];
    int64_t ns = e->host_mtime_ns;
    e->box_mtime = ns >= 0 ? ns / 1000000000 : -((-ns + 999999999) / 1000000000);
    if (e->type == 'l') e->size = (int64_t)strlen(e->link);
  }
  return rc;
}

/* Mode none: packs root (NULL: everything) of the scratch listing into the
 * extractor, named as the engine would name it. */
static int fetch_local(sm_workspace_sync *s, int sfd, ws_manifest *listing, ws_extract *x,
                       const char *root, const char *prefix, sm_error *err) {
  ws_entry **items = calloc(listing->n + 1, sizeof *items);
  if (items == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t n = 0, rlen = root ? strlen(root) : 0;
  for (size_t i = 0; i < listing->n; i++) {
    const char *p = listing->v[i].path;
    if (listing->v[i].type == 's') continue; /* never in a tar: ws_refusal_sockets */
    if (root == NULL || strcmp(p, root) == 0 || (strncmp(p, root, rlen) == 0 && p[rlen] == '/'))
      items[n++] = &listing->v[i];
  }
  size_t cut = 0;
  if (root && strrchr(root, '/')) cut = (size_t)(strrchr(root, '/') - root) + 1;
  ws_packer *pk = NULL;
  int rc = ws_packer_new(&pk, sfd, items, n, root ? "" : prefix, 0, 0, err);
  if (rc == 0) {
    ws_packer_set_cut(pk, cut);
    if (s->abort_after >= 0) ws_packer_abort_after(pk, abort_budget(s));
    rc = ws_extract_run(x, ws_packer_read, pk, err);
    if (rc && ws_packer_error(pk)->code) *err = *ws_packer_error(pk);
    s->abort_spent += ws_packer_produced(pk);
  }
  ws_packer_free(pk);
  free(items);
  return rc;
}

static void extract_setup(ws_extract *x, sm_workspace_sync *s, int root_fd, int stage_fd,
                          int valid) {
  ws_extract_init(x);
  x->stage_fd = stage_fd;
  x->root_fd = root_fd;
  x->base = valid ? &s->base : NULL;
  x->held = valid ? &s->held : NULL;
  x->excludes = &s->excludes;
  x->max_bytes = s->max_bytes;
  x->max_entries = s->max_entries;
  x->max_path = s->max_path;
  x->redact = &s->redact;
}

/* Each fetch is one archive request, which costs the engine a mount and a
 * tar process (tens of ms): past a few, one full read is cheaper. A local
 * fetch is cheap. */
#define PROBE_MAX_ROOTS_ENGINE 8
#define PROBE_MAX_ROOTS_LOCAL 512

/* Lists the sandbox and fetches only what changed. Returns 0, a refusal
 * (then the sync fails), or another error after which the caller copies
 * everything instead. */
static int fetch_changed(sm_workspace_sync *s, const sm_workspace_target *t, ws_extract *x,
                         int sfd, ws_manifest *listing, int *listed, sm_error *err) {
  int rc = t->engine ? list_engine(s, t, listing, err) : 0;
  if (rc == 0) *listed = 1;
  if (rc == 0) x->listing = listing;
  char **roots = NULL;
  size_t nroots = 0;
  size_t max_roots = t->engine ? PROBE_MAX_ROOTS_ENGINE : PROBE_MAX_ROOTS_LOCAL;
  if (rc == 0) rc = ws_probe_plan(x, listing, max_roots, &roots, &nroots, err);
  if (rc == 1) rc = sm_error_set(err, SM_ETOOBIG, "more than %zu changed paths", max_roots);
  if (rc == 0)
    sm_log(SM_LOG_DEBUG, "workspace: listing of %zu entries, %zu changed path(s) to fetch",
           listing->n, nroots);
  const char *root = t->sandbox_path;
  size_t rlen = strlen(root);
  while (rlen > 1 && root[rlen - 1] == '/') rlen--;
  for (size_t i = 0; rc == 0 && i < nroots; i++) {
    const char *slash = strrchr(roots[i], '/');
    x->strip = slash ? slash + 1 : roots[i];
    x->place = roots[i];
    if (t->engine) {
      size_t len = rlen + strlen(roots[i]) + 2;
      char *p = malloc(len);
      if (p == NULL) {
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
        break;
      }
      snprintf(p, len, "%.*s/%s", (int)rlen, root, roots[i]);
      rc = fetch_engine(s, t, x, p, err);
      free(p);
    } else {
      rc = fetch_local(s, sfd, listing, x, roots[i], "", err);
    }
  }
  ws_probe_free_roots(roots, nroots);
  x->place = NULL;
  return rc;
}

static int sorted_copy(char **src, size_t n, char ***out, size_t *out_n) {
  if (out == NULL) return 0;
  *out = NULL;
  if (out_n) *out_n = 0;
  char **v = calloc(n + 1, sizeof *v);
  if (v == NULL) return SM_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    v[i] = strdup(src[i]);
    if (v[i] == NULL) {
      sm_workspace_free_list(v, i);
      return SM_ENOMEM;
    }
  }
  if (n > 1) qsort(v, n, sizeof *v, cmp_cstr);
  *out = v;
  if (out_n) *out_n = n;
  return 0;
}

int sm_workspace_sync_out(sm_workspace_sync *s, const sm_workspace_target *t,
                          char ***files_changed, size_t *n_files_changed, char ***conflicts,
                          size_t *n_conflicts, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  if (files_changed) *files_changed = NULL;
  if (n_files_changed) *n_files_changed = 0;
  if (conflicts) *conflicts = NULL;
  if (n_conflicts) *n_conflicts = 0;
  int rc = check_target(t, err);
  if (rc) return rc;
  s->bytes_out = s->entries_out = 0;
  s->abort_spent = 0;
  s->last_out_listed = 0;
  ws_refusal_list_clear(&s->refused);
  int64_t stamp = now_ns();
  cleanup_fd int root_fd = open_host(s, err);
  if (root_fd < 0) return root_fd;
  int valid = base_matches(s, t);
  if (!valid)
    sm_log(SM_LOG_WARN, "workspace: no copy-in record for this sandbox; nothing is deleted on "
           "the host and every file counts as new");
  cleanup_fd int sfd = -1;
  if (!t->engine) {
    sfd = open_scratch(t->sandbox_path, err);
    if (sfd < 0) return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  }
  cleanup_free char *stage = NULL;
  int stage_fd = ws_stage_create(root_fd, s->host_dir, &stage, err);
  if (stage_fd < 0) return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  ws_extract x;
  extract_setup(&x, s, root_fd, stage_fd, valid);
  char prefix[256];
  last_component(t->sandbox_path, prefix, sizeof prefix);
  ws_manifest listing;
  ws_manifest_init(&listing);
  int listed = 0;
  if (!t->engine) {
    rc = list_local(s, sfd, t->sandbox_path, valid ? s->base.total_size : 0, &listing, err);
    listed = rc == 0;
  }
  int done = 0;
  if (rc == 0 && valid) {
    sm_error perr = SM_ERROR_INIT;
    int prc = fetch_changed(s, t, &x, sfd, &listing, &listed, &perr);
    if (prc == 0) {
      done = 1;
      s->last_out_listed = 1;
    } else if (prc == SM_EUNSAFE || (prc == SM_ETOOBIG && x.entries + x.bytes_staged > 0)) {
      *err = perr;
      rc = prc;
    } else {
      /* The listing could not be had or used: copy everything instead. */
      sm_log(SM_LOG_DEBUG, "workspace: full copy out (%s)", perr.message);
      ws_extract_dispose(&x);
      ws_stage_remove(root_fd, stage, stage_fd);
      free(stage);
      stage = NULL;
      stage_fd = ws_stage_create(root_fd, s->host_dir, &stage, err);
      if (stage_fd < 0) {
        ws_manifest_dispose(&listing);
        return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
      }
      extract_setup(&x, s, root_fd, stage_fd, valid);
    }
  }
  if (rc == 0 && !done) {
    x.strip = prefix;
    /* A listing that was had but not used (too many changes) still tells
     * which files changed behind the same size and mtime. */
    x.listing = listed ? &listing : NULL;
    if (t->engine)
      rc = fetch_engine(s, t, &x, t->sandbox_path, err);
    else
      rc = listed ? fetch_local(s, sfd, &listing, &x, NULL, prefix, err) : SM_EIO;
  }
  /* Per entry: what the host does not get is refused, the rest applies. */
  if (rc == 0) rc = ws_refusal_sockets(&x, listed ? &listing : NULL, err);
  if (rc == 0) rc = ws_refusal_decide(&x, s->protect, valid, err);
  ws_apply_result res = {0};
  if (rc == 0) rc = ws_apply(root_fd, &x, 1, valid, &res, err);
  ws_stage_remove(root_fd, stage, stage_fd);
  ws_manifest nheld;
  ws_manifest_init(&nheld);
  if (rc == 0) rc = ws_refusal_report(&x, &s->refused, err);
  if (rc == 0) rc = ws_refusal_hold(&x.box, valid ? &s->base : NULL, &nheld, err);
  if (rc) {
    ws_manifest_dispose(&nheld);
    ws_manifest_dispose(&listing);
    ws_apply_result_dispose(&res);
    ws_extract_dispose(&x);
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  }
  s->bytes_out = x.bytes_staged;
  s->entries_out = res.entries;
  /* The sandbox's side is now the reference for both directions. */
  ws_manifest nb = x.box;
  ws_manifest_init(&x.box);
  ws_manifest_dispose(&s->base);
  s->base = nb;
  s->disk_current = 0;
  s->have_base = 1;
  for (size_t i = 0; i < s->base.n; i++) {
    ws_entry *e = &s->base.v[i];
    if (e->state != WS_SAME) ws_entry_mark_racy(e, stamp, e->state == WS_CHANGED, 1);
    e->state = WS_SAME;
  }
  ws_manifest_dispose(&s->held);
  s->held = nheld;
  /* What the listing saw is what is known of the sandbox side now. */
  ws_probe_record(&s->base, listed ? &listing : NULL, -1);
  ws_probe_record(&s->held, listed ? &listing : NULL, -1);
  ws_manifest_dispose(&listing);
  rc = ws_manifest_set_target(&s->base, target_container(t), t->sandbox_path);
  if (rc == 0 && (sorted_copy(res.changed, res.n_changed, files_changed, n_files_changed) != 0 ||
                  sorted_copy(res.conflicts, res.n_conflicts, conflicts, n_conflicts) != 0))
    rc = SM_ENOMEM;
  ws_apply_result_dispose(&res);
  ws_extract_dispose(&x);
  if (rc) return sm_error_set(err, rc, "out of memory");
  if (s->manifest_path && ws_manifest_save(&s->base, &s->held, s->manifest_path, err) != 0)
    return sm_error_wrap(err, "workspace %s (copy out)", s->host_dir);
  for (size_t i = 0; i < s->refused.n; i++) {
    char lp[4096];
    sm_log(SM_LOG_DEBUG, "workspace: not applied to the host: '%s' (%s)",
           ws_log_path(&s->redact, s->refused.v[i].path, lp, sizeof lp),
           ws_reason_text(ws_reason_parse(s->refused.v[i].reason)));
  }
  s->disk_current = s->manifest_path != NULL;
  sm_log(SM_LOG_DEBUG, "workspace: copied out %" PRId64 " changes, %" PRId64 " bytes",
         s->entries_out, s->bytes_out);
  return 0;
}

/* ---- for tests and fuzzing ---- */

int ws_unpack_dir(const char *dest_dir, sm_read_fn reader, void *ud,
                  const sm_workspace_limits *limits, ws_apply_result *res,
                  ws_refusal_list *refused, sm_error *err) {
  sm_error local_err = SM_ERROR_INIT;
  if (err == NULL) err = &local_err;
  cleanup_fd int fd = open(dest_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "%s: %s", dest_dir, strerror(errno));
  cleanup_free char *stage = NULL;
  int stage_fd = ws_stage_create(fd, dest_dir, &stage, err);
  if (stage_fd < 0) return stage_fd;
  ws_extract x;
  ws_extract_init(&x);
  x.stage_fd = stage_fd;
  x.root_fd = fd;
  if (limits && limits->max_bytes > 0) x.max_bytes = limits->max_bytes;
  if (limits && limits->max_entries > 0) x.max_entries = limits->max_entries;
  if (limits && limits->max_path > 0) x.max_path = limits->max_path;
  int rc = ws_extract_run(&x, reader, ud, err);
  if (rc == 0) rc = ws_refusal_decide(&x, NULL, 0, err);
  if (rc == 0) rc = ws_apply(fd, &x, 1, 0, res, err);
  if (rc == 0 && refused) rc = ws_refusal_report(&x, refused, err);
  ws_stage_remove(fd, stage, stage_fd);
  ws_extract_dispose(&x);
  return rc;
}
