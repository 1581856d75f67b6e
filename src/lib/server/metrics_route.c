/* GET /metrics (metrics_route.h): the gauges of the moment rendered after
 * the counters, within a hard cap. */
#include "common/buf.h"
#include "server/metrics_route.h"

#define METRICS_MAX (4 * 1024 * 1024)

void server_metrics_route(sm_server *srv, char **text, size_t *len, sm_answer *a) {
  sm_metrics_gauges g;
  sm_server_gauges(srv, &g, 1);
  sm_buf b;
  sm_buf_init(&b, METRICS_MAX);
  sm_metrics_render(srv->metrics, &g, &b);
  *len = 0;
  *text = sm_buf_steal(&b, len);
  if (*text == NULL) {
    sm_error err = SM_ERROR_INIT;
    sm_error_set(&err, SM_ENOMEM, "out of memory");
    server_answer_from_error(a, &err);
  } else {
    a->status = 200;
  }
}
