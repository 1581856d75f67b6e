/* Networks (inspect, connect, disconnect; create, remove and list are in
 * engine_swarm.c) and a container's log, demultiplexed: what the egress topology
 * needs (docs/network.md). */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "engine/engine_call.h"
#include "engine/engine_client.h"
#include "engine/mux.h"
#include "engine/path.h"
#include "engine/response.h"
#include "engine/transport.h"

#define PATH_CAP (64u << 10)

static int network_path(common_buf *b, const char *name, const char *suffix, sm_error *err) {
  int rc = engine_check_ref(name, "network name", err);
  if (rc != 0) return rc;
  common_buf_init(b, PATH_CAP);
  if (common_buf_append(b, "/networks/", 10) != 0 || engine_url_escape(b, name, NULL) != 0 ||
      (suffix && common_buf_append(b, suffix, strlen(suffix)) != 0)) {
    common_buf_dispose(b);
    return sm_error_set(err, SM_EINVAL, "network name too long");
  }
  return 0;
}

int sm_engine_network_inspect(sm_engine *engine, const char *name, json_object **out,
                              sm_error *err) {
  *out = NULL;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  common_buf path;
  int rc = network_path(&path, name, NULL, err);
  if (rc != 0) return rc;
  rc = engine_call_json(engine, "GET", path.data, NULL, 0, NULL, out, err);
  common_buf_dispose(&path);
  return rc;
}

int sm_engine_network_connect(sm_engine *engine, const char *name, const char *container,
                              const char *const *aliases, size_t n_aliases, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  int rc = engine_check_ref(container, "container id", err);
  if (rc != 0) return rc;
  common_buf path;
  if ((rc = network_path(&path, name, "/connect", err)) != 0) return rc;
  json_object *body = json_object_new_object(), *ep = json_object_new_object();
  json_object *al = json_object_new_array();
  for (size_t i = 0; i < n_aliases; i++) json_object_array_add(al, json_object_new_string(aliases[i]));
  json_object_object_add(ep, "Aliases", al);
  json_object_object_add(body, "Container", json_object_new_string(container));
  json_object_object_add(body, "EndpointConfig", ep);
  rc = engine_call_json(engine, "POST", path.data, body, 0, NULL, NULL, err);
  json_object_put(body);
  common_buf_dispose(&path);
  return rc;
}

int sm_engine_network_disconnect(sm_engine *engine, const char *name, const char *container,
                                 int force, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  int rc = engine_check_ref(container, "container id", err);
  if (rc != 0) return rc;
  common_buf path;
  if ((rc = network_path(&path, name, "/disconnect", err)) != 0) return rc;
  json_object *body = json_object_new_object();
  json_object_object_add(body, "Container", json_object_new_string(container));
  json_object_object_add(body, "Force", json_object_new_boolean(force));
  rc = engine_call_json(engine, "POST", path.data, body, 0, NULL, NULL, err);
  json_object_put(body);
  common_buf_dispose(&path);
  return rc;
}

/* ---- logs ---- */

typedef struct logs_sink {
  engine_mux mux;
  sm_error *err;
} logs_sink;

static int logs_write(void *ud, const char *data, size_t len) {
  logs_sink *s = ud;
  return engine_mux_feed(&s->mux, data, len, s->err);
}

int sm_engine_container_logs(sm_engine *engine, const char *id, double since, int timestamps,
                             sm_output_fn output, void *ud, sm_error *err) {
  if (engine == NULL || output == NULL)
    return sm_error_set(err, SM_EINVAL, "container logs: needs a client and an output");
  int rc = engine_check_ref(id, "container id", err);
  if (rc != 0) return rc;
  common_buf rel, full;
  common_buf_init(&rel, PATH_CAP);
  common_buf_init(&full, PATH_CAP);
  char q[128];
  /* since: seconds.nanoseconds, as the engine takes it. */
  long long secs = (long long)since;
  long nanos = (long)((since - (double)secs) * 1e9);
  if (nanos < 0) nanos = 0;
  snprintf(q, sizeof q, "/logs?stdout=1&stderr=1&follow=0&timestamps=%d&since=%lld.%09ld",
           timestamps ? 1 : 0, secs, nanos);
  if (common_buf_append(&rel, "/containers/", 12) != 0 || engine_url_escape(&rel, id, NULL) != 0 ||
      common_buf_append(&rel, q, strlen(q)) != 0)
    rc = sm_error_set(err, SM_EINVAL, "container logs: path too long");
  if (rc == 0) rc = engine_versioned_path(engine, &full, rel.data, err);
  if (rc == 0) {
    logs_sink sink;
    engine_mux_init(&sink.mux, ENGINE_DEFAULT_MAX_FRAME, output, ud);
    sm_error cb_err = SM_ERROR_INIT;
    sink.err = &cb_err;
    engine_request req = {0};
    req.method = "GET";
    req.path = full.data;
    req.sink = logs_write;
    req.sink_ud = &sink;
    req.timeout_ms = -1;
    req.stall_timeout = 1;
    req.cb_err = &cb_err;
    engine_response resp;
    engine_response_init(&resp, ENGINE_MAX_ERROR_BODY);
    rc = engine_perform(engine, &req, &resp, err);
    if (rc == 0 && resp.status >= 400)
      rc = engine_error_from_response(resp.status, resp.body.data, resp.body.len, "container logs",
                                      err);
    if (rc == 0) rc = engine_mux_finish(&sink.mux, err);
    engine_response_dispose(&resp);
  }
  common_buf_dispose(&rel);
  common_buf_dispose(&full);
  return rc;
}
