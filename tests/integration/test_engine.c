/* The engine client against the real engine: containers, exec with stdin
 * through the hijacked connection, exit codes, a 50 MB archive round trip
 * in bounded memory, image import and build, volumes, error mapping and
 * clients on several threads. Everything created carries this test's
 * instance label and is removed at the end. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/unconst.h"
#include "support/itest.h"
#include "support/memio.h"

static const char *instance(void) {
  return itest_instance("test_engine");
}

static json_object *labels_object(void) {
  json_object *l = json_object_new_object();
  json_object_object_add(l, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(l, "io.sandman.instance", json_object_new_string(instance()));
  return l;
}

static char instance_label[300];
static const char *my_labels[2];

static void set_labels(void) {
  snprintf(instance_label, sizeof instance_label, "io.sandman.instance=%s", instance());
  my_labels[0] = "io.sandman.managed=true";
  my_labels[1] = instance_label;
}

/* ---- helpers ---- */

static json_object *container_config(const char *const *cmd) {
  json_object *c = json_object_new_object();
  json_object_object_add(c, "Image", json_object_new_string(ITEST_IMAGE));
  json_object *argv = json_object_new_array();
  for (size_t i = 0; cmd[i]; i++) json_object_array_add(argv, json_object_new_string(cmd[i]));
  json_object_object_add(c, "Cmd", argv);
  json_object_object_add(c, "Labels", labels_object());
  json_object *hc = json_object_new_object();
  json_object_object_add(hc, "NetworkMode", json_object_new_string("none"));
  json_object_object_add(c, "HostConfig", hc);
  return c;
}

/* A running container that sleeps; the caller removes it. */
static void start_sleeper(sm_engine *e, const char *name, char id[SM_ENGINE_ID_MAX]) {
  static const char *const cmd[] = {"sleep", "600", NULL};
  json_object *cfg = container_config(cmd);
  sm_error err = SM_ERROR_INIT;
  int rc = sm_engine_container_create(e, name, cfg, id, NULL, &err);
  json_object_put(cfg);
  if (rc != 0) fail_msg("create: %s", err.message);
  rc = sm_engine_container_start(e, id, &err);
  if (rc != 0) fail_msg("start: %s", err.message);
}

static void remove_container(sm_engine *e, const char *id) {
  sm_error err = SM_ERROR_INIT;
  int rc = sm_engine_container_remove(e, id, 1, 1, &err);
  if (rc != 0 && rc != SM_ENOTFOUND) fail_msg("remove %s: %s", id, err.message);
}

typedef struct capture {
  char *out, *err;
  size_t out_len, err_len, out_cap, err_cap;
  size_t calls;
} capture;

static int capture_output(void *ud, int stream, const char *data, size_t len) {
  capture *c = ud;
  char **buf = stream == 2 ? &c->err : &c->out;
  size_t *blen = stream == 2 ? &c->err_len : &c->out_len;
  size_t *bcap = stream == 2 ? &c->err_cap : &c->out_cap;
  if (stream != 1 && stream != 2) return SM_EPROTOCOL;
  if (*blen + len + 1 > *bcap) {
    size_t n = (*blen + len + 1) * 2;
    char *p = realloc(*buf, n);
    if (p == NULL) return SM_ENOMEM;
    *buf = p;
    *bcap = n;
  }
  memcpy(*buf + *blen, data, len);
  *blen += len;
  (*buf)[*blen] = '\0';
  c->calls++;
  return 0;
}

static void capture_free(capture *c) {
  free(c->out);
  free(c->err);
  memset(c, 0, sizeof *c);
}

/* Runs cmd in the container; returns the exit code, fills out. */
static int run_exec(sm_engine *e, const char *cid, const char *const *cmd, mem_reader *in,
                    capture *out, double timeout_s, int *out_rc, sm_error *err) {
  json_object *cfg = itest_exec_config(cmd, in != NULL);
  char xid[SM_ENGINE_ID_MAX];
  int rc = sm_engine_exec_create(e, cid, cfg, xid, err);
  json_object_put(cfg);
  if (rc != 0) {
    *out_rc = rc;
    return -1;
  }
  sm_exec_io io = SM_EXEC_IO_INIT;
  if (in) {
    io.stdin_read = read_mem;
    io.stdin_ud = in;
  }
  io.output = capture_output;
  io.output_ud = out;
  io.timeout_s = timeout_s;
  rc = sm_engine_exec_start(e, xid, &io, err);
  *out_rc = rc;
  if (rc != 0) return -1;
  int running = 1, code = -1;
  /* The exit code is recorded before the stream ends; allow a short lag. */
  for (int i = 0; i < 250 && running; i++) {
    rc = sm_engine_exec_inspect(e, xid, &running, &code, NULL, err);
    if (rc != 0) {
      *out_rc = rc;
      return -1;
    }
    if (running) usleep(20000);
  }
  return code;
}

