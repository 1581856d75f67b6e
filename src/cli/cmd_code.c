/* sandman code [--run-id ID | --worker-id ID | SANDBOX] [--context NAME]
 * (-c CODE | FILE | -): a run in a code context of a keyed sandbox, and the
 * contexts' management (--list, --create, --info, --interrupt, --restart,
 * --delete). Works against the engine, as `sandman run` does
 * (docs/code.md): the sandbox is the one `sandman run --mode per_run
 * --run-id ID` uses, or SANDBOX (a name or id, `sandman sandbox create`)
 * used as it was made.
 *
 * Plain output: stdout and the cell's value (text/plain) on stdout, stderr
 * and the error's traceback on stderr, images saved with --save-images DIR;
 * --json: each event as a JSON line. Exit status: 0 ok, 1 the cell raised,
 * 124 timeout (interrupted), 130 interrupted or cancelled, 137 the kernel
 * died, 125 sandman or the sandbox failed, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define MAX_ENV 256
#define CODE_FILE_MAX SM_CODE_CODE_MAX

typedef struct code_args {
  sm_config_flags flags;
  sm_call_names names;
  const char *context;
  const char **env;
  size_t n_env;
  sm_code_context_opts copts;
  const char *action;   /* NULL (a run), "list", "create", "info", ... */
  const char *sandbox;  /* SANDBOX (a name or id), or NULL */
  const char *save_dir; /* --save-images */
  int json;
  char *code;
} code_args;

/* Events printed as they come. */
typedef struct printer {
  const code_args *a;
  unsigned images;
  int error_seen;
} printer;


static const char *const actions[] = {"list", "create", "info", "interrupt", "restart", "delete"};

/* ---- the code to run ---- */

