/* `--help`, `sandman help CMD` and the man page, all rendered from the
 * table (commands.c), so they cannot disagree with the parser. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define FLAG_COLUMN 27
#define WRAP 79

/* "-e, --env K=V" or "    --timeout SECONDS". */
static void flag_label(const cli_flag *f, char *out, size_t len) {
  if (f->short_name)
    snprintf(out, len, "-%c, --%s%s%s", f->short_name, f->name, f->metavar ? " " : "",
             f->metavar ? f->metavar : "");
  else
    snprintf(out, len, "    --%s%s%s", f->name, f->metavar ? " " : "", f->metavar ? f->metavar : "");
}

/* Prints text wrapped at WRAP columns: the cursor is at column col (0: a
 * new line), continuation lines start at indent; "\n" in text starts a new
 * line at indent. */
static void wrapped(FILE *out, const char *text, int col, int indent) {
  const char *p = text;
  int fresh = 1; /* no word on this line yet */
  if (col == 0 && indent > 0) {
    fprintf(out, "%*s", indent, "");
    col = indent;
  }
  while (*p) {
    if (*p == '\n') {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
      fresh = 1;
      p++;
      continue;
    }
    const char *w = p;
    while (*p && *p != ' ' && *p != '\n') p++;
    int wl = (int)(p - w);
    if (!fresh && col + 1 + wl > WRAP) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
    } else if (!fresh) {
      fputc(' ', out);
      col++;
    }
    fwrite(w, 1, (size_t)wl, out);
    col += wl;
    fresh = 0;
    while (*p == ' ') p++;
  }
  fputc('\n', out);
}

static void print_subcommands(FILE *out, const char *group) {
  size_t width = 0;
  for (size_t i = 0; i < cli_n_commands; i++)
    if (cli_command_in_group(&cli_commands[i], group) &&
        strlen(cli_command_leaf(&cli_commands[i])) > width)
      width = strlen(cli_command_leaf(&cli_commands[i]));
  for (size_t i = 0; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    if (!cli_command_in_group(c, group)) continue;
    fprintf(out, "  %-*s  ", (int)width, cli_command_leaf(c));
    wrapped(out, c->summary ? c->summary : "", (int)width + 4, (int)width + 4);
  }
}

static void print_flags(FILE *out, const cli_command *cmd) {
  size_t n = cli_flag_count(cmd);
  int any_section = 0;
  for (size_t i = 0; i < n; i++) any_section |= cli_flag_at(cmd, i)->section != NULL;
  if (!any_section) fprintf(out, "Options:\n");
  for (size_t i = 0; i < n; i++) {
    const cli_flag *f = cli_flag_at(cmd, i);
    if (f->attrs & CLI_HIDDEN) continue;
    if (f->section) fprintf(out, "%s%s\n", i ? "\n" : "", f->section);
    else if (f == &cli_help_flag && any_section) fputc('\n', out);
    char label[128];
    flag_label(f, label, sizeof label);
    if ((int)strlen(label) + 2 >= FLAG_COLUMN) {
      fprintf(out, "  %s\n", label);
      wrapped(out, f->help ? f->help : "", 0, FLAG_COLUMN);
    } else {
      fprintf(out, "  %-*s", FLAG_COLUMN - 2, label);
      wrapped(out, f->help ? f->help : "", FLAG_COLUMN, FLAG_COLUMN);
    }
  }
}

void cli_help_print(FILE *out, const cli_command *cmd) {
  const cli_command *t = cli_command_target(cmd);
  if (cmd->name[0] == '\0') {
    fprintf(out, "Usage: sandman [OPTIONS] %s\n\n", t->args);
    wrapped(out, t->description, 0, 0);
    fprintf(out, "\nCommands:\n");
    print_subcommands(out, "");
    fputc('\n', out);
    print_flags(out, cmd);
    fputc('\n', out);
    wrapped(out, t->notes, 0, 0);
    return;
  }
  if (cli_command_is_group(cmd)) {
    fprintf(out, "Usage: sandman %s COMMAND [OPTIONS]\n\n", cmd->name);
    if (cmd->description) {
      wrapped(out, cmd->description, 0, 0);
      fputc('\n', out);
    }
    fprintf(out, "Commands:\n");
    print_subcommands(out, cmd->name);
    fprintf(out, "\nRun `sandman %s COMMAND --help` for a command's options.\n", cmd->name);
    return;
  }
  fprintf(out, "Usage: sandman %s%s%s%s\n", cmd->name, cli_flag_count(t) > 1 ? " [OPTIONS]" : "",
          t->args && strncmp(t->args, "[OPTIONS]", 9) != 0 ? " " : "",
          t->args ? (strncmp(t->args, "[OPTIONS]", 9) == 0 ? t->args + 9 : t->args) : "");
  if (cmd != t) fprintf(out, "(alias of `sandman %s`)\n", t->name);
  fputc('\n', out);
  wrapped(out, t->description ? t->description : t->summary, 0, 0);
  fputc('\n', out);
  print_flags(out, t);
  if (t->notes) {
    fputc('\n', out);
    wrapped(out, t->notes, 0, 0);
  }
}

/* ---- the man page (roff) ---- */

