/* sm_image_build and sm_image_check_pinned against the real engine: a tiny
 * context streamed to /build with its progress, then digest pins that
 * match, differ, and name an image that is not there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandman/image.h>

#include "support/files.h"
#include "support/itest.h"

static char workdir[256];
static char tag[200];
static char built_id[SM_ENGINE_ID_MAX];

struct lines {
  int n;
  int saw_step;
  int saw_context;
};

static void on_line(void *ud, const char *line) {
  struct lines *l = ud;
  l->n++;
  if (strncmp(line, "Step 1/", 7) == 0) l->saw_step = 1;
  if (strstr(line, "sent a build context of 3 entries")) l->saw_context = 1;
}

static int setup(void **state) {
  (void)state;
  const char *t = getenv("TMPDIR");
  snprintf(workdir, sizeof workdir, "%s/sm-image-pin-XXXXXX", t ? t : "/tmp");
  if (mkdtemp(workdir) == NULL) return -1;
  char path[512];
  snprintf(path, sizeof path, "%s/ctx", workdir);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/stage", workdir);
  mkdir(path, 0755);
  /* A tag of this process's own, so parallel runs never share it. */
  snprintf(tag, sizeof tag, "sandman-it/pin-%d:latest", (int)getpid());
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sm_engine *e = NULL;
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_new(&e, &o, &err) == 0) {
    char path[300];
    snprintf(path, sizeof path, "/images/%s?force=1", tag);
    sm_engine_request_json(e, "DELETE", path, NULL, NULL, NULL, &err);
    sm_engine_free(e);
  }
  const char *files[] = {"ctx/Dockerfile", "ctx/a.txt", "stage/b.txt", "ctx", "stage", ""};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", workdir, files[i]);
    remove(path);
  }
  return 0;
}

static void test_build_streams_context(void **state) {
  (void)state;
  sm_engine *e = itest_engine();
  assert_int_equal(tf_write_at(workdir, "ctx/Dockerfile", "FROM " ITEST_IMAGE "\nCOPY a.txt b.txt /opt/\n"), 0);
  assert_int_equal(tf_write_at(workdir, "ctx/a.txt", "from the folder\n"), 0);
  assert_int_equal(tf_write_at(workdir, "stage/b.txt", "from the staging directory\n"), 0);
  char ctx[300], stage[300];
  snprintf(ctx, sizeof ctx, "%s/ctx", workdir);
  snprintf(stage, sizeof stage, "%s/stage", workdir);

  struct lines l = {0, 0, 0};
  sm_image_build_options o = SM_IMAGE_BUILD_OPTIONS_INIT;
  o.context_dir = ctx;
  o.staged_dir = stage;
  o.tag = tag;
  o.progress = on_line;
  o.progress_ud = &l;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_image_build(e, &o, built_id, &err);
  if (rc != 0) fail_msg("build: %s", err.message);
  assert_true(sm_image_digest_valid(built_id));
  assert_true(l.saw_step);
  assert_true(l.saw_context);

  json_object *img = NULL;
  assert_int_equal(sm_engine_image_inspect(e, tag, &img, &err), 0);
  json_object *id = NULL;
  assert_true(json_object_object_get_ex(img, "Id", &id));
  assert_string_equal(json_object_get_string(id), built_id);
  json_object_put(img);

  /* No Dockerfile: refused before anything is sent. */
  o.context_dir = stage;
  o.staged_dir = NULL;
  assert_int_equal(sm_image_build(e, &o, NULL, &err), SM_EINVAL);
  assert_non_null(strstr(err.message, "Dockerfile"));
  /* A tag with a digest is not a tag. */
  o.context_dir = ctx;
  char bad[300];
  snprintf(bad, sizeof bad, "x@%s", built_id);
  o.tag = bad;
  assert_int_equal(sm_image_build(e, &o, NULL, &err), SM_EINVAL);
  sm_engine_free(e);
}

static void test_pins(void **state) {
  (void)state;
  sm_engine *e = itest_engine();
  sm_error err = SM_ERROR_INIT;
  char out[SM_ENGINE_ID_MAX];
  char ref[400];
  if (built_id[0] == '\0') skip();

  /* No pin: nothing to check, the engine is not asked. */
  assert_int_equal(sm_image_check_pinned(NULL, tag, NULL, out, &err), 0);
  assert_string_equal(out, "");

  /* The pin inside the reference (name@digest) and as a separate digest. */
  char name[200];
  snprintf(name, sizeof name, "%s", tag);
  *strrchr(name, ':') = '\0';
  snprintf(ref, sizeof ref, "%s@%s", name, built_id);
  if (sm_image_check_pinned(e, ref, NULL, out, &err) != 0) fail_msg("%s", err.message);
  assert_string_equal(out, built_id);
  assert_int_equal(sm_image_check_pinned(e, tag, built_id, out, &err), 0);
  assert_string_equal(out, built_id);

  /* A different digest is refused and both digests are named. */
  char other[80] = "sha256:";
  for (int i = 0; i < 64; i++) other[7 + i] = "0123456789abcdef"[i % 16];
  other[71] = '\0';
  assert_int_equal(sm_image_check_pinned(e, tag, other, out, &err), SM_EPOLICY);
  assert_non_null(strstr(err.message, other));
  assert_non_null(strstr(err.message, built_id));
  assert_string_equal(out, "");
  snprintf(ref, sizeof ref, "%s@%s", name, other);
  assert_int_equal(sm_image_check_pinned(e, ref, NULL, out, &err), SM_EPOLICY);

  /* Pinned in the reference and separately, to two digests: ambiguous. */
  snprintf(ref, sizeof ref, "%s@%s", name, built_id);
  assert_int_equal(sm_image_check_pinned(e, ref, other, out, &err), SM_EINVAL);

  /* A pinned image that is not there: never pulled, a clear error. */
  snprintf(ref, sizeof ref, "sandman-it/never-built-%d@%s", (int)getpid(), other);
  assert_int_equal(sm_image_check_pinned(e, ref, NULL, out, &err), SM_ENOTFOUND);
  assert_non_null(strstr(err.message, "never pulls"));

  /* Malformed pins. */
  assert_int_equal(sm_image_check_pinned(e, tag, "sha256:1234", out, &err), SM_EINVAL);
  assert_int_equal(sm_image_check_pinned(e, "bad ref", other, out, &err), SM_EINVAL);
  sm_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_build_streams_context),
      cmocka_unit_test(test_pins),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
