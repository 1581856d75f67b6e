/* sandman: configuration scopes and the keys of keyed sandboxes. */
#ifndef SANDMAN_SCOPE_H
#define SANDMAN_SCOPE_H

#include <sandman/export.h>

#include <stddef.h>

#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A configuration scope: which calls share one per_run/per_worker sandbox
 * instead of the run or worker key. Every scope includes the project. */
typedef enum {
  SM_SCOPE_NONE = 0,   /* the run id (per_run) or the worker id (per_worker) */
  SM_SCOPE_SHARED,     /* the agent's calls in the project */
  SM_SCOPE_USER,       /* the user's calls in the project */
  SM_SCOPE_USER_AGENT, /* the user's calls with that agent in the project */
} sm_scope;

/* Keys (scope keys, and everything named after them) are injective: a key
 * is its kind, then one ':'-separated field per value, each field escaped
 * (':' '%' and every byte outside the name set as %XX), so that different
 * values never give one key and keys stay readable ("run:proj:r1").
 * A worker principal ("worker:<key>") comes first as its own field
 * ("p:worker%3AK1:run:proj:r1"); NULL or "control" adds nothing. */
#define SM_KEY_MAX 2048
/* The key of a scope; SM_EINVAL when the scope needs a name the call lacks
 * (agent, user) or for SM_SCOPE_NONE. project NULL: "default". */
SM_API int sm_scope_key_build(sm_scope scope, const char *principal, const char *project,
                              const char *agent, const char *user, char *out, size_t len,
                              sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
