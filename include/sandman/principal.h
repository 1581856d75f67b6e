/* sandman: principals, who a keyed sandbox belongs to. */
#ifndef SANDMAN_PRINCIPAL_H
#define SANDMAN_PRINCIPAL_H

#include <sandman/export.h>

#include <stddef.h>

#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_PRINCIPAL_CONTROL "control"
#define SM_PRINCIPAL_MAX 160 /* "worker:" and a key */
/* "worker:<key>" into out; SM_EINVAL when the key is empty or too long. */
SM_API int sm_principal_worker(const char *worker_key, char *out, size_t len, sm_error *err);
/* 1 when a call of principal `who` may use a keyed sandbox whose
 * io.sandman.principal label is `label` (NULL when it has none). */
SM_API int sm_principal_may_use(const char *who, const char *label);

#ifdef __cplusplus
}
#endif
#endif
