/* The command-line parser, driven by the table (commands.c): long and short
 * options, `--name=value`, `--` and values checked by kind, so that every
 * command reports a bad value, an unknown flag or a missing argument the
 * same way (exit 2, the flag named, the nearest spelling suggested). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- table lookups ---- */

const cli_command *cli_command_find(const char *name) {
  for (size_t i = 0; i < cli_n_commands; i++)
    if (strcmp(cli_commands[i].name, name) == 0) return &cli_commands[i];
  return NULL;
}

const cli_command *cli_command_target(const cli_command *cmd) {
  if (cmd && cmd->alias_of) {
    const cli_command *t = cli_command_find(cmd->alias_of);
    if (t) return t;
  }
  return cmd;
}

int cli_command_is_group(const cli_command *cmd) {
  return cmd->fn == NULL && cmd->alias_of == NULL && cmd->name[0] != '\0';
}

const char *cli_command_leaf(const cli_command *cmd) {
  const char *sp = strrchr(cmd->name, ' ');
  return sp ? sp + 1 : cmd->name;
}

int cli_command_in_group(const cli_command *sub, const char *group) {
  size_t gl = strlen(group);
  if (sub->name[0] == '\0') return 0;
  if (gl == 0) return strchr(sub->name, ' ') == NULL;
  return strncmp(sub->name, group, gl) == 0 && sub->name[gl] == ' ' &&
         strchr(sub->name + gl + 1, ' ') == NULL;
}

size_t cli_flag_count(const cli_command *cmd) {
  cmd = cli_command_target(cmd);
  size_t n = 0;
  while (cmd->flags && cmd->flags[n].name) n++;
  return n + 1; /* --help */
}

const cli_flag *cli_flag_at(const cli_command *cmd, size_t i) {
  cmd = cli_command_target(cmd);
  size_t n = cli_flag_count(cmd) - 1;
  return i < n ? &cmd->flags[i] : &cli_help_flag;
}

const cli_flag *cli_flag_find(const cli_command *cmd, const char *name) {
  size_t n = cli_flag_count(cmd);
  for (size_t i = 0; i < n; i++) {
    const cli_flag *f = cli_flag_at(cmd, i);
    if (strcmp(f->name, name) == 0) return f;
  }
  return NULL;
}

/* A hidden spelling's canonical row. */
static const cli_flag *canonical(const cli_command *cmd, const cli_flag *f) {
  if (f->alias_of) {
    const cli_flag *t = cli_flag_find(cmd, f->alias_of);
    if (t) return t;
  }
  return f;
}

static const cli_flag *flag_by_short(const cli_command *cmd, char c) {
  size_t n = cli_flag_count(cmd);
  for (size_t i = 0; i < n; i++) {
    const cli_flag *f = cli_flag_at(cmd, i);
    if (f->short_name == c) return f;
  }
  return NULL;
}

const char *cli_nearest(const char *word, const char *const *candidates, size_t n) {
  const char *best = NULL;
  size_t best_d = (size_t)-1, wl = strlen(word);
  for (size_t i = 0; i < n; i++) {
    const char *c = candidates[i];
    size_t d = sm_edit_distance(word, c);
    /* A unique prefix is as good as one typo ("--time" for "--timeout"). */
    if (wl >= 3 && strncmp(c, word, wl) == 0 && d > 1) d = 1;
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  /* Close enough to be a typo: at most a third of the word, and 1 for short ones. */
  size_t limit = wl <= 4 ? 1 : wl / 3 + 1;
  return best && best_d <= limit ? best : NULL;
}

/* ---- usage errors ---- */

int cli_wants_json(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) break;
    if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "--format=json") == 0) return 1;
    if (strcmp(argv[i], "--format") == 0 && i + 1 < argc && strcmp(argv[i + 1], "json") == 0)
      return 1;
  }
  return 0;
}

