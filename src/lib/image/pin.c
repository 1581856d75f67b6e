/* Digest pins: the local image named by a pinned reference must be the one
 * the pin names, or it is refused. sandman never pulls. */
#include <stdio.h>
#include <string.h>

#include <sandman/image.h>

#include "common/cleanup.h"

/* Does the inspected image carry digest as its Id or in a RepoDigest? */
static int image_has_digest(json_object *image, const char *digest) {
  json_object *v = NULL;
  if (json_object_object_get_ex(image, "Id", &v) && json_object_is_type(v, json_type_string) &&
      strcmp(json_object_get_string(v), digest) == 0)
    return 1;
  json_object *digests = NULL;
  if (!json_object_object_get_ex(image, "RepoDigests", &digests) ||
      !json_object_is_type(digests, json_type_array))
    return 0;
  size_t n = json_object_array_length(digests);
  for (size_t i = 0; i < n; i++) {
    const char *rd = json_object_get_string(json_object_array_get_idx(digests, i));
    const char *at = rd ? strchr(rd, '@') : NULL;
    if (at && strcmp(at + 1, digest) == 0) return 1;
  }
  return 0;
}

static void describe_repo_digests(json_object *image, char *out, size_t len) {
  json_object *digests = NULL;
  out[0] = '\0';
  if (!json_object_object_get_ex(image, "RepoDigests", &digests) ||
      !json_object_is_type(digests, json_type_array) || json_object_array_length(digests) == 0) {
    snprintf(out, len, "none");
    return;
  }
  size_t used = 0, n = json_object_array_length(digests);
  for (size_t i = 0; i < n && used < len; i++) {
    const char *rd = json_object_get_string(json_object_array_get_idx(digests, i));
    int w = snprintf(out + used, len - used, "%s%s", i ? ", " : "", rd ? rd : "?");
    if (w < 0) break;
    used += (size_t)w;
  }
}

int sm_image_check_pinned(sm_engine *engine, const char *ref, const char *digest,
                          char out_id[SM_ENGINE_ID_MAX], sm_error *err) {
  if (out_id) out_id[0] = '\0';
  sm_image_ref r;
  int rc = sm_image_ref_parse(ref, &r, err);
  if (rc != 0) return rc;
  if (digest != NULL && digest[0] != '\0') {
    if (!sm_image_digest_valid(digest))
      return sm_error_set(err, SM_EINVAL,
                          "pinned digest '%s' for image %s: must be sha256: followed by 64 "
                          "lowercase hex digits",
                          digest, ref);
    if (r.digest[0] != '\0' && strcmp(r.digest, digest) != 0)
      return sm_error_set(err, SM_EINVAL,
                          "image %s carries a digest and is also pinned to %s: keep one", ref,
                          digest);
    snprintf(r.digest, sizeof r.digest, "%s", digest);
  }
  if (r.digest[0] == '\0') return 0;

  char named[SM_IMAGE_REF_MAX + 130];
  snprintf(named, sizeof named, "%s:%s", r.name, r.tag[0] ? r.tag : "latest");
  cleanup_json json_object *image = NULL;
  sm_error lookup = SM_ERROR_INIT;
  /* A pulled image is found by name@digest through its RepoDigests; a
   * locally built one has none and is found by its tag. */
  if (r.tag[0] == '\0') {
    char by_digest[SM_IMAGE_REF_MAX + SM_IMAGE_DIGEST_MAX + 2];
    snprintf(by_digest, sizeof by_digest, "%s@%s", r.name, r.digest);
    rc = sm_engine_image_inspect(engine, by_digest, &image, &lookup);
    if (rc != 0 && rc != SM_ENOTFOUND) {
      *err = lookup;
      return sm_error_wrap(err, "checking the pinned image %s", ref);
    }
  }
  if (image == NULL) {
    rc = sm_engine_image_inspect(engine, named, &image, &lookup);
    if (rc == SM_ENOTFOUND)
      return sm_error_set(err, SM_ENOTFOUND,
                          "pinned image %s is not present on the engine (sandman never pulls): "
                          "build it with `sandman image build NAME` or load it, then pin the "
                          "digest it prints",
                          ref);
    if (rc != 0) {
      *err = lookup;
      return sm_error_wrap(err, "checking the pinned image %s", ref);
    }
  }
  json_object *idv = NULL;
  const char *id = json_object_object_get_ex(image, "Id", &idv) ? json_object_get_string(idv) : NULL;
  if (id == NULL || id[0] == '\0')
    return sm_error_set(err, SM_EPROTOCOL, "the engine's inspection of image %s has no Id", named);
  if (!image_has_digest(image, r.digest)) {
    char repo_digests[512];
    describe_repo_digests(image, repo_digests, sizeof repo_digests);
    return sm_error_set(err, SM_EPOLICY,
                        "image %s is pinned to %s, but the local image %s is %s (repo digests: "
                        "%s); refusing it: rebuild or load the pinned image, or update the pin",
                        ref, r.digest, named, id, repo_digests);
  }
  if (out_id) snprintf(out_id, SM_ENGINE_ID_MAX, "%s", id);
  return 0;
}

