/* The files API: each operation is one sm_run call of sandman's helper in
 * the keyed sandbox (sm_run_request.helper), whose output is parsed by
 * files_wire.c. See sandman/files.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/files.h>

#include "agent/fs.h"
#include "files/files_internal.h"
#include "files/files_wire.h"

#define ROOT "/workspace"
#define CHUNK (64u << 10)
#define HEAD_ROOM 32 /* room for a chunk's "HEXLEN\n" before its data */

int sm_files_path(const char *path, char *out, size_t len, sm_error *err) {
  if (path == NULL || path[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no path given (use \".\" for the workspace)");
  size_t n = strlen(path);
  if (n > SM_FILES_PATH_MAX)
    return sm_error_set(err, SM_EINVAL, "the path is longer than %d bytes", SM_FILES_PATH_MAX);
  const char *p = path;
  if (p[0] == '/') {
    if (strncmp(p, ROOT, strlen(ROOT)) != 0 || (p[strlen(ROOT)] != '/' && p[strlen(ROOT)] != '\0'))
      return sm_error_set(err, SM_EUNSAFE, "'%s' is outside /workspace", path);
    p += strlen(ROOT);
    while (*p == '/') p++;
  }
  /* Canonical: names joined by one '/', "." names dropped, ".." refused. */
  size_t o = 0;
  while (*p) {
    const char *slash = strchr(p, '/');
    size_t seg = slash ? (size_t)(slash - p) : strlen(p);
    if (seg == 2 && p[0] == '.' && p[1] == '.')
      return sm_error_set(err, SM_EUNSAFE, "'%s' leaves the workspace ('..' is refused)", path);
    if (seg > 255) return sm_error_set(err, SM_EINVAL, "a name in '%s' is longer than 255 bytes", path);
    if (seg > 0 && !(seg == 1 && p[0] == '.')) {
      if (o + (o ? 1 : 0) + seg + 1 > len) return sm_error_set(err, SM_EINVAL, "path too long");
      if (o) out[o++] = '/';
      memcpy(out + o, p, seg);
      o += seg;
    }
    p += seg;
    while (*p == '/') p++;
  }
  if (o == 0) {
    if (len < 2) return sm_error_set(err, SM_EINVAL, "path too long");
    out[o++] = '.';
  }
  out[o] = '\0';
  return 0;
}

void sm_file_entry_dispose(sm_file_entry *e) {
  if (e == NULL) return;
  free(e->path);
  free(e->link);
  e->path = e->link = NULL;
}

void sm_file_list_dispose(sm_file_list *l) {
  if (l == NULL) return;
  for (size_t i = 0; i < l->n; i++) sm_file_entry_dispose(&l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

void sm_grep_result_dispose(sm_grep_result *r) {
  if (r == NULL) return;
  for (size_t i = 0; i < r->n; i++) {
    free(r->v[i].path);
    free(r->v[i].text);
  }
  free(r->v);
  memset(r, 0, sizeof *r);
}

json_object *sm_file_entry_to_json(const sm_file_entry *e) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  const char *type = e->type == 'f' ? "file" : e->type == 'd' ? "dir" : e->type == 'l' ? "symlink" : "other";
  char mode[8], mtime[64], date[32];
  snprintf(mode, sizeof mode, "%04o", (unsigned)e->mode);
  time_t t = (time_t)e->mtime_s;
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(mtime, sizeof mtime, "%s.%09dZ", date, (int)e->mtime_ns);
  json_object_object_add(o, "path", json_object_new_string(e->path ? e->path : ""));
  json_object_object_add(o, "type", json_object_new_string(type));
  json_object_object_add(o, "size", json_object_new_int64(e->size));
  json_object_object_add(o, "mode", json_object_new_string(mode));
  json_object_object_add(o, "mtime", json_object_new_string(mtime));
  if (e->link) json_object_object_add(o, "link", json_object_new_string(e->link));
  return o;
}

/* ---- one helper call ---- */

static int on_output(void *ud, int stream, const char *data, size_t len) {
  fs_call *c = ud;
  if (stream != 1 || c->parse_rc) return 0;
  c->parse_rc = files_wire_feed(&c->wire, data, len, &c->parse_err);
  if (c->parse_rc && c->parse_err.code == 0)
    sm_error_set(&c->parse_err, c->parse_rc, "stopped by the receiver (%s)",
                 sm_error_name(c->parse_rc));
  return c->parse_rc ? -1 : 0;
}

/* The code for a call that did not get as far as an answer. */
static int failure_code(const sm_run_result *r) {
  switch (r->failure_kind) {
  case SM_FAIL_POLICY: return SM_EPOLICY;
  case SM_FAIL_TIMEOUT: return SM_ETIMEOUT;
  case SM_FAIL_ENGINE: return SM_EUNREACHABLE;
  default: return SM_ESANDBOX;
  }
}

void files_helper_request(sm_run_request *req, const sm_run_request *base, const char *const *argv,
                          size_t argc, sm_output_fn on_out, void *ud) {
  *req = *base;
  req->argv = argv;
  req->argc = argc;
  req->helper = 1;
  req->stdin_read = NULL;
  req->on_output = on_out;
  req->on_output_ud = ud;
  req->stdout_forward_only = 1;
  req->env = NULL;
  req->n_env = 0;
  req->secret_env = NULL;
  req->n_secret_env = 0;
  if (req->settings.stderr_cap <= 0 || req->settings.stderr_cap > 64 * 1024)
    req->settings.stderr_cap = 64 * 1024;
}

int files_call_run(fs_call *c, sm_runner *runner, const sm_run_request *base,
                   const char *const *argv, size_t argc, sm_read_fn in, void *in_ud,
                   sm_run_result *call, sm_error *err) {
  sm_run_request req;
  files_helper_request(&req, base, argv, argc, on_output, c);
  req.stdin_read = in;
  req.stdin_ud = in_ud;
  sm_run_result local;
  sm_run_result *r = call ? call : &local;
  memset(r, 0, sizeof *r);
  int rc = sm_run(runner, &req, r, err);
  const char *op = argc > 1 ? argv[1] : "?";
  if (rc == 0) {
    if (c->in_rc) {
      rc = c->in_rc;
      if (err && c->in_err.message[0]) *err = c->in_err;
      else sm_error_set(err, rc, "reading the content to send failed");
    } else if (c->parse_rc) {
      rc = c->parse_rc;
      if (err) *err = c->parse_err;
    } else if (c->wire.failed) {
      rc = sm_error_set(err, files_wire_error_code(c->wire.errname), "%s", c->wire.message);
      /* What the sandbox's file system said, apart from sandman's own refusals. */
      if (err) err->sys_errno = files_wire_errno(c->wire.errname);
    } else if (r->failure_kind != SM_FAIL_NONE && r->failure_kind != SM_FAIL_TOOL) {
      rc = sm_error_set(err, failure_code(r), "%s", r->error[0] ? r->error : "the call failed");
    } else if (r->exit_code != 0) {
      rc = sm_error_set(err, SM_ESANDBOX, "sandman's helper failed in the sandbox (exit %d)%s%.*s",
                        r->exit_code, r->stderr_len ? ": " : "", (int)(r->stderr_len > 512 ? 512 : r->stderr_len),
                        r->stderr_data ? r->stderr_data : "");
    } else {
      rc = files_wire_finish(&c->wire, err);
    }
  }
  if (rc) sm_error_wrap(err, "%s", op);
  if (r == &local) sm_run_result_dispose(&local);
  return rc;
}

void files_call_init(fs_call *c, fs_wire_mode mode, const fs_wire_handlers *h,
                     int64_t max_records) {
  memset(c, 0, sizeof *c);
  files_wire_init(&c->wire, mode, h, max_records);
}

void files_call_dispose(fs_call *c) { files_wire_dispose(&c->wire); }

/* Checks path and keeps its canonical form in buf. */
static int canon(const char *path, char *buf, size_t len, sm_error *err) {
  return sm_files_path(path, buf, len, err);
}

/* ---- read ---- */

typedef struct reading {
  const sm_files_read_opts *opts;
  int64_t size, count, got;
  int64_t max; /* read_all */
  common_buf *into;
} reading;

static int read_ok(void *ud, const char *fields) {
  reading *r = ud;
  long long size, count;
  char tail;
  if (sscanf(fields, "%lld %lld%c", &size, &count, &tail) != 2 || size < 0 || count < 0 ||
      count > size)
    return SM_EPROTOCOL;
  r->size = size;
  r->count = count;
  if (r->opts->on_size) return r->opts->on_size(r->opts->ud, size, count);
  return 0;
}

static int read_content(void *ud, const char *data, size_t len) {
  reading *r = ud;
  if (r->got + (int64_t)len > r->count) return SM_EPROTOCOL;
  r->got += (int64_t)len;
  return r->opts->write ? r->opts->write(r->opts->ud, data, len) : 0;
}

int sm_files_read(sm_runner *runner, const sm_run_request *base, const char *path,
                  const sm_files_read_opts *opts, sm_run_result *call, sm_error *err) {
  char p[SM_FILES_PATH_MAX + 1], off[32], len[32];
  int rc = canon(path, p, sizeof p, err);
  if (rc) return rc;
  if (opts->offset < 0) return sm_error_set(err, SM_EINVAL, "the offset must be >= 0");
  snprintf(off, sizeof off, "%" PRId64, opts->offset);
  snprintf(len, sizeof len, "%" PRId64, opts->length < 0 ? (int64_t)-1 : opts->length);
  reading r = {.opts = opts};
  fs_wire_handlers h = {.ok = read_ok, .content = read_content, .ud = &r};
  fs_call c;
  files_call_init(&c, FS_WIRE_RAW, &h, 0);
  const char *argv[] = {"fs", "read", ROOT, p, off, len};
  rc = files_call_run(&c, runner, base, argv, 6, NULL, NULL, call, err);
  files_call_dispose(&c);
  if (rc == 0 && r.got != r.count)
    rc = sm_error_set(err, SM_EIO, "reading %s: the file changed while it was read (%" PRId64
                                   " of %" PRId64 " bytes)", p, r.got, r.count);
  return rc;
}

static int collect_size(void *ud, int64_t size, int64_t count) {
  reading *r = ud;
  if (count > r->max) return SM_ETOOBIG;
  return 0;
}

static int collect_write(void *ud, const char *data, size_t len) {
  reading *r = ud;
  return common_buf_append(r->into, data, len) == 0 ? 0 : SM_ETOOBIG;
}

int sm_files_read_all(sm_runner *runner, const sm_run_request *base, const char *path,
                      int64_t offset, int64_t length, size_t max, char **out, size_t *out_len,
                      sm_run_result *call, sm_error *err) {
  *out = NULL;
  *out_len = 0;
  common_buf b;
  common_buf_init(&b, max);
  reading r = {.max = (int64_t)max, .into = &b};
  sm_files_read_opts o = {offset, length, collect_size, collect_write, &r};
  int rc = sm_files_read(runner, base, path, &o, call, err);
  if (rc == SM_ETOOBIG || (rc && err && err->code == SM_ETOOBIG))
    rc = sm_error_set(err, SM_ETOOBIG, "%s is larger than %zu bytes", path, max);
  if (rc) {
    common_buf_dispose(&b);
    return rc;
  }
  if (b.data == NULL) {
    *out = strdup("");
    if (*out == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  } else {
    *out = common_buf_steal(&b, out_len);
  }
  return 0;
}

/* ---- write: the content in chunks (see src/shared/agent/fs.h) ---- */

typedef struct chunker {
  fs_call *call;
  sm_read_fn read;
  void *ud;
  char *buf;           /* HEAD_ROOM + CHUNK */
  size_t off, len;     /* what is left to hand out: buf[off, len) */
  int done;
  int64_t total, max;
} chunker;

static ssize_t chunk_read(void *ud, char *out, size_t len) {
  chunker *k = ud;
  if (k->off == k->len) {
    if (k->done) return 0;
    /* A failure ends the stream without its "0\n": the helper then drops
     * the file it was writing (a killed helper could not). */
    ssize_t n = k->read(k->ud, k->buf + HEAD_ROOM, CHUNK);
    if (n < 0) {
      k->call->in_rc = (int)n;
      sm_error_set(&k->call->in_err, (int)n, "reading the content to write failed (%s); nothing was written",
                   sm_error_name((int)n));
      k->done = 1;
      return 0;
    }
    if ((size_t)n > CHUNK) {
      k->call->in_rc = SM_EINVAL;
      sm_error_set(&k->call->in_err, SM_EINVAL, "the content reader overran its buffer");
      k->done = 1;
      return 0;
    }
    k->total += n;
    if (k->total > k->max) {
      k->call->in_rc = SM_ETOOBIG;
      sm_error_set(&k->call->in_err, SM_ETOOBIG,
                   "the content is larger than the limit of %" PRId64 " bytes; nothing was written",
                   k->max);
      k->done = 1;
      return 0;
    }
    char head[HEAD_ROOM];
    int h = snprintf(head, sizeof head, "%zx\n", (size_t)n);
    memcpy(k->buf + HEAD_ROOM - h, head, (size_t)h);
    k->off = HEAD_ROOM - (size_t)h;
    k->len = HEAD_ROOM + (size_t)n;
    if (n == 0) k->done = 1; /* "0\n" ends the content */
  }
  size_t n = k->len - k->off < len ? k->len - k->off : len;
  memcpy(out, k->buf + k->off, n);
  k->off += n;
  return (ssize_t)n;
}

static int count_ok(void *ud, const char *fields) {
  int64_t *v = ud;
  long long a = 0, b = 0;
  int n = sscanf(fields, "%lld %lld", &a, &b);
  if (v) {
    v[0] = n >= 1 ? a : 0;
    v[1] = n >= 2 ? b : 0;
  }
  return 0;
}

int sm_files_write(sm_runner *runner, const sm_run_request *base, const char *path,
                   const sm_files_write_opts *opts, int64_t *written, sm_run_result *call,
                   sm_error *err) {
  char p[SM_FILES_PATH_MAX + 1], mode[16], flags[4];
  int rc = canon(path, p, sizeof p, err);
  if (rc) return rc;
  if (strcmp(p, ".") == 0) return sm_error_set(err, SM_EINVAL, "cannot write over the workspace folder");
  if (opts->read == NULL) return sm_error_set(err, SM_EINVAL, "no content to write");
  if (opts->mode > 0777) return sm_error_set(err, SM_EINVAL, "mode %o: only permission bits (0 to 0777)", opts->mode);
  if (opts->mode < 0) snprintf(mode, sizeof mode, "-");
  else snprintf(mode, sizeof mode, "%o", (unsigned)opts->mode);
  snprintf(flags, sizeof flags, "%s%s%s", opts->parents ? "p" : "", opts->exclusive ? "x" : "",
           opts->parents || opts->exclusive ? "" : "-");
  int64_t counts[2] = {0, 0};
  fs_wire_handlers h = {.ok = count_ok, .ud = counts};
  fs_call c;
  files_call_init(&c, FS_WIRE_STATUS, &h, 0);
  chunker k = {.call = &c, .read = opts->read, .ud = opts->ud,
               .max = opts->max_bytes > 0 ? opts->max_bytes : SM_FILES_DEFAULT_MAX_BYTES};
  k.buf = malloc(HEAD_ROOM + CHUNK);
  if (k.buf == NULL) {
    files_call_dispose(&c);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  const char *argv[] = {"fs", "write", ROOT, p, mode, flags};
  rc = files_call_run(&c, runner, base, argv, 6, chunk_read, &k, call, err);
  free(k.buf);
  files_call_dispose(&c);
  if (rc == 0 && written) *written = counts[0];
  return rc;
}

typedef struct memory_reader {
  const char *data;
  size_t len, off;
} memory_reader;

static ssize_t read_memory(void *ud, char *buf, size_t len) {
  memory_reader *m = ud;
  size_t n = m->len - m->off < len ? m->len - m->off : len;
  memcpy(buf, m->data + m->off, n);
  m->off += n;
  return (ssize_t)n;
}

int sm_files_write_all(sm_runner *runner, const sm_run_request *base, const char *path,
                       const void *data, size_t len, int mode, sm_run_result *call,
                       sm_error *err) {
  memory_reader m = {data, len, 0};
  sm_files_write_opts o = SM_FILES_WRITE_OPTS_INIT;
  o.mode = mode;
  o.read = read_memory;
  o.ud = &m;
  o.max_bytes = (int64_t)len + 1;
  return sm_files_write(runner, base, path, &o, NULL, call, err);
}

/* ---- mkdir, delete ---- */

int sm_files_mkdir(sm_runner *runner, const sm_run_request *base, const char *path, int mode,
                   int parents, sm_run_result *call, sm_error *err) {
  char p[SM_FILES_PATH_MAX + 1], m[16];
  int rc = canon(path, p, sizeof p, err);
  if (rc) return rc;
  if (mode > 0777) return sm_error_set(err, SM_EINVAL, "mode %o: only permission bits (0 to 0777)", mode);
  snprintf(m, sizeof m, "%o", mode < 0 ? 0755u : (unsigned)mode);
  fs_call c;
  files_call_init(&c, FS_WIRE_STATUS, NULL, 0);
  const char *argv[] = {"fs", "mkdir", ROOT, p, m, parents ? "p" : "-"};
  rc = files_call_run(&c, runner, base, argv, 6, NULL, NULL, call, err);
  files_call_dispose(&c);
  return rc;
}

int sm_files_delete(sm_runner *runner, const sm_run_request *base, const char *path,
                    int recursive, int64_t *removed, sm_run_result *call, sm_error *err) {
  char p[SM_FILES_PATH_MAX + 1];
  int rc = canon(path, p, sizeof p, err);
  if (rc) return rc;
  if (strcmp(p, ".") == 0) return sm_error_set(err, SM_EINVAL, "the workspace folder itself cannot be deleted");
  int64_t counts[2] = {0, 0};
  fs_wire_handlers h = {.ok = count_ok, .ud = counts};
  fs_call c;
  files_call_init(&c, FS_WIRE_STATUS, &h, 0);
  const char *argv[] = {"fs", "delete", ROOT, p, recursive ? "r" : "-"};
  rc = files_call_run(&c, runner, base, argv, 5, NULL, NULL, call, err);
  files_call_dispose(&c);
  if (rc == 0 && removed) *removed = counts[0];
  return rc;
}

/* ---- stat, list, glob ---- */

static int list_record(void *ud, const sm_file_entry *e) {
  sm_file_list *l = ud;
  sm_file_entry *v = realloc(l->v, (l->n + 1) * sizeof *v);
  if (v == NULL) return SM_ENOMEM;
  l->v = v;
  v[l->n] = *e;
  v[l->n].path = strdup(e->path);
  v[l->n].link = e->link ? strdup(e->link) : NULL;
  if (v[l->n].path == NULL || (e->link && v[l->n].link == NULL)) {
    sm_file_entry_dispose(&v[l->n]);
    return SM_ENOMEM;
  }
  l->n++;
  return 0;
}

static int run_listing(sm_runner *runner, const sm_run_request *base, const char *const *argv,
                       size_t argc, size_t max, sm_file_list *out, sm_run_result *call,
                       sm_error *err) {
  memset(out, 0, sizeof *out);
  fs_wire_handlers h = {.record = list_record, .ud = out};
  fs_call c;
  files_call_init(&c, FS_WIRE_RECORDS, &h, (int64_t)max);
  int rc = files_call_run(&c, runner, base, argv, argc, NULL, NULL, call, err);
  out->truncated = c.wire.truncated;
  files_call_dispose(&c);
  if (rc) sm_file_list_dispose(out);
  return rc;
}

int sm_files_stat(sm_runner *runner, const sm_run_request *base, const char *path,
                  sm_file_entry *out, sm_run_result *call, sm_error *err) {
  memset(out, 0, sizeof *out);
  char p[SM_FILES_PATH_MAX + 1];
  int rc = canon(path, p, sizeof p, err);
  if (rc) return rc;
  const char *argv[] = {"fs", "stat", ROOT, p};
  sm_file_list l;
  rc = run_listing(runner, base, argv, 4, 1, &l, call, err);
  if (rc) return rc;
  if (l.n != 1) {
    sm_file_list_dispose(&l);
    return sm_error_set(err, SM_EPROTOCOL, "stat %s: no entry came back", p);
  }
  *out = l.v[0];
  free(l.v);
  return 0;
}

static size_t entry_cap(size_t max) {
  if (max == 0) return SM_FILES_DEFAULT_MAX_ENTRIES;
  return max > SM_FILES_MAX_ENTRIES ? SM_FILES_MAX_ENTRIES : max;
}

int sm_files_list(sm_runner *runner, const sm_run_request *base, const char *path, int depth,
                  size_t max_entries, sm_file_list *out, sm_run_result *call, sm_error *err) {
  memset(out, 0, sizeof *out);
  char p[SM_FILES_PATH_MAX + 1], d[16], m[24];
  int rc = canon(path, p, sizeof p, err);
  if (rc) return rc;
  if (depth < 0 || depth > SM_FS_DEPTH_MAX)
    return sm_error_set(err, SM_EINVAL, "depth must be 0 (all) to %d", SM_FS_DEPTH_MAX);
  size_t max = entry_cap(max_entries);
  snprintf(d, sizeof d, "%d", depth);
  snprintf(m, sizeof m, "%zu", max);
  const char *argv[] = {"fs", "list", ROOT, p, d, m};
  return run_listing(runner, base, argv, 6, max, out, call, err);
}

int sm_files_glob(sm_runner *runner, const sm_run_request *base, const char *path,
                  const char *pattern, size_t max_entries, sm_file_list *out,
                  sm_run_result *call, sm_error *err) {
  memset(out, 0, sizeof *out);
  char p[SM_FILES_PATH_MAX + 1], m[24];
  int rc = canon(path, p, sizeof p, err);
  if (rc) return rc;
  if (pattern == NULL || pattern[0] == '\0' || pattern[0] == '/' || strlen(pattern) > SM_FILES_PATH_MAX)
    return sm_error_set(err, SM_EINVAL, "the pattern must be a relative path pattern such as '**/*.c'");
  size_t max = entry_cap(max_entries);
  snprintf(m, sizeof m, "%zu", max);
  const char *argv[] = {"fs", "glob", ROOT, p, pattern, m};
  return run_listing(runner, base, argv, 6, max, out, call, err);
}

/* ---- grep ---- */

static int grep_match(void *ud, const char *path, int64_t line, const char *text, size_t len) {
  sm_grep_result *r = ud;
  sm_grep_match *v = realloc(r->v, (r->n + 1) * sizeof *v);
  if (v == NULL) return SM_ENOMEM;
  r->v = v;
  sm_grep_match *m = &v[r->n];
  m->path = strdup(path);
  m->text = malloc(len + 1);
  if (m->path == NULL || m->text == NULL) {
    free(m->path);
    free(m->text);
    return SM_ENOMEM;
  }
  memcpy(m->text, text, len);
  m->text[len] = '\0';
  m->text_len = len;
  m->line = line;
  r->n++;
  return 0;
}

int sm_files_grep(sm_runner *runner, const sm_run_request *base, const char *path,
                  const sm_grep_opts *opts, sm_grep_result *out, sm_run_result *call,
                  sm_error *err) {
  memset(out, 0, sizeof *out);
  char p[SM_FILES_PATH_MAX + 1], m[24], flags[4];
  int rc = canon(path, p, sizeof p, err);
  if (rc) return rc;
  if (opts->pattern == NULL || opts->pattern[0] == '\0' || strlen(opts->pattern) > SM_FILES_PATH_MAX)
    return sm_error_set(err, SM_EINVAL, "the search pattern must be 1 to %d bytes", SM_FILES_PATH_MAX);
  if (opts->include && (opts->include[0] == '\0' || opts->include[0] == '/'))
    return sm_error_set(err, SM_EINVAL, "the include pattern must be a relative path pattern");
  size_t max = opts->max_matches ? entry_cap(opts->max_matches) : 1000;
  snprintf(m, sizeof m, "%zu", max);
  snprintf(flags, sizeof flags, "%s%s%s", opts->fixed ? "F" : "", opts->ignore_case ? "i" : "",
           opts->fixed || opts->ignore_case ? "" : "-");
  fs_wire_handlers h = {.match = grep_match, .ud = out};
  fs_call c;
  files_call_init(&c, FS_WIRE_RECORDS, &h, (int64_t)max);
  const char *argv[] = {"fs", "grep", ROOT, p, opts->pattern, flags,
                        opts->include ? opts->include : "-", m};
  rc = files_call_run(&c, runner, base, argv, 8, NULL, NULL, call, err);
  out->truncated = c.wire.truncated;
  files_call_dispose(&c);
  if (rc) sm_grep_result_dispose(out);
  return rc;
}