static int read_fd(int fd, char **out) {
  size_t cap = 64 * 1024, n = 0;
  char *buf = malloc(cap + 1);
  if (buf == NULL) return -1;
  for (;;) {
    if (n == cap) {
      if (cap >= CODE_FILE_MAX) {
        free(buf);
        errno = EFBIG;
        return -1;
      }
      cap = cap * 2 > CODE_FILE_MAX ? CODE_FILE_MAX : cap * 2;
      char *bigger = realloc(buf, cap + 1);
      if (bigger == NULL) {
        free(buf);
        return -1;
      }
      buf = bigger;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      free(buf);
      return -1;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  buf[n] = '\0';
  if (strlen(buf) != n) {
    free(buf);
    errno = EINVAL;
    return -1;
  }
  *out = buf;
  return 0;
}

/* The positional arguments: [SANDBOX] with -c or an action, [SANDBOX] FILE
 * otherwise. */
static int positionals(const cli_call *call, code_args *a, const char **file) {
  int takes_file = !a->action && !cli_has(call, "code");
  *file = NULL;
  if (call->n_args > (takes_file ? 2 : 1))
    return cli_usage_error(call->cmd, a->json, "%s", takes_file ? "takes [SANDBOX] FILE"
                                                    : "takes at most SANDBOX (-c or an action: no FILE)");
  if (takes_file && call->n_args > 0) *file = call->args[call->n_args - 1];
  if (call->n_args == (takes_file ? 2 : 1)) a->sandbox = call->args[0];
  return 0;
}

static int load_code(const cli_call *call, code_args *a, const char *path) {
  const char *c = cli_str(call, "code");
  if (c) {
    a->code = strdup(c);
    return a->code ? 0 : cli_usage_error(call->cmd, a->json, "out of memory");
  }
  if (path == NULL)
    return cli_usage_error(call->cmd, a->json, "no code: -c CODE, FILE, or - for standard input");
  int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read_fd(fd, &a->code) != 0) {
    int e = errno;
    if (fd > STDIN_FILENO) close(fd);
    return cli_usage_error(call->cmd, a->json, "%s: %s", path,
                           e == EFBIG ? "larger than 4 MiB" : e == EINVAL ? "holds a NUL byte" : strerror(e));
  }
  if (fd > STDIN_FILENO) close(fd);
  return 0;
}

/* ---- flags ---- */

static int parse_args(const cli_call *call, code_args *a) {
  memset(a, 0, sizeof *a);
  a->json = cli_has(call, "json");
  cli_sandbox_flags(call, "", &a->flags);
  a->names = (sm_call_names){.project = cli_str(call, "project"),
                             .agent = cli_str(call, "agent"),
                             .tool = "code",
                             .user = cli_str(call, "user"),
                             .run_id = cli_str(call, "run-id"),
                             .worker_id = cli_str(call, "worker-id")};
  size_t n_actions = 0;
  for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
    if (cli_has(call, actions[i])) a->action = actions[i], n_actions++;
  if (n_actions > 1)
    return cli_usage_error(call->cmd, a->json, "one of --list, --create, --info, --interrupt, "
                                               "--restart, --delete at a time");
  const char *file = NULL;
  int rc = positionals(call, a, &file);
  if (rc) return rc;
  if (a->sandbox && (a->names.run_id || a->names.worker_id || a->flags.mode || a->names.project))
    return cli_usage_error(call->cmd, a->json,
                           "SANDBOX names the sandbox: no --run-id, --worker-id, --mode or "
                           "--project with it");
  if (a->flags.mode == NULL && a->sandbox == NULL)
    a->flags.mode = a->names.run_id ? "per_run" : a->names.worker_id ? "per_worker" : NULL;
  if (a->sandbox == NULL &&
      (a->flags.mode == NULL ||
       (strcmp(a->flags.mode, "per_run") != 0 && strcmp(a->flags.mode, "per_worker") != 0)))
    return cli_usage_error(call->cmd, a->json,
                           "code contexts live in a keyed sandbox: --run-id ID (per_run), "
                           "--worker-id ID (per_worker) or SANDBOX");
  a->context = cli_str(call, "context");
  if (a->context && !sm_code_name_valid(a->context))
    return cli_usage_error(call->cmd, a->json,
                           "--context: 1-64 letters, digits, _ . - (not starting with . or -)");
  a->n_env = cli_list(call, "env", &a->env);
  if (a->n_env > MAX_ENV) return cli_usage_error(call->cmd, a->json, "-e: at most %d", MAX_ENV);
  for (size_t i = 0; i < a->n_env; i++) {
    const char *eq = strchr(a->env[i], '=');
    size_t n = eq ? (size_t)(eq - a->env[i]) : strlen(a->env[i]);
    sm_env_name_class cls = sm_env_name_classify(a->env[i], n);
    if (eq == NULL || cls == SM_ENV_NAME_INVALID || cls == SM_ENV_NAME_BLOCKED)
      return cli_usage_error(call->cmd, a->json, "-e %.*s: %s", (int)(n > 200 ? 200 : n), a->env[i],
                             eq ? sm_env_name_refusal(cls) : "takes NAME=VALUE");
  }
  a->copts.kernel = cli_str(call, "kernel");
  a->copts.language = cli_str(call, "language");
  a->copts.cwd = cli_str(call, "cwd");
  a->copts.env = a->env;
  a->copts.n_env = a->n_env;
  if (a->copts.kernel && a->copts.language)
    return cli_usage_error(call->cmd, a->json, "--kernel or --language, not both");
  if (a->copts.cwd && a->copts.cwd[0] != '/')
    return cli_usage_error(call->cmd, a->json, "--cwd: an absolute path in the sandbox");
  a->save_dir = cli_str(call, "save-images");
  if (a->action) {
    if (cli_has(call, "code"))
      return cli_usage_error(call->cmd, a->json, "--%s takes no code", a->action);
    if (a->context == NULL && strcmp(a->action, "create") == 0)
      return cli_usage_error(call->cmd, a->json, "--create needs --context NAME");
    return 0;
  }
  return load_code(call, a, file);
}

/* ---- images ---- */

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Base64 (white space ignored) into a new buffer: 0, or -1. */
static int b64_decode(const char *s, size_t len, unsigned char **out, size_t *out_len) {
  unsigned char *buf = malloc(len / 4 * 3 + 3);
  if (buf == NULL) return -1;
  size_t n = 0;
  unsigned acc = 0;
  int bits = 0, pad = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n' || c == '\r' || c == ' ') continue;
    if (c == '=') {
      pad++;
      continue;
    }
    int v = b64_value(c);
    if (v < 0 || pad) {
      free(buf);
      return -1;
    }
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      buf[n++] = (unsigned char)(acc >> bits);
    }
  }
  *out = buf;
  *out_len = n;
  return 0;
}

