/* The code driver (code_driver.py) embedded in sandman-agent as bytes
 * (generated/code_driver_blob.c, made at build time by cmake/blob.cmake). */
#ifndef SANDMAN_AGENT_CODE_DRIVER_H
#define SANDMAN_AGENT_CODE_DRIVER_H

#include "common/blob_embed.h"

SM_BLOB_DECLARE(agent_code_driver);

#endif
