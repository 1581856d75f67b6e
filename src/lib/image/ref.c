/* Image references: "registry:5000/repo/name:tag@sha256:<hex>" split and
 * checked before anything reaches the engine. */
#include <stdio.h>
#include <string.h>

#include <sandman/image.h>

#define DIGEST_PREFIX "sha256:"
#define DIGEST_HEX 64

int sm_image_digest_valid(const char *digest) {
  if (digest == NULL || strncmp(digest, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) != 0) return 0;
  const char *hex = digest + strlen(DIGEST_PREFIX);
  size_t n = 0;
  for (; hex[n]; n++) {
    char c = hex[n];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
  }
  return n == DIGEST_HEX;
}

static int name_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-' || c == '/' || c == ':';
}

static int tag_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

int sm_image_ref_parse(const char *ref, sm_image_ref *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  if (ref == NULL || ref[0] == '\0') return sm_error_set(err, SM_EINVAL, "empty image reference");
  size_t len = strlen(ref);
  if (len >= SM_IMAGE_REF_MAX)
    return sm_error_set(err, SM_EINVAL, "image reference longer than %d bytes",
                        SM_IMAGE_REF_MAX - 1);
  const char *at = strchr(ref, '@');
  size_t name_end = at ? (size_t)(at - ref) : len;
  if (at) {
    if (!sm_image_digest_valid(at + 1))
      return sm_error_set(err, SM_EINVAL,
                          "image reference '%s': the digest must be sha256: followed by 64 "
                          "lowercase hex digits",
                          ref);
    snprintf(out->digest, sizeof out->digest, "%s", at + 1);
  }
  /* A ':' after the last '/' starts the tag; one before it is a registry
   * port ("localhost:5000/x"). */
  const char *slash = NULL, *colon = NULL;
  for (size_t i = 0; i < name_end; i++) {
    if (ref[i] == '/') slash = ref + i;
    if (ref[i] == ':') colon = ref + i;
  }
  if (colon && slash && colon < slash) colon = NULL;
  size_t repo_end = colon ? (size_t)(colon - ref) : name_end;
  if (repo_end == 0)
    return sm_error_set(err, SM_EINVAL, "image reference '%s' has no name", ref);
  for (size_t i = 0; i < repo_end; i++) {
    if (!name_char_ok(ref[i]))
      return sm_error_set(err, SM_EINVAL, "image reference '%s': bad character '%c' in the name",
                          ref, ref[i]);
  }
  if (ref[0] == '/' || ref[repo_end - 1] == '/' || strstr(ref, "//") != NULL)
    return sm_error_set(err, SM_EINVAL, "image reference '%s': empty path component", ref);
  memcpy(out->name, ref, repo_end);
  out->name[repo_end] = '\0';
  if (colon) {
    size_t tag_len = name_end - repo_end - 1;
    if (tag_len == 0 || tag_len >= sizeof out->tag)
      return sm_error_set(err, SM_EINVAL, "image reference '%s': the tag must be 1 to %zu characters",
                          ref, sizeof out->tag - 1);
    for (size_t i = 0; i < tag_len; i++) {
      if (!tag_char_ok(colon[1 + i]))
        return sm_error_set(err, SM_EINVAL, "image reference '%s': bad character '%c' in the tag",
                            ref, colon[1 + i]);
    }
    memcpy(out->tag, colon + 1, tag_len);
    out->tag[tag_len] = '\0';
  }
  return 0;
}

