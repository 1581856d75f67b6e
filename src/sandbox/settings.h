/* Internal to src/sandbox: random names and hashes (settings.c). */
#ifndef SANDMAN_SANDBOX_SETTINGS_H
#define SANDMAN_SANDBOX_SETTINGS_H

#include <stddef.h>

#include <sandman/error.h>

/* n random bytes as 2n lowercase hex characters (out has room for 2n+1). */
int sm_random_hex(char *out, size_t nbytes, sm_error *err);
/* Lowercase hex SHA-256 of data. */
void sm_sha256_hex(const void *data, size_t len, char out[65]);

#endif
