/* The engine client object (engine_client.c): its limits and its state. Every
 * other file of src/lib/engine works on this struct; engine_client.c only makes,
 * copies and frees it. */
#ifndef SANDMAN_ENGINE_CLIENT_H
#define SANDMAN_ENGINE_CLIENT_H

#include <stddef.h>

#include <curl/curl.h>

#include <sandman/engine.h>

#include "engine/address.h"
#include "engine/negotiate.h"

/* ---- limits ---- */
#define ENGINE_DEFAULT_CONNECT_TIMEOUT_MS 5000L
#define ENGINE_DEFAULT_REQUEST_TIMEOUT_MS 120000L
#define ENGINE_DEFAULT_MAX_RESPONSE ((size_t)16 << 20)
/* Error bodies of streaming calls are buffered too. */
#define ENGINE_MAX_ERROR_BODY ((size_t)64 << 10)

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

#endif
