/* The broker's state, shared by its files (src/lib/broker). */
#ifndef SANDMAN_BROKER_STATE_H
#define SANDMAN_BROKER_STATE_H

#include <pthread.h>

#include <sandman/broker.h>

#include "broker/approvals.h"
#include "broker/catalog.h"
#include "broker/limits.h"
#include "broker/mcp_servers.h"

struct sm_broker {
  const sm_config *config;
  json_object *conf; /* sm_config_broker (borrowed) */
  sm_audit *audit;
  int approvals_on;
  sm_broker_credentials_fn credentials;
  void *credentials_ud;
  bk_catalog catalog;
  bk_limits *limits;
  bk_approvals *approvals;
  bk_mcp_servers *mcp;
  struct bk_route_mcp_state *mcp_http; /* route_mcp.c, made on first use (under mu) */
  pthread_mutex_t mu;
  pthread_cond_t idle;
  int in_flight; /* calls running (sm_broker_free waits for them) */
};

#endif
