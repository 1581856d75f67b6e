/* SHA-256 (FIPS 180-4) on libc alone: shared by the library and the static
 * in-sandbox agent, which has no OpenSSL (the workspace digest,
 * src/shared/workspace/digest.h, is computed on both sides). */
#ifndef SANDMAN_COMMON_SHA256_H
#define SANDMAN_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sm_sha256 {
  uint32_t h[8];
  uint64_t bytes;        /* message length so far */
  unsigned char block[64];
  size_t fill;           /* bytes waiting in block */
} sm_sha256;

void sm_sha256_init(sm_sha256 *c);
void sm_sha256_update(sm_sha256 *c, const void *data, size_t len);
/* The digest of everything given; c must be initialised again for reuse. */
void sm_sha256_final(sm_sha256 *c, unsigned char out[32]);

#endif
