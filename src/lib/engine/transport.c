/* HTTP transport over libcurl: one easy handle per client, reused for every
 * call so that its connection stays alive between calls. Buffered bodies
 * are capped; streamed bodies go straight to the caller's callbacks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "engine/transport.h"

typedef struct xfer {
  sm_engine *e;
  const engine_request *req;
  engine_response *resp;
  int toobig;
  int sink_rc;
  int reader_rc;
} xfer;

void engine_request_tar(engine_request *req, const char *method, const char *path,
                        sm_read_fn reader, void *reader_ud) {
  memset(req, 0, sizeof *req);
  req->method = method;
  req->path = path;
  req->body_is_tar = 1;
  req->reader = reader;
  req->reader_ud = reader_ud;
}

void engine_response_init(engine_response *r, size_t max_body) {
  r->status = 0;
  common_buf_init(&r->body, max_body);
  r->api_version[0] = '\0';
  r->path_stat[0] = '\0';
}

void engine_response_dispose(engine_response *r) { common_buf_dispose(&r->body); }

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud) {
  xfer *x = ud;
  size_t n = size * nmemb;
  if (n == 0) return 0;
  if (x->req->sink != NULL) {
    long status = 0;
    curl_easy_getinfo(x->e->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
      int rc = x->req->sink(x->req->sink_ud, ptr, n);
      if (rc != 0) {
        x->sink_rc = rc < 0 ? rc : SM_EIO;
        return 0; /* anything but n aborts */
      }
      return n;
    }
  }
  if (common_buf_append(&x->resp->body, ptr, n) != 0) {
    x->toobig = 1;
    return 0;
  }
  return n;
}

/* Copies the value of header name (with its colon) into dst when line is
 * that header; a value longer than dst is left out whole. */
static void header_value(const char *line, size_t n, const char *name, char *dst, size_t cap) {
  size_t nl = strlen(name);
  if (n <= nl || strncasecmp(line, name, nl) != 0) return;
  const char *v = line + nl;
  size_t vlen = n - nl;
  while (vlen > 0 && (*v == ' ' || *v == '\t')) v++, vlen--;
  while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' ')) vlen--;
  if (vlen >= cap) return;
  memcpy(dst, v, vlen);
  dst[vlen] = '\0';
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud) {
  xfer *x = ud;
  size_t n = size * nmemb;
  header_value(ptr, n, "Api-Version:", x->resp->api_version, sizeof x->resp->api_version);
  header_value(ptr, n, "X-Docker-Container-Path-Stat:", x->resp->path_stat,
               sizeof x->resp->path_stat);
  return n;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *ud) {
  xfer *x = ud;
  size_t cap = size * nitems;
  ssize_t n = x->req->reader(x->req->reader_ud, buf, cap);
  if (n < 0) {
    x->reader_rc = (int)n;
    return CURL_READFUNC_ABORT;
  }
  if ((size_t)n > cap) {
    x->reader_rc = SM_EINVAL;
    return CURL_READFUNC_ABORT;
  }
  return (size_t)n;
}

int engine_unreachable_error(const sm_engine *e, int sys_errno, const char *detail,
                             sm_error *err) {
  const char *hint = "is dockerd running? start it with `sudo dockerd &` or scripts/setup.sh";
  if (sys_errno == EACCES || sys_errno == EPERM)
    hint = "permission denied: run as root or join the group that owns the socket "
           "(usually `docker`)";
  else if (e->addr.kind == ENGINE_ADDR_TCP)
    hint = "is dockerd listening there? check DOCKER_HOST, or start an engine with "
           "`sudo dockerd &` or scripts/setup.sh";
  sm_error_set(err, SM_EUNREACHABLE, "cannot reach the Docker engine at %s (%s); %s",
               e->addr.host, detail && detail[0] ? detail : "connection failed", hint);
  if (err) err->sys_errno = sys_errno;
  return SM_EUNREACHABLE;
}

static int is_tls_failure(CURLcode rc) {
  switch (rc) {
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_ENGINE_NOTFOUND:
  case CURLE_SSL_ENGINE_SETFAILED:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_SSL_SHUTDOWN_FAILED:
  case CURLE_USE_SSL_FAILED:
    return 1;
  default:
    return 0;
  }
}