/* ---- tests ---- */

static void test_system(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_ping(e, &err), 0);
  assert_string_equal(sm_engine_api_version(e), "1.41");
  json_object *v = NULL, *info = NULL, *x = NULL;
  assert_int_equal(sm_engine_version(e, &v, &err), 0);
  assert_true(json_object_object_get_ex(v, "ApiVersion", &x));
  assert_true(json_object_object_get_ex(v, "Version", &x));
  json_object_put(v);
  assert_int_equal(sm_engine_info(e, &info, &err), 0);
  assert_true(json_object_object_get_ex(info, "Driver", &x));
  json_object_put(info);
  int status = 0;
  json_object *list = NULL;
  assert_int_equal(sm_engine_request_json(e, "GET", "/containers/json?all=1", NULL, &status,
                                          &list, &err), 0);
  assert_int_equal(status, 200);
  assert_true(json_object_is_type(list, json_type_array));
  json_object_put(list);
}

static void test_container_lifecycle(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  static const char *const cmd[] = {"sh", "-c", "trap 'exit 7' TERM; while :; do sleep 1; done",
                                    NULL};
  json_object *cfg = container_config(cmd);
  char id[SM_ENGINE_ID_MAX];
  json_object *warnings = NULL;
  assert_int_equal(sm_engine_container_create(e, NULL, cfg, id, &warnings, &err), 0);
  json_object_put(cfg);
  json_object_put(warnings);
  assert_int_equal(strlen(id), 64);
  assert_int_equal(sm_engine_container_start(e, id, &err), 0);
  /* Starting a running container is not an error (304). */
  assert_int_equal(sm_engine_container_start(e, id, &err), 0);

  json_object *insp = NULL, *st = NULL, *running = NULL;
  assert_int_equal(sm_engine_container_inspect(e, id, &insp, &err), 0);
  assert_true(json_object_object_get_ex(insp, "State", &st));
  assert_true(json_object_object_get_ex(st, "Running", &running));
  assert_true(json_object_get_boolean(running));
  json_object_put(insp);

  /* Listed by our labels, and not by another instance's. */
  json_object *list = NULL;
  assert_int_equal(sm_engine_container_list(e, 1, my_labels, 2, &list, &err), 0);
  int found = 0;
  for (size_t i = 0; i < json_object_array_length(list); i++) {
    json_object *cid = NULL;
    if (json_object_object_get_ex(json_object_array_get_idx(list, i), "Id", &cid) &&
        strcmp(json_object_get_string(cid), id) == 0)
      found = 1;
  }
  json_object_put(list);
  assert_true(found);
  const char *other[] = {"io.sandman.instance=no-such-instance-xyz"};
  assert_int_equal(sm_engine_container_list(e, 1, other, 1, &list, &err), 0);
  assert_int_equal(json_object_array_length(list), 0);
  json_object_put(list);

  /* stop sends TERM: the trap exits 7. */
  assert_int_equal(sm_engine_container_stop(e, id, 10, &err), 0);
  int64_t code = -1;
  assert_int_equal(sm_engine_container_wait(e, id, "not-running", 30000, &code, &err), 0);
  assert_int_equal(code, 7);

  /* Start again, kill: 137. */
  assert_int_equal(sm_engine_container_start(e, id, &err), 0);
  assert_int_equal(sm_engine_container_kill(e, id, NULL, &err), 0);
  assert_int_equal(sm_engine_container_wait(e, id, NULL, 30000, &code, &err), 0);
  assert_int_equal(code, 137);
  /* Killing a stopped container is a conflict. */
  assert_int_equal(sm_engine_container_kill(e, id, "KILL", &err), SM_ECONFLICT);
  assert_int_equal(err.http_status, 409);

  assert_int_equal(sm_engine_container_remove(e, id, 1, 1, &err), 0);
  assert_int_equal(sm_engine_container_inspect(e, id, &insp, &err), SM_ENOTFOUND);
  assert_null(insp);
  assert_int_equal(sm_engine_container_remove(e, id, 1, 1, &err), SM_ENOTFOUND);
}

