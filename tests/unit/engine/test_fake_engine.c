/* The fake engine of the unit tests (tests/support/fake_engine.h) through
 * the library's own engine client: negotiation, system calls, images,
 * containers, volumes, archives that round-trip, execs with stdin over
 * the hijacked stream and their exit codes, injected faults and the
 * request log. What the call driver's tests build on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/engine.h>

#include "common/buf.h"
#include "support/fake_engine.h"
#include "support/files.h"
#include "support/memio.h"
#include "support/xalloc.h"

#define IMAGE "sandman-test/fake:latest"

typedef struct fixture {
  fake_engine *fe;
  sm_engine *e;
} fixture;

static int setup(void **state) {
  fixture *f = xcalloc(1, sizeof *f);
  f->fe = fake_engine_start();
  if (f->fe == NULL) return -1;
  fake_engine_add_image(f->fe, IMAGE, "");
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  o.host = fake_engine_host(f->fe);
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_new(&f->e, &o, &err) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  sm_engine_free(f->e);
  fake_engine_stop(f->fe);
  free(f);
  return 0;
}

static json_object *container_config(void) {
  json_object *c = json_object_new_object(), *hc = json_object_new_object();
  json_object *tmpfs = json_object_new_object(), *mounts = json_object_new_array();
  json_object *m = json_object_new_object(), *labels = json_object_new_object();
  json_object_object_add(c, "Image", json_object_new_string(IMAGE));
  json_object_object_add(c, "WorkingDir", json_object_new_string("/workspace"));
  json_object_object_add(labels, "io.sandman.instance", json_object_new_string("fake"));
  json_object_object_add(c, "Labels", labels);
  json_object_object_add(tmpfs, "/tmp", json_object_new_string("rw,mode=1777"));
  json_object_object_add(hc, "Tmpfs", tmpfs);
  json_object_object_add(m, "Type", json_object_new_string("volume"));
  json_object_object_add(m, "Source", json_object_new_string("fake-ws"));
  json_object_object_add(m, "Target", json_object_new_string("/workspace"));
  json_object_array_add(mounts, m);
  json_object_object_add(hc, "Mounts", mounts);
  json_object_object_add(c, "HostConfig", hc);
  return c;
}

static void make_container(fixture *f, const char *name, char id[SM_ENGINE_ID_MAX]) {
  sm_error err = SM_ERROR_INIT;
  json_object *cfg = container_config();
  assert_int_equal(sm_engine_container_create(f->e, name, cfg, id, NULL, &err), 0);
  json_object_put(cfg);
  assert_int_equal(sm_engine_container_start(f->e, id, &err), 0);
}

static void system_calls(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_negotiate(f->e, &err), 0);
  assert_string_equal(sm_engine_api_version(f->e), "1.41");
  json_object *v = NULL, *info = NULL, *rt = NULL, *img = NULL;
  assert_int_equal(sm_engine_version(f->e, &v, &err), 0);
  assert_true(json_object_object_get_ex(v, "ApiVersion", NULL));
  json_object_put(v);
  assert_int_equal(sm_engine_info(f->e, &info, &err), 0);
  assert_true(json_object_object_get_ex(info, "Runtimes", &rt));
  assert_true(json_object_object_get_ex(rt, "runsc", NULL));
  assert_int_equal(sm_engine_image_inspect(f->e, IMAGE, &img, &err), 0);
  assert_int_equal(sm_engine_image_inspect(f->e, "nope:1", &v, &err), SM_ENOTFOUND);
  json_object_put(v);
  json_object_put(info);
  json_object_put(img);
  /* One ping for the whole client, then the versioned calls. */
  assert_int_equal(fake_engine_count(f->fe, "GET", "/_ping"), 1);
  assert_int_equal(fake_engine_count(f->fe, "GET", "/images/"), 2);
}

