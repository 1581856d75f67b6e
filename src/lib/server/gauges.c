/* The gauges of /metrics: sandboxes by mode, the pool and agents, the
 * connections, handles, leases, calls and the queue, read at one moment. */
#include <string.h>

#include <sandman/ops.h>
#include <sandman/util.h>

#include "server/server_core.h"
#include "server/handles.h"

const char *const server_sandbox_states[4] = {"running", "frozen", "stopped", "hibernated"};

void server_gauges(sm_server *srv, server_metrics_gauges *g, int with_sandboxes) {
  memset(g, 0, sizeof *g);
  if (with_sandboxes && srv->opts.runner) {
    sm_ops_scope scope;
    sm_ops_sandbox_list list = {0, NULL};
    sm_error err = SM_ERROR_INIT;
    if (sm_ops_scope_from_runner(&scope, srv->opts.runner, &err) == 0 &&
        sm_ops_list(&scope, 0, &list, &err) == 0) {
      g->sandboxes_known = 1;
      for (size_t i = 0; i < list.n; i++) {
        sm_mode m;
        if (list.items[i].pool) continue;
        if (sm_mode_parse(list.items[i].mode, &m, NULL) == 0) g->sandboxes[m]++;
        for (int s = 0; s < 4; s++)
          if (strcmp(list.items[i].rest, server_sandbox_states[s]) == 0) g->sandboxes_by_state[s]++;
      }
      sm_ops_sandbox_list_dispose(&list);
    }
  }
  if (srv->opts.runner) {
    sm_runner_pool_stats(srv->opts.runner, &g->pool);
    sm_runner_agent_stats(srv->opts.runner, &g->agent);
    g->pool_known = 1;
  }
  if (srv->gate) {
    server_gate_read_stats(srv, &g->http);
    g->http_known = 1;
  }
  size_t total = 0;
  g->handles_running = (long)server_handles_running(srv, &total);
  g->handles_total = (long)total;
  g->leases_live = (long)server_lease_live(srv->leases, sm_now());
  pthread_mutex_lock(&srv->mu);
  g->calls_in_flight = srv->calls_in_flight;
  g->queue_depth = (long)srv->queued;
  g->engine_up = srv->engine_up;
  g->draining = srv->draining;
  pthread_mutex_unlock(&srv->mu);
}
