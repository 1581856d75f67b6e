/* Engine address and TLS settings, resolved as the docker CLI does:
 * --host > $DOCKER_HOST > $DOCKER_CONTEXT > the CLI's current context
 * (~/.docker/config.json "currentContext") > unix:///var/run/docker.sock;
 * TLS when DOCKER_TLS_VERIFY is non-empty, with ca.pem, cert.pem and
 * key.pem from DOCKER_CERT_PATH (default ~/.docker), or from a context's
 * own TLS folder. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/sha.h>

#include "engine/address.h"

void engine_address_env_from_process(engine_address_env *env) {
  env->docker_host = getenv("DOCKER_HOST");
  env->docker_tls_verify = getenv("DOCKER_TLS_VERIFY");
  env->docker_cert_path = getenv("DOCKER_CERT_PATH");
  env->docker_context = getenv("DOCKER_CONTEXT");
  env->docker_config = getenv("DOCKER_CONFIG");
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

#define CONTEXT_FILE_MAX (64u << 10)

/* A small JSON file (config.json, meta.json), or NULL with *missing set
 * when it does not exist. */
static json_object *read_json(const char *path, int *missing, sm_error *err) {
  *missing = 0;
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    if (errno == ENOENT || errno == ENOTDIR) {
      *missing = 1;
      return NULL;
    }
    sm_error_set_errno(err, SM_EINVAL, errno, "reading %s", path);
    return NULL;
  }
  char *buf = malloc(CONTEXT_FILE_MAX + 1);
  size_t n = buf ? fread(buf, 1, CONTEXT_FILE_MAX + 1, f) : 0;
  fclose(f);
  json_object *j = NULL;
  if (buf == NULL) sm_error_set(err, SM_ENOMEM, NULL);
  else if (n > CONTEXT_FILE_MAX) sm_error_set(err, SM_EINVAL, "%s is larger than 64 KiB", path);
  else {
    buf[n] = '\0';
    j = json_tokener_parse(buf);
    if (j == NULL || !json_object_is_type(j, json_type_object)) {
      json_object_put(j);
      j = NULL;
      sm_error_set(err, SM_EINVAL, "%s is not a JSON object", path);
    }
  }
  free(buf);
  return j;
}

