/* sandman audit: reads and filters the audit trail (docs/audit.md). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static volatile int stop_flag;

static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static const char *str_at(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x)) return NULL;
  if (b == NULL) return json_object_is_type(x, json_type_string) ? json_object_get_string(x) : NULL;
  if (!json_object_object_get_ex(x, b, &y) || !json_object_is_type(y, json_type_string)) return NULL;
  return json_object_get_string(y);
}

typedef struct print_ctx {
  int json;
  unsigned long n;
} print_ctx;

/* One line: TIME EVENT DISPOSITION who what (why). */
static int print_event(void *ud, json_object *ev) {
  print_ctx *p = ud;
  p->n++;
  if (p->json) {
    printf("%s\n", json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN));
  } else {
    const char *when = str_at(ev, "time_dt", NULL), *name = str_at(ev, "unmapped", "event");
    const char *disp = str_at(ev, "disposition", NULL);
    char who[256] = "", what[512] = "";
    const char *agent = str_at(ev, "unmapped", "agent"), *run = str_at(ev, "unmapped", "run_id");
    const char *user = str_at(ev, "unmapped", "user");
    snprintf(who, sizeof who, "%s%s%s%s%s%s", agent ? "agent=" : "", agent ? agent : "",
             run ? (agent ? " run=" : "run=") : "", run ? run : "",
             user ? ((agent || run) ? " user=" : "user=") : "", user ? user : "");
    const char *host = str_at(ev, "dst_endpoint", "hostname");
    json_object *d = NULL, *port = NULL;
    const char *tool = str_at(ev, "unmapped", "tool"), *sandbox = str_at(ev, "unmapped", "sandbox");
    const char *lease = str_at(ev, "unmapped", "lease_id");
    if (host && json_object_object_get_ex(ev, "dst_endpoint", &d) &&
        json_object_object_get_ex(d, "port", &port))
      snprintf(what, sizeof what, "%s:%d", host, json_object_get_int(port));
    else if (host)
      snprintf(what, sizeof what, "%s", host);
    else if (tool)
      snprintf(what, sizeof what, "tool=%s", tool);
    else if (lease)
      snprintf(what, sizeof what, "lease=%s", lease);
    else if (sandbox)
      snprintf(what, sizeof what, "%s", sandbox);
    const char *why = str_at(ev, "policy", "name");
    if (why == NULL) why = str_at(ev, "unmapped", "rule");
    if (why == NULL) why = str_at(ev, "message", NULL);
    printf("%-24s %-17s %-8s %-30s %s%s%s%s\n", when ? when : "?", name ? name : "?",
           disp ? disp : "-", who[0] ? who : "-", what[0] ? what : "-", why ? " (" : "",
           why ? why : "", why ? ")" : "");
  }
  fflush(stdout);
  return 0;
}

/* The egress proxy's decisions wait in its container log until someone
 * collects them: `sandman audit` does, so that a workstation's trail is
 * complete without a runner. An engine that does not answer is no error
 * here (the file is still worth reading). */
typedef struct collector {
  sm_engine *engine;
  sm_audit *audit;
  pthread_t thread;
  int started;
} collector;

static void collect_once(collector *c) {
  sm_error err = SM_ERROR_INIT;
  sm_egress_proxy_options po = SM_EGRESS_PROXY_OPTIONS_INIT;
  size_t n = 0;
  if (sm_egress_collect(c->engine, &po, c->audit, &n, &err) != 0)
    sm_log(SM_LOG_DEBUG, "audit: collecting the egress proxy's decisions: %s", err.message);
  else if (n > 0)
    sm_log(SM_LOG_DEBUG, "audit: collected %zu egress decisions", n);
}

