/* A static program embedded in the library (generated/<name>_blob.c,
 * written at build time by cmake/blob.cmake): its bytes, their length
 * and their SHA-256 in lowercase hex. */
#ifndef SANDMAN_COMMON_BLOB_H
#define SANDMAN_COMMON_BLOB_H

#include <stddef.h>

#define SM_BLOB_DECLARE(sym)          \
  extern const unsigned char sym[];   \
  extern const size_t sym##_len;      \
  extern const char sym##_sha256[65]

#endif
