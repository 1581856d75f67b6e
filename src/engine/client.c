/* The client object, negotiation and the system calls (ping, version,
 * info, any JSON call). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

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

/* GET /_ping: its Api-Version header is all negotiation needs. */
static int ping(sm_engine *e, char *api_out, size_t api_len, sm_error *err) {
  engine_request req = {0};
  req.method = "GET";
  req.path = "/_ping";
  engine_response resp;
  engine_response_init(&resp, 4096);
  int rc = engine_perform(e, &req, &resp, err);
  if (rc == 0 && resp.status != 200)
    rc = engine_error_from_response(resp.status, resp.body.data, resp.body.len, "GET /_ping",
                                    err);
  if (rc == 0 && api_out) snprintf(api_out, api_len, "%s", resp.api_version);
  engine_response_dispose(&resp);
  return rc;
}

int sm_engine_negotiate(sm_engine *engine, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  if (engine->api_version[0]) return 0;
  char header[ENGINE_API_MAX_LEN * 2];
  int rc = ping(engine, header, sizeof header, err);
  if (rc != 0) return rc;
  rc = engine_negotiate_version(header, engine->api_version, err);
  if (rc != 0) sm_error_wrap(err, "engine at %s", engine->addr.host);
  return rc;
}

int sm_engine_ping(sm_engine *engine, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  char header[ENGINE_API_MAX_LEN * 2];
  int rc = ping(engine, header, sizeof header, err);
  if (rc == 0 && engine->api_version[0] == '\0')
    rc = engine_negotiate_version(header, engine->api_version, err);
  return rc;
}

static int get_object(sm_engine *e, const char *path, json_object **out, sm_error *err) {
  *out = NULL;
  json_object *obj = NULL;
  int rc = engine_call_json(e, "GET", path, NULL, 0, NULL, &obj, err);
  if (rc != 0) return rc;
  if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
    json_object_put(obj);
    return sm_error_set(err, SM_EPROTOCOL, "GET %s: the engine's answer is not a JSON object",
                        path);
  }
  *out = obj;
  return 0;
}

int sm_engine_version(sm_engine *engine, json_object **out, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  return get_object(engine, "/version", out, err);
}

int sm_engine_info(sm_engine *engine, json_object **out, sm_error *err) {
  if (engine == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  return get_object(engine, "/info", out, err);
}

int sm_engine_request_json(sm_engine *engine, const char *method, const char *path,
                           json_object *body, int *out_status, json_object **out,
                           sm_error *err) {
  if (out) *out = NULL;
  if (engine == NULL || method == NULL || path == NULL || path[0] != '/')
    return sm_error_set(err, SM_EINVAL, "request_json: needs a client, a method and a path "
                        "starting with '/'");
  for (const char *m = method; *m; m++)
    if (*m < 'A' || *m > 'Z') return sm_error_set(err, SM_EINVAL, "bad HTTP method '%s'", method);
  for (const char *p = path; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == 0x7f)
      return sm_error_set(err, SM_EINVAL, "request path contains a space or control byte");
  return engine_call_json(engine, method, path, body, 0, out_status, out, err);
}
