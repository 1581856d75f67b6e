/* The engine address: DOCKER_HOST, TLS files and the docker CLI's rules,
 * resolved as a pure function of options and environment (address.c). */
#ifndef SANDMAN_ENGINE_ADDRESS_H
#define SANDMAN_ENGINE_ADDRESS_H

#include <limits.h>

#include <sandman/engine.h>
#include <sandman/error.h>

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

#endif
