/* sandman: which environment variable names may reach a tool. */
#ifndef SANDMAN_ENV_H
#define SANDMAN_ENV_H

#include <sandman/export.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The environment policy: one rule, used by `sandman run` (-e,
 * --env-passthrough) and by the runner (a request's env, env.passthrough),
 * for every name that could reach a tool. */
typedef enum {
  SM_ENV_NAME_OK = 0,
  SM_ENV_NAME_INVALID, /* empty, longer than 255 bytes, or holding '=' or NUL */
  SM_ENV_NAME_BLOCKED, /* SANDMAN_* (the token variable included) and DOCKER_* (the
                        * engine's address, TLS and credential variables): never
                        * reach a tool, whoever names them */
  SM_ENV_NAME_HOME,    /* HOME and the XDG base directories: the home contract;
                        * only `sandman run -e` may set them */
  SM_ENV_NAME_FIXED,   /* PATH, USER, TMPDIR: sandman's (or the image's) unless a
                        * caller sets them by name; never from a passthrough glob */
} sm_env_name_class;

/* Classifies name[0..len) (name need not be NUL-terminated there). */
SM_API sm_env_name_class sm_env_name_classify(const char *name, size_t len);
/* Why a name of that class is refused, for error messages (static). */
SM_API const char *sm_env_name_refusal(sm_env_name_class c);

#ifdef __cplusplus
}
#endif
#endif
