/* Every command and flag of sandman, once. The parser, --help, `sandman help`,
 * the man page and the completion scripts all read this table, so a new
 * command or flag is one row here (and its docs in docs/): see the comment
 * at the end of table.h for the fields. Keep rows in the order --help shows
 * them. */
#include <stddef.h>

#include <sandman/sandman.h>
#include <sandman/server.h>

#include "cli.h"

#define MODES "none|per_tool|per_run|per_worker"
#define ENVIRONMENTS "production|staging|development"
#define END {0}

/* Rows that `run` and `mcp` share, in the same words in both helps. */
#define FLAG_PROJECT \
  {.name = "project", .kind = CLI_NAME, .metavar = "ID", \
   .help = "project (default: the config's project.id, else \"default\")"}
#define FLAG_WORKER_ID \
  {.name = "worker-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_WORKER_IDS, \
   .help = "per_worker: the worker whose sandbox is used"}
#define FLAG_SYNC \
  {.name = "sync", .kind = CLI_ENUM, .metavar = "MODE", .values = "none|in|inout", \
   .help = "none | in | inout: workspace direction (default inout)"}
#define FLAG_EXCLUDE \
  {.name = "exclude", .kind = CLI_STRING, .metavar = "GLOB", .attrs = CLI_REPEAT, \
   .help = "workspace paths not copied (repeatable)"}, \
  {.name = "copy-env-files", \
   .help = "copy the workspace's .env and .env.* files too (left out by default)"}
#define FLAGS_SANDBOX_LIMITS \
  {.name = "network", .kind = CLI_ENUM, .metavar = "NET", .values = "none|bridge|allowlist", \
   .help = "none | bridge | allowlist (default none; allowlist: only egress.allow, through the egress proxy)"}, \
  {.name = "cpu", .kind = CLI_NUMBER, .metavar = "N", .min = 0.01, .max = 1024, \
   .help = "CPUs, fractions allowed (default 1)"}, \
  {.name = "mem", .kind = CLI_SIZE, .metavar = "SIZE", .help = "memory, no swap (default 512m)"}, \
  {.name = "pids", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 4194304, \
   .help = "processes (default 256)"}, \
  {.name = "disk", .kind = CLI_SIZE, .metavar = "SIZE", .help = "size of /workspace (default 1g)"}, \
  {.name = "runtime", .kind = CLI_STRING, .metavar = "NAME", \
   .help = "engine runtime, e.g. runsc for gVisor"}

const cli_flag cli_help_flag = {.name = "help", .short_name = 'h', .help = "show this help"};

static const cli_flag global_flags[] = {
    {.name = "config", .kind = CLI_FILE, .metavar = "FILE",
     .help = "configuration file (else $SANDMAN_CONFIG, ./sandman.yaml, "
             "$XDG_CONFIG_HOME/sandman/config.yaml)"},
    {.name = "host", .kind = CLI_STRING, .metavar = "URL",
     .help = "engine address, unix:///PATH or tcp://HOST:PORT (else $DOCKER_HOST, "
             "$DOCKER_CONTEXT, the configuration, docker's current context)"},
    {.name = "log-level", .kind = CLI_ENUM, .metavar = "LEVEL", .values = "debug|info|warn|error",
     .help = "least important log lines shown (default info)"},
    {.name = "log-format", .kind = CLI_ENUM, .metavar = "FORMAT", .values = "text|json",
     .help = "log lines on stderr as text or one JSON object each"},
    {.name = "version", .short_name = 'V', .help = "print the versions (as `sandman version`)"},
    END};

static const cli_flag run_flags[] = {
    {.name = "mode", .kind = CLI_ENUM, .metavar = "MODE", .values = MODES,
     .section = "Where it runs:", .help = "none | per_tool | per_run | per_worker"},
    FLAG_PROJECT,
    {.name = "project-environment", .kind = CLI_ENUM, .metavar = "ENV", .values = ENVIRONMENTS,
     .help = "production | staging | development (picks the default mode)"},
    {.name = "agent", .kind = CLI_NAME, .metavar = "NAME",
     .help = "agent making the call (configuration entry)"},
    {.name = "tool", .kind = CLI_NAME, .metavar = "NAME", .help = "tool being called (tool policy)"},
    {.name = "user", .kind = CLI_NAME, .metavar = "ID",
     .help = "end user on whose behalf the call runs"},
    {.name = "run-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_RUN_IDS,
     .help = "per_run: the run whose sandbox is used"},
    FLAG_WORKER_ID,
    {.name = "from-snapshot", .kind = CLI_NAME, .metavar = "NAME",
     .help = "per_run/per_worker: a new sandbox is made from this snapshot"},
    {.name = "image", .kind = CLI_STRING, .metavar = "REF",
     .section = "Sandbox settings (defaults: built in, or from the configuration):",
     .help = "image (default sandman/minimal:latest; never pulled)"},
    FLAGS_SANDBOX_LIMITS,
    {.name = "memory", .kind = CLI_SIZE, .metavar = "SIZE", .attrs = CLI_HIDDEN, .alias_of = "mem"},
    {.name = "timeout", .kind = CLI_DURATION, .metavar = "SECONDS",
     .help = "per call (default 120; 90, 90s, 2m work)"},
    {.name = "workspace", .kind = CLI_DIR, .metavar = "DIR", .section = "The call:",
     .help = "copy DIR into /workspace (and changes back)"},
    FLAG_SYNC,
    FLAG_EXCLUDE,
    {.name = "protect", .kind = CLI_STRING, .metavar = "GLOB", .attrs = CLI_REPEAT,
     .help = "workspace paths whose changes never reach the host, added to the configured "
             "list (repeatable)"},
    {.name = "env", .short_name = 'e', .kind = CLI_STRING, .metavar = "K=V", .attrs = CLI_REPEAT,
     .help = "set a variable; K alone passes the host's value (repeatable)"},
    {.name = "env-passthrough", .kind = CLI_STRING, .metavar = "GLOB", .attrs = CLI_REPEAT,
     .help = "pass host variables matching GLOB (repeatable; never SANDMAN_*)"},
    {.name = "stdin", .short_name = 'i', .help = "pass standard input to the tool"},
    {.name = "replace",
     .help = "a per_run/per_worker sandbox these settings change may be replaced with an empty "
             "/workspace when its own cannot be carried over"},
    {.name = "json", .help = "print the result as one JSON object"},
    END};

static const cli_flag code_flags[] = {
    {.name = "run-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_RUN_IDS,
     .section = "The sandbox (a keyed one):", .help = "per_run: the run whose sandbox holds the context"},
    FLAG_WORKER_ID,
    {.name = "mode", .kind = CLI_ENUM, .metavar = "MODE", .values = "per_run|per_worker",
     .help = "per_run | per_worker (default: from --run-id or --worker-id)"},
    FLAG_PROJECT,
    {.name = "project-environment", .kind = CLI_ENUM, .metavar = "ENV", .values = ENVIRONMENTS,
     .help = "production | staging | development"},
    {.name = "agent", .kind = CLI_NAME, .metavar = "NAME",
     .help = "agent making the call (configuration entry)"},
    {.name = "user", .kind = CLI_NAME, .metavar = "ID",
     .help = "end user on whose behalf the call runs"},
    {.name = "image", .kind = CLI_STRING, .metavar = "REF",
     .help = "image, when the sandbox is made (needs a Jupyter kernel: sandman/general)"},
    FLAGS_SANDBOX_LIMITS,
    {.name = "context", .kind = CLI_STRING, .metavar = "NAME", .section = "The context:",
     .help = "the context (default: the sandbox's default one, made on first use)"},
    {.name = "kernel", .kind = CLI_STRING, .metavar = "NAME",
     .help = "kernelspec of a context this makes (default: python3)"},
    {.name = "language", .kind = CLI_STRING, .metavar = "LANG",
     .help = "or the first kernel of this language"},
    {.name = "cwd", .kind = CLI_STRING, .metavar = "DIR",
     .help = "its working directory (default /workspace)"},
    {.name = "env", .short_name = 'e', .kind = CLI_STRING, .metavar = "K=V", .attrs = CLI_REPEAT,
     .help = "a variable of a context this makes (repeatable)"},
    {.name = "code", .short_name = 'c', .kind = CLI_STRING, .metavar = "CODE", .section = "A run:",
     .help = "the code to run (else FILE, or - for standard input)"},
    {.name = "timeout", .kind = CLI_DURATION, .metavar = "SECONDS",
     .help = "the cell's; past it the cell is interrupted (default 120)"},
    {.name = "save-images", .kind = CLI_DIR, .metavar = "DIR",
     .help = "save images (png, jpeg, svg) of the results in DIR"},
    {.name = "json", .help = "print each event as a JSON line (an action: its JSON)"},
    {.name = "list", .section = "Instead of a run:", .help = "list the sandbox's contexts"},
    {.name = "create", .help = "make context --context NAME"},
    {.name = "info", .help = "describe the context"},
    {.name = "interrupt", .help = "interrupt the cell running in the context"},
    {.name = "restart", .help = "a fresh kernel for the context (its state is dropped)"},
    {.name = "delete", .help = "delete the context"},
    END};

/* A keyed sandbox that exists, named by its keys (sandman exec, sandbox port). */
#define FLAGS_KEYED_SANDBOX                                                                        \
  {.name = "run-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_RUN_IDS,          \
   .section = "The sandbox (one of these, or SANDBOX):",                                           \
   .help = "the per_run sandbox of this run"},                                                     \
      {.name = "worker-id", .kind = CLI_NAME, .metavar = "ID",                                     \
       .complete = CLI_COMPLETE_WORKER_IDS, .help = "the per_worker sandbox of this worker"},      \
      {.name = "mode", .kind = CLI_ENUM, .metavar = "MODE", .values = "per_run|per_worker",        \
       .help = "per_run or per_worker (implied by --run-id or --worker-id)"},                      \
      FLAG_PROJECT,                                                                                \
      {.name = "agent", .kind = CLI_NAME, .metavar = "NAME",                                       \
       .help = "agent whose sandbox it is (configuration entry)"},                                 \
      {.name = "user", .kind = CLI_NAME, .metavar = "ID", .help = "end user of the sandbox's scope"}

static const cli_flag exec_flags[] = {
    {.name = "interactive", .short_name = 'i',
     .help = "pass standard input to the command as it comes"},
    {.name = "tty", .short_name = 't',
     .help = "a pseudo-terminal of this terminal's size (raw mode, size changes passed on)"},
    FLAGS_KEYED_SANDBOX,
    {.name = "env", .short_name = 'e', .kind = CLI_STRING, .metavar = "K=V", .attrs = CLI_REPEAT,
     .section = "The command:", .help = "set a variable; K alone passes the host's value (repeatable)"},
    {.name = "workdir", .short_name = 'w', .kind = CLI_STRING, .metavar = "DIR",
     .help = "working directory in the sandbox (default /workspace)"},
    END};

static const cli_flag port_flags[] = {
    {.name = "listen", .kind = CLI_STRING, .metavar = "ADDR:N",
     .help = "the loopback address and port to listen on (default 127.0.0.1:0, a free port)"},
    FLAGS_KEYED_SANDBOX,
    END};

static const cli_flag worker_flags[] = {
    {.name = "pool", .kind = CLI_STRING, .metavar = "NAME", .section = "Sandboxes:",
     .help = "name of this runner's pool (logs, /healthz)"},
    {.name = "sandbox-mode", .kind = CLI_ENUM, .metavar = "MODE", .values = MODES,
     .help = "none | per_tool | per_run | per_worker"},
    {.name = "sandbox-backend", .kind = CLI_ENUM, .metavar = "NAME", .values = "docker|swarm",
     .help = "docker, or swarm: the engine is a swarm manager (docs/scale-out.md)"},
    {.name = "sandbox-image", .kind = CLI_STRING, .metavar = "REF", .help = "image of the sandboxes"},
    {.name = "sandbox-network", .kind = CLI_ENUM, .metavar = "NET", .values = "none|bridge|allowlist",
     .help = "none | bridge | allowlist"},
    {.name = "sandbox-cpu", .kind = CLI_NUMBER, .metavar = "N", .min = 0.01, .max = 1024,
     .help = "CPUs per sandbox (fractions allowed)"},
    {.name = "sandbox-mem", .kind = CLI_SIZE, .metavar = "SIZE", .help = "memory per sandbox"},
    {.name = "sandbox-pids", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 4194304,
     .help = "processes per sandbox"},
    {.name = "sandbox-disk", .kind = CLI_SIZE, .metavar = "SIZE", .help = "size of /workspace"},
    {.name = "sandbox-runtime", .kind = CLI_STRING, .metavar = "NAME",
     .help = "engine runtime, e.g. runsc"},
    {.name = "sandbox-timeout", .kind = CLI_DURATION, .metavar = "SECONDS",
     .help = "default timeout of a call"},
    {.name = "sandbox-pool-size", .kind = CLI_INT, .metavar = "N", .min = 0, .max = SM_POOL_MAX_SIZE,
     .help = "warm per_tool containers per configuration, 0 to 64 (default 2)"},
    {.name = "sandbox-pool-max", .kind = CLI_INT, .metavar = "N", .min = 0, .max = SM_POOL_MAX_SIZE,
     .help = "warm containers per configuration while calls come in bursts (default 8)"},
    {.name = "sandbox-pool-parallel", .kind = CLI_INT, .metavar = "N", .min = 1,
     .max = SM_POOL_MAX_PARALLEL, .help = "pool containers made at once, 1 to 8 (default 2)"},
    {.name = "env-passthrough", .kind = CLI_STRING, .metavar = "GLOB", .attrs = CLI_REPEAT,
     .help = "runner variables passed to tools (repeatable)"},
    {.name = "project-environment", .kind = CLI_ENUM, .metavar = "ENV", .values = ENVIRONMENTS,
     .help = "production | staging | development"},
    {.name = "project", .kind = CLI_NAME, .metavar = "ID", .help = "default project of calls"},
    {.name = "listen", .kind = CLI_STRING, .metavar = "ADDR", .section = "Service:",
     .help = "unix:PATH or tcp://HOST:PORT (default: a unix socket in $XDG_RUNTIME_DIR/sandman)"},
    {.name = "token-file", .kind = CLI_FILE, .metavar = "FILE",
     .help = "control token (else $" SM_TOKEN_ENV ")"},
    {.name = "credentials-file", .kind = CLI_FILE, .metavar = "FILE",
     .help = "credentials for leases (JSON, mode 0600)"},
    {.name = "workspaces-root", .kind = CLI_DIR, .metavar = "DIR",
     .help = "the directory request workspaces live under"},
    {.name = "threads", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 1024,
     .help = "call threads (default 16)"},
    {.name = "max-body", .kind = CLI_SIZE, .metavar = "SIZE",
     .help = "request body limit, 1k to 1g (default 4m)"},
    {.name = "max-file-body", .kind = CLI_SIZE, .metavar = "SIZE",
     .help = "file or tar body of the files routes, 1k to 1t (default 1g)"},
    {.name = "max-connections", .kind = CLI_INT, .metavar = "N", .min = 4, .max = 100000,
     .help = "open connections (default 256)"},
    {.name = "background-max", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "longest life of a backgrounded call (default 1h)"},
    {.name = "mcp-sessions-per-token", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 64,
     .help = "/mcp sessions one token may hold, of 64 (default 8)"},
    {.name = "host-tool-memory", .kind = CLI_SIZE, .metavar = "SIZE",
     .help = "host-tool requests held at once, all sandboxes, 4m to 1t (default 32m)"},
    {.name = "mcp-session-idle", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "an MCP session idle this long ends, with its own sandbox (default 10m)"},
    {.name = "reap-interval", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "how often idle sandboxes and MCP sessions are looked for (default 60s)"},
    {.name = "code-queue", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 1024,
     .section = "Code contexts:", .help = "code runs waiting or running per sandbox (default 16)"},
    {.name = "code-max-contexts", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 64,
     .help = "code contexts per sandbox (default 8)"},
    {.name = "code-max-output", .kind = CLI_SIZE, .metavar = "SIZE",
     .help = "output of one code run, 1k to 256m (default 16m)"},
    {.name = "terminal-grace", .kind = CLI_DURATION, .metavar = "DURATION", .section = "Terminals:",
     .help = "how long a terminal lives without a client, and stays listed once ended (default 10m)"},
    {.name = "terminals-per-sandbox", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 256,
     .help = "terminals running in one sandbox at once (default 8)"},
    {.name = "max-terminals", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 1024,
     .help = "terminals of this runner (default 64)"},
    {.name = "terminal-scrollback", .kind = CLI_SIZE, .metavar = "SIZE",
     .help = "text kept of lines that scrolled off a terminal's screen, 1k to 64m (default 1m)"},
    {.name = "watches-per-sandbox", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 256,
     .section = "File events:", .help = "watches of GET /v1/files/watch in one sandbox at once (default 8)"},
    {.name = "watches-per-token", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 256,
     .help = "watches of one token (the control token, or one worker key) at once (default 16)"},
    {.name = "watch-queue", .kind = CLI_INT, .metavar = "N", .min = 16, .max = 1000000,
     .help = "events held per watch for a slow client before one \"overflow\" event (default 4096)"},
    END};

static const cli_flag files_watch_flags[] = {
    {.name = "recursive", .short_name = 'r', .help = "the folders below PATH too"},
    FLAGS_KEYED_SANDBOX,
    END};

static const cli_flag doctor_flags[] = {
    {.name = "json", .help = "print {\"healthy\", \"checks\": [...]}"},
    {.name = "mode", .kind = CLI_ENUM, .metavar = "MODE", .values = MODES,
     .help = "the mode whose fallback decision is shown (default: the configuration's)"},
    {.name = "project-environment", .kind = CLI_ENUM, .metavar = "ENV", .values = ENVIRONMENTS,
     .help = "the project environment for that decision"},
    END};

static const cli_flag list_flags[] = {
    {.name = "all", .short_name = 'a', .help = "exited and created sandboxes too"},
    {.name = "quiet", .short_name = 'q', .help = "only the ids"},
    {.name = "filter", .short_name = 'f', .kind = CLI_STRING, .metavar = "KEY=VALUE",
     .attrs = CLI_REPEAT,
     .help = "mode, project, run, worker, agent, status, pool or label=K[=V] (repeatable, all must match)"},
    {.name = "format", .kind = CLI_STRING, .metavar = "FORMAT", .values = "table|json",
     .help = "table, json, or a template of JSON field names: '{{.id}} {{.run_id}}'"},
    {.name = "json", .help = "print an array of objects (as --format json)"},
    END};

static const cli_flag reap_flags[] = {
    {.name = "older-than", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "remove sandboxes unused this long (90s, 10m, 2h, 7d)"},
    {.name = "dry-run", .short_name = 'n', .help = "show what would go, change nothing"},
    {.name = "force", .short_name = 'f', .help = "busy sandboxes too"},
    {.name = "json", .help = "print {\"removed\", \"spared\", \"dry_run\"}"},
    END};

static const cli_flag rm_flags[] = {
    {.name = "run-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_RUN_IDS,
     .help = "every sandbox of this run"},
    {.name = "worker-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_WORKER_IDS,
     .help = "every sandbox of this worker"},
    {.name = "force", .short_name = 'f', .help = "busy sandboxes too"},
    {.name = "wait", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "how long a call in flight is waited for before a busy sandbox is refused "
             "(default 10s)"},
    {.name = "no-wait", .help = "refuse a busy sandbox at once"},
    {.name = "json", .help = "print {\"removed\", \"spared\", \"dry_run\"}"},
    END};

static const cli_flag create_flags[] = {
    {.name = "template", .kind = CLI_NAME, .metavar = "NAME",
     .help = "a template of the configuration (templates.NAME)"},
    {.name = "image", .kind = CLI_STRING, .metavar = "REF", .help = "image (never pulled)"},
    FLAGS_SANDBOX_LIMITS,
    {.name = "mode", .kind = CLI_ENUM, .metavar = "MODE", .values = "per_run|per_worker",
     .help = "per_run (default) or per_worker"},
    {.name = "run-id", .kind = CLI_NAME, .metavar = "ID",
     .help = "its run (default: a run of its own, sbx-<random>)"},
    FLAG_WORKER_ID,
    FLAG_PROJECT,
    {.name = "agent", .kind = CLI_NAME, .metavar = "NAME",
     .help = "the agent whose configuration entry gives the settings"},
    {.name = "timeout", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "its life: removed by the next reap after it (default: the template's, else none)"},
    {.name = "idle-timeout", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "removed by a reap once unused this long (default: the template's, else the "
             "configuration's idle_timeout)"},
    {.name = "label", .kind = CLI_STRING, .metavar = "KEY=VALUE", .attrs = CLI_REPEAT,
     .help = "a label of its owner's (repeatable; GET /v1/sandboxes?label=KEY=VALUE finds it)"},
    {.name = "json", .help = "print its description (as GET /v1/sandboxes/ID)"},
    END};

#define FLAGS_KEEP_TARGET                                                                   \
  {.name = "run-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_RUN_IDS,     \
   .help = "the sandbox of this run"},                                                         \
  {.name = "worker-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_WORKER_IDS, \
   .help = "the sandbox of this worker"}

static const cli_flag pause_flags[] = {
    {.name = "tier", .kind = CLI_ENUM, .metavar = "TIER", .values = "freeze|stop|hibernate",
     .help = "freeze (default: memory kept, no CPU), stop (processes end, files kept) or "
             "hibernate (memory written to disk; gVisor)"},
    FLAGS_KEEP_TARGET,
    {.name = "no-wait", .help = "refuse when a call is in flight instead of waiting for it"},
    {.name = "wait", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "how long calls in flight are waited for (default 60s)"},
    {.name = "json", .help = "print {\"id\", \"name\", \"previous\", \"state\", \"since\", ...}"},
    END};

static const cli_flag resume_flags[] = {
    FLAGS_KEEP_TARGET,
    {.name = "json", .help = "print {\"id\", \"name\", \"previous\", \"state\", \"since\", ...}"},
    END};

static const cli_flag snapshot_take_flags[] = {
    {.name = "name", .kind = CLI_NAME, .metavar = "NAME",
     .help = "the snapshot's name (default snap-<UTC time>-<4 hex>)"},
    FLAGS_KEEP_TARGET,
    {.name = "no-wait", .help = "refuse when a call is in flight instead of waiting for it"},
    {.name = "wait", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "how long calls in flight are waited for (default 60s)"},
    {.name = "memory", .help = "also its processes' memory (the engine's checkpoint, where hibernate works: gVisor)"},
    {.name = "json", .help = "print the snapshot as JSON"},
    END};

static const cli_flag fork_flags[] = {
    {.name = "from-snapshot", .kind = CLI_NAME, .metavar = "NAME", .help = "the snapshot (required)"},
    {.name = "count", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 64,
     .help = "how many sandboxes (default 1)"},
    {.name = "prefix", .kind = CLI_NAME, .metavar = "P",
     .help = "their run ids are P-<8 hex> (default: the snapshot's name)"},
    FLAG_PROJECT,
    {.name = "json", .help = "print [{\"run_id\", \"name\", \"id\", \"duration_ms\", \"error\"}]"},
    END};

static const cli_flag rollback_flags[] = {
    {.name = "to", .kind = CLI_NAME, .metavar = "NAME", .help = "the snapshot (required)"},
    FLAGS_KEEP_TARGET,
    {.name = "json", .help = "print {\"id\", \"name\", \"previous\", \"state\", ...}"},
    END};

static const cli_flag diff_flags[] = {
    {.name = "from-snapshot", .kind = CLI_NAME, .metavar = "NAME", .help = "the snapshot (required)"},
    FLAGS_KEEP_TARGET,
    {.name = "json", .help = "print {\"added\", \"modified\", \"deleted\"}"},
    END};

static const cli_flag snapshot_reap_flags[] = {
    {.name = "older-than", .kind = CLI_DURATION, .metavar = "DURATION",
     .help = "remove snapshots older than this (90s, 10m, 2h, 7d)"},
    {.name = "keep", .kind = CLI_INT, .metavar = "N", .min = 0, .max = 1000000,
     .help = "keep only each owner's N newest"},
    {.name = "dry-run", .help = "say what would be removed, remove nothing"},
    {.name = "json", .help = "print the removed snapshots as a JSON array"},
    END};

static const cli_flag snapshot_list_flags[] = {
    {.name = "json", .help = "print a JSON array"},
    END};

static const cli_flag snapshot_inspect_flags[] = {
    {.name = "json", .help = "print it as JSON (the default)"},
    END};

static const cli_flag snapshot_rm_flags[] = {
    {.name = "json", .help = "print {\"removed\": [NAME...], \"failed\": [{\"name\", \"error\"}]}"},
    END};

static const cli_flag inspect_flags[] = {
    {.name = "json", .help = "print its description as JSON (the default)"},
    END};

static const cli_flag explain_flags[] = {
    {.name = "agent", .kind = CLI_NAME, .metavar = "NAME", .help = "the agent making the call"},
    {.name = "tool", .kind = CLI_NAME, .metavar = "NAME", .help = "the tool being called"},
    {.name = "user", .kind = CLI_NAME, .metavar = "ID", .help = "the end user"},
    {.name = "worker-key", .kind = CLI_NAME, .metavar = "KEY",
     .help = "a runner's worker: the services its token may lease"},
    {.name = "json", .help = "print the resolved settings as JSON"},
    {.name = "mode", .kind = CLI_ENUM, .metavar = "MODE", .values = MODES,
     .section = "Flags of `sandman run` to resolve with:", .help = "as `run --mode`"},
    {.name = "project-environment", .kind = CLI_ENUM, .metavar = "ENV", .values = ENVIRONMENTS,
     .help = "as `run --project-environment`"},
    {.name = "image", .kind = CLI_STRING, .metavar = "REF", .help = "as `run --image`"},
    {.name = "network", .kind = CLI_ENUM, .metavar = "NET", .values = "none|bridge|allowlist",
     .help = "as `run --network`"},
    {.name = "runtime", .kind = CLI_STRING, .metavar = "NAME", .help = "as `run --runtime`"},
    {.name = "cpu", .kind = CLI_NUMBER, .metavar = "N", .min = 0.01, .max = 1024,
     .help = "as `run --cpu`"},
    {.name = "mem", .kind = CLI_SIZE, .metavar = "SIZE", .help = "as `run --mem`"},
    {.name = "protect", .kind = CLI_STRING, .metavar = "GLOB", .attrs = CLI_REPEAT,
     .help = "as `run --protect` (repeatable)"},
    {.name = "pids", .kind = CLI_INT, .metavar = "N", .min = 1, .max = 4194304,
     .help = "as `run --pids`"},
    {.name = "disk", .kind = CLI_SIZE, .metavar = "SIZE", .help = "as `run --disk`"},
    {.name = "tmpfs", .kind = CLI_SIZE, .metavar = "SIZE", .help = "size of /tmp"},
    {.name = "timeout", .kind = CLI_DURATION, .metavar = "DURATION", .help = "as `run --timeout`"},
    {.name = "env-passthrough", .kind = CLI_STRING, .metavar = "GLOB", .attrs = CLI_REPEAT,
     .help = "as `run --env-passthrough` (repeatable)"},
    {.name = "exclude", .kind = CLI_STRING, .metavar = "GLOB", .attrs = CLI_REPEAT,
     .help = "as `run --exclude` (repeatable)"},
    END};

static const cli_flag image_build_flags[] = {
    {.name = "tag", .short_name = 't', .kind = CLI_STRING, .metavar = "REF",
     .help = "the image's name (default sandman/<folder name>:latest)"},
    END};

static const cli_flag token_derive_flags[] = {
    {.name = "worker-key", .kind = CLI_STRING, .metavar = "KEY", .help = "the worker's key (required)"},
    {.name = "token-file", .kind = CLI_FILE, .metavar = "FILE",
     .help = "the control token (else $" SM_TOKEN_ENV ")"},
    END};

static const cli_flag audit_flags[] = {
    {.name = "since", .kind = CLI_STRING, .metavar = "D",
     .help = "only events of the last D (90s, 10m, 2h, 7d) or since a time (2026-11-22T10:00:00Z)"},
    {.name = "agent", .kind = CLI_NAME, .metavar = "A", .help = "only events of agent A"},
    {.name = "run", .kind = CLI_NAME, .metavar = "R", .help = "only events of run R"},
    {.name = "denied", .help = "only refusals (disposition Blocked)"},
    {.name = "json", .help = "one JSON object per line, as stored"},
    {.name = "follow", .short_name = 'f', .help = "keep printing new events until interrupted"},
    {.name = "file", .kind = CLI_FILE, .metavar = "FILE",
     .help = "read FILE (default: audit.file, else <state dir>/audit/audit.jsonl)"},
    END};

static const cli_flag version_flags[] = {
    {.name = "json", .help = "print {\"version\", \"engine\": {...}}"},
    END};

static const cli_flag mcp_flags[] = {
    {.name = "mode", .kind = CLI_ENUM, .metavar = "MODE", .values = "per_run|per_worker",
     .section = "The sandbox:",
     .help = "per_run (default: a sandbox of this session's own) or per_worker"},
    {.name = "run-id", .kind = CLI_NAME, .metavar = "ID", .complete = CLI_COMPLETE_RUN_IDS,
     .help = "per_run: use (and keep) the sandbox of this run"},
    FLAG_WORKER_ID,
    {.name = "keep", .help = "keep the session's own sandbox when the session ends"},
    {.name = "agent", .kind = CLI_NAME, .metavar = "NAME",
     .help = "agent (configuration entry: settings and tool rules)"},
    FLAG_PROJECT,
    {.name = "project-environment", .kind = CLI_ENUM, .metavar = "ENV", .values = ENVIRONMENTS,
     .help = "production | staging | development"},
    {.name = "image", .kind = CLI_STRING, .metavar = "REF",
     .help = "image (default sandman/minimal:latest; never pulled)"},
    FLAGS_SANDBOX_LIMITS,
    {.name = "timeout", .kind = CLI_DURATION, .metavar = "SECONDS",
     .help = "per tool call (default 120)"},
    {.name = "workspace", .kind = CLI_DIR, .metavar = "DIR", .section = "A workspace:",
     .help = "copy DIR into /workspace before each tool call and the changes back after it"},
    FLAG_SYNC,
    FLAG_EXCLUDE,
    END};

static const cli_flag help_flags[] = {
    {.name = "man", .help = "print the whole manual page (roff) instead"},
    END};

#define RUN_NOTES                                                                            \
  "Sizes take k, m, g suffixes (powers of 1024). Exit status: the tool's own, or 2 usage "   \
  "error, 124 timeout, 125 sandman/engine/policy failure, 126 not executable, 127 not "     \
  "found, 137 killed (out of memory included)."

const cli_command cli_commands[] = {
    {.name = "", .args = "COMMAND [ARGS]", .flags = global_flags,
     .summary = "a sandbox manager for AI agents' tool calls",
     .description = "sandman runs the tool calls of AI agents (shell commands, code, file "
                    "edits) in hardened Docker containers: one per call, per workflow run or "
                    "per worker, with workspaces copied in and out as tar streams. It talks "
                    "to a Docker Engine over its API.",
     .notes = "Run `sandman help COMMAND` (or `sandman COMMAND --help`) for a command's "
              "options.",
     .min_args = 0, .max_args = -1, .attrs = CLI_CMD_STOP_AT_ARGS},
    {.name = "run", .args = "[OPTIONS] -- CMD [ARG...]", .flags = run_flags, .fn = cmd_run,
     .summary = "run one tool call in a sandbox",
     .description = "Runs one tool call in a sandbox and returns its result: the tool's "
                    "stdout and stderr as they arrive, and its exit status. The command "
                    "starts at the first argument that is not an option, or after --.",
     .notes = RUN_NOTES, .min_args = 1, .max_args = -1, .attrs = CLI_CMD_STOP_AT_ARGS},
    {.name = "code", .args = "[OPTIONS] [SANDBOX] (-c CODE | FILE | -)", .flags = code_flags, .fn = cmd_code,
     .summary = "run code in a live interpreter (a code context) of a keyed sandbox",
     .description = "Runs code in a code context of a keyed sandbox (--run-id, --worker-id, or "
                    "SANDBOX: a name or id of `sandbox list`): a Jupyter kernel that "
                    "keeps its variables, imports and data between runs (docs/code.md). Output "
                    "and the cell's value go to stdout as they come, errors with their traceback "
                    "to stderr; images are saved with --save-images. --list, --create, --info, "
                    "--interrupt, --restart and --delete manage the contexts instead.",
     .notes = "Exit status: 0 ok, 1 the cell raised, 124 its timeout interrupted it, 130 "
              "interrupted or cancelled, 137 the kernel died (the next run starts a fresh one), "
              "125 sandman or the sandbox failed, 2 usage error.",
     .min_args = 0, .max_args = 2, .complete_args = CLI_COMPLETE_FILES},
    {.name = "exec", .args = "[OPTIONS] [SANDBOX] -- CMD [ARG...]", .flags = exec_flags,
     .fn = cmd_exec, .summary = "run a command in an existing sandbox, like docker exec",
     .description = "Runs a command in a per_run or per_worker sandbox that exists already "
                    "(named by --run-id, --worker-id, or SANDBOX: a name or id from `sandbox "
                    "list`), as the sandbox's user, in /workspace, with the environment its "
                    "calls get; no workspace is copied. With -t it runs on a pseudo-terminal "
                    "of this terminal's size that sandman's agent opens in the sandbox (so it "
                    "works with network none and on a remote engine); with -i standard input "
                    "goes to it as it comes (docs/terminals.md).",
     .notes = "Exit status: the command's, or 2 usage error, 125 no such sandbox, sandbox "
              "stopped or sandman/engine failure, 137 killed; 128+N when sandman was stopped "
              "by signal N (the command is killed then).",
     .min_args = 1, .max_args = -1, .attrs = CLI_CMD_STOP_AT_ARGS,
     .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "files", .summary = "watch: file events of a keyed sandbox's folder"},
    {.name = "files watch", .flags = files_watch_flags, .fn = cmd_files_watch,
     .args = "[SANDBOX] [PATH]",
     .summary = "print a folder's file events as they happen",
     .description = "Prints the file events of folder PATH (default \".\", relative to "
                    "/workspace) of a per_run or per_worker sandbox that exists already "
                    "(named by --run-id, --worker-id, or SANDBOX), one JSON line each as GET /v1/files/watch streams them (created, modified, "
                    "deleted, moved, overflow), until SIGINT, SIGTERM or SIGHUP, or until the "
                    "folder itself goes (docs/file-events.md). A link on PATH is refused, "
                    "never followed.",
     .notes = "Exit status: 0 stopped by a signal or the folder gone, 1 PATH refused or "
              "missing, 2 usage error, 125 no such sandbox or sandman/engine failure.",
     .min_args = 0, .max_args = 2, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "worker", .summary = "worker start: serve the HTTP API"},
    {.name = "worker start", .flags = worker_flags, .fn = cmd_worker_start,
     .summary = "serve the runner's HTTP API",
     .description = "Serves the runner's HTTP API (docs/http-api.md) until SIGTERM or "
                    "SIGINT; then calls in flight finish and per_tool sandboxes are removed.",
     .max_args = 0},
    {.name = "serve", .alias_of = "worker start", .summary = "alias of `worker start`"},
    {.name = "sandbox", .summary = "doctor, list, reap, rm, create, inspect, pause, resume, port, snapshot, fork, rollback, diff",
     .description = "Operates the sandboxes of this instance ($SANDMAN_INSTANCE, default "
                    "\"default\"): only they are seen."},
    {.name = "sandbox doctor", .flags = doctor_flags, .fn = cmd_sandbox_doctor,
     .summary = "check that this host can run sandboxes",
     .description = "Checks the engine (and which address it came from), its limits, "
                    "runtimes and image, the socket and the state directory, and shows which "
                    "mode the fallback rule would use. Exit 0 when healthy, 1 when not.",
     .max_args = 0},
    {.name = "sandbox list", .flags = list_flags, .fn = cmd_sandbox_list,
     .summary = "this instance's sandboxes",
     .description = "Lists this instance's sandboxes like `docker ps`: running ones, all "
                    "with --all. Warm-pool containers are marked (pool) in STATUS.",
     .max_args = 0},
    {.name = "sandbox ls", .alias_of = "sandbox list", .summary = "alias of `sandbox list`"},
    {.name = "sandbox reap", .flags = reap_flags, .fn = cmd_sandbox_reap,
     .summary = "remove idle sandboxes and those whose owner is gone",
     .description = "Removes this instance's sandboxes (container, volume, state files) "
                    "unused for longer than DURATION, those whose owner process is gone, "
                    "exited ones and orphaned volumes. It covers the whole instance: every "
                    "project's, run's, worker's and runner's sandboxes on this engine, not only "
                    "those of your own calls (`sandbox rm` ends chosen ones). A busy sandbox (a "
                    "call in flight) is never removed without --force. With the configuration's "
                    "lifecycle (freeze_after, stop_after, remove_after) it first freezes, stops "
                    "and removes the keyed sandboxes unused that long (never a busy one). "
                    "--dry-run changes nothing.",
     .max_args = 0},
    {.name = "sandbox rm", .flags = rm_flags, .fn = cmd_sandbox_rm, .args = "[SANDBOX...]",
     .summary = "remove sandboxes by id, name, run or worker",
     .description = "Removes sandboxes of this instance: each SANDBOX by id (or a unique id "
                    "prefix) or name; every sandbox of a run with --run-id, of a worker with "
                    "--worker-id. A busy one is waited for (--wait, default 10s), then refused "
                    "without --force. Exit 1 when a named "
                    "sandbox does not exist, is busy or could not be removed.",
     .min_args = 0, .max_args = -1, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "sandbox remove", .alias_of = "sandbox rm", .summary = "alias of `sandbox rm`"},
    {.name = "sandbox create", .flags = create_flags, .fn = cmd_sandbox_create,
     .summary = "make a sandbox ahead of its calls",
     .description = "Makes a per_run (or per_worker) sandbox from a template or image and "
                    "starts it, against the engine (no runner needed), and prints its id "
                    "(--json: its description). Calls reach it by its run id, or on a runner "
                    "by its id (\"sandbox_id\"); it keeps its settings and is never replaced "
                    "by a call. Exit 1 when that sandbox exists already.",
     .max_args = 0},
    {.name = "sandbox inspect", .flags = inspect_flags, .fn = cmd_sandbox_inspect,
     .args = "SANDBOX", .summary = "one sandbox's description",
     .description = "Prints a sandbox's description (id, keys, template, resources, life, "
                    "labels) as JSON, as GET /v1/sandboxes/ID answers it. SANDBOX is its name, "
                    "id or a unique id prefix. Exit 1 when there is no such sandbox.",
     .min_args = 1, .max_args = 1, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "sandbox pause", .flags = pause_flags, .fn = cmd_sandbox_pause, .args = "[SANDBOX]",
     .summary = "put a keyed sandbox to rest: freeze, stop or hibernate",
     .description = "Puts one keyed sandbox (per_run, per_worker) to rest, named by SANDBOX, "
                    "--run-id or --worker-id. freeze (the default) pauses its processes: memory "
                    "kept, no CPU. stop ends them and keeps its files: /workspace is saved in the "
                    "state directory and put back when it starts again. hibernate writes its "
                    "processes' memory to disk through the engine's checkpoint and restores them "
                    "running (gVisor sandboxes; the engine's experimental mode). A call into a "
                    "resting sandbox resumes it by itself. Calls in flight are waited for "
                    "(--no-wait: refused). Exit 1 when the sandbox is missing, busy or cannot "
                    "go there from its state (docs/state.md).",
     .min_args = 0, .max_args = 1, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "sandbox resume", .flags = resume_flags, .fn = cmd_sandbox_resume, .args = "[SANDBOX]",
     .summary = "bring a resting sandbox back to running",
     .description = "Brings a frozen, stopped or hibernated sandbox back to running (a call "
                    "into it would too). A running one is left as it is.",
     .min_args = 0, .max_args = 1, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "sandbox port", .flags = port_flags, .fn = cmd_sandbox_port,
     .args = "[SANDBOX] PORT",
     .summary = "forward a local port to a port on a sandbox's loopback",
     .description = "Listens on a loopback address of this host (--listen, default a free "
                    "port on 127.0.0.1) and carries each connection to PORT on the own "
                    "loopback of a per_run or per_worker sandbox (named by --run-id, "
                    "--worker-id, or SANDBOX), through sandman's agent: it works with "
                    "network none, and the sandbox gains no network. Prints the address it "
                    "listens on once the relay runs in the sandbox; runs until interrupted. "
                    "The forward counts as a call in flight of the sandbox (docs/ports.md).",
     .notes = "Exit status: 0 when interrupted, 2 usage error, 125 no such sandbox, the "
              "sandbox stopped or went away, or sandman/engine failure.",
     .min_args = 1, .max_args = 2, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "sandbox snapshot", .flags = snapshot_take_flags, .fn = cmd_sandbox_snapshot,
     .args = "[SANDBOX]", .summary = "capture a keyed sandbox's files under a name",
     .description = "Captures one keyed sandbox (named by SANDBOX, --run-id or --worker-id): its "
                    "writable layer committed as an image and its /workspace as a tar in the state "
                    "directory, with a manifest of every file's SHA-256. Calls in flight are "
                    "waited for (--no-wait: refused); refused while a call with leased "
                    "credentials runs beside it. Exit 1 when the sandbox is missing or busy, or "
                    "the name is taken (docs/state.md).",
     .min_args = 0, .max_args = 1, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "sandbox fork", .flags = fork_flags, .fn = cmd_sandbox_fork,
     .summary = "new per_run sandboxes from a snapshot",
     .description = "Makes --count new per_run sandboxes from a snapshot and prints their run "
                    "ids, one a line. Each is a new sandbox: new container, /workspace from the "
                    "snapshot, none of the source's processes, leases or sessions. Calls reach one "
                    "with --mode per_run --run-id ID.",
     .max_args = 0},
    {.name = "sandbox rollback", .flags = rollback_flags, .fn = cmd_sandbox_rollback,
     .args = "[SANDBOX]", .summary = "return a keyed sandbox to a snapshot",
     .description = "Replaces the sandbox's container and /workspace with the snapshot's; its "
                    "name and keys stay, its processes end.",
     .min_args = 0, .max_args = 1, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "sandbox diff", .flags = diff_flags, .fn = cmd_sandbox_diff, .args = "[SANDBOX]",
     .summary = "what changed in /workspace since a snapshot",
     .description = "Lists the files of the sandbox's /workspace added (A), modified (M) and "
                    "deleted (D) since the snapshot, with their sizes.",
     .min_args = 0, .max_args = 1, .complete_args = CLI_COMPLETE_SANDBOXES},
    {.name = "snapshot", .summary = "list | inspect | rm | reap"},
    {.name = "snapshot list", .flags = snapshot_list_flags, .fn = cmd_snapshot_list,
     .summary = "this instance's snapshots, newest first",
     .description = "Lists the snapshots of this instance: name, source sandbox, files, sizes, age.",
     .max_args = 0},
    {.name = "snapshot inspect", .flags = snapshot_inspect_flags, .fn = cmd_snapshot_inspect, .args = "NAME",
     .summary = "one snapshot as JSON", .description = "Prints one snapshot as JSON. Exit 1 when there is none of that name.",
     .min_args = 1, .max_args = 1},
    {.name = "snapshot rm", .flags = snapshot_rm_flags, .fn = cmd_snapshot_rm, .args = "NAME...",
     .summary = "remove snapshots",
     .description = "Removes snapshots: their folder in the state directory and their image "
                    "(kept while a sandbox forked from it still uses it). Exit 1 when one is missing.",
     .min_args = 1, .max_args = 64},
    {.name = "snapshot reap", .flags = snapshot_reap_flags, .fn = cmd_snapshot_reap,
     .summary = "remove old snapshots and what a crash left",
     .description = "Removes snapshots older than --older-than and, per owner, all but the --keep "
                    "newest (neither: none), then what a crash left: temporary folders over an "
                    "hour old and snapshot images of this instance whose snapshot is gone (unless "
                    "a sandbox still uses one). Prints the removed snapshots' names.",
     .max_args = 0},
    {.name = "config", .summary = "check | explain | reload"},
    {.name = "config check", .fn = cmd_config_check, .args = "[FILE]",
     .complete_args = CLI_COMPLETE_FILES,
     .summary = "validate a configuration file",
     .description = "Validates FILE (else the file the search finds: --config, "
                    "$SANDMAN_CONFIG, ./sandman.yaml, $XDG_CONFIG_HOME/sandman/config.yaml). A "
                    "bad file exits 2 with FILE:LINE:COLUMN.",
     .min_args = 0, .max_args = 1},
    {.name = "config explain", .flags = explain_flags, .fn = cmd_config_explain,
     .summary = "the resolved settings of one call, each with its source",
     .description = "Resolves one call (agent, tool, user and run flags) and shows every "
                    "setting with where it came from, the policy and placement decisions "
                    "and the scope key.",
     .max_args = 0},
    {.name = "config reload", .fn = cmd_config_reload,
     .summary = "apply the configuration's egress lists to running sandboxes",
     .description = "Network allowlist: writes the egress policy of every running allowlist "
                    "sandbox of this instance from the configuration as it is now, so that a "
                    "changed egress.allow or egress.deny list reaches them without recreating "
                    "them (connections already open keep the policy they were judged by). A "
                    "runner reloads its configuration on SIGHUP instead (docs/network.md).",
     .max_args = 0},
    {.name = "image", .summary = "build | load sandbox images"},
    {.name = "image build", .flags = image_build_flags, .fn = cmd_image_build, .args = "NAME|DIR",
     .summary = "build an image from images/ through the engine, nothing pulled",
     .description = "Builds a sandbox image through the engine's build endpoint; nothing is "
                    "pulled from a registry (minimal and sandman need no network; the first "
                    "build of general and dind downloads Debian packages with debootstrap). "
                    "NAME is a folder under images/: $SANDMAN_IMAGES_DIR/NAME, else "
                    "images/NAME in the current directory or a parent, else beside the "
                    "sandman binary (../images, ../share/sandman/images). DIR is a folder "
                    "given by path (contains a '/', or is . or ..).\n\n"
                    "A folder with a rootfs.sh has it run first as `rootfs.sh --tar "
                    "STAGE/rootfs.tar`; the tar joins the build context. Progress goes to "
                    "stderr, the built image's id to stdout.",
     .min_args = 1, .max_args = 1, .complete_args = CLI_COMPLETE_IMAGES},
    {.name = "image load", .fn = cmd_image_load, .args = "FILE",
     .summary = "load images from a `docker save` tar (no registry needed)",
     .description = "Loads the images of FILE (a `docker save` tar, or - for standard input) "
                    "into the engine, with their tags: how images reach a CI engine that cannot "
                    "pull (docs/ci.md).",
     .min_args = 1, .max_args = 1, .complete_args = CLI_COMPLETE_FILES},
    {.name = "token", .summary = "derive a per-worker token"},
    {.name = "token derive", .flags = token_derive_flags, .fn = cmd_token_derive,
     .summary = "print a worker's token",
     .description = "Prints the per-worker token of KEY: hex(HMAC-SHA256(key = control "
                    "token, msg = \"" SM_WORKER_TOKEN_PREFIX "\" NUL KEY)). The control token "
                    "comes from --token-file (trailing newline stripped) or $" SM_TOKEN_ENV ".",
     .max_args = 0},
    {.name = "audit", .flags = audit_flags, .fn = cmd_audit,
     .summary = "read the audit trail",
     .description = "Prints the audit trail's events (docs/audit.md), oldest first, the rotated "
                    "files included, after collecting the egress proxy's decisions still waiting "
                    "in its container log. Lines cut short by a crash are skipped and counted on "
                    "stderr.",
     .max_args = 0},
    {.name = "mcp", .flags = mcp_flags, .fn = cmd_mcp,
     .summary = "an MCP server over stdio (tools in a sandbox)",
     .description = "Serves the Model Context Protocol over stdin and stdout (docs/mcp.md): an "
                    "agent, an IDE or any MCP client gets the tools execute, read_file, "
                    "write_file, edit_file, ls, glob and grep, all running in one sandbox that "
                    "keeps its files between calls. stdout carries only MCP messages; logs go to "
                    "stderr. The session's own sandbox is removed when stdin ends.",
     .notes = "Mode none and per_tool are refused (exit 2): file tools need a sandbox that "
              "outlives a call. An unhealthy engine, a missing runtime or image: exit 125.",
     .max_args = 0},
    {.name = "version", .flags = version_flags, .fn = cmd_version,
     .summary = "sandman, engine and API versions",
     .description = "Prints sandman's version, the engine's version and address and the "
                    "negotiated API version. Exit 1 when no engine answers (sandman's own "
                    "version is printed all the same), as `docker version`.",
     .max_args = 0},
    {.name = "completion", .fn = cmd_completion, .args = "bash|zsh|fish",
     .summary = "print a shell completion script",
     .description = "Prints a completion script for bash, zsh or fish: commands, flags, "
                    "their values, and run and worker ids from the engine.\n\n"
                    "bash: source <(sandman completion bash)\n"
                    "zsh:  sandman completion zsh > \"${fpath[1]}/_sandman\"\n"
                    "fish: sandman completion fish > ~/.config/fish/completions/sandman.fish",
     .min_args = 1, .max_args = 1, .arg_values = "bash|zsh|fish"},
    {.name = "help", .flags = help_flags, .fn = cmd_help, .args = "[COMMAND...]",
     .summary = "help on a command",
     .description = "Prints the help of COMMAND (`sandman help sandbox list`), or of "
                    "sandman itself.",
     .min_args = 0, .max_args = -1, .complete_args = CLI_COMPLETE_COMMANDS},
};

const size_t cli_n_commands = sizeof cli_commands / sizeof cli_commands[0];
