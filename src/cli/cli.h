/* sandman command-line tool: shared declarations. The CLI uses only the
 * public API (include/sandman); it alone prints and picks exit codes. */
#ifndef SANDMAN_CLI_H
#define SANDMAN_CLI_H

#include <pthread.h>
#include <sandman/sandman.h>

#include "table.h"

/* Exit codes of the contract. */
enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_UNHEALTHY = 1, /* doctor: not healthy */
  CLI_EXIT_USAGE = 2,     /* bad flags, bad configuration file */
  CLI_EXIT_TIMEOUT = 124,
  CLI_EXIT_FAILURE = 125, /* sandman or engine failure (as docker run) */
  CLI_EXIT_NOEXEC = 126,
  CLI_EXIT_NOTFOUND = 127,
  CLI_EXIT_KILLED = 137,
};

typedef struct cli_globals {
  const char *config_path; /* --config, or NULL */
  const char *host;        /* --host, or NULL */
  sm_log_level log_level;
  int log_json;            /* --log-format json */
} cli_globals;

/* One per command, in cmd_<group>.c; each gets its parsed command line
 * (table.h) and returns the exit code. */
int cmd_run(const cli_call *call);
int cmd_code(const cli_call *call);
int cmd_exec(const cli_call *call);
int cmd_files_watch(const cli_call *call);
int cmd_worker_start(const cli_call *call);
int cmd_version(const cli_call *call);
int cmd_sandbox_doctor(const cli_call *call);
int cmd_sandbox_list(const cli_call *call);
int cmd_sandbox_reap(const cli_call *call);
int cmd_sandbox_rm(const cli_call *call);
int cmd_sandbox_create(const cli_call *call);
int cmd_sandbox_inspect(const cli_call *call);
int cmd_sandbox_pause(const cli_call *call);
int cmd_sandbox_resume(const cli_call *call);
int cmd_sandbox_snapshot(const cli_call *call);
int cmd_sandbox_fork(const cli_call *call);
int cmd_sandbox_rollback(const cli_call *call);
int cmd_sandbox_diff(const cli_call *call);
int cmd_snapshot_list(const cli_call *call);
int cmd_snapshot_inspect(const cli_call *call);
int cmd_snapshot_rm(const cli_call *call);
int cmd_snapshot_reap(const cli_call *call);
int cmd_config_check(const cli_call *call);
int cmd_config_explain(const cli_call *call);
int cmd_config_reload(const cli_call *call);
/* Network allowlist, live (cli_egress.c): every running allowlist sandbox
 * of the runner's instance gets its policy from cfg again; *n: how many. */
int cli_egress_reapply(sm_runner *runner, const sm_config *cfg, size_t *n, sm_error *err);
int cmd_image_build(const cli_call *call);
int cmd_image_load(const cli_call *call);
int cmd_token_derive(const cli_call *call);
int cmd_audit(const cli_call *call);
int cmd_mcp(const cli_call *call);
int cmd_completion(const cli_call *call);
int cmd_help(const cli_call *call);

/* Installs the log handler (text or JSON lines on stderr, --log-level). */
void cli_log_setup(const cli_globals *g);
/* Installs the stop signals (INT, TERM, HUP; no SA_RESTART) of a
 * long-running command; returns the flag they set. */
volatile int *cli_catch_stop_signals(void);
/* "unknown command 'X'; did you mean ...": a usage error (exit 2). */
int cli_unknown_command(const char *name, int json);

/* "sandman: error: <message>" on stderr (a JSON line with --log-format json). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "sandman: warning: <message>" on stderr (a JSON line with --log-format json). */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "sandman: <message>" on stderr, e.g. a usage hint. */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints err and returns the exit code it maps to (2 for SM_EINVAL and
 * SM_ECONFIG, 125 otherwise). */
int cli_fail(const sm_error *err);
/* Adds every value of a repeatable flag to list; a usage error (exit 2)
 * when it is full or a value too long. */
int cli_add_list(const cli_call *call, const char *flag, sm_string_list *list, int json);
/* The sandbox settings flags (mode, image, network, cpu, mem, pids, disk,
 * runtime, timeout: each as prefix + name, e.g. "sandbox-" for worker
 * start) and --project-environment, into flags (values borrowed). */
void cli_sandbox_flags(const cli_call *call, const char *prefix, sm_config_flags *flags);
/* --workspace and --sync: a usage error (exit 2) for --sync without a
 * workspace or a workspace that is not a directory. */
int cli_workspace_flags(const cli_call *call, int json, const char **workspace,
                        const char **sync);
/* --protect: every value (checked) added to list; a usage error (exit 2)
 * for a bad glob. */
