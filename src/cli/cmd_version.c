/* sandman version [--json]: our version, the engine's, the negotiated API;
 * exit 1 when no engine answers. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cmd_version(const cli_call *call) {
  const cli_globals *g = call->g;
  int as_json = cli_has(call, "json");
  sm_error err = SM_ERROR_INIT;
  sm_config *cfg = NULL;
  if (sm_config_load(&cfg, g->config_path, &err) != 0) return cli_fail(&err);
  sm_engine_options opts;
  cli_engine_options(g, cfg, &opts);
  sm_engine *engine = NULL;
  json_object *version = NULL;
  int rc = sm_engine_new(&engine, &opts, &err);
  if (rc == 0) rc = sm_engine_negotiate(engine, &err);
  if (rc == 0) rc = sm_engine_version(engine, &version, &err);

  const char *engine_version = NULL;
  json_object *v = NULL;
  if (rc == 0 && json_object_object_get_ex(version, "Version", &v))
    engine_version = json_object_get_string(v);
  const char *host = engine ? sm_engine_host(engine) : (g->host ? g->host : "");

  if (as_json) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "version", json_object_new_string(sm_version()));
    json_object *e = json_object_new_object();
    json_object_object_add(e, "version", engine_version ? json_object_new_string(engine_version) : NULL);
    json_object_object_add(e, "api_version", rc == 0 ? json_object_new_string(sm_engine_api_version(engine)) : NULL);
    json_object_object_add(e, "host", json_object_new_string(host));
    if (engine) json_object_object_add(e, "host_source", json_object_new_string(sm_engine_host_source(engine)));
    if (rc != 0) json_object_object_add(e, "error", json_object_new_string(err.message));
    json_object_object_add(o, "engine", e);
    cli_print_json(o);
    json_object_put(o);
  } else {
    printf("sandman %s\n", sm_version());
    if (rc == 0) {
      printf("engine  %s at %s (from %s)\n", engine_version ? engine_version : "?", host,
             sm_engine_host_source(engine));
      printf("api     %s\n", sm_engine_api_version(engine));
    } else {
      if (engine)
        printf("engine  not reachable: %s (address from %s)\n", err.message,
               sm_engine_host_source(engine));
      else
        printf("engine  not reachable: %s\n", err.message);
    }
  }
  json_object_put(version);
  sm_engine_free(engine);
  sm_config_free(cfg);
  /* Our own version was printed either way; like `docker version`, the
   * status says whether an engine answered, so scripts can wait for one. */
  return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_UNHEALTHY;
}