/* Text as roff: backslashes, dashes and a leading dot or quote escaped. */
static void roff(FILE *out, const char *s) {
  int bol = 1;
  for (; *s; s++) {
    if (bol && (*s == '.' || *s == '\'')) fputs("\\&", out);
    if (*s == '\\') fputs("\\e", out);
    else if (*s == '-') fputs("\\-", out);
    else fputc(*s, out);
    bol = *s == '\n';
  }
}

static void man_flag(FILE *out, const cli_flag *f) {
  fputs(".TP\n", out);
  if (f->short_name) fprintf(out, "\\fB\\-%c\\fR, ", f->short_name);
  fputs("\\fB\\-\\-", out);
  roff(out, f->name);
  fputs("\\fR", out);
  if (f->metavar) {
    fputs(" \\fI", out);
    roff(out, f->metavar);
    fputs("\\fR", out);
  }
  fputc('\n', out);
  roff(out, f->help ? f->help : "");
  fputc('\n', out);
}

static void man_paragraphs(FILE *out, const char *text) {
  /* "\n\n" separates paragraphs; a single "\n" is a line break. */
  const char *p = text;
  while (p && *p) {
    const char *end = strstr(p, "\n\n");
    size_t len = end ? (size_t)(end - p) : strlen(p);
    fputs(".PP\n", out);
    char buf[2048];
    snprintf(buf, sizeof buf, "%.*s", (int)len, p);
    for (char *q = buf; *q; q++) {
      char *nl = strchr(q, '\n');
      if (nl) *nl = '\0';
      roff(out, q);
      fputc('\n', out);
      if (!nl) break;
      fputs(".br\n", out);
      q = nl;
    }
    p = end ? end + 2 : NULL;
  }
}

void cli_man_print(FILE *out) {
  const cli_command *root = &cli_commands[0];
  fprintf(out, ".TH SANDMAN 1 \"\" \"sandman %s\" \"User Commands\"\n", sm_version());
  fputs(".SH NAME\nsandman \\- ", out);
  roff(out, root->summary);
  fputs("\n.SH SYNOPSIS\n.B sandman\n[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]\n", out);
  fputs(".SH DESCRIPTION\n", out);
  man_paragraphs(out, root->description);
  fputs(".SH OPTIONS\n", out);
  size_t n = cli_flag_count(root);
  for (size_t i = 0; i < n; i++)
    if (!(cli_flag_at(root, i)->attrs & CLI_HIDDEN)) man_flag(out, cli_flag_at(root, i));
  fputs(".SH COMMANDS\n", out);
  for (size_t i = 1; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    if (cli_command_is_group(c) || c->alias_of) continue;
    fputs(".SS \"sandman ", out);
    roff(out, c->name);
    if (c->args) {
      fputc(' ', out);
      roff(out, c->args);
    }
    fputs("\"\n", out);
    for (size_t j = 0; j < cli_n_commands; j++)
      if (cli_commands[j].alias_of && strcmp(cli_commands[j].alias_of, c->name) == 0) {
        fputs(".PP\nAlias: \\fBsandman ", out);
        roff(out, cli_commands[j].name);
        fputs("\\fR.\n", out);
      }
    man_paragraphs(out, c->description ? c->description : c->summary);
    size_t nf = cli_flag_count(c);
    for (size_t j = 0; j < nf; j++) {
      const cli_flag *f = cli_flag_at(c, j);
      if (!(f->attrs & CLI_HIDDEN)) man_flag(out, f);
    }
    if (c->notes) man_paragraphs(out, c->notes);
  }
  fputs(".SH EXIT STATUS\n", out);
  man_paragraphs(out,
                 "0 success; 1 not healthy (doctor), a removal failed (reap, rm), no engine "
                 "(version); 2 usage error or a bad configuration file; run: the tool's own "
                 "status, or 124 timeout, 125 sandman, engine or policy failure, 126 not "
                 "executable, 127 not found, 137 killed (out of memory included).");
  fputs(".SH ENVIRONMENT\n", out);
  man_paragraphs(out,
                 "DOCKER_HOST, DOCKER_CONTEXT, DOCKER_CONFIG, DOCKER_TLS_VERIFY, "
                 "DOCKER_CERT_PATH: the engine, as the docker CLI finds it.\n"
                 "SANDMAN_CONFIG: the configuration file.\n"
                 "SANDMAN_INSTANCE: the instance whose sandboxes are seen (default "
                 "\"default\").\n"
                 "SANDMAN_STATE_DIR: busy locks, last-use times, manifests.\n"
                 "SANDMAN_TOKEN: the runner's control token.\n"
                 "SANDMAN_IMAGES_DIR: where `image build NAME` looks first.");
  fputs(".SH SEE ALSO\n", out);
  man_paragraphs(out, "docker(1); the documentation in share/doc/sandman or docs/ of the source.");
}

int cmd_help(const cli_call *call) {
  if (cli_has(call, "man")) {
    cli_man_print(stdout);
    return CLI_EXIT_OK;
  }
  char name[256] = "";
  size_t used = 0;
  for (int i = 0; i < call->n_args; i++) {
    int w = snprintf(name + used, sizeof name - used, "%s%s", i ? " " : "", call->args[i]);
    if (w < 0 || (size_t)w >= sizeof name - used) break;
    used += (size_t)w;
  }
  const cli_command *cmd = cli_command_find(name);
  if (cmd == NULL) return cli_unknown_command(name, 0);
  cli_help_print(stdout, cmd);
  return CLI_EXIT_OK;
}
