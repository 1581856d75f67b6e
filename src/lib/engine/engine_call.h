/* Calls on the versioned API (engine_call.c): negotiation on first use, the
 * "/v1.41" prefix, JSON in and out; ping, version and info. */
#ifndef SANDMAN_ENGINE_CALL_H
#define SANDMAN_ENGINE_CALL_H

#include <json-c/json.h>

#include <sandman/engine.h>

#include "common/buf.h"
#include "engine/engine_client.h"
#include "engine/transport.h"

/* Negotiates if needed, then prefixes "/v<api>" to rel_path. */
int engine_versioned_path(sm_engine *e, common_buf *out, const char *rel_path, sm_error *err);
/* One JSON exchange on a versioned path: statuses >= 400 become errors via
 * engine_error_from_response. out may be NULL; *out is NULL for an empty
 * body. timeout_ms as in engine_request. */
int engine_call_json(sm_engine *e, const char *method, const char *rel_path,
                     json_object *body, long timeout_ms, int *out_status,
                     json_object **out, sm_error *err);
/* GET of a listing on rel_path: a JSON array in *out. build_rc: how the
 * path was built (non-zero: its filters were too long, SM_EINVAL "<what>:
 * <filters> too long"). */
int engine_call_list(sm_engine *e, int build_rc, const char *rel_path, const char *what,
                     const char *filters, json_object **out, sm_error *err);
/* The body of a create (network, volume): Name, Driver and the Labels
 * (a JSON object or NULL), or SM_EINVAL/SM_ENOMEM named by what. */
int engine_create_body(const char *what, const char *name, const char *driver,
                       json_object *labels, json_object **out, sm_error *err);
/* One streamed exchange (req's reader and sink carry the bodies; req->path
 * already versioned): an answer >= 400 becomes an error through
 * engine_error_from_response, named by what. *out_status (may be NULL)
 * gets the status; path_stat (may be NULL; ENGINE_PATH_STAT_MAX bytes) the answer's
 * X-Docker-Container-Path-Stat header. */
int engine_call_stream(sm_engine *e, const engine_request *req, const char *what,
                       long *out_status, char *path_stat, sm_error *err);

#endif
