/* sandman-agent embedded in the library: the static binary built from
 * src/agent/agent_main.c (generated/agent_blob.c, made at build time by
 * cmake/blob.cmake), so sandman can copy it into a sandbox without
 * shipping a separate file. */
#ifndef SANDMAN_AGENT_BLOB_H
#define SANDMAN_AGENT_BLOB_H

#include "common/blob_embed.h"

SM_BLOB_DECLARE(sm_agent_blob);

#endif
