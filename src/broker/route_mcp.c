/* /mcp through the route: not built yet (the hostmcp part of issue 16
 * replaces this file); until then it answers 404 like any unknown path. */
#include "broker/route_mcp.h"

int bk_route_mcp(sm_broker *b, const sm_route_caller *who, const bk_http_msg *req, char **resp,
                 size_t *resp_len, sm_error *err) {
  (void)b, (void)who, (void)req;
  return bk_http_error(404, "not_found", "MCP over the route is not available in this build",
                       NULL, resp, resp_len, err);
}