static int map_curl_error(sm_engine *e, CURLcode rc, const xfer *x, const char *what,
                          sm_error *err) {
  const char *detail = e->curl_err[0] ? e->curl_err : curl_easy_strerror(rc);
  long os_errno = 0;
  curl_easy_getinfo(e->curl, CURLINFO_OS_ERRNO, &os_errno);
  if (x->toobig)
    return sm_error_set(err, SM_ETOOBIG,
                        "%s: the engine's answer is larger than the %zu-byte cap", what,
                        x->resp->body.max);
  if (x->sink_rc != 0 && (rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK)) {
    if (x->req->cb_err && x->req->cb_err->code == x->sink_rc) {
      if (err) *err = *x->req->cb_err;
      return x->sink_rc;
    }
    return sm_error_set(err, x->sink_rc, "%s: the output callback stopped the transfer (%s)",
                        what, sm_error_name(x->sink_rc));
  }
  if (x->reader_rc != 0) {
    if (x->req->cb_err && x->req->cb_err->code == x->reader_rc) {
      if (err) *err = *x->req->cb_err;
      return x->reader_rc;
    }
    return sm_error_set(err, x->reader_rc, "%s: the input callback failed (%s)", what,
                        sm_error_name(x->reader_rc));
  }
  if (is_tls_failure(rc) ||
      (e->addr.tls && (rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR) &&
       (strstr(detail, "SSL") || strstr(detail, "alert") || strstr(detail, "TLS")))) {
    return sm_error_set(err, SM_ETLS,
                        "%s: TLS with the engine at %s failed: %s (check the CA, certificate "
                        "and key in DOCKER_CERT_PATH)",
                        what, e->addr.host, detail);
  }
  switch (rc) {
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
    /* curl's text names "localhost port 80" for a unix socket: use errno. */
    if (e->addr.kind == ENGINE_ADDR_UNIX && os_errno != 0) detail = strerror((int)os_errno);
    return engine_unreachable_error(e, (int)os_errno, detail, err);
  case CURLE_OPERATION_TIMEDOUT: {
    /* Nothing sent: the connection never came up. */
    long sent = 0;
    curl_easy_getinfo(e->curl, CURLINFO_REQUEST_SIZE, &sent);
    if (sent == 0)
      return sm_error_set(err, SM_ETIMEOUT,
                          "%s: timed out after %ld ms connecting to the Docker engine at %s; "
                          "is it running and answering?",
                          what, e->connect_timeout_ms, e->addr.host);
    return sm_error_set(err, SM_ETIMEOUT, "%s: the engine at %s did not answer in time (%s)",
                        what, e->addr.host, detail);
  }
  case CURLE_GOT_NOTHING:
    return sm_error_set(err, SM_EPROTOCOL, "%s: the engine at %s closed the connection without "
                        "answering", what, e->addr.host);
  case CURLE_PARTIAL_FILE:
    return sm_error_set(err, SM_EPROTOCOL, "%s: the engine's answer was cut short (%s)", what,
                        detail);
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_BAD_CONTENT_ENCODING:
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
    return sm_error_set(err, SM_EPROTOCOL, "%s: the engine at %s sent a malformed answer (%s)",
                        what, e->addr.host, detail);
  case CURLE_OUT_OF_MEMORY:
    return sm_error_set(err, SM_ENOMEM, "%s: out of memory", what);
  case CURLE_RECV_ERROR:
  case CURLE_SEND_ERROR:
    sm_error_set(err, SM_EIO, "%s: connection to the engine at %s broke (%s)", what,
                 e->addr.host, detail);
    if (err) err->sys_errno = (int)os_errno;
    return SM_EIO;
  default:
    return sm_error_set(err, SM_EIO, "%s: talking to the engine at %s failed (%s)", what,
                        e->addr.host, detail);
  }
}

#define SETOPT(opt, val)                                                      \
  do {                                                                        \
    if ((crc = curl_easy_setopt(c, opt, val)) != CURLE_OK) goto setopt_fail; \
  } while (0)

