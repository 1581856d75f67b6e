/* Host MCP servers: not built yet (the hostmcp part of issue 16 replaces
 * this file). Until then a host tool of kind "mcp" is refused with a clear
 * error: nothing is started, nothing runs. */
#include <stdlib.h>

#include "broker/mcp_servers.h"

struct bk_mcp_servers {
  json_object *servers;
};

int bk_mcp_servers_new(bk_mcp_servers **out, json_object *servers, sm_error *err) {
  *out = calloc(1, sizeof **out);
  if (!*out) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  (*out)->servers = servers;
  return 0;
}

void bk_mcp_servers_free(bk_mcp_servers *s) { free(s); }

int bk_mcp_servers_call(bk_mcp_servers *s, const char *server, const char *tool,
                        json_object *args, double timeout_s, volatile int *cancel,
                        sm_mcp_result *out, sm_error *err) {
  (void)s, (void)tool, (void)args, (void)timeout_s, (void)cancel, (void)out;
  return sm_error_set(err, SM_EUNSUPPORTED,
                      "host MCP server '%s': relaying host MCP servers is not available in this "
                      "build",
                      server);
}
