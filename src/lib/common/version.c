#include <sandman/version.h>

#ifndef SANDMAN_VERSION
#define SANDMAN_VERSION "0.0.0"
#endif

const char *sm_version(void) { return SANDMAN_VERSION; }
