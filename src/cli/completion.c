/* `sandman completion bash|zsh|fish`: completion scripts generated from the
 * table (commands.c), so they know every command and flag the parser does.
 * Run and worker ids and sandbox names come from the engine at completion
 * time through `sandman sandbox list --all --format '{{.FIELD}}'`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Visible commands (groups, aliases included) under group, space-separated. */
static void subs(FILE *out, const char *group) {
  int first = 1;
  for (size_t i = 1; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    if (!cli_command_in_group(c, group)) continue;
    fprintf(out, "%s%s", first ? "" : " ", cli_command_leaf(c));
    first = 0;
  }
}

/* Every flag spelling of cmd ("-e --env"); with values_only, only those
 * that take a value. */
static void flags(FILE *out, const cli_command *cmd, int values_only) {
  size_t n = cli_flag_count(cmd);
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    const cli_flag *f = cli_flag_at(cmd, i);
    if ((f->attrs & CLI_HIDDEN) || (values_only && f->kind == CLI_SWITCH)) continue;
    if (f->short_name) fprintf(out, "%s-%c", first ? "" : " ", f->short_name), first = 0;
    fprintf(out, "%s--%s", first ? "" : " ", f->name);
    first = 0;
  }
}

/* What completes a value: words, or "@run_ids", "@dirs"... */
static const char *dynamic(cli_complete_kind k, cli_value_kind v) {
  switch (k) {
    case CLI_COMPLETE_RUN_IDS: return "@run_id";
    case CLI_COMPLETE_WORKER_IDS: return "@worker_id";
    case CLI_COMPLETE_SANDBOXES: return "@name";
    case CLI_COMPLETE_IMAGES: return "@images";
    case CLI_COMPLETE_COMMANDS: return "@commands";
    case CLI_COMPLETE_FILES: return "@files";
    case CLI_COMPLETE_NONE: break;
  }
  if (v == CLI_DIR) return "@dirs";
  if (v == CLI_FILE) return "@files";
  return NULL;
}

static void words(FILE *out, const char *bar_list) {
  for (const char *p = bar_list; *p; p++) fputc(*p == '|' ? ' ' : *p, out);
}

/* The data both bash and zsh walk: associative arrays keyed by the words
 * of a command ("sandman", "sandman sandbox list") and "sandman run --mode"
 * (bash has no empty keys). */
static void shell_tables(FILE *out, const char *prefix) {
  fprintf(out, "%s_sandman_subs=(\n", prefix);
  for (size_t i = 0; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    if (i != 0 && !cli_command_is_group(c)) continue;
    fprintf(out, "  [\"sandman%s%s\"]=\"", c->name[0] ? " " : "", c->name);
    subs(out, c->name);
    fputs("\"\n", out);
  }
  fputs(")\n", out);
  const char *arrays[] = {"flags", "takes"};
  for (int a = 0; a < 2; a++) {
    fprintf(out, "%s_sandman_%s=(\n", prefix, arrays[a]);
    for (size_t i = 0; i < cli_n_commands; i++) {
      const cli_command *c = &cli_commands[i];
      if (cli_command_is_group(c)) continue;
      fprintf(out, "  [\"sandman%s%s\"]=\"", c->name[0] ? " " : "", c->name);
      flags(out, c, a == 1);
      fputs("\"\n", out);
    }
    fputs(")\n", out);
  }
  fprintf(out, "%s_sandman_values=(\n", prefix);
  for (size_t i = 0; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    if (cli_command_is_group(c)) continue;
    size_t n = cli_flag_count(c);
    for (size_t j = 0; j < n; j++) {
      const cli_flag *f = cli_flag_at(c, j);
      if (f->kind == CLI_SWITCH || (f->attrs & CLI_HIDDEN)) continue;
      const char *d = dynamic(f->complete, f->kind);
      if (!d && !f->values) continue;
      const char *spell[2] = {NULL, NULL};
      char s1[4] = {'-', f->short_name, 0, 0}, s2[80];
      snprintf(s2, sizeof s2, "--%s", f->name);
      spell[0] = s2;
      if (f->short_name) spell[1] = s1;
      for (int k = 0; k < 2 && spell[k]; k++) {
        fprintf(out, "  [\"sandman%s%s %s\"]=\"", c->name[0] ? " " : "", c->name, spell[k]);
        if (d) fputs(d, out);
        else words(out, f->values);
        fputs("\"\n", out);
      }
    }
  }
  fputs(")\n", out);
  fprintf(out, "%s_sandman_args=(\n", prefix);
  for (size_t i = 1; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    const cli_command *t = cli_command_target(c);
    if (cli_command_is_group(c)) continue;
    const char *d = dynamic(t->complete_args, CLI_STRING);
    if (!d && !t->arg_values && !(t->attrs & CLI_CMD_STOP_AT_ARGS)) continue;
    fprintf(out, "  [\"sandman%s%s\"]=\"", c->name[0] ? " " : "", c->name);
    if (t->attrs & CLI_CMD_STOP_AT_ARGS) fputs("@stop", out);
    else if (d) fputs(d, out);
    else words(out, t->arg_values);
    fputs("\"\n", out);
  }
  fputs(")\n", out);
}

