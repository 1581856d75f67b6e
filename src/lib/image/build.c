/* `image build`: the context streamed to the engine's /build endpoint, its
 * progress relayed as lines. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <sandman/image.h>

#include "common/buf.h"
#include "common/cleanup.h"

/* A progress line longer than this is cut (a `RUN` step may print
 * without newlines). */
#define PROGRESS_LINE_MAX 4096
#define BUILD_PATH_MAX 4096

struct build_progress {
  sm_image_progress_fn fn;
  void *ud;
  char id[SM_ENGINE_ID_MAX];
  common_buf partial; /* "stream" text not yet ended by a newline */
};

static void emit_lines(struct build_progress *p, const char *text) {
  for (const char *s = text; *s;) {
    const char *nl = strchr(s, '\n');
    size_t n = nl ? (size_t)(nl - s) : strlen(s);
    common_buf_append_capped(&p->partial, s, n);
    if (!nl) break;
    /* Engines end lines with "\r\n" at times; drop the '\r'. */
    if (p->partial.len > 0 && p->partial.data[p->partial.len - 1] == '\r')
      p->partial.data[--p->partial.len] = '\0';
    if (p->partial.len > 0 && p->fn) p->fn(p->ud, p->partial.data);
    common_buf_reset(&p->partial);
    s = nl + 1;
  }
}

static void on_build_message(void *ud, json_object *msg) {
  struct build_progress *p = ud;
  json_object *v = NULL;
  if (json_object_object_get_ex(msg, "stream", &v) && json_object_is_type(v, json_type_string)) {
    emit_lines(p, json_object_get_string(v));
    return;
  }
  if (json_object_object_get_ex(msg, "aux", &v)) {
    json_object *idv = NULL;
    if (json_object_object_get_ex(v, "ID", &idv) && json_object_is_type(idv, json_type_string))
      snprintf(p->id, sizeof p->id, "%s", json_object_get_string(idv));
    return;
  }
  if (json_object_object_get_ex(msg, "status", &v) && json_object_is_type(v, json_type_string)) {
    char line[PROGRESS_LINE_MAX];
    json_object *prog = NULL;
    if (json_object_object_get_ex(msg, "progress", &prog))
      snprintf(line, sizeof line, "%s %s", json_object_get_string(v), json_object_get_string(prog));
    else
      snprintf(line, sizeof line, "%s", json_object_get_string(v));
    if (p->fn && line[0]) p->fn(p->ud, line);
  }
}

