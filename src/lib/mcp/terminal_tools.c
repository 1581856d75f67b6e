/* The MCP terminal tools (terminal_tools.h): a session's terminals, each a
 * running terminal (src/lib/terminal/terminal_run.h) in the session's sandbox;
 * every tool answers with the screen as the model reads it, after the
 * terminal has been quiet for a moment (or the wait ran out). */
#include "mcp/terminal_tools.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/terminal.h>

#include "common/text.h"
#include "terminal/terminal_run.h"

#define DEFAULT_ROWS 24
#define DEFAULT_COLS 80
#define DEFAULT_WAIT_MS 2000
#define DEFAULT_QUIET_MS 150
#define WAIT_MAX_MS 30000
#define START_WAIT_MS 120000.0
#define SCROLLBACK ((size_t)256 << 10)
#define TERM_ENV "TERM=xterm-256color"

const char mcp_terminal_schema_open[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"description\":\"What runs on the terminal, with /bin/sh "
    "-c in /workspace (default: a shell), e.g. python3 or vim notes.txt\"},"
    "\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500},"
    "\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500},"
    "\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"How long "
    "to wait for the screen to settle before answering (default 2000)\"}},"
    "\"additionalProperties\":false}";
const char mcp_terminal_schema_send[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"terminal\":{\"type\":\"string\",\"description\":\"Which terminal (default: the last one "
    "opened; a shell is opened when there is none)\"},"
    "\"keys\":{\"type\":\"string\",\"description\":\"Typed as is: \\\\r is Enter, \\\\u0003 "
    "Ctrl-C, \\\\u0004 Ctrl-D, \\\\u001b Escape, \\\\u001b[A Up, \\\\t Tab\"},"
    "\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"How long "
    "to wait for the screen to settle (default 2000)\"}},"
    "\"required\":[\"keys\"],\"additionalProperties\":false}";
const char mcp_terminal_schema_screen[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"terminal\":{\"type\":\"string\",\"description\":\"Which terminal (default: the last one "
    "opened)\"},"
    "\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"Wait up "
    "to this long for the screen to settle first (default 0)\"}},"
    "\"additionalProperties\":false}";
const char mcp_terminal_schema_close[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"terminal\":{\"type\":\"string\",\"description\":\"Which terminal\"}},"
    "\"required\":[\"terminal\"],\"additionalProperties\":false}";

/* The screen as screen_result gives it (terminal_screen_json and the
 * terminal's name and state). */
const char mcp_terminal_out_screen[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"terminal\":{\"type\":\"string\",\"description\":\"The terminal's name\"},"
    "\"state\":{\"type\":\"string\",\"enum\":[\"running\",\"exited\"]},"
    "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
    "\"rows\":{\"type\":\"integer\"},\"cols\":{\"type\":\"integer\"},"
    "\"cursor\":{\"type\":\"object\",\"properties\":{\"row\":{\"type\":\"integer\"},"
    "\"col\":{\"type\":\"integer\"},\"visible\":{\"type\":\"boolean\"}},"
    "\"required\":[\"row\",\"col\"]},"
    "\"alt_screen\":{\"type\":\"boolean\"},\"title\":{\"type\":\"string\"},"
    "\"text\":{\"type\":\"string\",\"description\":\"The screen's text, line by line\"},"
    "\"lines\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
    "\"required\":[\"terminal\",\"state\",\"rows\",\"cols\",\"cursor\",\"text\",\"lines\"]}";

typedef struct slot {
  struct slot *next;
  sm_runner *runner;
  char name[16];
  int refs; /* under ts->mu */
  sm_run_request req;
  const char *argv[3];
  const char *env[1];
  char *command;
  terminal_run *run;
} slot;

struct mcp_terminals {
  pthread_mutex_t mu;
  sm_runner *runner;
  mcp_terminal_prepare_fn prepare;
  void *ud;
  slot *list; /* newest first */
  size_t n;
  unsigned next_num;
};

mcp_terminals *mcp_terminals_new(sm_runner *runner, mcp_terminal_prepare_fn prepare, void *ud) {
  mcp_terminals *ts = calloc(1, sizeof *ts);
  if (ts == NULL) return NULL;
  ts->runner = runner;
  pthread_mutex_init(&ts->mu, NULL);
  ts->prepare = prepare;
  ts->ud = ud;
  return ts;
}

static void slot_free(slot *s) {
  terminal_run_free(s->run);
  free(s->command);
  free(s);
}

static void slot_release(mcp_terminals *ts, slot *s) {
  pthread_mutex_lock(&ts->mu);
  int last = --s->refs == 0;
  pthread_mutex_unlock(&ts->mu);
  if (last) slot_free(s);
}

void mcp_terminals_free(mcp_terminals *ts) {
  if (ts == NULL) return;
  while (ts->list) {
    slot *s = ts->list;
    ts->list = s->next;
    slot_release(ts, s);
  }
  pthread_mutex_destroy(&ts->mu);
  free(ts);
}

/* The terminal named (NULL: the newest), held; NULL when none. */
static slot *slot_find(mcp_terminals *ts, const char *name) {
  pthread_mutex_lock(&ts->mu);
  slot *s = ts->list;
  while (s && name && strcmp(s->name, name) != 0) s = s->next;
  if (s) s->refs++;
  pthread_mutex_unlock(&ts->mu);
  return s;
}

static int arg_int(json_object *args, const char *key, int dflt) {
  json_object *v = NULL;
  return json_object_object_get_ex(args, key, &v) ? (int)json_object_get_int64(v) : dflt;
}

static const char *arg_str(json_object *args, const char *key) {
  json_object *v = NULL;
  return json_object_object_get_ex(args, key, &v) ? json_object_get_string(v) : NULL;
}

/* ---- answers ---- */

/* The screen as the tool's answer: a text block for the model and the
 * screen's JSON as structured content. */
static int screen_result(slot *s, sm_mcp_result *out) {
  json_object *o = terminal_run_screen_json(s->run, 0);
  if (o == NULL) return SM_ENOMEM;
  int code = 0;
  char error[512] = "";
  terminal_state st = terminal_run_state(s->run, &code, NULL, error, sizeof error);
  json_object *c = NULL, *row = NULL, *col = NULL, *text = NULL;
  json_object_object_get_ex(o, "cursor", &c);
  json_object_object_get_ex(c, "row", &row);
  json_object_object_get_ex(c, "col", &col);
  json_object_object_get_ex(o, "text", &text);
  unsigned rows, cols;
  terminal_run_size(s->run, &rows, &cols);
  char head[768];
  int n =
      st == TERMINAL_EXITED
          ? snprintf(head, sizeof head, "[terminal %s: exited with %d%s%s, %ux%u]\n", s->name, code,
                     error[0] ? ": " : "", error, cols, rows)
          : snprintf(head, sizeof head, "[terminal %s: running, %ux%u, cursor at row %d col %d]\n",
                     s->name, cols, rows, json_object_get_int(row), json_object_get_int(col));
  const char *t = json_object_get_string(text);
  size_t tl = (size_t)json_object_get_string_len(text);
  char *all = malloc((size_t)n + tl + 1);
  if (all == NULL) {
    json_object_put(o);
    return SM_ENOMEM;
  }
  memcpy(all, head, (size_t)n);
  memcpy(all + n, t, tl);
  sm_mcp_result_text(out, all, (size_t)n + tl);
  free(all);
  json_object_object_add(o, "terminal", json_object_new_string(s->name));
  json_object_object_add(o, "state",
                         json_object_new_string(st == TERMINAL_EXITED ? "exited" : "running"));
  json_object_object_add(o, "exit_code", st == TERMINAL_EXITED ? json_object_new_int(code) : NULL);
  sm_mcp_result_structured(out, o);
  return 0;
}

/* ---- the tools ---- */

static void run_call(void *ud, const sm_run_request *req, sm_run_result *res) {
  slot *s = ud;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_run(s->runner, req, res, &err);
  if (rc != 0 && res->error[0] == '\0') snprintf(res->error, sizeof res->error, "%s", err.message);
}

/* A new terminal running command (NULL: a shell); 0 with *out held. */
static int open_slot(mcp_terminals *ts, const char *command, unsigned rows, unsigned cols,
                     volatile int *cancel, slot **held, sm_mcp_result *out) {
  *held = NULL;
  pthread_mutex_lock(&ts->mu);
  int full = ts->n >= MCP_TERMINALS_MAX;
  pthread_mutex_unlock(&ts->mu);
  if (full)
    return sm_mcp_result_error(out, "this session has %d terminals already: close one first",
                               MCP_TERMINALS_MAX);
  slot *s = calloc(1, sizeof *s);
  if (s == NULL || (command && (s->command = strdup(command)) == NULL)) {
    free(s);
    return SM_ENOMEM;
  }
  s->runner = ts->runner;
  if (ts->prepare(ts->ud, cancel, &s->req, out) != 0) {
    slot_free(s);
    return 0;
  }
  s->argv[0] = "/bin/sh";
  s->argv[1] = "-c";
  s->argv[2] = s->command;
  s->req.argv = s->argv;
  s->req.argc = command ? 3 : 1;
  s->env[0] = TERM_ENV;
  s->req.env = s->env;
  s->req.n_env = 1;
  /* The terminal works in the sandbox as it is: no workspace copy. */
  s->req.workspace = NULL;
  s->req.stdin_read = NULL;
  terminal_run_hooks hooks = {.run = run_call, .ud = s};
  sm_error err = SM_ERROR_INIT;
  s->run = terminal_run_start(&s->req, rows, cols, SCROLLBACK, &hooks, &err);
  if (s->run == NULL) {
    slot_free(s);
    return sm_mcp_result_error(out, "the terminal could not start: %s", err.message);
  }
  if (!terminal_run_wait_started(s->run, START_WAIT_MS)) {
    char why[512] = "";
    terminal_run_wait_ended(s->run, START_WAIT_MS);
    terminal_run_state(s->run, NULL, NULL, why, sizeof why);
    slot_free(s);
    return sm_mcp_result_error(out, "the terminal could not start: %s",
                               why[0] ? why : "it ended at once");
  }
  pthread_mutex_lock(&ts->mu);
  snprintf(s->name, sizeof s->name, "%u", ++ts->next_num);
  s->refs = 2; /* the list's and the caller's */
  s->next = ts->list;
  ts->list = s;
  ts->n++;
  pthread_mutex_unlock(&ts->mu);
  *held = s;
  return 0;
}

int mcp_terminal_open(mcp_terminals *ts, json_object *args, volatile int *cancel,
                      sm_mcp_result *out) {
  int rows = arg_int(args, "rows", DEFAULT_ROWS), cols = arg_int(args, "cols", DEFAULT_COLS);
  int wait = arg_int(args, "wait_ms", DEFAULT_WAIT_MS);
  if (rows < 1 || cols < 1 || rows > 500 || cols > 500)
    return sm_mcp_result_error(out, "rows and cols must be 1 to 500");
  if (wait < 0 || wait > WAIT_MAX_MS) return sm_mcp_result_error(out, "wait_ms must be 0 to 30000");
  slot *s = NULL;
  int rc = open_slot(ts, arg_str(args, "command"), (unsigned)rows, (unsigned)cols, cancel, &s, out);
  if (rc || s == NULL) return rc;
  terminal_run_settle(s->run, DEFAULT_QUIET_MS * 2, wait, 0);
  rc = screen_result(s, out);
  slot_release(ts, s);
  return rc;
}

int mcp_terminal_send(mcp_terminals *ts, json_object *args, volatile int *cancel,
                      sm_mcp_result *out) {
  const char *name = arg_str(args, "terminal"), *keys = arg_str(args, "keys");
  int wait = arg_int(args, "wait_ms", DEFAULT_WAIT_MS);
  if (wait < 0 || wait > WAIT_MAX_MS) return sm_mcp_result_error(out, "wait_ms must be 0 to 30000");
  slot *s = slot_find(ts, name);
  if (s == NULL && name) return sm_mcp_result_error(out, "no terminal '%s' in this session", name);
  if (s == NULL) {
    /* The first keys of a session: a shell to type them into. */
    int rc = open_slot(ts, NULL, DEFAULT_ROWS, DEFAULT_COLS, cancel, &s, out);
    if (rc || s == NULL) return rc;
    terminal_run_settle(s->run, DEFAULT_QUIET_MS * 2, DEFAULT_WAIT_MS, 0);
  }
  sm_error err = SM_ERROR_INIT;
  int rc = terminal_run_input(s->run, keys, strlen(keys), &err);
  if (rc == SM_ENOMEM) {
    slot_release(ts, s);
    return rc;
  }
  if (rc) {
    sm_mcp_result_error(out, "terminal %s: %s", s->name, err.message);
    slot_release(ts, s);
    return 0;
  }
  terminal_run_settle(s->run, DEFAULT_QUIET_MS, wait, 1);
  rc = screen_result(s, out);
  slot_release(ts, s);
  return rc;
}

int mcp_terminal_screen(mcp_terminals *ts, json_object *args, volatile int *cancel,
                        sm_mcp_result *out) {
  (void)cancel;
  const char *name = arg_str(args, "terminal");
  int wait = arg_int(args, "wait_ms", 0);
  if (wait < 0 || wait > WAIT_MAX_MS) return sm_mcp_result_error(out, "wait_ms must be 0 to 30000");
  slot *s = slot_find(ts, name);
  if (s == NULL)
    return name ? sm_mcp_result_error(out, "no terminal '%s' in this session", name)
                : sm_mcp_result_error(out,
                                      "no terminal is open: terminal_open or terminal_send first");
  if (wait > 0) terminal_run_settle(s->run, DEFAULT_QUIET_MS, wait, 0);
  int rc = screen_result(s, out);
  slot_release(ts, s);
  return rc;
}

int mcp_terminal_close(mcp_terminals *ts, json_object *args, volatile int *cancel,
                       sm_mcp_result *out) {
  (void)cancel;
  const char *name = arg_str(args, "terminal");
  pthread_mutex_lock(&ts->mu);
  slot **pp = &ts->list;
  while (*pp && strcmp((*pp)->name, name) != 0) pp = &(*pp)->next;
  slot *s = *pp;
  if (s) {
    *pp = s->next;
    ts->n--;
  }
  pthread_mutex_unlock(&ts->mu);
  if (s == NULL) return sm_mcp_result_error(out, "no terminal '%s' in this session", name);
  terminal_run_cancel(s->run);
  terminal_run_wait_ended(s->run, 30000.0);
  int rc = screen_result(s, out);
  slot_release(ts, s); /* the list's */
  return rc;
}
