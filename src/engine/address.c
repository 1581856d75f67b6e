/* Engine address and TLS settings, resolved as the docker CLI does:
 * --host > $DOCKER_HOST > unix:///var/run/docker.sock; TLS when
 * DOCKER_TLS_VERIFY is non-empty, with ca.pem, cert.pem and key.pem from
 * DOCKER_CERT_PATH (default ~/.docker). */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/internal.h"

void engine_address_env_from_process(engine_address_env *env) {
  env->docker_host = getenv("DOCKER_HOST");
  env->docker_tls_verify = getenv("DOCKER_TLS_VERIFY");
  env->docker_cert_path = getenv("DOCKER_CERT_PATH");
  env->home = getenv("HOME");
  if (env->home == NULL || env->home[0] == '\0') {
    struct passwd *pw = getpwuid(getuid());
    env->home = pw ? pw->pw_dir : NULL;
  }
}

static int parse_unix(const char *host, const char *rest, engine_address *out, sm_error *err) {
  size_t n = strlen(rest);
  if (n == 0 || rest[0] != '/')
    return sm_error_set(err, SM_EINVAL,
                        "bad engine address '%s': a unix socket needs an absolute path, "
                        "e.g. unix:///var/run/docker.sock",
                        host);
  if (n >= sizeof out->socket_path)
    return sm_error_set(err, SM_EINVAL,
                        "bad engine address '%s': the socket path is longer than %zu bytes",
                        host, sizeof out->socket_path - 1);
  out->kind = ENGINE_ADDR_UNIX;
  memcpy(out->socket_path, rest, n + 1);
  snprintf(out->host, sizeof out->host, "unix://%s", rest);
  return 0;
}

static int parse_port(const char *s, int *out) {
  if (*s == '\0') return -1;
  long v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
    if (v > 65535) return -1;
  }
  if (v == 0) return -1;
  *out = (int)v;
  return 0;
}

static int parse_tcp(const char *host, const char *rest, int tls, engine_address *out,
                     sm_error *err) {
  char hostport[ENGINE_HOST_MAX];
  size_t n = strlen(rest);
  /* A trailing "/" is harmless (docker accepts it); any other path is not. */
  if (n > 0 && rest[n - 1] == '/') n--;
  if (n == 0 || n >= sizeof hostport || memchr(rest, '/', n) != NULL ||
      memchr(rest, '?', n) != NULL || memchr(rest, '@', n) != NULL)
    return sm_error_set(err, SM_EINVAL,
                        "bad engine address '%s': expected tcp://HOST:PORT", host);
  memcpy(hostport, rest, n);
  hostport[n] = '\0';

  const char *name = hostport;
  const char *port = NULL;
  if (hostport[0] == '[') { /* [IPv6]:port */
    char *close = strchr(hostport, ']');
    if (close == NULL || close == hostport + 1)
      return sm_error_set(err, SM_EINVAL, "bad engine address '%s': unclosed '[' in host",
                          host);
    *close = '\0';
    name = hostport + 1;
    if (close[1] == ':') port = close + 2;
    else if (close[1] != '\0')
      return sm_error_set(err, SM_EINVAL,
                          "bad engine address '%s': expected tcp://[ADDRESS]:PORT", host);
  } else {
    char *colon = strchr(hostport, ':');
    if (colon != NULL) {
      if (strchr(colon + 1, ':') != NULL)
        return sm_error_set(err, SM_EINVAL,
                            "bad engine address '%s': write IPv6 addresses as "
                            "tcp://[ADDRESS]:PORT",
                            host);
      *colon = '\0';
      port = colon + 1;
    }
  }
  if (name[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "bad engine address '%s': no host name", host);
  for (const char *p = name; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c <= ' ' || c >= 0x7f || c == '%' || c == '#')
      return sm_error_set(err, SM_EINVAL,
                          "bad engine address '%s': invalid character in host name", host);
  }
  if (strlen(name) >= sizeof out->tcp_host)
    return sm_error_set(err, SM_EINVAL, "bad engine address '%s': host name too long", host);
  int portnum = tls ? 2376 : 2375; /* docker's defaults */
  if (port != NULL && parse_port(port, &portnum) != 0)
    return sm_error_set(err, SM_EINVAL,
                        "bad engine address '%s': the port must be a number from 1 to 65535",
                        host);
  out->kind = ENGINE_ADDR_TCP;
  snprintf(out->tcp_host, sizeof out->tcp_host, "%s", name);
  out->port = portnum;
  if (strchr(name, ':') != NULL)
    snprintf(out->host, sizeof out->host, "tcp://[%s]:%d", name, portnum);
  else
    snprintf(out->host, sizeof out->host, "tcp://%s:%d", name, portnum);
  return 0;
}