static void test_exec_stdin(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  start_sleeper(e, NULL, id);
  int rc = 0;

  /* cat: stdin comes back on stdout; nothing on stderr. */
  static const char *const cat[] = {"cat", NULL};
  mem_reader in = {"hello through the hijacked connection\n", 0, 0, 0};
  in.len = strlen(in.data);
  capture out = {0};
  int code = run_exec(e, id, cat, &in, &out, 60, &rc, &err);
  assert_int_equal(rc, 0);
  assert_int_equal(code, 0);
  assert_int_equal(out.out_len, in.len);
  assert_memory_equal(out.out, in.data, in.len);
  assert_int_equal(out.err_len, 0);
  capture_free(&out);

  /* stdout and stderr are kept apart. */
  static const char *const cat_err[] = {"sh", "-c", "cat; echo err >&2", NULL};
  mem_reader in2 = {"line one\nline two\n", 0, 0, 3};
  in2.len = strlen(in2.data);
  code = run_exec(e, id, cat_err, &in2, &out, 60, &rc, &err);
  assert_int_equal(rc, 0);
  assert_int_equal(code, 0);
  assert_string_equal(out.out, "line one\nline two\n");
  assert_string_equal(out.err, "err\n");
  capture_free(&out);

  /* Empty stdin: cat sees EOF at once. */
  mem_reader none = {"", 0, 0, 0};
  code = run_exec(e, id, cat, &none, &out, 60, &rc, &err);
  assert_int_equal(rc, 0);
  assert_int_equal(code, 0);
  assert_int_equal(out.out_len, 0);
  capture_free(&out);

  /* 8 MB through cat: output must be read while stdin is written, or
   * both sides fill their buffers and stop. */
  size_t big = 8u << 20;
  char *data = malloc(big);
  assert_non_null(data);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < big; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    data[i] = (char)x;
  }
  mem_reader in3 = {data, big, 0, 0};
  code = run_exec(e, id, cat, &in3, &out, 300, &rc, &err);
  if (rc != 0) fail_msg("8 MB cat: %s", err.message);
  assert_int_equal(code, 0);
  assert_int_equal(out.out_len, big);
  assert_memory_equal(out.out, data, big);
  capture_free(&out);
  free(data);
  remove_container(e, id);
}

static void test_exec_exit_codes(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  start_sleeper(e, NULL, id);
  int rc = 0;
  capture out = {0};

  static const char *const ok[] = {"sh", "-c", "echo out; echo err >&2", NULL};
  assert_int_equal(run_exec(e, id, ok, NULL, &out, 60, &rc, &err), 0);
  assert_int_equal(rc, 0);
  assert_string_equal(out.out, "out\n");
  assert_string_equal(out.err, "err\n");
  capture_free(&out);

  static const char *const three[] = {"sh", "-c", "exit 3", NULL};
  assert_int_equal(run_exec(e, id, three, NULL, &out, 60, &rc, &err), 3);
  assert_int_equal(rc, 0);
  capture_free(&out);

  static const char *const missing_sh[] = {"sh", "-c", "no-such-command-xyz", NULL};
  assert_int_equal(run_exec(e, id, missing_sh, NULL, &out, 60, &rc, &err), 127);
  capture_free(&out);

  /* An executable that does not exist at all: the runtime fails the exec
   * and the engine reports 126 (as `docker exec` exits), with the runtime's
   * message in the output stream. */
  static const char *const missing[] = {"/no/such/binary", NULL};
  int code = run_exec(e, id, missing, NULL, &out, 60, &rc, &err);
  assert_int_equal(rc, 0);
  print_message("missing binary: exit %d, stdout [%s] stderr [%s]\n", code,
                out.out ? out.out : "", out.err ? out.err : "");
  assert_int_equal(code, 126);
  assert_true((out.out && strstr(out.out, "no such file")) ||
              (out.err && strstr(out.err, "no such file")));
  capture_free(&out);

  /* Lots of output in many frames, all of it delivered. */
  static const char *const lots[] = {"sh", "-c", "head -c 3000000 /dev/zero; echo done >&2", NULL};
  assert_int_equal(run_exec(e, id, lots, NULL, &out, 120, &rc, &err), 0);
  assert_int_equal(rc, 0);
  assert_int_equal(out.out_len, 3000000);
  assert_string_equal(out.err, "done\n");
  capture_free(&out);

  /* Timeout: the call returns, the process keeps running. */
  static const char *const slow[] = {"sleep", "30", NULL};
  assert_int_equal(run_exec(e, id, slow, NULL, &out, 0.5, &rc, &err), -1);
  assert_int_equal(rc, SM_ETIMEOUT);
  capture_free(&out);

  /* No such exec. */
  sm_exec_io io = SM_EXEC_IO_INIT;
  assert_int_equal(sm_engine_exec_start(e, "0000000000000000000000000000000000000000000000000000000000000000", &io, &err),
                   SM_ENOTFOUND);
  assert_int_equal(err.http_status, 404);
  remove_container(e, id);
}

