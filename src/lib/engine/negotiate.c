/* API version negotiation: speak the lower of the engine's version (the
 * Api-Version header of /_ping) and our newest, never below the oldest we
 * support. Pure functions, unit tested. */
#include <stdio.h>
#include <string.h>

#include "engine/negotiate.h"

static int parse_num(const char **p, int *out) {
  const char *s = *p;
  long v = 0;
  if (*s < '0' || *s > '9') return -1;
  while (*s >= '0' && *s <= '9') {
    v = v * 10 + (*s - '0');
    if (v > 100000) return -1;
    s++;
  }
  *out = (int)v;
  *p = s;
  return 0;
}

int engine_api_parse(const char *s, int *out_major, int *out_minor) {
  if (s == NULL) return -1;
  int major, minor;
  if (parse_num(&s, &major) != 0 || *s++ != '.' || parse_num(&s, &minor) != 0 || *s != '\0')
    return -1;
  if (out_major) *out_major = major;
  if (out_minor) *out_minor = minor;
  return 0;
}

int engine_api_compare(const char *a, const char *b) {
  int amaj = 0, amin = 0, bmaj = 0, bmin = 0;
  engine_api_parse(a, &amaj, &amin);
  engine_api_parse(b, &bmaj, &bmin);
  if (amaj != bmaj) return amaj < bmaj ? -1 : 1;
  if (amin != bmin) return amin < bmin ? -1 : 1;
  return 0;
}

int engine_negotiate_version(const char *engine_api, char out[ENGINE_API_MAX_LEN],
                             sm_error *err) {
  out[0] = '\0';
  if (engine_api == NULL || engine_api[0] == '\0')
    return sm_error_set(err, SM_EPROTOCOL,
                        "the engine did not report an API version (no Api-Version header "
                        "in its /_ping answer); is this a Docker Engine?");
  /* Trim the blanks a header value may carry. */
  char v[ENGINE_API_MAX_LEN];
  while (*engine_api == ' ' || *engine_api == '\t') engine_api++;
  size_t n = strlen(engine_api);
  while (n > 0 && (engine_api[n - 1] == ' ' || engine_api[n - 1] == '\t' ||
                   engine_api[n - 1] == '\r' || engine_api[n - 1] == '\n'))
    n--;
  int major, minor;
  if (n == 0 || n >= sizeof v) goto bad;
  memcpy(v, engine_api, n);
  v[n] = '\0';
  if (engine_api_parse(v, &major, &minor) != 0) goto bad;
  if (engine_api_compare(v, SM_ENGINE_MIN_API) < 0)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "the engine speaks API %s, older than %s, the oldest sandman "
                        "supports (Docker 20.10); upgrade the engine",
                        v, SM_ENGINE_MIN_API);
  if (engine_api_compare(v, SM_ENGINE_MAX_API) > 0)
    snprintf(out, ENGINE_API_MAX_LEN, "%s", SM_ENGINE_MAX_API);
  else
    snprintf(out, ENGINE_API_MAX_LEN, "%d.%d", major, minor);
  return 0;
bad:
  return sm_error_set(err, SM_EPROTOCOL,
                      "the engine reported a malformed API version '%.*s' (expected "
                      "MAJOR.MINOR)",
                      (int)(n > 40 ? 40 : n), engine_api);
}
