/* Fuzzes everything the engine client parses from outside: error bodies,
 * JSON bodies, progress streams, HTTP response heads, the Api-Version
 * header, and engine addresses. The first byte picks the parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/address.h"
#include "engine/negotiate.h"
#include "engine/response.h"

static void on_progress(void *ud, json_object *m) {
  (void)ud;
  if (m == NULL) abort();
  (void)json_object_to_json_string(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t sel = data[0];
  const char *p = (const char *)data + 1;
  size_t n = size - 1;
  sm_error err = SM_ERROR_INIT;
  switch (sel % 6) {
  case 0: {
    long status = 400 + (sel >> 3) % 200;
    int rc = engine_error_from_response(status, p, n, "GET /fuzz", &err);
    if (rc >= 0 || err.http_status != status || strlen(err.message) >= sizeof err.message)
      abort();
    break;
  }
  case 1: {
    json_object *o = NULL;
    int rc = engine_parse_json_body(p, n, "GET /fuzz", &o, &err);
    if (rc != 0 && o != NULL) abort();
    json_object_put(o);
    break;
  }
  case 2: {
    engine_progress pr;
    engine_progress_init(&pr, on_progress, NULL);
    size_t step = 1 + (sel >> 3);
    for (size_t off = 0; off < n; off += step) {
      size_t k = n - off < step ? n - off : step;
      if (engine_progress_feed(&pr, p + off, k) != 0) break;
    }
    engine_progress_finish(&pr, "image build", &err);
    engine_progress_dispose(&pr);
    break;
  }
  case 3: {
    int st = 0, ch = 0;
    size_t hl = 0;
    long long cl = 0;
    int rc = engine_http_parse_head(p, n, &st, &hl, &cl, &ch, NULL);
    if (rc == 1 && (hl > n || st < 100 || st > 999)) abort();
    break;
  }
  case 4:
  case 5: {
    char *s = malloc(n + 1);
    if (s == NULL) return 0;
    memcpy(s, p, n);
    s[n] = '\0';
    if (sel % 6 == 4) {
      char v[ENGINE_API_MAX_LEN];
      if (engine_negotiate_version(s, v, &err) == 0 &&
          engine_api_compare(v, SM_ENGINE_MIN_API) < 0)
        abort();
    } else {
      engine_address a;
      engine_address_env env = {NULL, (sel & 0x40) ? "1" : NULL, "/nonexistent", NULL, NULL, NULL};
      if (engine_address_resolve(s, -1, NULL, &env, &a, &err) == 0 &&
          a.kind != ENGINE_ADDR_UNIX && a.kind != ENGINE_ADDR_TCP)
        abort();
    }
    free(s);
    break;
  }
  }
  return 0;
}