int engine_perform(sm_engine *e, const engine_request *req, engine_response *resp,
                   sm_error *err) {
  CURL *c = e->curl;
  CURLcode crc = CURLE_OK;
  xfer x = {e, req, resp, 0, 0, 0};
  char what[160];
  const char *q = strchr(req->path, '?');
  snprintf(what, sizeof what, "%s %.*s", req->method,
           (int)(q ? (size_t)(q - req->path) : strlen(req->path)), req->path);

  common_buf url;
  common_buf_init(&url, 64 << 10);
  if (common_buf_printf(&url, "%s%s", e->base_url, req->path) != 0) {
    common_buf_dispose(&url);
    return sm_error_set(err, SM_EINVAL, "%s: request path too long", what);
  }
  common_buf_reset(&resp->body);
  resp->status = 0;
  resp->api_version[0] = '\0';
  resp->path_stat[0] = '\0';
  e->curl_err[0] = '\0';

  /* Reset keeps the connection cache: only the options start afresh. */
  curl_easy_reset(c);
  SETOPT(CURLOPT_URL, url.data);
  SETOPT(CURLOPT_ERRORBUFFER, e->curl_err);
  SETOPT(CURLOPT_NOSIGNAL, 1L);
  SETOPT(CURLOPT_TCP_NODELAY, 1L);
  SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  SETOPT(CURLOPT_USERAGENT, "sandman/" SANDMAN_VERSION);
  SETOPT(CURLOPT_CONNECTTIMEOUT_MS, e->connect_timeout_ms);
  long timeout = req->timeout_ms == 0 ? e->request_timeout_ms : req->timeout_ms;
  SETOPT(CURLOPT_TIMEOUT_MS, timeout > 0 ? timeout : 0L);
  if (timeout < 0 && req->stall_timeout) {
    long secs = (e->request_timeout_ms + 999) / 1000;
    SETOPT(CURLOPT_LOW_SPEED_LIMIT, 1L);
    SETOPT(CURLOPT_LOW_SPEED_TIME, secs > 0 ? secs : 1L);
  }
  SETOPT(CURLOPT_WRITEFUNCTION, on_write);
  SETOPT(CURLOPT_WRITEDATA, &x);
  SETOPT(CURLOPT_HEADERFUNCTION, on_header);
  SETOPT(CURLOPT_HEADERDATA, &x);
  if (e->addr.kind == ENGINE_ADDR_UNIX) {
    SETOPT(CURLOPT_UNIX_SOCKET_PATH, e->addr.socket_path);
  } else if (e->addr.tls) {
    SETOPT(CURLOPT_CAINFO, e->addr.ca);
    SETOPT(CURLOPT_SSLCERT, e->addr.cert);
    SETOPT(CURLOPT_SSLKEY, e->addr.key);
    SETOPT(CURLOPT_SSL_VERIFYPEER, 1L);
    SETOPT(CURLOPT_SSL_VERIFYHOST, 2L);
  }
  SETOPT(CURLOPT_HTTPHEADER, req->body_is_tar ? e->hdr_tar
                             : (req->body || req->reader) ? e->hdr_json
                                                          : e->hdr_none);
  if (req->reader != NULL) {
    /* Unknown length: HTTP/1.1 chunked, no "Expect: 100-continue". */
    SETOPT(CURLOPT_UPLOAD, 1L);
    SETOPT(CURLOPT_READFUNCTION, on_read);
    SETOPT(CURLOPT_READDATA, &x);
    SETOPT(CURLOPT_INFILESIZE_LARGE, (curl_off_t)-1);
    SETOPT(CURLOPT_CUSTOMREQUEST, req->method);
  } else if (strcmp(req->method, "POST") == 0) {
    SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(req->body ? req->body_len : 0));
    SETOPT(CURLOPT_POSTFIELDS, req->body ? req->body : "");
  } else if (strcmp(req->method, "HEAD") == 0) {
    SETOPT(CURLOPT_NOBODY, 1L);
  } else if (strcmp(req->method, "GET") != 0) {
    if (req->body) {
      SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
      SETOPT(CURLOPT_POSTFIELDS, req->body);
    }
    SETOPT(CURLOPT_CUSTOMREQUEST, req->method);
  }

  crc = curl_easy_perform(c);
  common_buf_dispose(&url);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
  if (crc != CURLE_OK) return map_curl_error(e, crc, &x, what, err);
  if (x.toobig) return map_curl_error(e, CURLE_WRITE_ERROR, &x, what, err);
  if (resp->status < 100 || resp->status > 599)
    return sm_error_set(err, SM_EPROTOCOL, "%s: the engine answered with HTTP status %ld", what,
                        resp->status);
  return 0;

setopt_fail:
  common_buf_dispose(&url);
  return sm_error_set(err, SM_EIO, "%s: configuring libcurl failed: %s", what,
                      curl_easy_strerror(crc));
}