static void *cancel_later(void *p) {
  usleep(300000);
  *(volatile int *)p = 1;
  return NULL;
}

static void test_exec_cancel(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  start_sleeper(e, NULL, id);
  json_object *cfg = json_object_new_object();
  json_object *argv = json_object_new_array();
  json_object_array_add(argv, json_object_new_string("sleep"));
  json_object_array_add(argv, json_object_new_string("30"));
  json_object_object_add(cfg, "Cmd", argv);
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  char xid[SM_ENGINE_ID_MAX];
  assert_int_equal(sm_engine_exec_create(e, id, cfg, xid, &err), 0);
  json_object_put(cfg);
  volatile int cancel = 0;
  pthread_t t;
  pthread_create(&t, NULL, cancel_later, SM_UNCONST(&cancel));
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.cancel = &cancel;
  assert_int_equal(sm_engine_exec_start(e, xid, &io, &err), SM_ECANCELLED);
  pthread_join(t, NULL);
  remove_container(e, id);
}

/* ---- 50 MB archive round trip ---- */

#define BIG_SIZE (50u << 20)

typedef struct tar_gen {
  char header[512];
  uint64_t off, total, rng;
} tar_gen;

static void tar_header(char *h, const char *name, uint64_t size) {
  memset(h, 0, 512);
  snprintf(h, 100, "%s", name);
  snprintf(h + 100, 8, "%07o", 0644);
  snprintf(h + 108, 8, "%07o", 1000);
  snprintf(h + 116, 8, "%07o", 1000);
  snprintf(h + 124, 12, "%011llo", (unsigned long long)size);
  snprintf(h + 136, 12, "%011llo", (unsigned long long)time(NULL));
  h[156] = '0';
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++) sum += (unsigned char)h[i];
  snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static uint64_t expected_hash;

/* Header, 50 MB of pseudo-random bytes made on the fly, two zero blocks. */
static ssize_t tar_read(void *ud, char *buf, size_t len) {
  tar_gen *g = ud;
  size_t n = 0;
  while (n < len && g->off < g->total) {
    uint64_t o = g->off;
    if (o < 512) {
      buf[n++] = g->header[o];
    } else if (o < 512 + BIG_SIZE) {
      g->rng ^= g->rng << 13, g->rng ^= g->rng >> 7, g->rng ^= g->rng << 17;
      unsigned char c = (unsigned char)g->rng;
      expected_hash = fnv(expected_hash, &c, 1);
      buf[n++] = (char)c;
    } else {
      buf[n++] = 0;
    }
    g->off++;
  }
  return (ssize_t)n;
}

/* Streaming tar parse: hashes the first regular file's content. */
typedef struct tar_hash {
  unsigned char block[512];
  size_t block_len;
  uint64_t left, pad;  /* of the current entry */
  int hashing, done, files;
  uint64_t hash, bytes, total;
} tar_hash;

static uint64_t octal(const unsigned char *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n && p[i]; i++)
    if (p[i] >= '0' && p[i] <= '7') v = v * 8 + (p[i] - '0');
  return v;
}

static int tar_write(void *ud, const char *buf, size_t len) {
  tar_hash *t = ud;
  const unsigned char *p = (const unsigned char *)buf;
  t->total += len;
  while (len > 0) {
    if (t->left > 0) {
      size_t take = len < t->left ? len : (size_t)t->left;
      if (t->hashing) {
        t->hash = fnv(t->hash, p, take);
        t->bytes += take;
      }
      t->left -= take;
      p += take;
      len -= take;
      if (t->left == 0) {
        t->hashing = 0;
        t->left = t->pad;
        t->pad = 0;
      }
      continue;
    }
    size_t take = 512 - t->block_len;
    if (take > len) take = len;
    memcpy(t->block + t->block_len, p, take);
    t->block_len += take;
    p += take;
    len -= take;
    if (t->block_len < 512) break;
    t->block_len = 0;
    if (t->done || t->block[0] == 0) {
      t->done = 1;
      continue;
    }
    uint64_t size = octal(t->block + 124, 12);
    char type = (char)t->block[156];
    t->left = size;
    t->pad = (512 - size % 512) % 512;
    if ((type == '0' || type == '\0') && t->files == 0) {
      t->files++;
      t->hashing = 1;
      t->hash = 14695981039346656037ull;
    }
    if (t->left == 0) {
      t->left = t->pad;
      t->pad = 0;
    }
  }
  return 0;
}

static long status_kb(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
  if (f) fclose(f);
  return v;
}

/* Resets the peak RSS (VmHWM) so that earlier tests do not mask growth;
 * returns the current RSS to measure from. */
