/* The files API (src/lib/files/files.c) against the fake engine: each
 * operation is one call of sandman's helper (`sandman-agent fs`) in a
 * per_run sandbox, the first through the engine's exec, the rest over the
 * agent's session: write, read (whole and a range), mkdir, stat, list,
 * glob, grep, delete, a tar up and down, and the refusals of ".." and of a
 * link on the path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "common/buf.h"
#include "support/fake_engine.h"
#include "support/files.h"
#include "support/memio.h"
#include "support/xalloc.h"

typedef struct fixture {
  fake_world w;
  sm_runner *runner; /* w.runner */
  sm_run_request base;
} fixture;

static int setup(void **state) {
  fixture *f = xcalloc(1, sizeof *f);
  *state = f;
  if (f == NULL || fake_world_open(&f->w, "unit-files") != 0) return -1;
  f->runner = f->w.runner;
  sm_run_request_init(&f->base);
  f->base.settings.mode = SM_MODE_PER_RUN;
  snprintf(f->base.settings.image, sizeof f->base.settings.image, "%s", FAKE_ENGINE_IMAGE);
  f->base.settings.timeout_s = 60;
  f->base.run_id = "files";
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fake_world_close(&f->w);
  free(f);
  return 0;
}

static void write_read_stat(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  const char text[] = "line one\nline two\n";
  assert_int_equal(sm_files_write_all(f->runner, &f->base, "notes/a.txt", text, sizeof text - 1,
                                      0640, NULL, &err),
                   0);
  char *got = NULL;
  size_t len = 0;
  assert_int_equal(sm_files_read_all(f->runner, &f->base, "/workspace/notes/a.txt", 0, -1, 4096,
                                     &got, &len, NULL, &err),
                   0);
  assert_int_equal(len, sizeof text - 1);
  assert_string_equal(got, text);
  free(got);
  assert_int_equal(sm_files_read_all(f->runner, &f->base, "notes/a.txt", 5, 3, 4096, &got, &len,
                                     NULL, &err),
                   0);
  assert_string_equal(got, "one");
  free(got);
  sm_file_entry e;
  assert_int_equal(sm_files_stat(f->runner, &f->base, "notes/a.txt", &e, NULL, &err), 0);
  assert_int_equal(e.type, 'f');
  assert_int_equal(e.mode, 0640);
  assert_int_equal(e.size, (int64_t)sizeof text - 1);
  sm_file_entry_dispose(&e);
  assert_int_equal(sm_files_stat(f->runner, &f->base, "notes/none", &e, NULL, &err), SM_ENOTFOUND);
  assert_int_equal(sm_files_read_all(f->runner, &f->base, "../etc/passwd", 0, -1, 4096, &got, &len,
                                     NULL, &err),
                   SM_EUNSAFE);
  /* One exec for the first operation and one for the agent's session; the
   * others went over the session. */
  sm_agent_stats st;
  sm_runner_agent_stats(f->runner, &st);
  assert_int_equal(st.sessions_opened, 1);
  assert_true(st.calls >= 4);
}

static void folders_and_search(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_files_mkdir(f->runner, &f->base, "src/deep", -1, 1, NULL, &err), 0);
  assert_int_equal(sm_files_write_all(f->runner, &f->base, "src/deep/x.c", "int x;\n", 7, -1, NULL,
                                      &err),
                   0);
  assert_int_equal(sm_files_write_all(f->runner, &f->base, "src/y.h", "int y;\nfind me\n", 15, -1,
                                      NULL, &err),
                   0);
  sm_file_list l;
  assert_int_equal(sm_files_list(f->runner, &f->base, "src", 0, 0, &l, NULL, &err), 0);
  assert_int_equal(l.n, 3);
  sm_file_list_dispose(&l);
  assert_int_equal(sm_files_glob(f->runner, &f->base, ".", "**/*.c", 0, &l, NULL, &err), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].path, "src/deep/x.c");
  sm_file_list_dispose(&l);
  sm_grep_opts g = {.pattern = "find", .fixed = 1};
  sm_grep_result gr;
  assert_int_equal(sm_files_grep(f->runner, &f->base, "src", &g, &gr, NULL, &err), 0);
  assert_int_equal(gr.n, 1);
  assert_string_equal(gr.v[0].path, "src/y.h");
  assert_int_equal(gr.v[0].line, 2);
  sm_grep_result_dispose(&gr);
  int64_t removed = 0;
  assert_int_equal(sm_files_delete(f->runner, &f->base, "src", 0, &removed, NULL, &err), SM_EINVAL);
  assert_int_equal(sm_files_delete(f->runner, &f->base, "src", 1, &removed, NULL, &err), 0);
  assert_int_equal(removed, 4);
  sm_file_entry e;
  assert_int_equal(sm_files_stat(f->runner, &f->base, "src", &e, NULL, &err), SM_ENOTFOUND);
}

static int to_buf(void *ud, const char *data, size_t len) {
  return common_buf_append(ud, data, len) == 0 ? 0 : SM_ETOOBIG;
}

/* A tar down and up again lands the same files elsewhere; a link on the
 * path is refused, never followed. */
static void tar_round_trip(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_files_write_all(f->runner, &f->base, "t/one.txt", "1\n", 2, -1, NULL, &err),
                   0);
  assert_int_equal(sm_files_write_all(f->runner, &f->base, "t/two.txt", "22\n", 3, -1, NULL, &err),
                   0);
  common_buf tar;
  common_buf_init(&tar, 1 << 20);
  const char *paths[] = {"t"};
  sm_files_tar_stats st;
  assert_int_equal(sm_files_download_tar(f->runner, &f->base, paths, 1, 0, to_buf, &tar, &st, NULL,
                                         &err),
                   0);
  assert_int_equal(st.files, 2);
  mem_reader r = {tar.data, tar.len, 0, 0};
  assert_int_equal(sm_files_upload_tar(f->runner, &f->base, "copy", read_mem, &r, 0, 0, &st, NULL,
                                       &err),
                   0);
  common_buf_dispose(&tar);
  char *got = NULL;
  size_t len = 0;
  assert_int_equal(sm_files_read_all(f->runner, &f->base, "copy/t/two.txt", 0, -1, 64, &got, &len,
                                     NULL, &err),
                   0);
  assert_string_equal(got, "22\n");
  free(got);
  /* A link planted in the sandbox by a tool. */
  const char *argv[] = {"ln", "-s", "/etc", "/workspace/planted"};
  sm_run_request req = f->base;
  req.argv = argv;
  req.argc = 4;
  sm_run_result res;
  assert_int_equal(sm_run(f->runner, &req, &res, &err), 0);
  assert_true(res.ok);
  sm_run_result_dispose(&res);
  assert_int_equal(sm_files_read_all(f->runner, &f->base, "planted/hostname", 0, -1, 64, &got, &len,
                                     NULL, &err),
                   SM_EUNSAFE);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(write_read_stat),
      T(folders_and_search),
      T(tar_round_trip),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
