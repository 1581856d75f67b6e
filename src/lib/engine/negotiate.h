/* API version negotiation, pure (negotiate.c). */
#ifndef SANDMAN_ENGINE_NEGOTIATE_H
#define SANDMAN_ENGINE_NEGOTIATE_H

#include <sandman/engine.h>

#define ENGINE_API_MAX_LEN 16

/* ---- version negotiation ---- */
/* Parses "MAJOR.MINOR" (nothing else). Returns 0 or -1. */
int engine_api_parse(const char *s, int *out_major, int *out_minor);
/* Compares two versions already known to parse: <0, 0, >0. */
int engine_api_compare(const char *a, const char *b);
/* The version to speak given the engine's Api-Version header (may be NULL):
 * min(engine, SM_ENGINE_MAX_API); SM_EUNSUPPORTED below SM_ENGINE_MIN_API,
 * SM_EPROTOCOL for a missing or malformed header. */
int engine_negotiate_version(const char *engine_api, char out[ENGINE_API_MAX_LEN],
                             sm_error *err);

#endif