int cli_usage_error(const cli_command *cmd, int json, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (json) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "ok", json_object_new_boolean(0));
    json_object_object_add(o, "exit_code", json_object_new_int(CLI_EXIT_USAGE));
    json_object_object_add(o, "failure_kind", json_object_new_string("usage"));
    json_object_object_add(o, "error", json_object_new_string(msg));
    cli_print_json(o);
    json_object_put(o);
  }
  cli_error("%s", msg);
  if (cmd && cmd->name[0])
    cli_note("see `sandman %s --help`", cmd->name);
  else
    cli_note("see `sandman --help`");
  return CLI_EXIT_USAGE;
}

/* ---- values ---- */

static int enum_has(const char *values, const char *v) {
  size_t vl = strlen(v);
  const char *p = values;
  while (p && *p) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == vl && strncmp(p, v, vl) == 0) return 1;
    p = bar ? bar + 1 : NULL;
  }
  return 0;
}

/* "none, per_tool or per_run" from "none|per_tool|per_run". */
static void enum_words(const char *values, char *out, size_t len) {
  size_t n = 0, o = 0, total = 1;
  for (const char *p = values; *p; p++) total += *p == '|';
  out[0] = '\0';
  const char *p = values;
  while (p && *p && o < len) {
    const char *bar = strchr(p, '|');
    int wl = bar ? (int)(bar - p) : (int)strlen(p);
    n++;
    const char *sep = n == 1 ? "" : n == total ? " or " : ", ";
    int w = snprintf(out + o, len - o, "%s%.*s", sep, wl, p);
    if (w < 0) break;
    o += (size_t)w;
    p = bar ? bar + 1 : NULL;
  }
}

/* Checks v for flag f; a message naming the flag on failure. */
static int check_value(const cli_flag *f, const char *v, char *msg, size_t len) {
  sm_error err = SM_ERROR_INIT;
  int64_t i64;
  double d;
  int rc = 0;
  switch (f->kind) {
    case CLI_ENUM:
      if (!enum_has(f->values, v)) {
        char words[256];
        enum_words(f->values, words, sizeof words);
        snprintf(msg, len, "--%s: '%s' is not one of %s", f->name, v, words);
        return -1;
      }
      return 0;
    case CLI_SIZE: rc = sm_parse_size(v, &i64, &err); break;
    case CLI_NAME: rc = sm_name_check("value", v, &err); break;
    case CLI_DURATION:
      rc = sm_parse_duration(v, &d, &err);
      break;
    case CLI_INT: rc = sm_parse_int(v, (int64_t)f->min, (int64_t)f->max, &i64, &err); break;
    case CLI_NUMBER: rc = sm_parse_double(v, f->min, f->max, &d, &err); break;
    case CLI_STRING:
    case CLI_FILE:
    case CLI_DIR:
      if (v[0] == '\0') {
        snprintf(msg, len, "--%s: needs a value (%s), not an empty string", f->name, f->metavar);
        return -1;
      }
      return 0;
    case CLI_SWITCH: return 0;
  }
  if (rc) {
    snprintf(msg, len, "--%s: %s", f->name, err.message);
    return -1;
  }
  return 0;
}

/* ---- the parser ---- */

static int add_value(cli_call *c, size_t *cap, const cli_flag *f, const char *v) {
  if (c->n_values == *cap) {
    size_t n = *cap ? *cap * 2 : 16;
    cli_value *nv = realloc(c->values, n * sizeof *nv);
    if (nv == NULL) return -1;
    c->values = nv;
    *cap = n;
  }
  c->values[c->n_values].flag = f;
  c->values[c->n_values].value = v;
  c->n_values++;
  return 0;
}

/* Every visible long name of cmd, for suggestions. */
static size_t flag_names(const cli_command *cmd, const char **names, size_t cap) {
  size_t n = 0, total = cli_flag_count(cmd);
  for (size_t i = 0; i < total && n < cap; i++) {
    const cli_flag *f = cli_flag_at(cmd, i);
    if (!(f->attrs & CLI_HIDDEN)) names[n++] = f->name;
  }
  return n;
}

