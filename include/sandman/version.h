#ifndef SANDMAN_VERSION_H
#define SANDMAN_VERSION_H

#include <sandman/export.h>
#ifdef __cplusplus
extern "C" {
#endif
/* sandman's own version, e.g. "0.1.0" (static string). */
SM_API const char *sm_version(void);
#ifdef __cplusplus
}
#endif
#endif