/* Saves the bundle's images to the --save-images folder; says where. */
static void save_images(printer *p, json_object *data) {
  static const struct {
    const char *mime, *ext;
    int b64;
  } kinds[] = {{"image/png", "png", 1}, {"image/jpeg", "jpg", 1}, {"image/svg+xml", "svg", 0}};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(data, kinds[i].mime, &v)) continue;
    const char *s = json_object_get_string(v);
    size_t len = (size_t)json_object_get_string_len(v);
    if (p->a->save_dir == NULL) {
      cli_note("an %s image was not shown (--save-images DIR saves it)", kinds[i].mime);
      continue;
    }
    unsigned char *decoded = NULL; /* base64 images: their bytes (ours) */
    const void *bytes = s;
    size_t n = len;
    if (kinds[i].b64) {
      if (b64_decode(s, len, &decoded, &n) != 0) {
        cli_warn("an %s image was not valid base64: not saved", kinds[i].mime);
        continue;
      }
      bytes = decoded;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/image-%u.%s", p->a->save_dir, ++p->images, kinds[i].ext);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    ssize_t w = fd >= 0 ? write(fd, bytes, n) : -1;
    if (fd < 0 || w != (ssize_t)n) cli_warn("%s: %s", path, strerror(errno));
    else cli_note("image saved: %s", path);
    if (fd >= 0) close(fd);
    free(decoded);
  }
}

/* ---- events ---- */

static void put(FILE *f, const char *s, size_t n) {
  fwrite(s, 1, n, f);
  fflush(f);
}

