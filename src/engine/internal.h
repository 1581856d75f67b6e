/* Internal to the engine client: the client struct and the pure pieces
 * (address resolution, version negotiation, response parsing, the stream
 * demultiplexer) that unit tests and fuzz targets call directly. */
#ifndef SANDMAN_ENGINE_INTERNAL_H
#define SANDMAN_ENGINE_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>

#include "common/buf.h"

/* ---- limits ---- */
#define ENGINE_DEFAULT_CONNECT_TIMEOUT_MS 5000L
#define ENGINE_DEFAULT_REQUEST_TIMEOUT_MS 120000L
#define ENGINE_DEFAULT_MAX_RESPONSE ((size_t)16 << 20)
#define ENGINE_DEFAULT_MAX_FRAME ((size_t)1 << 20)
/* Error bodies of streaming calls and progress lines are buffered too. */
#define ENGINE_MAX_ERROR_BODY ((size_t)64 << 10)
#define ENGINE_MAX_PROGRESS_LINE ((size_t)1 << 20)
/* The response head of a hijacked exec (status line and headers). */
#define ENGINE_MAX_HTTP_HEAD ((size_t)16 << 10)
#define ENGINE_JSON_DEPTH 64
#define ENGINE_API_MAX_LEN 16
#define ENGINE_UNIX_PATH_MAX 108 /* sizeof(sockaddr_un.sun_path) */
#define ENGINE_HOST_MAX 512

/* ---- address ---- */
typedef enum { ENGINE_ADDR_UNIX = 1, ENGINE_ADDR_TCP = 2 } engine_addr_kind;

