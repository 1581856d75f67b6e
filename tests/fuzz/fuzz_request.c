/* Fuzz target: request bodies of the runner's HTTP API (execute, lease and
 * sandbox create bodies, the worker key read before them, base64 stdin), then the
 * scrubbing of answers with what parsed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include <sandman/env.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *body = (const char *)data;
  sm_error err = SM_ERROR_INIT;
  server_execute_params p;
  if (server_parse_execute(body, size, 4096, &p, &err) == 0) {
    /* What parsed is well formed. */
    if (p.argv && (p.argc == 0 || p.argv[p.argc] != NULL || p.argv[0][0] == '\0')) abort();
    if (p.argv && p.command) abort();
    for (size_t i = 0; i < p.n_env; i++) {
      const char *eq = strchr(p.env[i], '=');
      if (eq == NULL) abort();
      sm_env_name_class cls = sm_env_name_classify(p.env[i], (size_t)(eq - p.env[i]));
      /* Never sandman's, the engine's or the home contract's names. */
      if (cls != SM_ENV_NAME_OK && cls != SM_ENV_NAME_FIXED) abort();
      for (size_t j = 0; j < i; j++) /* each name once */
        if (strncmp(p.env[j], p.env[i], (size_t)(eq - p.env[i]) + 1) == 0) abort();
    }
    if (p.stdin_len > 4096) abort();
    /* Use the env values as secrets to scrub the body with. */
    server_secret_env s = {p.env, p.n_env};
    char *copy = malloc(size + 1);
    if (copy) {
      memcpy(copy, data, size);
      copy[size] = '\0';
      size_t len = size;
      server_redact(&copy, &len, &s);
      if (strlen(copy) > len) abort();
      free(copy);
    }
    server_execute_params_dispose(&p);
  }
  char key[SM_SERVER_KEY_MAX + 1];
  if (server_json_has_worker_key(body, size, key) && !server_name_valid(key, SM_SERVER_KEY_MAX))
    abort();
  server_lease_params lp;
  if (server_parse_lease(body, size, &lp, &err) == 0) {
    if (lp.n_services < 1 || lp.n_services > SM_LEASE_SERVICES_MAX) abort();
    if (lp.max_uses < 1 || lp.max_uses > SM_LEASE_USES_MAX) abort();
    if (!(lp.ttl_s >= 1 && lp.ttl_s <= SM_LEASE_TTL_MAX)) abort();
  }
  server_create_params cp;
  if (server_parse_create(body, size, &cp, &err) == 0) {
    /* A sandbox's labels: each one a label the sandbox module takes. */
    if (cp.n_labels > SM_CREATE_LABELS_MAX) abort();
    for (size_t i = 0; i < cp.n_labels; i++)
      if (sm_sandbox_label_check(cp.labels[i], NULL) != 0) abort();
    if (cp.template_name && cp.image) abort();
    if (cp.memory < 0 || cp.disk < 0 || cp.pids < 0 || cp.cpu < 0) abort();
    server_create_params_dispose(&cp);
  }
  unsigned char *dec = NULL;
  size_t n = 0;
  if (server_base64_decode(body, size, 1 << 20, &dec, &n, NULL) == 0) {
    if (n > size) abort();
    free(dec);
  }
  return 0;
}
