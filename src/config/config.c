/* Configuration: first cut. Finds the file, checks that it parses, and
 * resolves flags over the built-in settings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yaml.h>

#include <sandman/config.h>
#include <sandman/util.h>

struct sm_config {
  char *path;
};

const char *sm_setting_source_name(sm_setting_source s) {
  switch (s) {
    case SM_SOURCE_BUILT_IN: return "built_in";
    case SM_SOURCE_PROJECT_ENVIRONMENT: return "project_environment";
    case SM_SOURCE_DEFAULTS: return "defaults";
    case SM_SOURCE_AGENT: return "agent";
    case SM_SOURCE_FLAG: return "flag";
  }
  return "built_in";
}

int sm_config_load_string(sm_config **out, const char *name, const char *text, size_t len,
                          sm_error *err) {
  yaml_parser_t p;
  yaml_event_t ev;
  if (!yaml_parser_initialize(&p)) return sm_error_set(err, SM_ENOMEM, "yaml parser");
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  int rc = 0;
  for (;;) {
    if (!yaml_parser_parse(&p, &ev)) {
      rc = sm_error_set(err, SM_ECONFIG, "%s:%zu:%zu: syntax error: %s", name,
                        p.problem_mark.line + 1, p.problem_mark.column + 1,
                        p.problem ? p.problem : "invalid YAML");
      break;
    }
    int done = ev.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&ev);
    if (done) break;
  }
  yaml_parser_delete(&p);
  if (rc) return rc;
  sm_config *c = calloc(1, sizeof *c);
  if (!c || !(c->path = strdup(name))) {
    free(c);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  *out = c;
  return 0;
}

int sm_config_load(sm_config **out, const char *path, sm_error *err) {
  *out = NULL;
  if (path == NULL) {
    sm_config *c = calloc(1, sizeof *c);
    if (!c) return sm_error_set(err, SM_ENOMEM, "out of memory");
    *out = c;
    return 0;
  }
  FILE *f = fopen(path, "rb");
  if (!f) return sm_error_set_errno(err, SM_ECONFIG, errno, "%s: %s", path, strerror(errno));
  char *buf = malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
  fclose(f);
  if (!buf) return sm_error_set(err, SM_ENOMEM, "out of memory");
  int rc = sm_config_load_string(out, path, buf, n, err);
  free(buf);
  return rc;
}

void sm_config_free(sm_config *cfg) {
  if (!cfg) return;
  free(cfg->path);
  free(cfg);
}

const char *sm_config_path(const sm_config *cfg) { return cfg ? cfg->path : NULL; }
const char *sm_config_project_id(const sm_config *cfg) { (void)cfg; return NULL; }
const char *sm_config_project_environment(const sm_config *cfg) { (void)cfg; return NULL; }
const char *sm_config_engine_host(const sm_config *cfg) { (void)cfg; return NULL; }

static void set_source(sm_resolved *out, const char *name, sm_setting_source src) {
  if (out->n_sources >= SM_CONFIG_MAX_SETTINGS) return;
  snprintf(out->sources[out->n_sources].name, sizeof out->sources[0].name, "%s", name);
  out->sources[out->n_sources].source = src;
  out->n_sources++;
}

int sm_config_resolve(const sm_config *cfg, const char *agent, const char *tool,
                      const char *user, const sm_config_flags *flags, sm_resolved *out,
                      sm_error *err) {
  (void)cfg; (void)agent; (void)tool; (void)user;
  memset(out, 0, sizeof *out);
  sm_sandbox_settings_defaults(&out->settings);
  int fm = flags && flags->mode, fi = flags && flags->image, fn = flags && flags->network;
  if (fm) {
    const char *names[] = {"none", "per_tool", "per_run", "per_worker"};
    int found = 0;
    for (int i = 0; i < 4; i++)
      if (strcmp(flags->mode, names[i]) == 0) { out->settings.mode = (sm_mode)i; found = 1; }
    if (!found) return sm_error_set(err, SM_EINVAL, "--mode: '%s' is not a mode", flags->mode);
  }
  if (fi) snprintf(out->settings.image, sizeof out->settings.image, "%s", flags->image);
  if (fn) snprintf(out->settings.network, sizeof out->settings.network, "%s", flags->network);
  set_source(out, "mode", fm ? SM_SOURCE_FLAG : SM_SOURCE_BUILT_IN);
  set_source(out, "image", fi ? SM_SOURCE_FLAG : SM_SOURCE_BUILT_IN);
  set_source(out, "network", fn ? SM_SOURCE_FLAG : SM_SOURCE_BUILT_IN);
  out->allowed = 1;
  out->sandboxed = out->settings.mode != SM_MODE_NONE;
  return 0;
}

json_object *sm_resolved_to_json(const sm_resolved *r, const char *agent, const char *tool) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "agent", agent ? json_object_new_string(agent) : NULL);
  json_object_object_add(o, "tool", tool ? json_object_new_string(tool) : NULL);
  json_object_object_add(o, "allowed", json_object_new_boolean(r->allowed));
  json_object_object_add(o, "sandboxed", json_object_new_boolean(r->sandboxed));
  json_object_object_add(o, "scope_key", json_object_new_string(r->scope_key));
  json_object *s = json_object_new_object();
  for (size_t i = 0; i < r->n_sources; i++) {
    json_object *e = json_object_new_object();
    const char *v = "";
    if (strcmp(r->sources[i].name, "image") == 0) v = r->settings.image;
    else if (strcmp(r->sources[i].name, "network") == 0) v = r->settings.network;
    else if (strcmp(r->sources[i].name, "mode") == 0) {
      const char *names[] = {"none", "per_tool", "per_run", "per_worker"};
      v = names[r->settings.mode & 3];
    }
    json_object_object_add(e, "value", json_object_new_string(v));
    json_object_object_add(e, "source",
                           json_object_new_string(sm_setting_source_name(r->sources[i].source)));
    json_object_object_add(s, r->sources[i].name, e);
  }
  json_object_object_add(o, "settings", s);
  if (!r->allowed) json_object_object_add(o, "rule", json_object_new_string(r->rule));
  return o;
}

int sm_config_tool_argv(const sm_config *cfg, const char *tool, json_object *params,
                        char ***out_argv, size_t *out_argc, sm_error *err) {
  (void)cfg;
  const char *key;
  const char *prog;
  if (strcmp(tool, "shell") == 0) { prog = "sh"; key = "command"; }
  else if (strcmp(tool, "python") == 0) { prog = "python3"; key = "code"; }
  else return sm_error_set(err, SM_ENOTFOUND, "no tool '%s' is configured", tool);
  json_object *v = NULL;
  if (!params || !json_object_object_get_ex(params, key, &v))
    return sm_error_set(err, SM_EINVAL, "tool %s: missing parameter '%s'", tool, key);
  char **argv = calloc(4, sizeof *argv);
  if (!argv) return sm_error_set(err, SM_ENOMEM, "out of memory");
  argv[0] = strdup(prog);
  argv[1] = strdup("-c");
  argv[2] = strdup(json_object_get_string(v));
  if (!argv[0] || !argv[1] || !argv[2]) {
    for (int i = 0; i < 3; i++) free(argv[i]);
    free(argv);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  *out_argv = argv;
  *out_argc = 3;
  return 0;
}