static long reset_peak_rss_kb(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f) {
    fputs("5", f);
    fclose(f);
  }
  return status_kb("VmRSS");
}

static long max_rss_kb(void) {
  long hwm = status_kb("VmHWM");
  if (hwm >= 0) return hwm;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static void test_archive_roundtrip(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  start_sleeper(e, NULL, id);
  long rss_before = reset_peak_rss_kb();

  tar_gen g;
  memset(&g, 0, sizeof g);
  tar_header(g.header, "big.bin", BIG_SIZE);
  g.total = 512 + BIG_SIZE + 1024; /* BIG_SIZE is a multiple of 512 */
  g.rng = 0x2545F4914F6CDD1Dull;
  expected_hash = 14695981039346656037ull;
  int rc = sm_engine_archive_put(e, id, "/tmp", tar_read, &g, &err);
  if (rc != 0) fail_msg("archive put: %s", err.message);
  assert_int_equal(g.off, g.total);

  tar_hash t;
  memset(&t, 0, sizeof t);
  rc = sm_engine_archive_get(e, id, "/tmp/big.bin", tar_write, &t, &err);
  if (rc != 0) fail_msg("archive get: %s", err.message);
  assert_int_equal(t.files, 1);
  assert_int_equal(t.bytes, BIG_SIZE);
  assert_true(t.hash == expected_hash);
  long grown_kb = max_rss_kb() - rss_before;
  print_message("50 MB round trip: peak RSS %ld KiB over the %ld KiB before\n", grown_kb,
                rss_before);
  assert_true(grown_kb < 16 * 1024);
  /* The measurement itself works: touching 20 MB shows up in it. */
  size_t ctl = 20u << 20;
  char *touch = malloc(ctl);
  assert_non_null(touch);
  memset(touch, 1, ctl);
  long control_kb = max_rss_kb() - rss_before;
  free(touch);
  assert_true(control_kb >= 19 * 1024);

  /* A path that does not exist: SM_ENOTFOUND with the engine's text. */
  assert_int_equal(sm_engine_archive_get(e, id, "/no/such/path", tar_write, &t, &err),
                   SM_ENOTFOUND);
  assert_non_null(strstr(err.message, "Could not find the file /no/such/path"));
  /* A reader error aborts the upload with its own code. */
  remove_container(e, id);
}

static ssize_t failing_reader(void *ud, char *buf, size_t len) {
  int *calls = ud;
  if ((*calls)++ == 0) {
    memset(buf, 0, len < 512 ? len : 512);
    return (ssize_t)(len < 512 ? len : 512);
  }
  return SM_EIO;
}

static void test_archive_reader_error(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  start_sleeper(e, NULL, id);
  int calls = 0;
  assert_int_equal(sm_engine_archive_put(e, id, "/tmp", failing_reader, &calls, &err), SM_EIO);
  /* The client still works afterwards. */
  assert_int_equal(sm_engine_ping(e, &err), 0);
  remove_container(e, id);
}

/* ---- images ---- */

typedef struct tar_mem {
  char buf[8192];
  size_t len;
} tar_mem;

static void tar_add(tar_mem *t, const char *name, char type, const char *content) {
  char *h = t->buf + t->len;
  size_t n = content ? strlen(content) : 0;
  tar_header(h, name, n);
  h[156] = type;
  if (type == '5') snprintf(h + 100, 8, "%07o", 0755);
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++) sum += (unsigned char)h[i];
  snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  t->len += 512;
  if (n) {
    memcpy(t->buf + t->len, content, n);
    t->len += (n + 511) / 512 * 512;
  }
}

static int progress_count;
static void count_progress(void *ud, json_object *m) {
  (void)ud;
  assert_true(json_object_is_type(m, json_type_object));
  progress_count++;
}

static void delete_image(sm_engine *e, const char *ref) {
  sm_error err = SM_ERROR_INIT;
  int rc = sm_engine_image_remove(e, ref, 1, &err);
  if (rc != 0) fail_msg("delete image %s: %s", ref, err.message);
  assert_int_equal(sm_engine_image_remove(e, ref, 1, &err), SM_ENOTFOUND);
}