static void containers_and_volumes(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX], again[SM_ENGINE_ID_MAX];
  make_container(f, "fake-one", id);
  json_object *cfg = container_config();
  assert_int_equal(sm_engine_container_create(f->e, "fake-one", cfg, again, NULL, &err),
                   SM_ECONFLICT);
  json_object_put(cfg);
  assert_int_equal(fake_engine_volumes(f->fe), 1); /* made with the container */
  json_object *insp = NULL, *st = NULL, *running = NULL;
  assert_int_equal(sm_engine_container_inspect(f->e, "fake-one", &insp, &err), 0);
  assert_true(json_object_object_get_ex(insp, "State", &st));
  assert_true(json_object_object_get_ex(st, "Running", &running));
  assert_true(json_object_get_boolean(running));
  json_object_put(insp);
  const char *labels[] = {"io.sandman.instance=fake"}, *other[] = {"io.sandman.instance=x"};
  json_object *list = NULL;
  assert_int_equal(sm_engine_container_list(f->e, 1, labels, 1, &list, &err), 0);
  assert_int_equal(json_object_array_length(list), 1);
  json_object_put(list);
  assert_int_equal(sm_engine_container_list(f->e, 1, other, 1, &list, &err), 0);
  assert_int_equal(json_object_array_length(list), 0);
  json_object_put(list);
  assert_int_equal(sm_engine_volume_remove(f->e, "fake-ws", 1, &err), SM_ECONFLICT);
  assert_int_equal(sm_engine_container_kill(f->e, id, "KILL", &err), 0);
  int64_t code = 0;
  assert_int_equal(sm_engine_container_wait(f->e, id, NULL, 0, &code, &err), 0);
  assert_int_equal(code, 137);
  assert_int_equal(sm_engine_container_remove(f->e, id, 1, 1, &err), 0);
  assert_int_equal(sm_engine_container_remove(f->e, id, 1, 1, &err), SM_ENOTFOUND);
  assert_int_equal(sm_engine_volume_remove(f->e, "fake-ws", 1, &err), 0);
  assert_int_equal(fake_engine_containers(f->fe), 0);
  assert_int_equal(fake_engine_volumes(f->fe), 0);
}

/* A one-file tar: name with text. */
static char *one_file_tar(const char *name, const char *text, size_t *len) {
  char *tar = xcalloc(1, 2048);
  snprintf(tar, 100, "%s", name);
  snprintf(tar + 100, 8, "0000644");
  snprintf(tar + 108, 8, "0000000");
  snprintf(tar + 116, 8, "0000000");
  snprintf(tar + 124, 12, "%011o", (unsigned)strlen(text));
  snprintf(tar + 136, 12, "%011o", 0u);
  memset(tar + 148, ' ', 8);
  tar[156] = '0';
  memcpy(tar + 257, "ustar", 6);
  memcpy(tar + 263, "00", 2);
  unsigned sum = 0;
  for (size_t i = 0; i < 512; i++) sum += (unsigned char)tar[i];
  snprintf(tar + 148, 8, "%06o", sum);
  memcpy(tar + 512, text, strlen(text));
  *len = 2048;
  return tar;
}

static int to_buf(void *ud, const char *data, size_t len) {
  return common_buf_append(ud, data, len) == 0 ? 0 : SM_ETOOBIG;
}

static void archives_round_trip(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  make_container(f, "fake-archive", id);
  size_t len = 0;
  char *tar = one_file_tar("hello.txt", "hello from the host\n", &len);
  mem_reader r = {tar, len, 0, 700};
  assert_int_equal(sm_engine_archive_put(f->e, id, "/workspace", read_mem, &r, &err), 0);
  free(tar);
  char host[4096];
  assert_int_equal(fake_engine_path(f->fe, id, "/workspace/hello.txt", host, sizeof host), 0);
  char *text = tf_read(host, NULL);
  assert_non_null(text);
  assert_string_equal(text, "hello from the host\n");
  free(text);
  common_buf out;
  common_buf_init(&out, 1 << 20);
  assert_int_equal(sm_engine_archive_get(f->e, id, "/workspace", to_buf, &out, &err), 0);
  /* Named as the engine names it: the folder's base name first. */
  assert_non_null(memmem(out.data, out.len, "workspace/hello.txt", 19));
  assert_non_null(memmem(out.data, out.len, "hello from the host", 19));
  common_buf_dispose(&out);
  unsigned mode = 0;
  assert_int_equal(sm_engine_path_mode(f->e, id, "/tmp", &mode, &err), 0);
  assert_true(S_ISDIR(mode));
  assert_int_equal(mode & 07777, 01777);
  assert_int_equal(sm_engine_path_mode(f->e, id, "/nowhere", &mode, &err), SM_ENOTFOUND);
  /* The whole stat: the mtime to the nanosecond, as the folder has it. */
  sm_engine_path_info info;
  assert_int_equal(sm_engine_path_stat(f->e, id, "/workspace", &info, &err), 0);
  char ws[4096];
  assert_int_equal(fake_engine_path(f->fe, id, "/workspace", ws, sizeof ws), 0);
  struct stat wst;
  assert_int_equal(stat(ws, &wst), 0);
  assert_true(S_ISDIR(info.mode));
  assert_true(info.has_mtime);
  assert_int_equal(info.mtime_s, (int64_t)wst.st_mtim.tv_sec);
  assert_int_equal(info.mtime_ns, (long)wst.st_mtim.tv_nsec);
  assert_string_equal(info.name, "workspace");
  assert_int_equal(sm_engine_container_remove(f->e, id, 1, 1, &err), 0);
}

