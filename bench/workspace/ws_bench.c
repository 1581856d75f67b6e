/* Workspace copy benchmark (not a test): times sandman's copy in and out
 * against a running container, first call and repeated calls.
 *
 *   ws_bench gen DIR FILES BYTES_PER_FILE     make a workspace
 *   ws_bench sync DIR CONTAINER MANIFEST      time the sync calls
 *
 * The container must have sandman's /.sandman (a tmpfs with exec): the copy
 * in goes through sandman's unpacker there, as in a keyed sandbox.
 *
 * Prints "name seconds" lines that bench/workspace/run.sh turns into a table. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sandman/sandman.h>

/* The unpacker's path and installer: internal to the library (src/lib/sandbox),
 * linked from libsandman.a as the integration tests do. */
#include "sandbox/agent.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int gen(const char *dir, long files, long size) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  char *buf = malloc((size_t)size);
  if (buf == NULL) return 1;
  mkdir(dir, 0755);
  for (long i = 0; i < files; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/d%03ld", dir, i / 100);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/d%03ld/f%05ld.bin", dir, i / 100, i);
    for (long k = 0; k < size; k += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      memcpy(buf + k, &x, (size_t)(size - k < 8 ? size - k : 8));
    }
    FILE *f = fopen(p, "wb");
    if (f == NULL || fwrite(buf, 1, (size_t)size, f) != (size_t)size) return 1;
    fclose(f);
  }
  free(buf);
  return 0;
}

static void touch_some(const char *dir, int n) {
  for (int i = 0; i < n; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/d%03d/f%05d.bin", dir, i, i * 100);
    FILE *f = fopen(p, "r+b");
    if (f) {
      fputs("changed", f);
      fclose(f);
    }
  }
}

/* Runs a shell command in the container, as the tool would. */
static int box_sh(sm_engine *e, const char *id, const char *script, sm_error *err) {
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
  int rc = sm_engine_exec_create(e, id, cfg, xid, err);
  json_object_put(cfg);
  sm_exec_io io = SM_EXEC_IO_INIT;
  if (rc == 0) rc = sm_engine_exec_start(e, xid, &io, err);
  return rc;
}

#define CHECK(call)                                                       \
  do {                                                                    \
    if ((call) != 0) {                                                    \
      fprintf(stderr, "%s: %s\n", #call, err.message);                    \
      return 1;                                                           \
    }                                                                     \
  } while (0)

static void log_line(sm_log_level level, const char *rid, const char *msg, void *ud) {
  (void)rid;
  (void)ud;
  static double t0;
  if (t0 == 0) t0 = now();
  fprintf(stderr, "%8.1f ms [%s] %s\n", (now() - t0) * 1000, sm_log_level_name(level), msg);
}

static int bench(const char *dir, const char *container, const char *manifest) {
  sm_error err = SM_ERROR_INIT;
  if (getenv("WS_BENCH_LOG")) {
    sm_log_set_handler(log_line, NULL);
    sm_log_set_level(SM_LOG_DEBUG);
  }
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  sm_engine *e = NULL;
  CHECK(sm_engine_new(&e, &o, &err));
  CHECK(sm_engine_negotiate(e, &err));
  /* A keyed sandbox's copy in: the unpacker, as the sandbox's user. Its
   * install happens once per sandbox (with the agent), so it is timed apart. */
  char unpacker[128];
  sandbox_agent_binary_path(unpacker, sizeof unpacker);
  sm_workspace_target t = {.engine = e,
                           .container_id = container,
                           .sandbox_path = "/workspace",
                           .uid = 1000,
                           .gid = 1000,
                           .unpacker = unpacker};
  double t_install = now();
  CHECK(sandbox_agent_install(NULL, e, container, &err));
  printf("install %.3f 0 0\n", now() - t_install);
  unlink(manifest);
  sm_workspace_sync *s = NULL;
  CHECK(sm_workspace_sync_new(&s, dir, manifest, NULL, NULL, &err));
  int64_t bi, ei, bo, eo;
  double t0 = now();
  CHECK(sm_workspace_sync_in(s, &t, &err));
  double t1 = now();
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  printf("in_first %.3f %lld %lld\n", t1 - t0, (long long)ei, (long long)bi);
  sm_workspace_sync_free(s);
  /* The next call of a run: a new sync object over the saved manifest. */
  CHECK(sm_workspace_sync_new(&s, dir, manifest, NULL, NULL, &err));
  t0 = now();
  CHECK(sm_workspace_sync_in(s, &t, &err));
  t1 = now();
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  printf("in_unchanged %.3f %lld %lld\n", t1 - t0, (long long)ei, (long long)bi);
  char **ch = NULL, **cf = NULL;
  size_t nch = 0, ncf = 0;
  t0 = now();
  CHECK(sm_workspace_sync_out(s, &t, &ch, &nch, &cf, &ncf, &err));
  t1 = now();
  sm_workspace_sync_stats(s, NULL, NULL, &bo, &eo);
  printf("out_unchanged %.3f %lld %lld\n", t1 - t0, (long long)eo, (long long)bo);
  sm_workspace_free_list(ch, nch);
  sm_workspace_free_list(cf, ncf);
  /* The tool changes 5 files in the sandbox: a listing and 5 fetches. */
  CHECK(box_sh(e, container, "for i in 1 2 3 4 5; do echo tool >> d00$i/f00${i}00.bin; done", &err));
  t0 = now();
  CHECK(sm_workspace_sync_out(s, &t, &ch, &nch, &cf, &ncf, &err));
  t1 = now();
  sm_workspace_sync_stats(s, NULL, NULL, &bo, &eo);
  printf("out_5_changed %.3f %lld %lld\n", t1 - t0, (long long)eo, (long long)bo);
  sm_workspace_free_list(ch, nch);
  sm_workspace_free_list(cf, ncf);
  /* The tool rewrites 100 files: past the per-path limit, one full read. */
  CHECK(box_sh(e, container, "for f in d010/f*.bin; do echo tool >> $f; done", &err));
  t0 = now();
  CHECK(sm_workspace_sync_out(s, &t, &ch, &nch, &cf, &ncf, &err));
  t1 = now();
  sm_workspace_sync_stats(s, NULL, NULL, &bo, &eo);
  printf("out_100_changed %.3f %lld %lld\n", t1 - t0, (long long)eo, (long long)bo);
  sm_workspace_free_list(ch, nch);
  sm_workspace_free_list(cf, ncf);
  touch_some(dir, 10);
  t0 = now();
  CHECK(sm_workspace_sync_in(s, &t, &err));
  t1 = now();
  sm_workspace_sync_stats(s, &bi, &ei, NULL, NULL);
  printf("in_10_changed %.3f %lld %lld\n", t1 - t0, (long long)ei, (long long)bi);
  sm_workspace_sync_free(s);
  sm_engine_free(e);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "gen") == 0) return gen(argv[2], atol(argv[3]), atol(argv[4]));
  if (argc == 5 && strcmp(argv[1], "sync") == 0) return bench(argv[2], argv[3], argv[4]);
  fprintf(stderr, "usage: ws_bench gen DIR FILES BYTES | ws_bench sync DIR CONTAINER MANIFEST\n");
  return 2;
}