int cli_protect_flags(const cli_call *call, sm_string_list *list, int json);
/* Prints a JSON object to stdout (pretty when stdout is a terminal). */
void cli_print_json(json_object *obj);
/* Prints obj (as cli_print_json) and frees it; NULL (an allocation that
 * failed) is an error: CLI_EXIT_FAILURE, else CLI_EXIT_OK. */
int cli_print_json_owned(json_object *obj);
/* Loads the configuration (--config or the search) and resolves one call.
 * On failure prints the error, frees what it made and returns the exit
 * code (2 for a bad file); 0 on success, *cfg then the caller's. */
int cli_load_resolve(const cli_globals *g, const char *agent, const char *tool, const char *user,
                     const sm_config_flags *flags, sm_config **cfg, sm_resolved *res);
/* A runner on the engine cli_engine_options picks (backend: the
 * --sandbox-backend flag, or NULL for the configuration's). cfg is
 * borrowed, on success and failure alike: the caller owns it and frees it
 * after the runner. On failure prints the error and returns the exit code. */
int cli_runner_new(const cli_globals *g, sm_config *cfg, const char *backend, sm_runner **out);

/* The audit trail's file: the configuration's audit.file, else the default
 * (<state dir>/audit/audit.jsonl); "" when the configuration says no file. */
int cli_audit_file(const sm_config *cfg, char *buf, size_t len, sm_error *err);
/* Opens the trail the configuration asks for (cfg may be NULL). on_by_default:
 * whether this command records when audit.enabled is not said (the runner
 * does). *out is NULL when auditing is off. On failure prints the error and
 * returns the exit code. */
int cli_audit_open(const sm_config *cfg, int on_by_default, sm_audit **out);
/* The host-tool broker of cfg (cli_broker.c): approvals 1 in the runner.
 * Returns a CLI exit code (CLI_EXIT_OK with *out set). */
int cli_broker_new(const sm_config *cfg, sm_audit *audit, int approvals, sm_broker **out);

/* Engine options: --host > DOCKER_HOST > the configuration's engine
 * section (cfg may be NULL) > the default socket; TLS from the environment
 * or, with the configuration's host, from its engine section. */
void cli_engine_options(const cli_globals *g, const sm_config *cfg, sm_engine_options *out);

/* A keyed sandbox named on the command line (cli_keyed.c): its container
 * name and what its labels say. */
typedef struct cli_keyed_sandbox {
  char name[SM_NAME_MAX];
  char mode[32], run_id[SM_NAME_MAX], worker_id[SM_NAME_MAX], project[SM_NAME_MAX],
      agent[SM_NAME_MAX];
} cli_keyed_sandbox;
/* ref: a name, an id or a unique prefix of one among this instance's
 * sandboxes, which must be per_run or per_worker (what: the command, for
 * the message). 0 or an exit code (reported). */
int cli_find_keyed_sandbox(sm_runner *runner, const char *ref, const char *what,
                           cli_keyed_sandbox *out);
/* The sandbox a command names by the flags of FLAGS_KEYED_SANDBOX or by
 * SANDBOX (sandman exec, sandbox port). */
typedef struct cli_keyed {
  const char *run_id, *worker_id, *sandbox, *mode, *project, *agent, *user;
  cli_keyed_sandbox found; /* SANDBOX found */
} cli_keyed;
/* Its flags (sandbox left NULL). */
void cli_keyed_flags(const cli_call *call, cli_keyed *k);
/* With k->sandbox: finds it; its keys from its labels. 0 or an exit code. */
int cli_keyed_resolve(sm_runner *runner, cli_keyed *k, const char *what);
/* A request for a call in k's sandbox as it is (never made nor replaced):
 * its keys and the configuration's settings; the host-tool keying of its
 * agent from broker. */
void cli_keyed_request(const cli_keyed *k, sm_run_request *req, sm_config_egress *eg,
                       sm_config *cfg, const sm_resolved *res, sm_broker *broker);
/* A call run on a thread of its own; done_pipe[0] becomes readable once
 * sm_run returned (result, rc and err then set). */
typedef struct cli_run_thread {
  sm_runner *runner;
  sm_run_request *req;
  sm_run_result result;
  sm_error err;
  int rc;
  int done_pipe[2];
  pthread_t thread;
} cli_run_thread;
/* 0, or -1 (errno) when no pipe or thread could be had. */
int cli_run_thread_start(cli_run_thread *r, sm_runner *runner, sm_run_request *req);
/* Waits for the call's end and closes the pipe; the result stays (the
 * caller disposes of it). */
void cli_run_thread_join(cli_run_thread *r);
int cmd_sandbox_port(const cli_call *call);

#endif