static int print_event(void *ud, const sm_code_event *ev) {
  printer *p = ud;
  if (p->a->json) {
    json_object *o = sm_code_event_to_json(ev);
    size_t n = 0;
    const char *s = json_object_to_json_string_length(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    put(stdout, s, n);
    put(stdout, "\n", 1);
    json_object_put(o);
    if (ev->type == SM_CODE_EV_DISPLAY || ev->type == SM_CODE_EV_RESULT)
      if (p->a->save_dir) save_images(p, ev->data);
    return 0;
  }
  json_object *text = NULL;
  switch (ev->type) {
    case SM_CODE_EV_STDOUT: put(stdout, ev->text, ev->text_len); break;
    case SM_CODE_EV_STDERR: put(stderr, ev->text, ev->text_len); break;
    case SM_CODE_EV_DISPLAY:
    case SM_CODE_EV_RESULT:
      save_images(p, ev->data);
      if (json_object_object_get_ex(ev->data, "text/plain", &text)) {
        put(stdout, json_object_get_string(text), (size_t)json_object_get_string_len(text));
        put(stdout, "\n", 1);
      }
      break;
    case SM_CODE_EV_ERROR:
      p->error_seen = 1;
      if (ev->traceback && ev->traceback[0]) fprintf(stderr, "%s\n", ev->traceback);
      else fprintf(stderr, "%s: %s\n", ev->name, ev->value);
      break;
    case SM_CODE_EV_RESTARTED:
      cli_warn("a fresh kernel was started (%.*s): the context's state was lost",
               (int)ev->text_len, ev->text);
      break;
    case SM_CODE_EV_TRUNCATED: cli_note("output truncated: more than the run's output cap"); break;
    case SM_CODE_EV_NOTICE: cli_note("%.*s", (int)ev->text_len, ev->text); break;
    case SM_CODE_EV_END:
      if (ev->text) cli_note("%.*s", (int)ev->text_len, ev->text);
      break;
    default: break;
  }
  return 0;
}

static int exit_for(const sm_code_run_end *e) {
  if (strcmp(e->status, "ok") == 0) return CLI_EXIT_OK;
  if (strcmp(e->status, "error") == 0) return 1;
  if (strcmp(e->status, "timeout") == 0) return CLI_EXIT_TIMEOUT;
  if (strcmp(e->status, "died") == 0) return CLI_EXIT_KILLED;
  return 130; /* interrupted, cancelled */
}

/* ---- the actions ---- */

static void print_context(const code_args *a, const sm_code_context *c) {
  if (a->json) {
    json_object *o = sm_code_context_to_json(c);
    cli_print_json(o);
    json_object_put(o);
  } else {
    printf("%-20s %-12s %-10s %-8s %lld\n", c->name, c->kernel, c->language, c->state,
           (long long)c->execution_count);
  }
}

static int run_action(const code_args *a, sm_runner *runner, const sm_run_request *base,
                      sm_error *err) {
  const char *name = a->context ? a->context : SM_CODE_DEFAULT_CONTEXT;
  sm_code_context c;
  int rc = 0, interrupted = 0;
  if (strcmp(a->action, "list") == 0) {
    sm_code_context_list l;
    if ((rc = sm_code_list(runner, base, &l, NULL, err)) != 0) return rc;
    if (a->json) {
      json_object *arr = json_object_new_array();
      for (size_t i = 0; i < l.n; i++) json_object_array_add(arr, sm_code_context_to_json(&l.v[i]));
      cli_print_json(arr);
      json_object_put(arr);
    } else {
      printf("%-20s %-12s %-10s %-8s %s\n", "CONTEXT", "KERNEL", "LANGUAGE", "STATE", "RUNS");
      for (size_t i = 0; i < l.n; i++) print_context(a, &l.v[i]);
    }
    sm_code_context_list_dispose(&l);
    return 0;
  }
  if (strcmp(a->action, "create") == 0) rc = sm_code_create(runner, base, name, &a->copts, &c, NULL, err);
  else if (strcmp(a->action, "info") == 0) rc = sm_code_info(runner, base, name, &c, NULL, err);
  else if (strcmp(a->action, "restart") == 0) rc = sm_code_restart(runner, base, name, &c, NULL, err);
  else if (strcmp(a->action, "interrupt") == 0) {
    if ((rc = sm_code_interrupt(runner, base, name, &interrupted, NULL, err)) == 0) {
      if (a->json) printf("{\"context\": \"%s\", \"interrupted\": %s}\n", name, interrupted ? "true" : "false");
      else cli_note("%s", interrupted ? "the running cell was interrupted" : "no cell was running");
    }
    return rc;
  } else {
    if ((rc = sm_code_delete(runner, base, name, NULL, err)) == 0 && !a->json)
      cli_note("context %s deleted", name);
    if (rc == 0 && a->json) printf("{\"context\": \"%s\", \"deleted\": true}\n", name);
    return rc;
  }
  if (rc == 0) print_context(a, &c);
  return rc;
}

/* A code.run row in the audit trail when the configuration keeps one (off
 * by default for the command line, as for `sandman run`). */
static void audit_run(const sm_config *cfg, const code_args *a, const char *status) {
  sm_audit *audit = NULL;
  if (cli_audit_open(cfg, 0, &audit) != CLI_EXIT_OK || audit == NULL) return;
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = a->action ? "code.context" : "code.run";
  ev.agent = a->names.agent;
  ev.user = a->names.user;
  ev.project = a->names.project ? a->names.project : sm_config_project_id(cfg);
  ev.run_id = a->names.run_id;
  ev.worker = a->names.worker_id;
  ev.tool = "code";
  ev.mode = a->flags.mode;
  json_object *d = json_object_new_object();
  json_object_object_add(d, "context", json_object_new_string(a->context ? a->context : "default"));
  json_object_object_add(d, a->action ? "action" : "status", json_object_new_string(a->action ? a->action : status));
  ev.detail = d;
  sm_error err = SM_ERROR_INIT;
  if (sm_audit_record(audit, &ev, &err) != 0) cli_note("audit: %s", err.message);
  json_object_put(d);
  sm_audit_close(audit);
}

/* SANDBOX (a name or id of this instance) into req: its keys, and its
 * settings as it was made (the call uses it as it is, never replaces it). */
static int named_sandbox(sm_runner *runner, const char *ref, sm_ops_sandbox *sb,
                         sm_run_request *req) {
  sm_ops_scope scope;
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_scope_from_runner(&scope, runner, &err) != 0 || sm_ops_get(&scope, ref, sb, &err) != 0) {
    cli_error("%s", err.message);
    return CLI_EXIT_FAILURE;
  }
  if (sm_mode_parse(sb->mode, &req->settings.mode, NULL) != 0 ||
      (req->settings.mode != SM_MODE_PER_RUN && req->settings.mode != SM_MODE_PER_WORKER)) {
    cli_error("sandbox %s is %s: code contexts live in a keyed sandbox (per_run, per_worker)",
              sb->name, sb->mode);
    return CLI_EXIT_FAILURE;
  }
  req->sandbox = sb->name;
  req->run_id = req->settings.mode == SM_MODE_PER_RUN ? (sb->run_id[0] ? sb->run_id : sb->name) : NULL;
  req->worker_id = req->settings.mode == SM_MODE_PER_WORKER ? sb->worker_id : NULL;
  req->project = sb->project[0] ? sb->project : "default";
  if (sb->agent[0]) req->agent = sb->agent;
  sm_sandbox_settings *s = &req->settings;
  if (sb->image[0]) snprintf(s->image, sizeof s->image, "%s", sb->image);
  if (sb->network[0]) snprintf(s->network, sizeof s->network, "%s", sb->network);
  if (sb->network[0]) snprintf(s->runtime, sizeof s->runtime, "%s", sb->runtime);
  if (sb->cpu >= 0) s->cpu = sb->cpu;
  if (sb->memory >= 0) s->memory = sb->memory;
  if (sb->pids >= 0) s->pids = sb->pids;
  if (sb->disk >= 0) s->disk = sb->disk;
  return 0;
}

