/* GET /metrics (metrics_route.h): the gauges of the moment rendered after
 * the counters, within a hard cap. */
#include "common/buf.h"
#include "server/metrics_route.h"

#define METRICS_MAX (4 * 1024 * 1024)

void server_metrics_route(sm_server *srv, char **text, size_t *len, server_answer *a) {
  server_metrics_gauges g;
  server_gauges(srv, &g, 1);
  common_buf b;
  common_buf_init(&b, METRICS_MAX);
  server_metrics_render(srv->metrics, &g, &b);
  *len = 0;
  *text = common_buf_steal(&b, len);
  if (*text == NULL) {
    sm_error err = SM_ERROR_INIT;
    sm_error_set(&err, SM_ENOMEM, "out of memory");
    server_answer_from_error(a, &err);
  } else {
    a->status = 200;
  }
}