static void test_image_import(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  tar_mem *t = calloc(1, sizeof *t);
  tar_add(t, "etc/", '5', NULL);
  tar_add(t, "etc/hello.txt", '0', "hello from an imported image\n");
  t->len += 1024;
  char tag[128];
  snprintf(tag, sizeof tag, "it-%ld", (long)getpid());
  char label1[300], label2[300];
  snprintf(label1, sizeof label1, "LABEL io.sandman.managed=true");
  snprintf(label2, sizeof label2, "LABEL io.sandman.instance=%s", instance());
  const char *changes[] = {label1, label2, "USER 1000", "CMD [\"/bin/none\"]"};
  mem_reader r = {t->buf, t->len, 0, 1000};
  progress_count = 0;
  int rc = sm_engine_image_import(e, read_mem, &r, "sandman-it/engine-import", tag, changes, 4,
                                  count_progress, NULL, &err);
  if (rc != 0) fail_msg("import: %s", err.message);
  assert_true(progress_count >= 1);
  char ref[256];
  snprintf(ref, sizeof ref, "sandman-it/engine-import:%s", tag);
  json_object *insp = NULL, *cfg = NULL, *user = NULL, *labels = NULL, *l = NULL;
  assert_int_equal(sm_engine_image_inspect(e, ref, &insp, &err), 0);
  assert_true(json_object_object_get_ex(insp, "Config", &cfg));
  assert_true(json_object_object_get_ex(cfg, "User", &user));
  assert_string_equal(json_object_get_string(user), "1000");
  assert_true(json_object_object_get_ex(cfg, "Labels", &labels));
  assert_true(json_object_object_get_ex(labels, "io.sandman.instance", &l));
  assert_string_equal(json_object_get_string(l), instance());
  json_object_put(insp);

  json_object *filters = json_object_new_object();
  json_object *ref_arr = json_object_new_array();
  json_object_array_add(ref_arr, json_object_new_string(ref));
  json_object_object_add(filters, "reference", ref_arr);
  json_object *list = NULL;
  assert_int_equal(sm_engine_image_list(e, filters, &list, &err), 0);
  assert_int_equal(json_object_array_length(list), 1);
  json_object_put(list);
  json_object_put(filters);
  delete_image(e, ref);
  assert_int_equal(sm_engine_image_inspect(e, ref, &insp, &err), SM_ENOTFOUND);
  free(t);
}

static void test_image_build(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  char df[512];
  snprintf(df, sizeof df,
           "FROM %s\nLABEL io.sandman.managed=true io.sandman.instance=%s\n"
           "COPY note.txt /note.txt\n",
           ITEST_IMAGE, instance());
  tar_mem *t = calloc(1, sizeof *t);
  tar_add(t, "Dockerfile", '0', df);
  tar_add(t, "note.txt", '0', "built\n");
  t->len += 1024;
  char ref[128];
  snprintf(ref, sizeof ref, "sandman-it/engine-build:it-%ld", (long)getpid());
  mem_reader r = {t->buf, t->len, 0, 0};
  progress_count = 0;
  int rc = sm_engine_image_build(e, read_mem, &r, ref, NULL, count_progress, NULL, &err);
  if (rc != 0) fail_msg("build: %s", err.message);
  assert_true(progress_count >= 2);
  json_object *insp = NULL;
  assert_int_equal(sm_engine_image_inspect(e, ref, &insp, &err), 0);
  json_object_put(insp);
  delete_image(e, ref);

  /* A failing step: the stream's error message becomes SM_EENGINE. */
  t->len = 0;
  snprintf(df, sizeof df,
           "FROM %s\nLABEL io.sandman.managed=true io.sandman.instance=%s\n"
           "COPY missing-file.txt /x\n",
           ITEST_IMAGE, instance());
  tar_add(t, "Dockerfile", '0', df);
  t->len += 1024;
  mem_reader r2 = {t->buf, t->len, 0, 0};
  rc = sm_engine_image_build(e, read_mem, &r2, NULL, NULL, NULL, NULL, &err);
  assert_int_equal(rc, SM_EENGINE);
  print_message("failing build: %s\n", err.message);
  assert_non_null(strstr(err.message, "missing-file.txt"));
  free(t);
}

/* ---- volumes ---- */

