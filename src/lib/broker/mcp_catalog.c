/* The host MCP servers' tools joining the catalog (mcp_catalog.h). The
 * servers are asked outside the broker's lock (starting one may take
 * seconds); the catalog is extended under it, once. */
#include <pthread.h>

#include "broker/mcp_catalog.h"
#include "broker/state.h"

int broker_catalog_join_servers(sm_broker *b, sm_error *err) {
  if (!b->mcp) return 0;
  pthread_mutex_lock(&b->mu);
  int joined = b->catalog.joined;
  pthread_mutex_unlock(&b->mu);
  if (joined) return 0;
  json_object *entries = NULL;
  int rc = broker_mcp_servers_tools(b->mcp, &entries, err);
  if (rc) return rc;
  pthread_mutex_lock(&b->mu);
  rc = broker_catalog_extend(&b->catalog, entries, err);
  pthread_mutex_unlock(&b->mu);
  json_object_put(entries);
  return rc;
}
