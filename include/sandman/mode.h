/* sandman: the sandbox modes (docs/modes.md): which calls share a sandbox. */
#ifndef SANDMAN_MODE_H
#define SANDMAN_MODE_H

#include <sandman/export.h>

#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SM_MODE_NONE = 0,
  SM_MODE_PER_TOOL = 1,
  SM_MODE_PER_RUN = 2,
  SM_MODE_PER_WORKER = 3,
} sm_mode;

SM_API const char *sm_mode_name(sm_mode mode); /* "none", "per_tool", ... */
SM_API int sm_mode_parse(const char *s, sm_mode *out, sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
