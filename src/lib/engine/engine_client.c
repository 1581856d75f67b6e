/* The client object: made from options and the environment, cloned for
 * another thread, freed. Talks to nobody: engine_call.c negotiates on first use. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_client.h"
#include "engine/conn.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static int transport_init(sm_engine *e, sm_error *err) {
  pthread_once(&global_once, global_init);
  if (global_rc != CURLE_OK)
    return sm_error_set(err, SM_EIO, "initialising libcurl failed: %s",
                        curl_easy_strerror(global_rc));
  e->curl = curl_easy_init();
  /* "Expect:" stops curl's 100-continue round trip on uploads. */
  e->hdr_none = curl_slist_append(NULL, "Expect:");
  struct curl_slist *j = curl_slist_append(NULL, "Expect:");
  e->hdr_json = j ? curl_slist_append(j, "Content-Type: application/json") : NULL;
  if (e->hdr_json == NULL) curl_slist_free_all(j);
  struct curl_slist *t = curl_slist_append(NULL, "Expect:");
  e->hdr_tar = t ? curl_slist_append(t, "Content-Type: application/x-tar") : NULL;
  if (e->hdr_tar == NULL) curl_slist_free_all(t);
  if (e->curl == NULL || e->hdr_none == NULL || e->hdr_json == NULL || e->hdr_tar == NULL)
    return sm_error_set(err, SM_ENOMEM, "creating the engine client: out of memory");
  if (e->addr.kind == ENGINE_ADDR_UNIX)
    snprintf(e->base_url, sizeof e->base_url, "http://localhost");
  else if (strchr(e->addr.tcp_host, ':') != NULL)
    snprintf(e->base_url, sizeof e->base_url, "%s://[%s]:%d", e->addr.tls ? "https" : "http",
             e->addr.tcp_host, e->addr.port);
  else
    snprintf(e->base_url, sizeof e->base_url, "%s://%s:%d", e->addr.tls ? "https" : "http",
             e->addr.tcp_host, e->addr.port);
  return 0;
}

int sm_engine_new(sm_engine **out, const sm_engine_options *opts, sm_error *err) {
  *out = NULL;
  sm_engine_options defaults = SM_ENGINE_OPTIONS_INIT;
  if (opts == NULL) opts = &defaults;
  sm_engine *e = calloc(1, sizeof *e);
  if (e == NULL) return sm_error_set(err, SM_ENOMEM, "creating the engine client: out of memory");
  engine_address_env env;
  engine_address_env_from_process(&env);
  int rc = engine_address_resolve(opts->host, opts->tls_verify, opts->cert_path, &env, &e->addr,
                                  err);
  if (rc != 0) {
    free(e);
    return rc;
  }
  if (opts->host && opts->host[0] && opts->host_source)
    snprintf(e->addr.source, sizeof e->addr.source, "%s", opts->host_source);
  e->connect_timeout_ms =
      opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : ENGINE_DEFAULT_CONNECT_TIMEOUT_MS;
  e->request_timeout_ms =
      opts->request_timeout_ms > 0 ? opts->request_timeout_ms : ENGINE_DEFAULT_REQUEST_TIMEOUT_MS;
  e->max_response_bytes =
      opts->max_response_bytes > 0 ? opts->max_response_bytes : ENGINE_DEFAULT_MAX_RESPONSE;
  if (opts->api_version != NULL) {
    if (engine_api_parse(opts->api_version, NULL, NULL) != 0 ||
        strlen(opts->api_version) >= sizeof e->api_version) {
      free(e);
      return sm_error_set(err, SM_EINVAL, "bad API version '%s': expected MAJOR.MINOR, e.g. %s",
                          opts->api_version, SM_ENGINE_MIN_API);
    }
    if (engine_api_compare(opts->api_version, SM_ENGINE_MIN_API) < 0) {
      free(e);
      return sm_error_set(err, SM_EINVAL, "API version %s is older than %s, the oldest sandman "
                          "supports", opts->api_version, SM_ENGINE_MIN_API);
    }
    snprintf(e->api_version, sizeof e->api_version, "%s", opts->api_version);
  }
  rc = transport_init(e, err);
  if (rc != 0) {
    sm_engine_free(e);
    return rc;
  }
  *out = e;
  return 0;
}

int sm_engine_clone(sm_engine **out, const sm_engine *engine, sm_error *err) {
  *out = NULL;
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client to clone");
  sm_engine *e = calloc(1, sizeof *e);
  if (e == NULL) return sm_error_set(err, SM_ENOMEM, "cloning the engine client: out of memory");
  e->addr = engine->addr;
  e->connect_timeout_ms = engine->connect_timeout_ms;
  e->request_timeout_ms = engine->request_timeout_ms;
  e->max_response_bytes = engine->max_response_bytes;
  memcpy(e->api_version, engine->api_version, sizeof e->api_version);
  int rc = transport_init(e, err);
  if (rc != 0) {
    sm_engine_free(e);
    return rc;
  }
  *out = e;
  return 0;
}

void sm_engine_free(sm_engine *engine) {
  if (engine == NULL) return;
  if (engine->curl) curl_easy_cleanup(engine->curl);
  engine_tls_dispose(engine);
  curl_slist_free_all(engine->hdr_none);
  curl_slist_free_all(engine->hdr_json);
  curl_slist_free_all(engine->hdr_tar);
  free(engine);
}

const char *sm_engine_host(const sm_engine *engine) { return engine ? engine->addr.host : NULL; }

const char *sm_engine_host_source(const sm_engine *engine) {
  return engine ? engine->addr.source : "";
}

int sm_engine_uses_tls(const sm_engine *engine) { return engine ? engine->addr.tls : 0; }

const char *sm_engine_api_version(const sm_engine *engine) {
  return engine && engine->api_version[0] ? engine->api_version : NULL;
}
