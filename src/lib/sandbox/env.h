/* Internal to src/lib/sandbox: the scrubbed environment of a call (env.c). */
#ifndef SANDMAN_SANDBOX_ENV_H
#define SANDMAN_SANDBOX_ENV_H

#include <stddef.h>

#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>

#include "common/strv.h"

/* Limits on what a call may put in its environment. */
#define SM_ENV_MAX_VARS 512
#define SM_ENV_MAX_BYTES (256 * 1024)

typedef struct sandbox_env_spec {
  const char *path;     /* PATH (NULL: not set, the container's applies) */
  const char *user;     /* USER (NULL: not set, the container's applies) */
  const char *home;     /* HOME; XDG_CONFIG/DATA/STATE_HOME live under it */
  const char *tmpdir;   /* TMPDIR; XDG_CACHE_HOME lives under it */
  const char *const *host_env;        /* the host's environ (LANG/LC_*, passthrough) */
  const sm_string_list *passthrough;  /* globs of host names */
  const char *const *explicit_env;    /* -e "K=V" or "K" (host value) */
  size_t n_explicit;
  const char *const *secret_env;      /* leased credentials, last */
  size_t n_secret;
  const char *marker;   /* "SANDMAN_CALL=<token>" or NULL */
} sandbox_env_spec;

/* The scrubbed environment of one call, in order: fixed variables,
 * LANG/LC_* of the host, passthrough globs (never SANDMAN_*, never one of
 * the fixed names), -e, secrets, the call marker. A later entry replaces an
 * earlier one of the same name. */
int sandbox_env_build(const sandbox_env_spec *spec, common_strv *out, sm_error *err);
/* What a request gives the spec: the host's environ, its passthrough globs,
 * its -e entries and its leased credentials (the rest is the caller's). */
void sandbox_env_from_request(sandbox_env_spec *spec, const sm_run_request *req);

#endif
