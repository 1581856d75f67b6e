/* sandman-egress embedded in the library: the static proxy built from
 * src/egress_proxy (generated/egress_blob.c, made at build time by
 * cmake/blob.cmake), so sandman can make the proxy's image on any
 * engine, a remote one included, without shipping a separate file. */
#ifndef SANDMAN_EGRESS_BLOB_H
#define SANDMAN_EGRESS_BLOB_H

#include "common/blob_embed.h"

SM_BLOB_DECLARE(sm_egress_blob);

#endif