static int code_call(const cli_call *call, code_args *a) {
  const cli_globals *g = call->g;
  sm_config *cfg = NULL;
  sm_resolved res;
  int rc = cli_load_resolve(g, a->names.agent, "code", a->names.user, &a->flags, &cfg, &res);
  if (rc) return rc;
  if (!res.allowed) {
    cli_error("tool 'code' refused by the configuration (%s)", res.rule);
    sm_config_free(cfg);
    return CLI_EXIT_FAILURE;
  }
  sm_runner *runner = NULL;
  if ((rc = cli_runner_new(g, cfg, NULL, &runner)) != 0) return rc;
  sm_broker *broker = NULL;
  if ((rc = cli_broker_new(cfg, NULL, 0, &broker)) != CLI_EXIT_OK) {
    sm_runner_free(runner);
    sm_config_free(cfg);
    return rc;
  }
  sm_run_request req;
  sm_config_egress eg;
  sm_call_names names = a->names;
  names.project = a->names.project ? a->names.project : sm_config_project_id(cfg);
  sm_run_request_from_config(&req, &eg, cfg, &res, &names);
  /* Whatever a rule says about where the tool runs, a context needs a
   * container: the keyed mode the flags chose, or SANDBOX's. */
  sm_ops_sandbox sb;
  if (a->sandbox) {
    rc = named_sandbox(runner, a->sandbox, &sb, &req);
    if (rc) {
      sm_broker_free(broker);
      sm_runner_free(runner);
      sm_config_free(cfg);
      return rc;
    }
  } else {
    sm_mode_parse(a->flags.mode, &req.settings.mode, NULL);
  }
  req.agent_has_host_tools = sm_broker_agent_has_tools(broker, a->names.agent);
  volatile int *cancelled = cli_catch_stop_signals();
  req.cancel = cancelled;
  sm_error err = SM_ERROR_INIT;
  int code = CLI_EXIT_OK;
  if (a->action) {
    rc = run_action(a, runner, &req, &err);
    if (rc == 0) audit_run(cfg, a, NULL);
  } else {
    printer p = {a, 0, 0};
    sm_code_run_opts ro = SM_CODE_RUN_OPTS_INIT;
    ro.create = &a->copts;
    ro.on_event = print_event;
    ro.ud = &p;
    sm_code_run_end end;
    rc = sm_code_run(runner, &req, a->context, a->code, &ro, &end, NULL, &err);
    if (rc == 0) {
      code = exit_for(&end);
      audit_run(cfg, a, end.status);
    }
  }
  if (rc != 0) {
    if (rc == SM_ENOTFOUND && a->context)
      cli_error("%s (contexts are lost when their sandbox is stopped, replaced or removed)",
                err.message);
    else
      cli_error("%s", err.message);
    code = rc == SM_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
    if (*cancelled) code = 130;
  }
  sm_runner_free(runner);
  sm_broker_free(broker);
  sm_config_free(cfg);
  return code;
}

int cmd_code(const cli_call *call) {
  code_args a;
  int rc = parse_args(call, &a);
  if (rc == 0) rc = code_call(call, &a);
  free(a.env);
  free(a.code);
  return rc;
}