typedef struct streams {
  char out[4096], err[4096];
  size_t n_out, n_err;
} streams;

static int collect(void *ud, int stream, const char *data, size_t len) {
  streams *s = ud;
  char *dst = stream == 1 ? s->out : s->err;
  size_t *n = stream == 1 ? &s->n_out : &s->n_err;
  if (len > 4095 - *n) len = 4095 - *n;
  memcpy(dst + *n, data, len);
  *n += len;
  dst[*n] = '\0';
  return 0;
}

static int run_exec(fixture *f, const char *cid, const char *const *cmd, size_t n, const char *in,
                    streams *s) {
  sm_error err = SM_ERROR_INIT;
  json_object *cfg = json_object_new_object(), *argv = json_object_new_array();
  for (size_t i = 0; i < n; i++) json_object_array_add(argv, json_object_new_string(cmd[i]));
  json_object_object_add(cfg, "Cmd", argv);
  json_object_object_add(cfg, "User", json_object_new_string("1000:1000"));
  json_object_object_add(cfg, "AttachStdin", json_object_new_boolean(in != NULL));
  char xid[SM_ENGINE_ID_MAX];
  assert_int_equal(sm_engine_exec_create(f->e, cid, cfg, xid, &err), 0);
  json_object_put(cfg);
  mem_reader r = {in, in ? strlen(in) : 0, 0, 3};
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.stdin_read = in ? read_mem : NULL;
  io.stdin_ud = &r;
  io.output = collect;
  io.output_ud = s;
  io.timeout_s = 60;
  assert_int_equal(sm_engine_exec_start(f->e, xid, &io, &err), 0);
  int running = 1, code = -1;
  assert_int_equal(sm_engine_exec_inspect(f->e, xid, &running, &code, NULL, &err), 0);
  assert_false(running);
  return code;
}

static void execs(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  make_container(f, "fake-exec", id);
  streams s = {0};
  const char *cat[] = {"cat"};
  assert_int_equal(run_exec(f, id, cat, 1, "stdin in small pieces\n", &s), 0);
  assert_string_equal(s.out, "stdin in small pieces\n");
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "cat", user, sizeof user), 0);
  assert_string_equal(user, "1000:1000");
  /* The working folder and the mount paths are the container's. */
  memset(&s, 0, sizeof s);
  const char *sh[] = {"/bin/sh", "-c",
                      "echo out; echo err >&2; echo x > /workspace/made; "
                      "test -f made && test -d /tmp && exit 3"};
  assert_int_equal(run_exec(f, id, sh, 3, NULL, &s), 3);
  assert_string_equal(s.out, "out\n");
  assert_string_equal(s.err, "err\n");
  memset(&s, 0, sizeof s);
  const char *missing[] = {"no-such-program-here"};
  assert_int_equal(run_exec(f, id, missing, 1, NULL, &s), 127);
  assert_non_null(strstr(s.out, "no-such-program-here"));
  assert_int_equal(sm_engine_container_kill(f->e, id, "KILL", &err), 0);
  json_object *cfg = json_object_new_object(), *argv = json_object_new_array();
  json_object_array_add(argv, json_object_new_string("true"));
  json_object_object_add(cfg, "Cmd", argv);
  char xid[SM_ENGINE_ID_MAX];
  assert_int_equal(sm_engine_exec_create(f->e, id, cfg, xid, &err), SM_ECONFLICT);
  json_object_put(cfg);
  assert_int_equal(sm_engine_container_remove(f->e, id, 1, 1, &err), 0);
}

static void faults_and_log(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  fake_engine_clear_log(f->fe);
  fake_engine_fail(f->fe, "GET", "/images/", 500, "the disk is full", 1);
  json_object *img = NULL;
  assert_int_equal(sm_engine_image_inspect(f->e, IMAGE, &img, &err), SM_EENGINE);
  assert_non_null(strstr(err.message, "the disk is full"));
  assert_int_equal(sm_engine_image_inspect(f->e, IMAGE, &img, &err), 0);
  json_object_put(img);
  char *log = fake_engine_log(f->fe);
  assert_non_null(strstr(log, "GET /images/" IMAGE "/json\n"));
  free(log);
  /* This client's negotiation, then the two inspects. */
  assert_int_equal(fake_engine_count(f->fe, NULL, NULL), 3);
  assert_int_equal(fake_engine_count(f->fe, "GET", "/_ping"), 1);
  assert_int_equal(fake_engine_count(f->fe, "POST", NULL), 0);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(system_calls), T(containers_and_volumes), T(archives_round_trip),
      T(execs),        T(faults_and_log),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