typedef struct engine_address {
  engine_addr_kind kind;
  char host[ENGINE_HOST_MAX];               /* canonical: unix:///p, tcp://h:p */
  char socket_path[ENGINE_UNIX_PATH_MAX];   /* unix */
  char tcp_host[256];                       /* tcp, without IPv6 brackets */
  int port;                                 /* tcp */
  int tls;                                  /* tcp with TLS */
  char ca[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
  char source[320];                         /* where the address came from: "DOCKER_HOST" */
} engine_address;

/* The environment, passed in so that resolution is a pure function. */
typedef struct engine_address_env {
  const char *docker_host;       /* $DOCKER_HOST */
  const char *docker_tls_verify; /* $DOCKER_TLS_VERIFY */
  const char *docker_cert_path;  /* $DOCKER_CERT_PATH */
  const char *home;              /* $HOME */
  const char *docker_context;    /* $DOCKER_CONTEXT */
  const char *docker_config;     /* $DOCKER_CONFIG (else HOME/.docker) */
} engine_address_env;

void engine_address_env_from_process(engine_address_env *env);
/* host_opt > env->docker_host > env->docker_context > the docker CLI's
 * currentContext (DOCKER_CONFIG/config.json) > SM_ENGINE_DEFAULT_HOST; a
 * context's endpoint and TLS files come from DOCKER_CONFIG/contexts, as
 * the docker CLI keeps them. tls_opt: -1 from the
 * environment (any non-empty DOCKER_TLS_VERIFY), 0 off, 1 on. Checks that
 * the TLS files are readable. Errors: SM_EINVAL naming what is wrong. */
int engine_address_resolve(const char *host_opt, int tls_opt, const char *cert_opt,
                           const engine_address_env *env, engine_address *out,
                           sm_error *err);

/* ---- version negotiation ---- */
/* Parses "MAJOR.MINOR" (nothing else). Returns 0 or -1. */
int engine_api_parse(const char *s, int *out_major, int *out_minor);
/* Compares two versions already known to parse: <0, 0, >0. */
int engine_api_compare(const char *a, const char *b);
/* The version to speak given the engine's Api-Version header (may be NULL):
 * min(engine, SM_ENGINE_MAX_API); SM_EUNSUPPORTED below SM_ENGINE_MIN_API,
 * SM_EPROTOCOL for a missing or malformed header. */
int engine_negotiate_version(const char *engine_api, char out[ENGINE_API_MAX_LEN],
                             sm_error *err);

/* ---- the client ---- */
struct sm_engine {
  engine_address addr;
  long connect_timeout_ms;
  long request_timeout_ms;
  size_t max_response_bytes;
  char api_version[ENGINE_API_MAX_LEN]; /* "" until negotiated */
  char base_url[ENGINE_HOST_MAX + 16];  /* http://localhost, https://h:p */
  CURL *curl;                           /* reused: keep-alive */
  struct curl_slist *hdr_json, *hdr_tar, *hdr_none;
  char curl_err[CURL_ERROR_SIZE];
  /* exec hijack over TLS: the context (CA, certificate and key loaded
   * once) and the last resumable session, to skip full handshakes. */
  void *tls_ctx;     /* SSL_CTX * */
  void *tls_session; /* SSL_SESSION * */
};

/* Frees the hijack's TLS state (hijack.c). */
void engine_tls_dispose(sm_engine *e);

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

typedef struct engine_response {
  long status;
  sm_buf body;                        /* capped; error bodies of streams too */
  char api_version[ENGINE_API_MAX_LEN * 2]; /* the Api-Version header */
  char path_stat[1024]; /* X-Docker-Container-Path-Stat (base64 JSON), "" if none */
} engine_response;

void engine_response_init(engine_response *r, size_t max_body);
void engine_response_dispose(engine_response *r);
/* Performs one HTTP exchange. Transport failures are errors (unreachable,
 * timeout, TLS, truncated, over the cap); any HTTP status is returned in
 * resp->status for the caller to judge. */
int engine_perform(sm_engine *e, const engine_request *req, engine_response *resp,
                   sm_error *err);

/* Negotiates if needed, then prefixes "/v<api>" to rel_path. */
int engine_versioned_path(sm_engine *e, sm_buf *out, const char *rel_path, sm_error *err);
/* One JSON exchange on a versioned path: statuses >= 400 become errors via
 * engine_error_from_response. out may be NULL; *out is NULL for an empty
 * body. timeout_ms as in engine_request. */
int engine_call_json(sm_engine *e, const char *method, const char *rel_path,
                     json_object *body, long timeout_ms, int *out_status,
                     json_object **out, sm_error *err);
/* Unreachable / timeout / TLS messages name the address. */
int engine_unreachable_error(const sm_engine *e, int sys_errno, const char *detail,
                             sm_error *err);

/* ---- response parsing (pure) ---- */
/* Turns a >= 400 answer into an error with the engine's "message" (or a
 * short printable excerpt of a non-JSON body): 404 SM_ENOTFOUND, 409
 * SM_ECONFLICT, others SM_EENGINE; err->http_status is set. what names the
 * call ("POST /containers/create"). Returns the code. */
int engine_error_from_response(long status, const char *body, size_t len, const char *what,
                               sm_error *err);
/* Parses a whole JSON body; empty (or blank) gives *out NULL. SM_EPROTOCOL
 * for malformed JSON. */
int engine_parse_json_body(const char *body, size_t len, const char *what,
                           json_object **out, sm_error *err);

/* Progress streams (build, import): one JSON message per line. */
typedef struct engine_progress {
  sm_buf line;
  sm_progress_fn cb;
  void *ud;
  int failed;            /* the stream carried an error message */
  int code;              /* first parse error, or 0 */
  char message[SM_ERROR_MESSAGE_MAX];
} engine_progress;

void engine_progress_init(engine_progress *p, sm_progress_fn cb, void *ud);
void engine_progress_dispose(engine_progress *p);
/* Feeds bytes; returns 0 or a negative code (line over the cap). */
int engine_progress_feed(engine_progress *p, const char *data, size_t len);
/* Flushes the last line and reports the stream's verdict. */
int engine_progress_finish(engine_progress *p, const char *what, sm_error *err);

/* ---- the multiplexed exec stream (pure) ---- */
typedef struct engine_mux {
  unsigned char head[8];
  size_t head_len;      /* bytes of the current header received */
  uint32_t remaining;   /* payload bytes left in the current frame */
  int stream;           /* of the current frame */
  size_t max_frame;
  sm_output_fn out;
  void *ud;
  char syserr[512];     /* a stream-3 (engine error) frame, capped */
  size_t syserr_len;
} engine_mux;

void engine_mux_init(engine_mux *m, size_t max_frame, sm_output_fn out, void *ud);
/* Feeds bytes as they arrive; payload is handed to out as it comes (a frame
 * may arrive in several pieces). Errors: SM_ETOOBIG (frame over the cap),
 * SM_EPROTOCOL (bad header), SM_EENGINE (engine error frame), or the
 * callback's code. */
int engine_mux_feed(engine_mux *m, const char *data, size_t len, sm_error *err);
/* End of stream: SM_EPROTOCOL when cut inside a header or a frame. */
int engine_mux_finish(const engine_mux *m, sm_error *err);

/* ---- HTTP/1.1 response head (hijack, pure) ---- */
/* Looks for the end of a response head in buf. Returns 1 with *out_status,
 * *out_head_len and *out_content_length (-1 when absent) when complete, 0
 * when more bytes are needed, SM_EPROTOCOL for garbage. */
int engine_http_parse_head(const char *buf, size_t len, int *out_status,
                           size_t *out_head_len, long long *out_content_length,
                           int *out_chunked);

/* ---- helpers ---- */
/* Appends s percent-encoded; keep lists extra bytes left as they are. */
int engine_url_escape(sm_buf *b, const char *s, const char *keep);
/* Appends "filters=<escaped JSON>" for labels ({"label":[...]}). */
int engine_label_filters(sm_buf *b, const char *const *labels, size_t n_labels);
/* Checks an id or name used in a path (non-empty, bounded). */
int engine_check_ref(const char *ref, const char *what, sm_error *err);

/* exec start over the upgraded connection (hijack.c) */
int engine_exec_hijack(sm_engine *e, const char *exec_id, const sm_exec_io *io,
                       sm_error *err);

#endif