static int unknown_flag(const cli_command *cmd, int json, const char *arg) {
  const char *names[128];
  size_t n = flag_names(cmd, names, 128);
  char word[64];
  const char *eq = strchr(arg, '=');
  size_t wl = eq ? (size_t)(eq - arg) : strlen(arg);
  snprintf(word, sizeof word, "%.*s", (int)(wl > 2 ? wl - 2 : 0), arg + 2);
  const char *near = arg[1] == '-' ? cli_nearest(word, names, n) : NULL;
  const char *where = cmd->name[0] ? cmd->name : "";
  if (near)
    return cli_usage_error(cmd, json, "unknown flag '%.*s' for `sandman%s%s`; did you mean --%s?",
                           (int)wl, arg, where[0] ? " " : "", where, near);
  return cli_usage_error(cmd, json, "unknown flag '%.*s' for `sandman%s%s`", (int)wl, arg,
                         where[0] ? " " : "", where);
}

static int take(const cli_command *cmd, int json, cli_call *c, size_t *cap, const cli_flag *f,
                const char *shown, const char *inline_v, int argc, char **argv, int *i) {
  const cli_flag *canon = canonical(cmd, f);
  const char *v = NULL;
  if (f->kind == CLI_SWITCH) {
    if (inline_v)
      return cli_usage_error(cmd, json, "%s takes no value (got '%s')", shown, inline_v);
  } else if (inline_v) {
    v = inline_v;
  } else if (*i + 1 < argc) {
    v = argv[++*i];
  } else {
    return cli_usage_error(cmd, json, "%s needs a value (%s)", shown, f->metavar);
  }
  if (v) {
    char msg[512];
    if (check_value(canon, v, msg, sizeof msg) != 0) {
      /* The message names the canonical flag; say it as the user spelled it. */
      if (canon != f || shown[1] != '-') {
        char fixed[600];
        snprintf(fixed, sizeof fixed, "%s%s", shown, strchr(msg, ':') ? strchr(msg, ':') : "");
        return cli_usage_error(cmd, json, "%s", fixed);
      }
      return cli_usage_error(cmd, json, "%s", msg);
    }
  }
  if (!(canon->attrs & CLI_REPEAT)) {
    /* A second value replaces the first, as with getopt; keep one. */
    for (size_t k = 0; k < c->n_values; k++)
      if (c->values[k].flag == canon) c->values[k].flag = NULL;
  }
  if (add_value(c, cap, canon, v) != 0) return cli_usage_error(cmd, json, "out of memory");
  return 0;
}

/* The arguments' count and values against the command's table: 0, or a
 * usage error (reported). */
