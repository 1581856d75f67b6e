/* Fuzz target for the configuration loader: any bytes must either load or
 * fail with SM_ECONFIG and a "NAME:LINE:COLUMN: " message; a loaded config
 * must resolve, serialise and expand templates without crashing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/sandman.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const agents[] = {NULL, "family", "personal", "a", "bot"};
static const char *const tools[] = {NULL, "shell", "read_file", "web_fetch", "message", "python"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_config_load_string(&cfg, "fuzz.yaml", (const char *)data, size, &err);
  if (rc != 0) {
    if (rc != SM_ECONFIG && rc != SM_ENOMEM) abort();
    if (rc == SM_ECONFIG && strncmp(err.message, "fuzz.yaml:", 10) != 0) abort();
    if (cfg) abort();
    return 0;
  }
  static sm_resolved r;
  for (size_t a = 0; a < sizeof agents / sizeof agents[0]; a++) {
    for (size_t t = 0; t < sizeof tools / sizeof tools[0]; t++) {
      if (sm_config_resolve(cfg, agents[a], tools[t], "u1", NULL, &r, &err) != 0) continue;
      if (r.sandboxed != (r.settings.mode != SM_MODE_NONE)) abort();
      if (!r.allowed && r.rule[0] == '\0') abort();
      json_object *j = sm_resolved_to_json(&r, agents[a], tools[t]);
      if (j) {
        (void)json_object_to_json_string(j);
        json_object_put(j);
      }
    }
  }
  json_object *params = json_object_new_object();
  json_object_object_add(params, "command", json_object_new_string("x"));
  json_object_object_add(params, "code", json_object_new_string("y"));
  for (size_t t = 1; t < sizeof tools / sizeof tools[0]; t++) {
    char **argv = NULL;
    size_t argc = 0;
    if (sm_config_tool_argv(cfg, tools[t], params, &argv, &argc, &err) == 0) {
      for (size_t i = 0; i < argc; i++) free(argv[i]);
      free(argv);
    }
  }
  json_object_put(params);
  sm_config_free(cfg);
  return 0;
}