static void *collect_loop(void *ud) {
  collector *c = ud;
  while (!stop_flag) {
    collect_once(c);
    for (int i = 0; i < 10 && !stop_flag; i++) {
      struct timespec ts = {0, 100 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void collector_open(collector *c, const cli_globals *g, const sm_config *cfg, const char *file) {
  memset(c, 0, sizeof *c);
  sm_engine_options eo;
  cli_engine_options(g, cfg, &eo);
  eo.connect_timeout_ms = 2000;
  sm_error err = SM_ERROR_INIT;
  sm_audit_options ao = SM_AUDIT_OPTIONS_INIT;
  sm_config_audit ca;
  sm_config_audit_get(cfg, &ca);
  ao.file = file;
  ao.max_bytes = ca.max_bytes;
  ao.keep = ca.keep;
  if (sm_engine_new(&c->engine, &eo, &err) != 0 || sm_engine_negotiate(c->engine, &err) != 0 ||
      sm_audit_open(&c->audit, &ao, &err) != 0) {
    sm_log(SM_LOG_DEBUG, "audit: not collecting egress decisions: %s", err.message);
    sm_engine_free(c->engine);
    sm_audit_close(c->audit);
    c->engine = NULL;
    c->audit = NULL;
  }
}

static void collector_close(collector *c) {
  if (c->started) pthread_join(c->thread, NULL);
  sm_engine_free(c->engine);
  sm_audit_close(c->audit);
}

int cmd_audit(const cli_call *call) {
  const cli_globals *g = call->g;
  sm_audit_filter filter = SM_AUDIT_FILTER_INIT;
  print_ctx pc = {0, 0};
  sm_error err = SM_ERROR_INIT;
  const char *since = cli_str(call, "since"), *file_opt = cli_str(call, "file");
  if (since) {
    double secs = 0, t = sm_parse_time(since);
    if (t >= 0) filter.since = t;
    else if (sm_parse_duration(since, &secs, &err) == 0) filter.since = sm_now() - secs;
    else
      return cli_usage_error(call->cmd, 0,
                             "--since takes a duration (10m, 2h, 7d) or a time (2026-11-22T10:00:00Z), not '%s'",
                             since);
  }
  filter.agent = cli_str(call, "agent");
  filter.run_id = cli_str(call, "run");
  filter.denied_only = cli_has(call, "denied") > 0;
  pc.json = cli_has(call, "json") > 0;
  int follow = cli_has(call, "follow") > 0;
  sm_config *cfg = NULL;
  if (sm_config_load(&cfg, g->config_path, &err) != 0) return cli_fail(&err);
  char file[4096];
  int rc = 0;
  if (file_opt) snprintf(file, sizeof file, "%s", file_opt);
  else rc = cli_audit_file(cfg, file, sizeof file, &err);
  sm_config_audit ca;
  sm_config_audit_get(cfg, &ca);
  int keep = ca.keep;
  if (rc != 0) {
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  if (file[0] == '\0') {
    sm_config_free(cfg);
    cli_error("the configuration writes no audit file (audit.file is \"\"); use --file FILE");
    return CLI_EXIT_USAGE;
  }
  /* Into the configured trail only (not a file named by --file), and not
   * when the configuration turned auditing off. */
  collector col;
  memset(&col, 0, sizeof col);
  if (file_opt == NULL && ca.enabled != 0) collector_open(&col, g, cfg, file);
  sm_config_free(cfg);
  if (col.engine) collect_once(&col);
  size_t skipped = 0;
  if (follow) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (col.engine && pthread_create(&col.thread, NULL, collect_loop, &col) == 0) col.started = 1;
    rc = sm_audit_follow(file, keep, &filter, print_event, &pc, &stop_flag, 250, &err);
    stop_flag = 1;
  } else {
    rc = sm_audit_read(file, keep, &filter, print_event, &pc, &skipped, &err);
  }
  collector_close(&col);
  if (rc < 0) return cli_fail(&err);
  if (skipped > 0) cli_note("%zu line(s) of %s were not events (cut short by a crash?) and were skipped", skipped, file);
  return CLI_EXIT_OK;
}