static int tls_file(char *dst, size_t dst_len, const char *dir, const char *file,
                    const char *why, sm_error *err) {
  int n = snprintf(dst, dst_len, "%s/%s", dir, file);
  if (n < 0 || (size_t)n >= dst_len)
    return sm_error_set(err, SM_EINVAL, "TLS certificate directory path too long: %s", dir);
  if (access(dst, R_OK) != 0) {
    int e = errno;
    return sm_error_set_errno(err, SM_EINVAL, e,
                              "TLS is on (%s) but the file %s cannot be read; put ca.pem, "
                              "cert.pem and key.pem there or set DOCKER_CERT_PATH",
                              why, dst);
  }
  return 0;
}

int engine_address_resolve(const char *host_opt, int tls_opt, const char *cert_opt,
                           const engine_address_env *env, engine_address *out,
                           sm_error *err) {
  memset(out, 0, sizeof *out);
  const char *host = host_opt;
  if (host == NULL || host[0] == '\0') host = env ? env->docker_host : NULL;
  if (host == NULL || host[0] == '\0') host = SM_ENGINE_DEFAULT_HOST;
  if (strlen(host) >= ENGINE_HOST_MAX - 16)
    return sm_error_set(err, SM_EINVAL, "engine address too long (%zu bytes)", strlen(host));

  /* The docker CLI turns TLS on for any non-empty DOCKER_TLS_VERIFY. */
  int tls = tls_opt;
  const char *why = "tls_verify option";
  if (tls < 0) {
    tls = env && env->docker_tls_verify && env->docker_tls_verify[0] != '\0';
    why = "DOCKER_TLS_VERIFY is set";
  }

  int rc;
  if (strncmp(host, "unix://", 7) == 0) {
    rc = parse_unix(host, host + 7, out, err);
    if (rc != 0) return rc;
    /* TLS only applies to TCP; an exported DOCKER_TLS_VERIFY must not break
     * a unix socket, an explicit request for it is a mistake. */
    if (tls_opt == 1)
      return sm_error_set(err, SM_EINVAL,
                          "TLS was requested but the engine address '%s' is a unix socket; "
                          "use tcp://HOST:PORT",
                          host);
    return 0;
  }
  if (strncmp(host, "tcp://", 6) == 0) {
    rc = parse_tcp(host, host + 6, tls, out, err);
    if (rc != 0) return rc;
  } else {
    const char *sep = strstr(host, "://");
    if (sep != NULL)
      return sm_error_set(err, SM_EINVAL,
                          "unsupported engine address scheme '%.*s://' in '%s': use "
                          "unix:///path/to/docker.sock or tcp://HOST:PORT",
                          (int)(sep - host), host, host);
    return sm_error_set(err, SM_EINVAL,
                        "bad engine address '%s': use unix:///path/to/docker.sock or "
                        "tcp://HOST:PORT",
                        host);
  }
  if (!tls) return 0;

  char dir[PATH_MAX];
  const char *cp = cert_opt;
  if (cp == NULL || cp[0] == '\0') cp = env ? env->docker_cert_path : NULL;
  if (cp != NULL && cp[0] != '\0') {
    snprintf(dir, sizeof dir, "%s", cp);
  } else {
    if (env == NULL || env->home == NULL || env->home[0] == '\0')
      return sm_error_set(err, SM_EINVAL,
                          "TLS is on (%s) but neither DOCKER_CERT_PATH nor HOME is set, so "
                          "there is no certificate directory",
                          why);
    snprintf(dir, sizeof dir, "%s/.docker", env->home);
  }
  out->tls = 1;
  if ((rc = tls_file(out->ca, sizeof out->ca, dir, "ca.pem", why, err)) != 0) return rc;
  if ((rc = tls_file(out->cert, sizeof out->cert, dir, "cert.pem", why, err)) != 0) return rc;
  if ((rc = tls_file(out->key, sizeof out->key, dir, "key.pem", why, err)) != 0) return rc;
  return 0;
}