static void progressf(const sm_image_build_options *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void progressf(const sm_image_build_options *o, const char *fmt, ...) {
  if (o->progress == NULL) return;
  char line[PROGRESS_LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  o->progress(o->progress_ud, line);
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The staged files land at the top of the context: none may shadow one of
 * the image folder's own. */
static int check_no_overlap(const char *context_dir, const char *staged_dir, sm_error *err) {
  cleanup_dir DIR *d = opendir(staged_dir);
  if (d == NULL)
    return sm_error_set_errno(err, SM_EIO, errno, "reading the staged directory %s", staged_dir);
  int rc = 0;
  struct dirent *de;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    char path[BUILD_PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", context_dir, de->d_name);
    if (lstat(path, &st) == 0)
      rc = sm_error_set(err, SM_EINVAL,
                        "%s already holds %s, which the staged root file system also makes: "
                        "remove it from the image folder",
                        context_dir, de->d_name);
  }
  return rc;
}

static int check_build_dirs(const sm_image_build_options *o, const char *dockerfile,
                            sm_error *err) {
  char path[BUILD_PATH_MAX];
  struct stat st;
  if (o->context_dir == NULL || o->context_dir[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no build context directory given");
  if (!is_dir(o->context_dir))
    return sm_error_set(err, SM_EINVAL, "build context %s is not a directory", o->context_dir);
  if (strstr(dockerfile, "..") != NULL || dockerfile[0] == '/')
    return sm_error_set(err, SM_EINVAL, "Dockerfile path %s must stay inside the context",
                        dockerfile);
  snprintf(path, sizeof path, "%s/%s", o->context_dir, dockerfile);
  int in_context = stat(path, &st) == 0 && S_ISREG(st.st_mode);
  if (!in_context && o->staged_dir) {
    snprintf(path, sizeof path, "%s/%s", o->staged_dir, dockerfile);
    in_context = stat(path, &st) == 0 && S_ISREG(st.st_mode);
  }
  if (!in_context)
    return sm_error_set(err, SM_EINVAL, "%s has no %s: an image folder needs one",
                        o->context_dir, dockerfile);
  if (o->staged_dir) {
    if (!is_dir(o->staged_dir))
      return sm_error_set(err, SM_EINVAL, "staged directory %s is not a directory",
                          o->staged_dir);
    return check_no_overlap(o->context_dir, o->staged_dir, err);
  }
  return 0;
}

int sm_image_build(sm_engine *engine, const sm_image_build_options *o,
                   char out_id[SM_ENGINE_ID_MAX], sm_error *err) {
  if (out_id) out_id[0] = '\0';
  const char *dockerfile = o->dockerfile ? o->dockerfile : "Dockerfile";
  sm_image_ref tag;
  int rc = sm_image_ref_parse(o->tag, &tag, err);
  if (rc != 0) return sm_error_wrap(err, "build tag");
  if (tag.digest[0] != '\0')
    return sm_error_set(err, SM_EINVAL, "build tag %s: a tag cannot carry a digest", o->tag);
  rc = check_build_dirs(o, dockerfile, err);
  if (rc != 0) return rc;

  sm_image_context *ctx = NULL;
  rc = sm_image_context_new(&ctx, err);
  if (rc != 0) return rc;
  rc = sm_image_context_add_dir(ctx, o->context_dir, "", err);
  if (rc == 0 && o->staged_dir) rc = sm_image_context_add_dir(ctx, o->staged_dir, "", err);
  if (rc != 0) {
    sm_image_context_free(ctx);
    return rc;
  }

  struct build_progress p;
  memset(&p, 0, sizeof p);
  p.fn = o->progress;
  p.ud = o->progress_ud;
  common_buf_init(&p.partial, PROGRESS_LINE_MAX);
  progressf(o, "building %s from %s%s%s", o->tag, o->context_dir,
            o->staged_dir ? " and " : "", o->staged_dir ? o->staged_dir : "");
  rc = sm_engine_image_build(engine, sm_image_context_read, ctx, o->tag, dockerfile,
                             on_build_message, &p, err);
  if (p.partial.len > 0 && p.fn) p.fn(p.ud, p.partial.data);
  common_buf_dispose(&p.partial);
  uint64_t entries = 0, bytes = 0;
  sm_image_context_stats(ctx, &entries, &bytes);
  /* When packing failed, the engine only saw a cut stream: our error is
   * the one that says what to fix. */
  sm_error packing = SM_ERROR_INIT;
  int packing_rc = sm_image_context_error(ctx, &packing);
  sm_image_context_free(ctx);
  if (packing_rc != 0) {
    if (err) *err = packing;
    return sm_error_wrap(err, "building %s", o->tag);
  }
  if (rc != 0) return sm_error_wrap(err, "building %s", o->tag);
  progressf(o, "sent a build context of %llu entries, %.1f MiB of file data",
            (unsigned long long)entries, (double)bytes / (1024.0 * 1024.0));

  /* The tag is the truth: it is what sandboxes are created from. */
  cleanup_json json_object *image = NULL;
  rc = sm_engine_image_inspect(engine, o->tag, &image, err);
  if (rc != 0) return sm_error_wrap(err, "inspecting the image just built as %s", o->tag);
  json_object *idv = NULL;
  const char *id = json_object_object_get_ex(image, "Id", &idv) ? json_object_get_string(idv) : NULL;
  if (id == NULL || id[0] == '\0') id = p.id;
  if (id[0] == '\0')
    return sm_error_set(err, SM_EPROTOCOL, "the engine built %s but reported no image id", o->tag);
  if (out_id) snprintf(out_id, SM_ENGINE_ID_MAX, "%s", id);
  return 0;
}
