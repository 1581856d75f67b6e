/* Tool groups, tool-name patterns and tool argv templates.
 *
 * A template turns a named tool call into an argv without a shell: an
 * argument that is exactly "{name}" is replaced by the call's parameter
 * "name" (one argument, or one per element for an array); every other
 * argument is copied as it is, braces included. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/util.h>

#include "common/cleanup.h"
#include "config/config_internal.h"

static const char *const group_fs[] = {"read_file", "write_file", "edit_file", "apply_patch",
                                       "list_dir",  "glob",       "grep",      "find",
                                       NULL};
static const char *const group_fs_read[] = {"read_file", "list_dir", "glob", "grep", "find", NULL};
static const char *const group_runtime[] = {"exec", "shell", "bash", "process", "python", "node",
                                            NULL};
static const char *const group_code[] = {"code_interpreter", "notebook", "run_tests", NULL};
static const char *const group_web[] = {"web_fetch", "web_search", "browser", NULL};
static const char *const group_messaging[] = {"message", "cron", "email", "notify",
                                              "sessions_send", NULL};

static const struct {
  const char *name;
  const char *const *members;
} groups[] = {
    {"group:fs", group_fs},           {"group:fs_read", group_fs_read},
    {"group:runtime", group_runtime}, {"group:code", group_code},
    {"group:web", group_web},         {"group:messaging", group_messaging},
};

/* Writable arrays: cfg_list holds char *, as it does for the lists it owns. */
static char b_runtime[] = "group:runtime", b_fs[] = "group:fs", b_code[] = "group:code",
            b_messaging[] = "group:messaging";
static char *builtin_worker_items[] = {b_runtime, b_fs, b_code};
static char *builtin_host_items[] = {b_messaging};
const cfg_list cfg_builtin_worker_tools = {3, builtin_worker_items};
const cfg_list cfg_builtin_host_tools = {1, builtin_host_items};

const char *const *config_group_members(const char *group) {
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
    if (strcmp(groups[i].name, group) == 0) return groups[i].members;
  return NULL;
}

const char *config_group_names(void) {
  return "group:fs, group:fs_read, group:runtime, group:code, group:web, group:messaging";
}

int config_pattern_match(const char *pattern, const char *tool) {
  if (strncmp(pattern, "group:", 6) == 0) {
    const char *const *m = config_group_members(pattern);
    for (; m && *m; m++)
      if (strcmp(*m, tool) == 0) return 1;
    return 0;
  }
  return sm_glob_match(pattern, tool);
}

const char *config_list_match(const cfg_list *list, const char *tool) {
  for (size_t i = 0; list && i < list->n; i++)
    if (config_pattern_match(list->items[i], tool)) return list->items[i];
  return NULL;
}

int config_valid_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= CFG_NAME_MAX || !isalnum((unsigned char)s[0])) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!isalnum(c) && c != '_' && c != '-' && c != '.') return 0;
  }
  return 1;
}

int config_placeholder(const char *arg, char *name, size_t len) {
  size_t n = strlen(arg);
  if (n < 3 || arg[0] != '{' || arg[n - 1] != '}') return 0;
  if (!isalpha((unsigned char)arg[1]) && arg[1] != '_') return 0;
  for (size_t i = 1; i < n - 1; i++) {
    unsigned char c = (unsigned char)arg[i];
    if (!isalnum(c) && c != '_') return 0;
  }
  if (n - 2 >= len) return 0;
  memcpy(name, arg + 1, n - 2);
  name[n - 2] = '\0';
  return 1;
}

/* Templates every configuration has unless tools.<name> redefines them. */
static const char *const tpl_shell[] = {"sh", "-c", "{command}", NULL};
static const char *const tpl_python[] = {"python3", "-c", "{code}", NULL};
static const struct {
  const char *name;
  const char *const *argv;
} builtin_tools[] = {{"shell", tpl_shell}, {"python", tpl_python}};

typedef struct argv_builder {
  char **v;
  size_t n, cap;
} argv_builder;

static void argv_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

