/* Internal to src/lib/sandbox: hashes (sandbox_settings.c), and random names
 * (sm_random_hex, public in <sandman/util.h>). */
#ifndef SANDMAN_SANDBOX_SETTINGS_H
#define SANDMAN_SANDBOX_SETTINGS_H

#include <stddef.h>

#include <sandman/error.h>
#include <sandman/util.h>

/* Lowercase hex SHA-256 of data. */
void sandbox_sha256_hex(const void *data, size_t len, char out[65]);

#endif
