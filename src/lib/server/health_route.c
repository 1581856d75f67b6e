/* GET /healthz (health_route.h): what the runner knows of its engine,
 * read under the server's lock, never a call to the engine. */
#include <sandman/version.h>

#include "server/health_route.h"

void server_health_route(sm_server *srv, server_answer *a) {
  json_object *o = json_object_new_object();
  json_object *e = json_object_new_object();
  pthread_mutex_lock(&srv->mu);
  int up = srv->engine_up;
  int has_engine = srv->opts.runner != NULL;
  int degraded = srv->opts.degraded || srv->draining ||
                 (has_engine && !up && srv->opts.mode != SM_MODE_NONE);
  json_object_object_add(e, "host", srv->engine_host[0]
                                        ? json_object_new_string(srv->engine_host)
                                        : NULL);
  json_object_object_add(e, "reachable", json_object_new_boolean(up));
  json_object_object_add(e, "version", up && srv->engine_version[0]
                                           ? json_object_new_string(srv->engine_version)
                                           : NULL);
  json_object_object_add(e, "api_version", up && srv->engine_api[0]
                                               ? json_object_new_string(srv->engine_api)
                                               : NULL);
  if (!up && srv->engine_error[0])
    json_object_object_add(e, "error", json_object_new_string(srv->engine_error));
  int draining = srv->draining;
  pthread_mutex_unlock(&srv->mu);
  json_object_object_add(o, "status", json_object_new_string(degraded ? "degraded" : "ok"));
  json_object_object_add(o, "version", json_object_new_string(sm_version()));
  json_object_object_add(o, "mode", json_object_new_string(sm_mode_name(srv->opts.mode)));
  json_object_object_add(o, "pool", srv->pool ? json_object_new_string(srv->pool) : NULL);
  if (srv->opts.degraded)
    json_object_object_add(o, "fallback", json_object_new_boolean(1));
  if (draining) json_object_object_add(o, "draining", json_object_new_boolean(1));
  json_object_object_add(o, "engine", e);
  a->status = 200;
  a->body = o;
}