static void test_volumes(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  char name[128];
  snprintf(name, sizeof name, "sandman-it-engine-vol-%ld", (long)getpid());
  json_object *opts = json_object_new_object();
  json_object_object_add(opts, "type", json_object_new_string("tmpfs"));
  json_object_object_add(opts, "device", json_object_new_string("tmpfs"));
  json_object_object_add(opts, "o", json_object_new_string("size=10m,uid=1000,gid=1000"));
  json_object *labels = labels_object();
  assert_int_equal(sm_engine_volume_create(e, name, NULL, opts, labels, &err), 0);
  json_object_put(opts);
  json_object_put(labels);

  json_object *list = NULL;
  assert_int_equal(sm_engine_volume_list(e, my_labels, 2, &list, &err), 0);
  int found = 0;
  for (size_t i = 0; i < json_object_array_length(list); i++) {
    json_object *n = NULL, *o = NULL, *o2 = NULL;
    json_object *v = json_object_array_get_idx(list, i);
    if (json_object_object_get_ex(v, "Name", &n) && strcmp(json_object_get_string(n), name) == 0) {
      found = 1;
      assert_true(json_object_object_get_ex(v, "Options", &o));
      assert_true(json_object_object_get_ex(o, "o", &o2));
      assert_string_equal(json_object_get_string(o2), "size=10m,uid=1000,gid=1000");
    }
  }
  json_object_put(list);
  assert_true(found);

  /* Mounted in a container, the tmpfs belongs to uid 1000 and is 10 MB. */
  static const char *const cmd[] = {"sleep", "600", NULL};
  json_object *cfg = container_config(cmd);
  json_object *hc = NULL;
  json_object_object_get_ex(cfg, "HostConfig", &hc);
  json_object *binds = json_object_new_array();
  char bind[200];
  snprintf(bind, sizeof bind, "%s:/data", name);
  json_object_array_add(binds, json_object_new_string(bind));
  json_object_object_add(hc, "Binds", binds);
  char id[SM_ENGINE_ID_MAX];
  assert_int_equal(sm_engine_container_create(e, NULL, cfg, id, NULL, &err), 0);
  json_object_put(cfg);
  assert_int_equal(sm_engine_container_start(e, id, &err), 0);
  static const char *const probe[] = {"sh", "-c", "stat -c %u /data; df -k /data | tail -1", NULL};
  capture out = {0};
  int rc = 0;
  assert_int_equal(run_exec(e, id, probe, NULL, &out, 60, &rc, &err), 0);
  assert_non_null(out.out);
  assert_true(strncmp(out.out, "1000\n", 5) == 0);
  assert_non_null(strstr(out.out, "10240"));
  capture_free(&out);
  /* In use: removing the volume is a conflict. */
  assert_int_equal(sm_engine_volume_remove(e, name, 0, &err), SM_ECONFLICT);
  remove_container(e, id);

  assert_int_equal(sm_engine_volume_remove(e, name, 0, &err), 0);
  assert_int_equal(sm_engine_volume_remove(e, name, 0, &err), SM_ENOTFOUND);
}

/* ---- errors ---- */

static void test_errors(void **state) {
  sm_engine *e = *state;
  sm_error err = SM_ERROR_INIT;
  json_object *o = NULL;
  assert_int_equal(sm_engine_container_inspect(e, "sandman-no-such-container-xyz", &o, &err),
                   SM_ENOTFOUND);
  assert_int_equal(err.http_status, 404);
  assert_non_null(strstr(err.message, "No such container"));
  assert_int_equal(sm_engine_image_inspect(e, "sandman/no-such-image:nope", &o, &err),
                   SM_ENOTFOUND);
  assert_non_null(strstr(err.message, "No such image"));

  /* A name conflict. */
  char name[128], id[SM_ENGINE_ID_MAX], id2[SM_ENGINE_ID_MAX];
  snprintf(name, sizeof name, "sandman-it-engine-conflict-%ld", (long)getpid());
  static const char *const cmd[] = {"true", NULL};
  json_object *cfg = container_config(cmd);
  assert_int_equal(sm_engine_container_create(e, name, cfg, id, NULL, &err), 0);
  assert_int_equal(sm_engine_container_create(e, name, cfg, id2, NULL, &err), SM_ECONFLICT);
  assert_int_equal(err.http_status, 409);
  assert_non_null(strstr(err.message, "already in use"));
  json_object_put(cfg);
  remove_container(e, id);

  /* Creating from a missing image: not found, with the engine's text. */
  json_object *bad = json_object_new_object();
  json_object_object_add(bad, "Image", json_object_new_string("sandman/no-such-image:nope"));
  json_object_object_add(bad, "Labels", labels_object());
  assert_int_equal(sm_engine_container_create(e, NULL, bad, id, NULL, &err), SM_ENOTFOUND);
  json_object_put(bad);

  /* A 400 carries the engine's message. */
  json_object *inv = json_object_new_object();
  json_object_object_add(inv, "Image", json_object_new_string(ITEST_IMAGE));
  json_object *hc = json_object_new_object();
  json_object_object_add(hc, "Memory", json_object_new_int(1));
  json_object_object_add(inv, "HostConfig", hc);
  json_object_object_add(inv, "Labels", labels_object());
  int rc = sm_engine_container_create(e, NULL, inv, id, NULL, &err);
  json_object_put(inv);
  if (rc == 0) remove_container(e, id);
  assert_int_equal(rc, SM_EENGINE);
  assert_int_equal(err.http_status, 400);
  assert_non_null(strstr(err.message, "Minimum memory limit"));

  /* The client keeps working after errors. */
  assert_int_equal(sm_engine_ping(e, &err), 0);
}