static const char bash_body[] =
    "_sandman_dynamic() {\n"
    "  case $1 in\n"
    "    @run_id|@worker_id|@name)\n"
    "      \"${COMP_WORDS[0]}\" \"${_sandman_global[@]}\" sandbox list --all --format \"{{.${1#@}}}\" "
    "2>/dev/null | grep -v '^$' | sort -u ;;\n"
    "    @images) ls -d \"${SANDMAN_IMAGES_DIR:-images}\"/*/ 2>/dev/null | sed 's:/*$::; s:.*/::' ;;\n"
    "    @commands) echo \"${_sandman_subs[sandman]}\" ;;\n"
    "  esac\n"
    "}\n"
    "_sandman_value() {\n"
    "  local cur=$1 spec=$2\n"
    "  case $spec in\n"
    "    '') ;;\n"
    "    @dirs) COMPREPLY=($(compgen -d -- \"$cur\")) ;;\n"
    "    @files|@stop) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
    "    @*) COMPREPLY=($(compgen -W \"$(_sandman_dynamic \"$spec\")\" -- \"$cur\")) ;;\n"
    "    *) COMPREPLY=($(compgen -W \"$spec\" -- \"$cur\")) ;;\n"
    "  esac\n"
    "}\n"
    "_sandman() {\n"
    "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
    "  local cmd=sandman i=1 w nargs=0\n"
    "  _sandman_global=()\n"
    "  while [ \"$i\" -lt \"$COMP_CWORD\" ]; do\n"
    "    w=${COMP_WORDS[i]}\n"
    "    if [ \"$w\" = -- ]; then nargs=$((nargs + 1))\n"
    "    elif [[ $w == -?* ]]; then\n"
    "      if [[ $w != *=* && \" ${_sandman_takes[$cmd]} \" == *\" $w \"* ]]; then\n"
    "        i=$((i + 1))\n"
    "        [ \"$cmd\" = sandman ] && _sandman_global+=(\"$w\" \"${COMP_WORDS[i]}\")\n"
    "      fi\n"
    "    elif [ \"$nargs\" -eq 0 ] && [ -n \"${_sandman_subs[$cmd]+set}\" ] &&\n"
    "         [[ \" ${_sandman_subs[$cmd]} \" == *\" $w \"* ]]; then\n"
    "      cmd=\"$cmd $w\"\n"
    "    else\n"
    "      nargs=$((nargs + 1))\n"
    "    fi\n"
    "    i=$((i + 1))\n"
    "  done\n"
    "  if [ \"${_sandman_args[$cmd]}\" = @stop ] && [ \"$nargs\" -gt 0 ]; then\n"
    "    COMPREPLY=($(compgen -f -- \"$cur\")); return\n"
    "  fi\n"
    "  if [[ $prev == -?* && \" ${_sandman_takes[$cmd]} \" == *\" $prev \"* ]]; then\n"
    "    _sandman_value \"$cur\" \"${_sandman_values[$cmd $prev]}\"; return\n"
    "  fi\n"
    "  if [[ $cur == -* ]]; then\n"
    "    COMPREPLY=($(compgen -W \"${_sandman_flags[$cmd]}\" -- \"$cur\")); return\n"
    "  fi\n"
    "  if [ -n \"${_sandman_subs[$cmd]+set}\" ]; then\n"
    "    COMPREPLY=($(compgen -W \"${_sandman_subs[$cmd]}\" -- \"$cur\")); return\n"
    "  fi\n"
    "  _sandman_value \"$cur\" \"${_sandman_args[$cmd]}\"\n"
    "}\n"
    "complete -F _sandman sandman\n";

static void bash_script(FILE *out) {
  fputs("# bash completion for sandman (generated by `sandman completion bash`).\n"
        "# source <(sandman completion bash), or install it as\n"
        "# share/bash-completion/completions/sandman.\n",
        out);
  shell_tables(out, "declare -gA ");
  fputs(bash_body, out);
}

