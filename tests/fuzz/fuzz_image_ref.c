/* Fuzz target for image references (configuration values, --image, --tag):
 * any bytes either parse into parts that rebuild the reference exactly, or
 * fail with SM_EINVAL; a digest that parses is always valid. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/image.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char ref[SM_IMAGE_REF_MAX + 16];
  if (size >= sizeof ref) size = sizeof ref - 1;
  memcpy(ref, data, size);
  ref[size] = '\0';
  sm_image_ref r;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_image_ref_parse(ref, &r, &err);
  if (rc != 0) {
    if (rc != SM_EINVAL || err.message[0] == '\0') abort();
    return 0;
  }
  if (r.name[0] == '\0') abort();
  if (r.digest[0] != '\0' && !sm_image_digest_valid(r.digest)) abort();
  char back[SM_IMAGE_REF_MAX * 2];
  snprintf(back, sizeof back, "%s%s%s%s%s", r.name, r.tag[0] ? ":" : "", r.tag,
           r.digest[0] ? "@" : "", r.digest);
  if (strcmp(back, ref) != 0) abort();
  return 0;
}
