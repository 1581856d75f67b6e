/* HTTP exchanges over the client's libcurl handle (transport.c): no
 * version prefix, no negotiation; any status is the caller's to judge. */
#ifndef SANDMAN_ENGINE_TRANSPORT_H
#define SANDMAN_ENGINE_TRANSPORT_H

#include <sandman/engine.h>

#include "common/buf.h"
#include "engine/engine_client.h"

/* ---- transport (libcurl) ---- */
typedef struct engine_request {
  const char *method;       /* GET POST PUT DELETE HEAD */
  const char *path;         /* full path, version prefix included */
  const char *body;         /* buffered request body, or NULL */
  size_t body_len;
  int body_is_tar;          /* Content-Type application/x-tar, else JSON */
  sm_read_fn reader;        /* streamed request body (chunked) */
  void *reader_ud;
  sm_write_fn sink;         /* 2xx response body streamed here, not buffered */
  void *sink_ud;
  long timeout_ms;          /* 0: the client's request timeout; <0: none */
  int stall_timeout;        /* with timeout_ms < 0: fail after the request
                               timeout without a byte moving */
  sm_error *cb_err;         /* where internal callbacks explain an abort */
} engine_request;

/* The longest X-Docker-Container-Path-Stat header kept. */
#define ENGINE_PATH_STAT_MAX 1024

typedef struct engine_response {
  long status;
  common_buf body;                          /* capped; error bodies of streams too */
  char api_version[ENGINE_API_MAX_LEN * 2]; /* the Api-Version header */
  /* X-Docker-Container-Path-Stat (base64 JSON), "" if none */
  char path_stat[ENGINE_PATH_STAT_MAX];
} engine_response;

/* A request whose body is a tar stream read from reader (the rest zero). */
void engine_request_tar(engine_request *req, const char *method, const char *path,
                        sm_read_fn reader, void *reader_ud);

void engine_response_init(engine_response *r, size_t max_body);
void engine_response_dispose(engine_response *r);
/* Performs one HTTP exchange. Transport failures are errors (unreachable,
 * timeout, TLS, truncated, over the cap); any HTTP status is returned in
 * resp->status for the caller to judge. */
int engine_perform(sm_engine *e, const engine_request *req, engine_response *resp,
                   sm_error *err);

/* Unreachable / timeout / TLS messages name the address. */
int engine_unreachable_error(const sm_engine *e, int sys_errno, const char *detail,
                             sm_error *err);

#endif
