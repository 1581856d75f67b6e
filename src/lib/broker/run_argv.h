/* Host tools that run as a program on the host (`argv:`), no shell. */
#ifndef SANDMAN_BROKER_RUN_ARGV_H
#define SANDMAN_BROKER_RUN_ARGV_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>

#include "common/strv.h"

/* The tool's argv template with args substituted: an argument that is
 * exactly "{name}" becomes the argument's value as one argument (an array
 * of strings: one argument per item; an absent optional argument: none);
 * every other argument is copied as it is. Never through a shell. */
int broker_argv_build(json_object *tmpl, json_object *args, common_strv *out, sm_error *err);
/* 1 with why set when a value args gives a placeholder of tmpl would be
 * an argument starting with '-' (a string, a negative number, an array's
 * item) and allow_dash (an array of names, may be NULL) does not name it:
 * it would become an option of the host program. 0 otherwise. */
int broker_argv_dash_check(json_object *tmpl, json_object *args, json_object *allow_dash, char *why,
                           size_t len);

typedef struct bk_proc_opts {
  char *const *argv;
  char *const *envp;  /* the whole environment of the tool */
  const char *cwd;    /* NULL: "/" */
  double timeout_s;
  size_t max_output;  /* per stream */
  volatile int *cancel;
} bk_proc_opts;

typedef struct bk_proc_result {
  int exit_code;      /* 128+N for signal N; 127 not found; -1 none */
  int timed_out, cancelled;
  char *out, *errout; /* NUL-terminated, owned */
  size_t out_len, err_len;
  int out_truncated, err_truncated;
  double duration_ms;
} bk_proc_result;

/* Runs argv in its own process group with stdin from /dev/null, reads
 * stdout and stderr (each capped, the rest read and dropped), and kills the
 * whole group at the timeout, on cancel, and when the program itself has
 * exited (so nothing it started outlives the call). */
int broker_proc_run(const bk_proc_opts *o, bk_proc_result *r, sm_error *err);
void broker_proc_result_dispose(bk_proc_result *r);

#endif
