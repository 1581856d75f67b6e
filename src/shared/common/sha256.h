/* SHA-256 (FIPS 180-4) on libc alone: shared by the library and the static
 * in-sandbox agent, which has no OpenSSL (the workspace digest,
 * src/shared/workspace/digest.h, is computed on both sides). */
#ifndef SANDMAN_COMMON_SHA256_H
#define SANDMAN_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct common_sha256 {
  uint32_t h[8];
  uint64_t bytes;        /* message length so far */
  unsigned char block[64];
  size_t fill;           /* bytes waiting in block */
} common_sha256;

void common_sha256_init(common_sha256 *c);
void common_sha256_update(common_sha256 *c, const void *data, size_t len);
/* The digest of everything given; c must be initialised again for reuse. */
void common_sha256_final(common_sha256 *c, unsigned char out[32]);

#endif
