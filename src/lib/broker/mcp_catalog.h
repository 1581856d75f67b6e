/* The host MCP servers' tools in the catalog (src/lib/broker): joined on the
 * first list or call that needs them, so that a server starts only when
 * it is used. */
#ifndef SANDMAN_BROKER_MCP_CATALOG_H
#define SANDMAN_BROKER_MCP_CATALOG_H

#include <sandman/broker.h>
#include <sandman/error.h>

/* Starts the host MCP servers (once) and adds the tools they re-export to
 * b's catalog; 0 at once when there are none or that was done. A name
 * clash is SM_ECONFIG, a server that cannot start its error: nothing is
 * added then, and the next call tries again. After 0, every tool of the
 * catalog may be read. */
int broker_catalog_join_servers(sm_broker *b, sm_error *err);

#endif