static int check_args(const cli_command *cmd, const cli_command *target, int json,
                      const cli_call *out) {
  int rc;
  if (out->n_args < target->min_args || (target->max_args >= 0 && out->n_args > target->max_args)) {
    const char *name = cmd->name;
    if (out->n_args > target->max_args && target->max_args >= 0)
      rc = cli_usage_error(cmd, json, "`sandman %s` takes %s, not '%s'", name,
                           target->max_args == 0 ? "no arguments" : target->args,
                           out->args[target->max_args]);
    else
      rc = cli_usage_error(cmd, json, "`sandman %s` needs %s", name, target->args);
    return rc;
  }
  if (target->arg_values) {
    for (int j = 0; j < out->n_args; j++) {
      if (!enum_has(target->arg_values, out->args[j])) {
        char words[256];
        enum_words(target->arg_values, words, sizeof words);
        rc = cli_usage_error(cmd, json, "'%s' is not one of %s", out->args[j], words);
        return rc;
      }
    }
  }
  return 0;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, const cli_globals *g,
              cli_call *out) {
  memset(out, 0, sizeof *out);
  out->cmd = cmd;
  out->g = g;
  const cli_command *target = cli_command_target(cmd);
  int json = cli_flag_find(target, "json") || cli_flag_find(target, "format")
                 ? cli_wants_json(argc, argv)
                 : 0;
  size_t cap = 0;
  out->args = calloc((size_t)argc + 1, sizeof *out->args);
  if (out->args == NULL) return cli_usage_error(cmd, json, "out of memory");
  int help = 0, rc = 0;
  for (int i = 0; i < argc && rc == 0; i++) {
    char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      while (++i < argc) out->args[out->n_args++] = argv[i];
      break;
    }
    if (a[0] != '-' || a[1] == '\0') {
      out->args[out->n_args++] = a;
      if (target->attrs & CLI_CMD_STOP_AT_ARGS) {
        while (++i < argc) out->args[out->n_args++] = argv[i];
        break;
      }
      continue;
    }
    if (a[1] == '-') {
      char name[128];
      const char *eq = strchr(a + 2, '=');
      size_t nl = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
      if (nl >= sizeof name) return unknown_flag(target, json, a);
      memcpy(name, a + 2, nl);
      name[nl] = '\0';
      const cli_flag *f = cli_flag_find(target, name);
      if (f == NULL) {
        rc = unknown_flag(target, json, a);
        break;
      }
      if (f == &cli_help_flag) {
        help = 1;
        continue;
      }
      char shown[140];
      snprintf(shown, sizeof shown, "--%s", name);
      rc = take(target, json, out, &cap, f, shown, eq ? eq + 1 : NULL, argc, argv, &i);
      continue;
    }
    /* -abc: switches, the last may take a value (-e K=V, -eK=V). */
    for (const char *p = a + 1; *p && rc == 0; p++) {
      const cli_flag *f = flag_by_short(target, *p);
      if (f == NULL) {
        char opt[3] = {'-', *p, '\0'};
        rc = cli_usage_error(target, json, "unknown flag '%s' for `sandman %s`", opt,
                             target->name);
        break;
      }
      if (f == &cli_help_flag) {
        help = 1;
        continue;
      }
      char shown[4] = {'-', *p, '\0', '\0'};
      if (f->kind != CLI_SWITCH) {
        rc = take(target, json, out, &cap, f, shown, p[1] ? p + 1 : NULL, argc, argv, &i);
        break;
      }
      rc = take(target, json, out, &cap, f, shown, NULL, argc, argv, &i);
    }
  }
  if (rc) {
    cli_call_dispose(out);
    return rc;
  }
  if (help) {
    cli_help_print(stdout, cmd);
    cli_call_dispose(out);
    return -1;
  }
  /* Values replaced by a later one were marked NULL: drop them. */
  size_t k = 0;
  for (size_t j = 0; j < out->n_values; j++)
    if (out->values[j].flag) out->values[k++] = out->values[j];
  out->n_values = k;
  rc = check_args(cmd, target, json, out);
  if (rc) cli_call_dispose(out);
  return rc;
}

void cli_call_dispose(cli_call *call) {
  free(call->values);
  free(call->args);
  call->values = NULL;
  call->args = NULL;
  call->n_values = 0;
  call->n_args = 0;
}

/* ---- accessors ---- */

static const cli_flag *declared(const cli_call *call, const char *name) {
  const cli_flag *f = cli_flag_find(call->cmd, name);
  if (f == NULL) {
    fprintf(stderr, "sandman: internal error: flag --%s is not in the table for `%s`\n", name,
            call->cmd->name);
    abort();
  }
  return canonical(cli_command_target(call->cmd), f);
}

const char *cli_str(const cli_call *call, const char *name) {
  const cli_flag *f = declared(call, name);
  for (size_t i = call->n_values; i-- > 0;)
    if (call->values[i].flag == f) return call->values[i].value;
  return NULL;
}

int cli_has(const cli_call *call, const char *name) {
  const cli_flag *f = declared(call, name);
  int n = 0;
  for (size_t i = 0; i < call->n_values; i++) n += call->values[i].flag == f;
  return n;
}

size_t cli_list(const cli_call *call, const char *name, const char ***out) {
  const cli_flag *f = declared(call, name);
  size_t n = 0;
  *out = calloc(call->n_values + 1, sizeof **out);
  if (*out == NULL) return 0;
  for (size_t i = 0; i < call->n_values; i++)
    if (call->values[i].flag == f) (*out)[n++] = call->values[i].value;
  return n;
}