static const char zsh_body[] =
    "_sandman_dynamic() {\n"
    "  case $1 in\n"
    "    @run_id|@worker_id|@name)\n"
    "      ${words[1]} \"${_sandman_global[@]}\" sandbox list --all --format \"{{.${1#@}}}\" "
    "2>/dev/null | grep -v '^$' | sort -u ;;\n"
    "    @images) ls -d \"${SANDMAN_IMAGES_DIR:-images}\"/*/ 2>/dev/null | sed 's:/*$::; s:.*/::' ;;\n"
    "    @commands) print -r -- \"${_sandman_subs[sandman]}\" ;;\n"
    "  esac\n"
    "}\n"
    "_sandman_value() {\n"
    "  local spec=$1\n"
    "  case $spec in\n"
    "    '') ;;\n"
    "    @dirs) _directories ;;\n"
    "    @files|@stop) _files ;;\n"
    "    @*) compadd -- ${(f)\"$(_sandman_dynamic $spec)\"} ;;\n"
    "    *) compadd -- ${=spec} ;;\n"
    "  esac\n"
    "}\n"
    "_sandman() {\n"
    "  local cur=${words[CURRENT]} prev=${words[CURRENT-1]}\n"
    "  local cmd=sandman i=2 w nargs=0\n"
    "  _sandman_global=()\n"
    "  while (( i < CURRENT )); do\n"
    "    w=${words[i]}\n"
    "    if [[ $w == -- ]]; then (( nargs++ ))\n"
    "    elif [[ $w == -?* ]]; then\n"
    "      if [[ $w != *=* && \" ${_sandman_takes[$cmd]} \" == *\" $w \"* ]]; then\n"
    "        (( i++ ))\n"
    "        [[ $cmd == sandman ]] && _sandman_global+=(\"$w\" \"${words[i]}\")\n"
    "      fi\n"
    "    elif (( nargs == 0 )) && (( ${+_sandman_subs[$cmd]} )) &&\n"
    "         [[ \" ${_sandman_subs[$cmd]} \" == *\" $w \"* ]]; then\n"
    "      cmd=\"$cmd $w\"\n"
    "    else\n"
    "      (( nargs++ ))\n"
    "    fi\n"
    "    (( i++ ))\n"
    "  done\n"
    "  if [[ ${_sandman_args[$cmd]} == @stop ]] && (( nargs > 0 )); then _files; return; fi\n"
    "  if [[ $prev == -?* && \" ${_sandman_takes[$cmd]} \" == *\" $prev \"* ]]; then\n"
    "    _sandman_value \"${_sandman_values[$cmd $prev]}\"; return\n"
    "  fi\n"
    "  if [[ $cur == -* ]]; then compadd -- ${=_sandman_flags[$cmd]}; return; fi\n"
    "  if (( ${+_sandman_subs[$cmd]} )); then compadd -- ${=_sandman_subs[$cmd]}; return; fi\n"
    "  _sandman_value \"${_sandman_args[$cmd]}\"\n"
    "}\n"
    "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _sandman \"$@\"; else compdef _sandman "
    "sandman; fi\n";

static void zsh_script(FILE *out) {
  fputs("#compdef sandman\n"
        "# zsh completion for sandman (generated by `sandman completion zsh`).\n"
        "# Install it as _sandman in a directory of $fpath (share/zsh/site-functions).\n",
        out);
  shell_tables(out, "typeset -gA ");
  fputs(zsh_body, out);
}

/* fish: one `complete` line per command and flag. */
static void fish_quote(FILE *out, const char *s) {
  fputc('\'', out);
  for (; *s; s++) {
    if (*s == '\'' || *s == '\\') fputc('\\', out);
    fputc(*s, out);
  }
  fputc('\'', out);
}

static const char fish_body[] =
    "function __sandman_cmd\n"
    "    set -l words (commandline -opc)\n"
    "    set -e words[1]\n"
    "    set -l cmd ''\n"
    "    set -l skip 0\n"
    "    for w in $words\n"
    "        if test $skip = 1\n"
    "            set skip 0\n"
    "            continue\n"
    "        end\n"
    "        switch $w\n"
    "            case '--*=*'\n"
    "            case '-?*'\n"
    "                if contains -- $w (__sandman_takes $cmd)\n"
    "                    set skip 1\n"
    "                end\n"
    "            case '*'\n"
    "                if contains -- $w (__sandman_subs $cmd)\n"
    "                    set cmd (string trim -- \"$cmd $w\")\n"
    "                else\n"
    "                    echo \"$cmd\"\n"
    "                    echo args\n"
    "                    return\n"
    "                end\n"
    "        end\n"
    "    end\n"
    "    echo \"$cmd\"\n"
    "end\n"
    "function __sandman_is\n"
    "    set -l c (__sandman_cmd)\n"
    "    test \"$c[1]\" = \"$argv[1]\"; and test (count $c) -eq 1\n"
    "end\n"
    "function __sandman_dynamic\n"
    "    set -l w (commandline -opc)\n"
    "    $w[1] sandbox list --all --format \"{{.$argv[1]}}\" 2>/dev/null | string match -rv '^$' "
    "| sort -u\n"
    "end\n"
    "function __sandman_images\n"
    "    set -l d images\n"
    "    set -q SANDMAN_IMAGES_DIR; and set d $SANDMAN_IMAGES_DIR\n"
    "    for f in $d/*/\n"
    "        basename $f\n"
    "    end\n"
    "end\n";

