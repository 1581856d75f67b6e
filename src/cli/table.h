/* The one table of sandman's commands and flags (commands.c) and what reads
 * it: the parser (parse.c), `--help` and the man page (help.c), the shell
 * completion scripts (completion.c). Adding a command or a flag is a row in
 * commands.c; nothing else lists them. */
#ifndef SANDMAN_CLI_TABLE_H
#define SANDMAN_CLI_TABLE_H

#include <stddef.h>
#include <stdio.h>

struct cli_globals;
struct cli_call;

/* What a flag's value is; the parser checks it before the command runs, so
 * every bad value is a usage error (exit 2) that names its flag. */
typedef enum {
  CLI_SWITCH = 0,   /* no value */
  CLI_STRING,       /* any text */
  CLI_NAME,         /* a name (project, run id, agent...): sm_name_check's one set */
  CLI_ENUM,         /* one of .values ("none|bridge") */
  CLI_SIZE,         /* 512k, 64m, 2g */
  CLI_DURATION,     /* 90, 90s, 10m, 2h, 7d */
  CLI_INT,          /* a whole number from .min to .max */
  CLI_NUMBER,       /* a number from .min to .max, fractions allowed */
  CLI_FILE,         /* a path (completed as a file) */
  CLI_DIR,          /* a path (completed as a directory) */
} cli_value_kind;

/* How a shell completes a flag's value (besides .values of an enum). */
typedef enum {
  CLI_COMPLETE_NONE = 0,
  CLI_COMPLETE_RUN_IDS,    /* the run ids of this instance's sandboxes, from the engine */
  CLI_COMPLETE_WORKER_IDS, /* the worker ids, likewise */
  CLI_COMPLETE_SANDBOXES,  /* sandbox names, likewise */
  CLI_COMPLETE_IMAGES,     /* image folders under images/ */
  CLI_COMPLETE_COMMANDS,   /* sandman's own commands (help) */
  CLI_COMPLETE_FILES,      /* file names (positional arguments) */
} cli_complete_kind;

enum {
  CLI_REPEAT = 1u << 0, /* may be given several times; cli_list() has every value */
  CLI_HIDDEN = 1u << 1, /* accepted, never shown (an old spelling: .alias_of names the flag) */
};

typedef struct cli_flag {
  const char *name;        /* long form without dashes: "timeout" */
  char short_name;         /* 'e' for -e, or 0 */
  cli_value_kind kind;
  const char *metavar;     /* "SECONDS" (NULL for a switch) */
  const char *values;      /* CLI_ENUM: the words, '|'-separated */
  double min, max;         /* CLI_INT, CLI_NUMBER */
  unsigned attrs;          /* CLI_REPEAT, CLI_HIDDEN */
  cli_complete_kind complete;
  const char *alias_of;    /* CLI_HIDDEN spellings: the flag they stand for */
  const char *section;     /* a heading in --help before this flag, or NULL */
  const char *help;        /* one line */
} cli_flag;

typedef int (*cli_command_fn)(const struct cli_call *call);

enum {
  /* The first word that is not an option starts the positional arguments
   * and ends option parsing (run: the tool's own argv follows). Otherwise
   * options and arguments may come in any order, and `--` ends options. */
  CLI_CMD_STOP_AT_ARGS = 1u << 0,
};

typedef struct cli_command {
  const char *name;        /* "run", "sandbox list"; "" for the global options */
  const char *alias_of;    /* "worker start" for "serve"; NULL for a command of its own */
  const char *args;        /* what follows the options in the usage line: "SANDBOX..." */
  const char *summary;     /* one line, in lists */
  const char *description; /* paragraphs for --help and the man page ("\n\n" between) */
  const char *notes;       /* printed after the flags (exit status, examples), or NULL */
  const cli_flag *flags;   /* ends with a row whose name is NULL; NULL for none */
  int min_args, max_args;  /* positional arguments; max -1: no limit */
  unsigned attrs;          /* CLI_CMD_* */
  cli_complete_kind complete_args;
  const char *arg_values;  /* positional words to complete ('|'-separated), or NULL */
  cli_command_fn fn;       /* NULL for a group ("sandbox"): its commands follow it */
} cli_command;

/* The table (commands.c). cli_commands[0] is the global options. */
extern const cli_command cli_commands[];
extern const size_t cli_n_commands;
/* --help, added to every command (never listed in the table). */
extern const cli_flag cli_help_flag;

/* Lookups. */
const cli_command *cli_command_find(const char *name);
/* What an alias stands for (itself for a command of its own). */
const cli_command *cli_command_target(const cli_command *cmd);
int cli_command_is_group(const cli_command *cmd);
/* The words of cmd's name after its group ("list" of "sandbox list"). */
const char *cli_command_leaf(const cli_command *cmd);
/* 1 when sub is a command directly under group (group "" = top level). */
int cli_command_in_group(const cli_command *sub, const char *group);
/* The flag rows of cmd (aliases resolved), --help included. */
size_t cli_flag_count(const cli_command *cmd);
const cli_flag *cli_flag_at(const cli_command *cmd, size_t i);
const cli_flag *cli_flag_find(const cli_command *cmd, const char *name);
/* The nearest of candidates to word (edit distance), or NULL when none is
 * close enough to be a likely typo. */
const char *cli_nearest(const char *word, const char *const *candidates, size_t n);

/* A parsed command line, what a command function gets. */
typedef struct cli_value {
  const cli_flag *flag; /* the canonical row (never a hidden alias) */
  const char *value;    /* borrowed from argv; NULL for a switch */
} cli_value;

typedef struct cli_call {
  const cli_command *cmd;
  const struct cli_globals *g;
  cli_value *values; /* in command-line order */
  size_t n_values;
  char **args;       /* positional arguments, borrowed from argv */
  int n_args;
} cli_call;

/* The last value of flag name, or NULL when not given. name must be a flag
 * of the call's command: anything else is a programming error (abort). */
const char *cli_str(const cli_call *call, const char *name);
/* How many times flag name was given. */
int cli_has(const cli_call *call, const char *name);
/* Every value of a repeatable flag, in order: *out (caller frees the array,
 * not the strings) and the count. */
size_t cli_list(const cli_call *call, const char *name, const char ***out);

/* Parses argv (argv[0] is the first word after the command's name) for
 * cmd. On a usage error prints it (JSON too when the command line asked for
 * JSON) and returns 2; -1 when --help was given (help printed); 0 on
 * success (call's arrays then the caller's: cli_call_dispose). */
int cli_parse(const cli_command *cmd, int argc, char **argv, const struct cli_globals *g,
              cli_call *out);
void cli_call_dispose(cli_call *call);

/* A usage error of cmd: the message on stderr with a pointer to --help, or,
 * when json is set, also the JSON object on stdout. Returns 2. */
int cli_usage_error(const cli_command *cmd, int json, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whether a command line asks for JSON output (--json, --format json)
 * before any `--`. */
int cli_wants_json(int argc, char **argv);

/* help.c: the full name ("sandman sandbox list"), --help text, man page. */
void cli_help_print(FILE *out, const cli_command *cmd);
void cli_man_print(FILE *out);
/* completion.c */
int cli_completion_print(FILE *out, const char *shell);

#endif