static const char *json_path_str(json_object *o, const char *a, const char *b, const char *c) {
  json_object *v = o;
  const char *keys[] = {a, b, c};
  for (int i = 0; i < 3 && keys[i] && v; i++)
    if (!json_object_object_get_ex(v, keys[i], &v)) return NULL;
  return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The docker CLI keeps a context under contexts/meta/<sha256 of its name>/. */
static void context_dir(const char *config, const char *kind, const char *name, char *out,
                        size_t len) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256((const unsigned char *)name, strlen(name), md);
  char hex[2 * SHA256_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  snprintf(out, len, "%s/contexts/%s/%s", config, kind, hex);
}

/* The context's engine address into host (and its TLS folder into tls_dir,
 * "" when it has none). "default" is the docker CLI's name for no context. */
static int context_endpoint(const char *config, const char *name, const char *why, char *host,
                            size_t host_len, char *tls_dir, size_t tls_len, sm_error *err) {
  char dir[PATH_MAX], path[PATH_MAX + 16];
  context_dir(config, "meta", name, dir, sizeof dir);
  snprintf(path, sizeof path, "%s/meta.json", dir);
  int missing = 0;
  json_object *meta = read_json(path, &missing, err);
  if (meta == NULL)
    return missing ? sm_error_set(err, SM_EINVAL,
                                  "docker context '%s' (%s) does not exist: no %s; see `docker "
                                  "context ls`",
                                  name, why, path)
                   : err->code;
  const char *h = json_path_str(meta, "Endpoints", "docker", "Host");
  json_object *skip = NULL, *docker = NULL;
  json_object *eps = NULL;
  if (json_object_object_get_ex(meta, "Endpoints", &eps) &&
      json_object_object_get_ex(eps, "docker", &docker))
    json_object_object_get_ex(docker, "SkipTLSVerify", &skip);
  int rc = 0;
  if (h == NULL || h[0] == '\0')
    rc = sm_error_set(err, SM_EINVAL, "docker context '%s' (%s) has no docker endpoint in %s",
                      name, why, path);
  else if (skip && json_object_get_boolean(skip))
    rc = sm_error_set(err, SM_EINVAL,
                      "docker context '%s' (%s) skips TLS verification; sandman always "
                      "verifies the engine: give the context its CA or use --host",
                      name, why);
  else if (strlen(h) >= host_len)
    rc = sm_error_set(err, SM_EINVAL, "docker context '%s': engine address too long", name);
  else
    snprintf(host, host_len, "%s", h);
  json_object_put(meta);
  if (rc) return rc;
  char tls[PATH_MAX];
  context_dir(config, "tls", name, tls, sizeof tls);
  snprintf(path, sizeof path, "%s/docker/ca.pem", tls);
  tls_dir[0] = '\0';
  if (access(path, F_OK) == 0) snprintf(tls_dir, tls_len, "%s/docker", tls);
  return 0;
}

/* Where the docker CLI would find the engine when neither --host nor
 * DOCKER_HOST says: DOCKER_CONTEXT, else config.json's currentContext.
 * host[0] stays '\0' when no context applies. */
static int context_host(const engine_address_env *env, char *host, size_t host_len,
                        char *tls_dir, size_t tls_len, char *source, size_t src_len,
                        sm_error *err) {
  host[0] = '\0';
  if (env == NULL) return 0;
  char config[PATH_MAX];
  if (env->docker_config && env->docker_config[0])
    snprintf(config, sizeof config, "%s", env->docker_config);
  else if (env->home && env->home[0])
    snprintf(config, sizeof config, "%s/.docker", env->home);
  else
    config[0] = '\0';
  const char *name = env->docker_context;
  const char *why = "DOCKER_CONTEXT";
  json_object *cfg = NULL;
  char cfg_path[PATH_MAX + 16];
  if ((name == NULL || name[0] == '\0') && config[0]) {
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", config);
    int missing = 0;
    cfg = read_json(cfg_path, &missing, err);
    if (cfg == NULL && !missing) return err->code;
    name = cfg ? json_path_str(cfg, "currentContext", NULL, NULL) : NULL;
    why = "the docker CLI's current context";
  }
  int rc = 0;
  if (name && name[0] && strcmp(name, "default") != 0) {
    if (config[0] == '\0')
      rc = sm_error_set(err, SM_EINVAL,
                        "docker context '%s' (%s): neither DOCKER_CONFIG nor HOME is set", name,
                        why);
    else
      rc = context_endpoint(config, name, why, host, host_len, tls_dir, tls_len, err);
    if (rc == 0) snprintf(source, src_len, "docker context %s (%s)", name, why);
  }
  json_object_put(cfg);
  return rc;
}

int engine_address_resolve(const char *host_opt, int tls_opt, const char *cert_opt,
                           const engine_address_env *env, engine_address *out,
                           sm_error *err) {
  memset(out, 0, sizeof *out);
  const char *host = host_opt;
  char ctx_host[ENGINE_HOST_MAX], ctx_tls[PATH_MAX] = "";
  snprintf(out->source, sizeof out->source, "the host option");
  if (host == NULL || host[0] == '\0') {
    host = env ? env->docker_host : NULL;
    snprintf(out->source, sizeof out->source, "DOCKER_HOST");
  }
  if (host == NULL || host[0] == '\0') {
    int rc = context_host(env, ctx_host, sizeof ctx_host, ctx_tls, sizeof ctx_tls, out->source,
                          sizeof out->source, err);
    if (rc) return rc;
    host = ctx_host[0] ? ctx_host : NULL;
    /* A context with TLS files speaks TLS with them, as the docker CLI does. */
    if (ctx_tls[0] && tls_opt < 0) tls_opt = 1;
    if (ctx_tls[0] && (cert_opt == NULL || cert_opt[0] == '\0')) cert_opt = ctx_tls;
  }
  if (host == NULL || host[0] == '\0') {
    host = SM_ENGINE_DEFAULT_HOST;
    snprintf(out->source, sizeof out->source, "the default socket");
  }
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