static int argv_push(argv_builder *a, const char *s, sm_error *err) {
  if (a->n + 1 >= SM_CONFIG_MAX_ARGV)
    return sm_error_set(err, SM_EINVAL, "more than %d arguments", SM_CONFIG_MAX_ARGV - 1);
  if (a->n + 2 > a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 8;
    char **v = realloc(a->v, cap * sizeof *v);
    if (!v) return sm_error_set(err, SM_ENOMEM, "out of memory");
    a->v = v;
    a->cap = cap;
  }
  char *dup = strdup(s);
  if (!dup) return sm_error_set(err, SM_ENOMEM, "out of memory");
  a->v[a->n++] = dup;
  a->v[a->n] = NULL;
  return 0;
}

/* One parameter value as argument text: strings as they are, numbers and
 * booleans in their JSON spelling; anything else is refused. */
static int param_text(const char *tool, const char *name, json_object *v, const char **out,
                      sm_error *err) {
  switch (json_object_get_type(v)) {
    case json_type_string:
    case json_type_int:
    case json_type_double:
    case json_type_boolean: *out = json_object_get_string(v); return 0;
    default:
      return sm_error_set(err, SM_EINVAL,
                          "tool %s: parameter '%s' must be a string, number, boolean or a list "
                          "of them",
                          tool, name);
  }
}

static int expand(const char *tool, const char *const *tpl, size_t tpl_n, json_object *params,
                  argv_builder *a, sm_error *err) {
  for (size_t i = 0; i < tpl_n; i++) {
    char name[128];
    if (!config_placeholder(tpl[i], name, sizeof name)) {
      int rc = argv_push(a, tpl[i], err);
      if (rc) return rc;
      continue;
    }
    json_object *v = NULL;
    if (!params || !json_object_is_type(params, json_type_object) ||
        !json_object_object_get_ex(params, name, &v) || v == NULL)
      return sm_error_set(err, SM_EINVAL, "tool %s: missing parameter '%s'", tool, name);
    if (json_object_is_type(v, json_type_array)) {
      size_t n = json_object_array_length(v);
      for (size_t j = 0; j < n; j++) {
        const char *s = NULL;
        int rc = param_text(tool, name, json_object_array_get_idx(v, j), &s, err);
        if (rc == 0) rc = argv_push(a, s, err);
        if (rc) return rc;
      }
      continue;
    }
    const char *s = NULL;
    int rc = param_text(tool, name, v, &s, err);
    if (rc == 0) rc = argv_push(a, s, err);
    if (rc) return rc;
  }
  return 0;
}

int sm_config_tool_argv(const sm_config *cfg, const char *tool, json_object *params,
                        char ***out_argv, size_t *out_argc, sm_error *err) {
  *out_argv = NULL;
  *out_argc = 0;
  if (tool == NULL || *tool == '\0')
    return sm_error_set(err, SM_EINVAL, "no tool named for the template");
  const char *const *tpl = NULL;
  size_t tpl_n = 0;
  for (size_t i = 0; cfg && i < cfg->n_tools; i++) {
    if (strcmp(cfg->tools[i].name, tool) == 0) {
      tpl = (const char *const *)cfg->tools[i].argv;
      tpl_n = cfg->tools[i].argc;
      break;
    }
  }
  for (size_t i = 0; !tpl && i < sizeof builtin_tools / sizeof builtin_tools[0]; i++) {
    if (strcmp(builtin_tools[i].name, tool) == 0) {
      tpl = builtin_tools[i].argv;
      while (tpl[tpl_n]) tpl_n++;
    }
  }
  if (!tpl)
    return sm_error_set(err, SM_ENOTFOUND, "no tool '%s' is defined (add tools.%s.argv)", tool,
                        tool);
  argv_builder a = {0};
  int rc = expand(tool, tpl, tpl_n, params, &a, err);
  if (rc == 0 && a.n == 0) rc = sm_error_set(err, SM_EINVAL, "tool %s: empty argv", tool);
  if (rc == 0 && a.v[0][0] == '\0')
    rc = sm_error_set(err, SM_EINVAL, "tool %s: the command (first argument) is empty", tool);
  if (rc) {
    argv_free(a.v, a.n);
    return rc;
  }
  *out_argv = a.v;
  *out_argc = a.n;
  return 0;
}
