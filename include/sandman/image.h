/* sandman: sandbox images.
 *
 * sm_image_build() sends a build context to the engine's /build endpoint as
 * a tar stream that libarchive writes while the engine reads it: one or
 * more directories on disk (the image's folder, a staged root file system)
 * are walked lazily, so the context is never held whole in memory or on
 * disk.
 *
 * sm_image_check_pinned() enforces a digest pin: a reference such as
 * "sandman/general@sha256:<hex>" (or a name plus a separate digest) is
 * accepted only when the local image of that name has that Id or one of its
 * RepoDigests carries that digest. sandman never pulls, so a pinned image
 * that is missing or different is an error, never a download. */
#ifndef SANDMAN_IMAGE_H
#define SANDMAN_IMAGE_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sandman/engine.h>
#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_IMAGE_REF_MAX 256
#define SM_IMAGE_DIGEST_MAX 80 /* "sha256:" + 64 hex + NUL, with room */

/* ---- references ---- */

/* "registry:5000/repo/name:tag@sha256:<64 hex>", split. */
typedef struct sm_image_ref {
  char name[SM_IMAGE_REF_MAX];     /* repository, without tag or digest */
  char tag[128];                   /* "" when the reference names none */
  char digest[SM_IMAGE_DIGEST_MAX]; /* "sha256:<64 hex>" or "" */
} sm_image_ref;

/* Parses and validates a reference. SM_EINVAL names what is wrong (empty
 * name, bad characters, a digest that is not sha256 with 64 hex digits). */
SM_API int sm_image_ref_parse(const char *ref, sm_image_ref *out, sm_error *err);
/* Checks that digest is "sha256:" followed by 64 lowercase hex digits. */
SM_API int sm_image_digest_valid(const char *digest);

/* Compares the local image named by ref against its pinned digest: the
 * digest inside ref ("name[:tag]@sha256:...") or, if ref has none, the
 * separate digest argument (may be NULL). Both given and different is
 * SM_EINVAL.
 *   - no pin at all: returns 0 without asking the engine; out_id = "".
 *   - pin matches the image's Id or one of its RepoDigests: returns 0 and
 *     out_id (may be NULL) receives the image Id ("sha256:..."), which is
 *     what a container should be created from so that a tag moved later
 *     cannot swap the image.
 *   - image not present locally: SM_ENOTFOUND, saying how to build it.
 *   - image present with another digest: SM_EPOLICY with both digests. */
SM_API int sm_image_check_pinned(sm_engine *engine, const char *ref, const char *digest,
                                 char out_id[SM_ENGINE_ID_MAX], sm_error *err);

/* ---- build context stream ---- */

typedef struct sm_image_context sm_image_context;

SM_API int sm_image_context_new(sm_image_context **out, sm_error *err);
/* Adds every file under dir (not following symbolic links, not crossing
 * mount points; sockets skipped) under prefix in the tar ("" or NULL: at
 * the top). Owners are kept as numbers; extended attributes are not sent.
 * Directories are read when the stream reaches them. */
SM_API int sm_image_context_add_dir(sm_image_context *ctx, const char *dir, const char *prefix,
                                    sm_error *err);
/* An sm_read_fn (userdata: the context): the next bytes of the tar stream,
 * 0 at its end, or a negative SM_E* code (details: sm_image_context_error). */
SM_API ssize_t sm_image_context_read(void *ctx, char *buf, size_t len);
/* The error that stopped the stream, if any (copied into err); returns its
 * code or 0. */
SM_API int sm_image_context_error(const sm_image_context *ctx, sm_error *err);
/* Entries and file bytes written so far. */
SM_API void sm_image_context_stats(const sm_image_context *ctx, uint64_t *out_entries,
                                   uint64_t *out_bytes);
SM_API void sm_image_context_free(sm_image_context *ctx);

/* ---- build ---- */

/* One line of progress, without its newline (borrowed for the call). */
typedef void (*sm_image_progress_fn)(void *userdata, const char *line);

typedef struct sm_image_build_options {
  const char *context_dir; /* required: holds the Dockerfile */
  /* NULL, or a directory whose files join the context at its top: where a
   * root file system made by rootfs.sh is staged (e.g. rootfs.tar). A name
   * present in both directories is refused. */
  const char *staged_dir;
  const char *tag;         /* required: "repo:tag" */
  const char *dockerfile;  /* NULL: "Dockerfile" */
  sm_image_progress_fn progress; /* NULL: progress dropped */
  void *progress_ud;
} sm_image_build_options;

#define SM_IMAGE_BUILD_OPTIONS_INIT {NULL, NULL, NULL, NULL, NULL, NULL}

/* Streams the context to the engine and builds tag, relaying the engine's
 * progress as lines. out_id (may be NULL) receives the built image's Id.
 * Errors: SM_EINVAL (no Dockerfile, a name in both context_dir and
 * staged_dir, bad tag), SM_EIO (reading the context), SM_EENGINE (the
 * build failed: the engine's message). */
SM_API int sm_image_build(sm_engine *engine, const sm_image_build_options *opts,
                          char out_id[SM_ENGINE_ID_MAX], sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