static void fish_value(FILE *out, const char *spec, const char *values) {
  if (spec && strcmp(spec, "@dirs") == 0) fputs(" -a '(__fish_complete_directories)'", out);
  else if (spec && strcmp(spec, "@files") == 0) fputs(" -F", out);
  else if (spec && strcmp(spec, "@images") == 0) fputs(" -a '(__sandman_images)'", out);
  else if (spec && strcmp(spec, "@commands") == 0) {
    fputs(" -a '", out);
    subs(out, "");
    fputc('\'', out);
  } else if (spec) fprintf(out, " -a '(__sandman_dynamic %s)'", spec + 1);
  else if (values) {
    fputs(" -a '", out);
    words(out, values);
    fputc('\'', out);
  }
}

static void fish_script(FILE *out) {
  fputs("# fish completion for sandman (generated by `sandman completion fish`).\n"
        "# Install it as share/fish/vendor_completions.d/sandman.fish.\n",
        out);
  fputs("function __sandman_subs\n    switch \"$argv[1]\"\n", out);
  for (size_t i = 0; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    if (i != 0 && !cli_command_is_group(c)) continue;
    fprintf(out, "        case '%s'\n            echo ", c->name);
    subs(out, c->name);
    fputs(" | string split ' '\n", out);
  }
  fputs("    end\nend\n", out);
  fputs("function __sandman_takes\n    switch \"$argv[1]\"\n", out);
  for (size_t i = 0; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    if (cli_command_is_group(c)) continue;
    fprintf(out, "        case '%s'\n            echo ", c->name);
    flags(out, c, 1);
    fputs(" | string split ' '\n", out);
  }
  fputs("    end\nend\n", out);
  fputs(fish_body, out);
  fputs("complete -c sandman -f\n", out);
  for (size_t i = 0; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    if (cli_command_is_group(c)) {
      /* nothing of its own but its commands, below */
    } else {
      size_t n = cli_flag_count(c);
      for (size_t j = 0; j < n; j++) {
        const cli_flag *f = cli_flag_at(c, j);
        if (f->attrs & CLI_HIDDEN) continue;
        fprintf(out, "complete -c sandman -n '__sandman_is \"%s\"'", c->name);
        if (f->short_name) fprintf(out, " -s %c", f->short_name);
        fprintf(out, " -l %s", f->name);
        if (f->kind != CLI_SWITCH) {
          const char *d = dynamic(f->complete, f->kind);
          /* -x: a value, and no file names unless the value is a path. */
          fputs(d && (strcmp(d, "@files") == 0 || strcmp(d, "@dirs") == 0) ? " -r" : " -x", out);
          fish_value(out, d, f->values);
        }
        fputs(" -d ", out);
        fish_quote(out, f->help ? f->help : "");
        fputc('\n', out);
      }
      const cli_command *t = cli_command_target(c);
      if (i != 0 && (t->complete_args || t->arg_values)) {
        fprintf(out, "complete -c sandman -n '__sandman_is \"%s\"'", c->name);
        fish_value(out, dynamic(t->complete_args, CLI_STRING), t->arg_values);
        fputc('\n', out);
      }
    }
    if (i == 0 || cli_command_is_group(c)) {
      for (size_t j = 1; j < cli_n_commands; j++) {
        const cli_command *s = &cli_commands[j];
        if (!cli_command_in_group(s, c->name)) continue;
        fprintf(out, "complete -c sandman -n '__sandman_is \"%s\"' -a %s -d ", c->name,
                cli_command_leaf(s));
        fish_quote(out, s->summary ? s->summary : "");
        fputc('\n', out);
      }
    }
  }
}

int cli_completion_print(FILE *out, const char *shell) {
  if (strcmp(shell, "bash") == 0) bash_script(out);
  else if (strcmp(shell, "zsh") == 0) zsh_script(out);
  else if (strcmp(shell, "fish") == 0) fish_script(out);
  else return -1;
  return 0;
}

int cmd_completion(const cli_call *call) {
  if (cli_completion_print(stdout, call->args[0]) != 0)
    return cli_usage_error(call->cmd, 0, "no completion for shell '%s'", call->args[0]);
  fflush(stdout);
  return CLI_EXIT_OK;
}
