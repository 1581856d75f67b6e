/* Exec with stdin, stdout/stderr kept apart, exit codes and a small archive
 * round trip against whichever engine the environment names (DOCKER_HOST,
 * DOCKER_TLS_VERIFY, DOCKER_CERT_PATH), exactly as a user's configuration
 * would reach it. ctest runs it against the default engine;
 * test_engine_tls.sh runs it again against a second engine over TLS with
 * SANDMAN_EXPECT_TLS=1, where the stdin half-close is a TLS close_notify. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/itest.h"
#include "support/memio.h"

static const char *instance(void) {
  return itest_instance("test_engine_exec_env");
}

typedef struct buf {
  char *p;
  size_t len, cap;
} buf;

static int put(buf *b, const char *d, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t c = (b->len + n + 1) * 2;
    char *q = realloc(b->p, c);
    if (!q) return SM_ENOMEM;
    b->p = q;
    b->cap = c;
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

typedef struct outs {
  buf out, err;
} outs;

static int on_output(void *ud, int stream, const char *d, size_t n) {
  outs *o = ud;
  return put(stream == 2 ? &o->err : &o->out, d, n);
}

static int exec_run(sm_engine *e, const char *cid, const char *const *cmd, mem_reader *in, outs *o,
                    int *code) {
  json_object *cfg = itest_exec_config(cmd, in != NULL);
  char xid[SM_ENGINE_ID_MAX];
  sm_error err = SM_ERROR_INIT;
  int rc = sm_engine_exec_create(e, cid, cfg, xid, &err);
  json_object_put(cfg);
  if (rc != 0) fail_msg("exec create: %s", err.message);
  sm_exec_io io = SM_EXEC_IO_INIT;
  if (in) {
    io.stdin_read = read_mem;
    io.stdin_ud = in;
  }
  io.output = on_output;
  io.output_ud = o;
  io.timeout_s = 120;
  rc = sm_engine_exec_start(e, xid, &io, &err);
  if (rc != 0) fail_msg("exec start: %s", err.message);
  int running = 1;
  for (int i = 0; i < 250 && running; i++) {
    if (sm_engine_exec_inspect(e, xid, &running, code, NULL, &err) != 0)
      fail_msg("exec inspect: %s", err.message);
    if (running) usleep(20000);
  }
  return 0;
}

static void outs_free(outs *o) {
  free(o->out.p);
  free(o->err.p);
  memset(o, 0, sizeof *o);
}

static int sink_count(void *ud, const char *d, size_t n) {
  (void)d;
  *(size_t *)ud += n;
  return 0;
}

static sm_engine *g_engine;
static char g_id[SM_ENGINE_ID_MAX];

static void test_exec_env(void **state) {
  (void)state;
  sm_engine *e = g_engine = itest_engine();
  const char *expect_tls = getenv("SANDMAN_EXPECT_TLS");
  if (expect_tls && strcmp(expect_tls, "1") == 0) {
    assert_int_equal(sm_engine_uses_tls(e), 1);
    assert_non_null(strstr(sm_engine_host(e), "tcp://"));
  }
  print_message("engine %s, TLS %s, API %s\n", sm_engine_host(e),
                sm_engine_uses_tls(e) ? "on" : "off", sm_engine_api_version(e));

  json_object *c = json_object_new_object();
  json_object_object_add(c, "Image", json_object_new_string(ITEST_IMAGE));
  json_object *argv = json_object_new_array();
  json_object_array_add(argv, json_object_new_string("sleep"));
  json_object_array_add(argv, json_object_new_string("600"));
  json_object_object_add(c, "Cmd", argv);
  json_object *labels = json_object_new_object();
  json_object_object_add(labels, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(labels, "io.sandman.instance", json_object_new_string(instance()));
  json_object_object_add(c, "Labels", labels);
  json_object *hc = json_object_new_object();
  json_object_object_add(hc, "NetworkMode", json_object_new_string("none"));
  json_object_object_add(c, "HostConfig", hc);
  char *id = g_id;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_create(e, NULL, c, id, NULL, &err) != 0)
    fail_msg("create: %s", err.message);
  json_object_put(c);
  if (sm_engine_container_start(e, id, &err) != 0) fail_msg("start: %s", err.message);

  /* cat: stdin in, the same out, over the hijacked connection. */
  size_t n = 1u << 20;
  char *data = malloc(n);
  assert_non_null(data);
  for (size_t i = 0; i < n; i++) data[i] = (char)('a' + (i * 7) % 26);
  mem_reader in = {data, n, 0, 0};
  outs o = {0};
  int code = -1;
  static const char *const cat[] = {"cat", NULL};
  exec_run(e, id, cat, &in, &o, &code);
  assert_int_equal(code, 0);
  assert_int_equal(o.out.len, n);
  assert_memory_equal(o.out.p, data, n);
  assert_int_equal(o.err.len, 0);
  outs_free(&o);
  free(data);

  /* stdout and stderr apart; the half-close ends cat, then sh goes on. */
  mem_reader in2 = {"abc\n", 4, 0, 0};
  static const char *const both[] = {"sh", "-c", "cat; echo err >&2", NULL};
  exec_run(e, id, both, &in2, &o, &code);
  assert_int_equal(code, 0);
  assert_string_equal(o.out.p, "abc\n");
  assert_string_equal(o.err.p, "err\n");
  outs_free(&o);

  static const char *const three[] = {"sh", "-c", "echo x; exit 3", NULL};
  exec_run(e, id, three, NULL, &o, &code);
  assert_int_equal(code, 3);
  assert_string_equal(o.out.p, "x\n");
  outs_free(&o);

  /* A small archive out of the container. */
  size_t got = 0;
  if (sm_engine_archive_get(e, id, "/etc/passwd", sink_count, &got, &err) != 0)
    fail_msg("archive get: %s", err.message);
  assert_true(got >= 1024);

  assert_int_equal(sm_engine_container_remove(e, id, 1, 1, &err), 0);
  g_id[0] = '\0';
}

/* Removes the container even when an assertion failed half-way. */
static int teardown(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  if (g_engine && g_id[0]) sm_engine_container_remove(g_engine, g_id, 1, 1, &err);
  sm_engine_free(g_engine);
  g_engine = NULL;
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_exec_env)};
  return cmocka_run_group_tests(tests, NULL, teardown);
}