static void test_unreachable(void **state) {
  (void)state;
  sm_engine_options opts = SM_ENGINE_OPTIONS_INIT;
  opts.host = "unix:///tmp/sandman-no-such-dir/docker.sock";
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_new(&e, &opts, &err), 0);
  assert_int_equal(sm_engine_negotiate(e, &err), SM_EUNREACHABLE);
  assert_non_null(strstr(err.message, "unix:///tmp/sandman-no-such-dir/docker.sock"));
  assert_non_null(strstr(err.message, "dockerd"));
  assert_null(sm_engine_api_version(e));
  /* Exec start goes through its own socket: same error. */
  sm_exec_io io = SM_EXEC_IO_INIT;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_EUNREACHABLE);
  sm_engine_free(e);

  /* A TCP port nobody listens on. */
  opts.host = "tcp://127.0.0.1:1";
  opts.tls_verify = 0;
  assert_int_equal(sm_engine_new(&e, &opts, &err), 0);
  assert_int_equal(sm_engine_ping(e, &err), SM_EUNREACHABLE);
  assert_non_null(strstr(err.message, "tcp://127.0.0.1:1"));
  sm_engine_free(e);
}

/* ---- threads: one client per thread through sm_engine_clone ---- */

typedef struct thread_arg {
  const sm_engine *base;
  const char *cid;
  int ok;
} thread_arg;

static void *thread_main(void *p) {
  thread_arg *a = p;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_clone(&e, a->base, &err) != 0) return NULL;
  a->ok = sm_engine_api_version(e) != NULL;
  for (int i = 0; i < 5 && a->ok; i++) {
    static const char *const cat[] = {"cat", NULL};
    char msg[64];
    snprintf(msg, sizeof msg, "thread message %d\n", i);
    mem_reader in = {msg, strlen(msg), 0, 0};
    capture out = {0};
    int rc = 0;
    int code = run_exec(e, a->cid, cat, &in, &out, 60, &rc, &err);
    a->ok = rc == 0 && code == 0 && out.out && strcmp(out.out, msg) == 0;
    capture_free(&out);
  }
  sm_engine_free(e);
  return NULL;
}

static void test_threads(void **state) {
  sm_engine *e = *state;
  char id[SM_ENGINE_ID_MAX];
  start_sleeper(e, NULL, id);
  pthread_t t[4];
  thread_arg a[4];
  for (int i = 0; i < 4; i++) {
    a[i].base = e;
    a[i].cid = id;
    a[i].ok = 0;
    pthread_create(&t[i], NULL, thread_main, &a[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_true(a[i].ok);
  }
  remove_container(e, id);
}

/* ---- setup ---- */

static void reap_instance(sm_engine *e) {
  sm_error err = SM_ERROR_INIT;
  json_object *list = NULL;
  if (sm_engine_container_list(e, 1, my_labels, 2, &list, &err) == 0) {
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      json_object *id = NULL;
      if (json_object_object_get_ex(json_object_array_get_idx(list, i), "Id", &id))
        sm_engine_container_remove(e, json_object_get_string(id), 1, 1, &err);
    }
    json_object_put(list);
  }
  if (sm_engine_volume_list(e, my_labels, 2, &list, &err) == 0) {
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      json_object *n = NULL;
      if (json_object_object_get_ex(json_object_array_get_idx(list, i), "Name", &n))
        sm_engine_volume_remove(e, json_object_get_string(n), 1, &err);
    }
    json_object_put(list);
  }
}

static int group_setup(void **state) {
  set_labels();
  sm_engine_options opts = SM_ENGINE_OPTIONS_INIT;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_new(&e, &opts, &err) != 0 || sm_engine_negotiate(e, &err) != 0) {
    sm_engine_free(e);
    if (itest_in_ci()) {
      fprintf(stderr, "CI=true and no engine answers: %s\n", err.message);
      return -1;
    }
    fprintf(stderr, "no engine answers (%s): skipped\n", err.message);
    exit(77);
  }
  *state = e;
  return 0;
}

static int group_teardown(void **state) {
  sm_engine *e = *state;
  if (e) {
    reap_instance(e);
    sm_engine_free(e);
  }
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_system),
      cmocka_unit_test(test_container_lifecycle),
      cmocka_unit_test(test_exec_stdin),
      cmocka_unit_test(test_exec_exit_codes),
      cmocka_unit_test(test_exec_cancel),
      cmocka_unit_test(test_archive_roundtrip),
      cmocka_unit_test(test_archive_reader_error),
      cmocka_unit_test(test_image_import),
      cmocka_unit_test(test_image_build),
      cmocka_unit_test(test_volumes),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_unreachable),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
