/* sandman: code contexts of a keyed sandbox (docs/code.md).
 *
 * A context is a live interpreter inside a keyed sandbox (per_run,
 * per_worker) that keeps its state between runs: a Jupyter kernel (Python's
 * ipykernel, or any kernel the image has a kernelspec for), started as the
 * sandbox's user by sandman's code driver in the sandbox and spoken to over
 * the Jupyter messaging protocol on Unix sockets of a private folder there.
 * Nothing of it listens on a network; it works with network none.
 *
 * Every operation is a call of sandman's helper in the sandbox
 * (sm_run_request.helper, as the files API: sandman/files.h): `base` names
 * the sandbox (settings with mode per_run or per_worker, project, run_id or
 * worker_id, principal, agent) and its argv, stdin, env and output fields
 * are ignored. The helper relays one request to the driver (started on
 * first use) and its answer back; what comes back is parsed against hard
 * caps and never trusted further than that.
 *
 * Contexts live as long as their sandbox's processes: a sandbox that is
 * removed, replaced or stopped takes them with it (the next operation finds
 * none and says so: SM_ENOTFOUND). A kernel that died is found dead at the
 * next run, which starts a fresh one and says the state was lost.
 *
 * Leased credentials never enter a context (a kernel outlives the call):
 * base->secret_env must be empty (SM_EPOLICY otherwise).
 *
 * Errors: SM_ENOTFOUND (no such context), SM_ECONFLICT (it exists),
 * SM_EINVAL (a bad name, an unknown kernel or language), SM_EBUSY (the
 * sandbox's limit of contexts), SM_ESANDBOX (a kernel that would not start,
 * an image without one), SM_EPROTOCOL (the sandbox answered outside the
 * protocol or its caps), and whatever the call itself met (SM_EUNREACHABLE,
 * SM_ETIMEOUT, SM_ECANCELLED, SM_EPOLICY).
 *
 * `call` (may be NULL) receives the underlying call's result (sandbox_id,
 * failure_kind); the caller disposes it with sm_run_result_dispose. */
#ifndef SANDMAN_CODE_H
#define SANDMAN_CODE_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/export.h>
#include <sandman/runner.h>
#include <sandman/run.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_CODE_NAME_MAX 64                  /* a context's name, bytes */
#define SM_CODE_DEFAULT_CONTEXT "default"
#define SM_CODE_DEFAULT_MAX_OUTPUT ((size_t)16 << 20) /* output of one run */
#define SM_CODE_MAX_OUTPUT_LIMIT ((size_t)256 << 20)
#define SM_CODE_DEFAULT_MAX_CONTEXTS 8       /* per sandbox */
#define SM_CODE_CODE_MAX ((size_t)4 << 20)   /* the code of one run */
#define SM_CODE_ENV_MAX 256                  /* variables of a context */
/* One line of the driver's answer at most (an image of a figure and its
 * JSON): a longer one ends the operation with SM_EPROTOCOL. */
#define SM_CODE_LINE_MAX ((size_t)13 << 20)

/* 1 when s is a context name: 1-64 letters, digits, _ . -, not starting
 * with . or -. */
SM_API int sm_code_name_valid(const char *s);

typedef struct sm_code_context_opts {
  const char *kernel;     /* a kernelspec's name, or NULL */
  const char *language;   /* NULL (and no kernel): "python" */
  const char *cwd;        /* NULL: /workspace */
  const char *const *env; /* "K=V" for the kernel (sm_env_name_classify's rules) */
  size_t n_env;
  unsigned max_contexts;  /* the sandbox's limit; 0: SM_CODE_DEFAULT_MAX_CONTEXTS */
} sm_code_context_opts;

#define SM_CODE_CONTEXT_OPTS_INIT {NULL, NULL, NULL, NULL, 0, 0}

/* A context as the driver describes it. */
typedef struct sm_code_context {
  char name[SM_CODE_NAME_MAX + 1];
  char kernel[128];
  char language[64];
  char cwd[1024];
  char state[16];          /* "idle", "busy", "dead", "stopped" */
  int64_t execution_count;
  double created_at;       /* seconds since the epoch, the sandbox's clock */
  double last_run_at;      /* 0: never */
  int64_t queued;          /* runs waiting for their turn */
} sm_code_context;

/* {"name", "kernel", "language", "cwd", "state", "execution_count",
 * "created_at", "last_run_at", "queued"} (caller owns it). */
SM_API json_object *sm_code_context_to_json(const sm_code_context *c);

typedef struct sm_code_context_list {
  sm_code_context *v;
  size_t n;
} sm_code_context_list;

SM_API void sm_code_context_list_dispose(sm_code_context_list *l);

/* ---- events of a run, in order ----
 * START once the run has its turn; RESTARTED before it when the kernel had
 * died (or was killed) since the last run: its state is gone; STDOUT and
 * STDERR text; DISPLAY and RESULT (the cell's value) MIME bundles; ERROR the
 * exception; TRUNCATED once the output passed max_output (what follows of
 * stdout, stderr, display and result is dropped); END last. */
typedef enum {
  SM_CODE_EV_START = 0,
  SM_CODE_EV_RESTARTED,
  SM_CODE_EV_STDOUT,
  SM_CODE_EV_STDERR,
  SM_CODE_EV_DISPLAY,
  SM_CODE_EV_RESULT,
  SM_CODE_EV_ERROR,
  SM_CODE_EV_TRUNCATED,
  SM_CODE_EV_NOTICE,
  SM_CODE_EV_END,
} sm_code_event_type;

