/* sandman-agent embedded in the library: the static binary built from
 * src/agent/main.c (generated/agent_blob.c, made at build time by
 * src/agent/blob.cmake), so sandman can copy it into a sandbox without
 * shipping a separate file. */
#ifndef SANDMAN_AGENT_BLOB_H
#define SANDMAN_AGENT_BLOB_H

#include <stddef.h>

extern const unsigned char sm_agent_blob[]; /* the static binary */
extern const size_t sm_agent_blob_len;
extern const char sm_agent_blob_sha256[65]; /* lowercase hex */

#endif