/* "start", "restarted", "stdout", ... (static). */
SM_API const char *sm_code_event_name(sm_code_event_type t);

typedef struct sm_code_event {
  sm_code_event_type type;
  /* STDOUT/STDERR: the text; RESTARTED: why the state was lost; NOTICE and
   * END: a message (may be NULL). */
  const char *text;
  size_t text_len;
  /* DISPLAY/RESULT: the MIME bundle, only text/plain, text/html,
   * text/markdown, text/latex, image/png, image/jpeg (base64),
   * image/svg+xml, application/json, application/javascript,
   * application/pdf (base64); each value a string but application/json's. */
  json_object *data;
  const char *name, *value, *traceback; /* ERROR */
  /* END: "ok", "error", "timeout", "interrupted", "died", "cancelled" */
  const char *status;
  int64_t execution_count;              /* RESULT and END; -1 when unknown */
  double duration_ms;                   /* END: the cell's time in the kernel */
  int truncated;                        /* END */
} sm_code_event;

/* The event as the runner streams it: {"event": NAME, ...} (caller owns it). */
SM_API json_object *sm_code_event_to_json(const sm_code_event *ev);

/* Called for each event as it arrives; everything it points to is valid
 * during the call only. Return 0, or a negative code to stop the run (it
 * is then cancelled in the sandbox). */
typedef int (*sm_code_event_fn)(void *ud, const sm_code_event *ev);

typedef struct sm_code_run_opts {
  double timeout_s;     /* the cell's; 0: base->settings.timeout_s. Past it the
                         * cell is interrupted (END "timeout") */
  size_t max_output;    /* bytes of output events; 0: SM_CODE_DEFAULT_MAX_OUTPUT */
  /* Create the context when it does not exist (with `create`, may be NULL
   * for the defaults): what a run of the default context does. */
  int ensure;
  const sm_code_context_opts *create;
  sm_code_event_fn on_event;
  void *ud;
} sm_code_run_opts;

#define SM_CODE_RUN_OPTS_INIT {0, 0, 0, NULL, NULL, NULL}

/* How a run ended (from its END event). */
typedef struct sm_code_run_end {
  char status[16];      /* "" when no END came (the error says why) */
  int64_t execution_count;
  double duration_ms;
  int truncated;
  int restarted;        /* a RESTARTED event came: the state before was lost */
  char message[512];
} sm_code_run_end;

/* Runs code in context `name` (NULL: the default context, created on first
 * use). Returns 0 once the run ended, however the cell did (out->status);
 * the events went to opts->on_event as they came. */
SM_API int sm_code_run(sm_runner *runner, const sm_run_request *base, const char *name,
                       const char *code, const sm_code_run_opts *opts, sm_code_run_end *out,
                       sm_run_result *call, sm_error *err);

/* ---- contexts ---- */
/* Creates context name (SM_ECONFLICT when it exists) and waits for its
 * kernel to answer; *out describes it. */
SM_API int sm_code_create(sm_runner *runner, const sm_run_request *base, const char *name,
                          const sm_code_context_opts *opts, sm_code_context *out,
                          sm_run_result *call, sm_error *err);
SM_API int sm_code_info(sm_runner *runner, const sm_run_request *base, const char *name,
                        sm_code_context *out, sm_run_result *call, sm_error *err);
SM_API int sm_code_list(sm_runner *runner, const sm_run_request *base,
                        sm_code_context_list *out, sm_run_result *call, sm_error *err);
/* Interrupts the cell running in name (as Ctrl-C); *interrupted (may be
 * NULL): whether one ran. Runs waiting their turn are left alone. */
SM_API int sm_code_interrupt(sm_runner *runner, const sm_run_request *base, const char *name,
                             int *interrupted, sm_run_result *call, sm_error *err);
/* A fresh kernel for name: its state is dropped; a cell running now ends
 * "cancelled". */
SM_API int sm_code_restart(sm_runner *runner, const sm_run_request *base, const char *name,
                           sm_code_context *out, sm_run_result *call, sm_error *err);
SM_API int sm_code_delete(sm_runner *runner, const sm_run_request *base, const char *name,
                          sm_run_result *call, sm_error *err);

/* ---- a run's events gathered (the shape of E2B's Execution) ---- */
typedef struct sm_code_execution sm_code_execution;

/* max_bytes: what it holds at most (output beyond is dropped and said in
 * "truncated"); 0: SM_CODE_DEFAULT_MAX_OUTPUT. NULL when out of memory. */
SM_API sm_code_execution *sm_code_execution_new(size_t max_bytes);
SM_API void sm_code_execution_free(sm_code_execution *x);
/* Adds one event (an sm_code_event_fn: ud is the execution). */
SM_API int sm_code_execution_add(void *x, const sm_code_event *ev);
/* {"results": [{"text", "html", "markdown", "latex", "png", "jpeg", "svg",
 * "json", "javascript", "pdf", "is_main_result"}], "logs": {"stdout": [...],
 * "stderr": [...]}, "error": {"name", "value", "traceback"} | null,
 * "execution_count", "status", "duration_ms", "truncated", "state_lost",
 * "message"}: end is the run's end (caller owns the object). */
SM_API json_object *sm_code_execution_to_json(const sm_code_execution *x,
                                              const sm_code_run_end *end);

#ifdef __cplusplus
}
#endif

#endif
