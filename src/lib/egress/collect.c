/* Collecting the proxy's decisions into the audit trail. The proxy prints
 * one JSON line per decision; the engine keeps them in the container's log
 * with a timestamp each. A collector reads the log from its cursor (the
 * last timestamp taken, kept under the state directory) under a lock, so
 * any number of sandman processes (runs, a runner, `sandman audit`) record
 * each decision exactly once. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/state.h>

#include "egress/egress_internal.h"

#define LINE_CAP (64u * 1024)

static const char *jstring(json_object *o, const char *key) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string)) return NULL;
  return json_object_get_string(v);
}

static long long jint(json_object *o, const char *key, long long dflt) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(o, key, &v)) return dflt;
  if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) return dflt;
  return json_object_get_int64(v);
}

int egress_collect_line(sm_audit *audit, const char *line, size_t len, sm_error *err) {
  json_tokener *tok = json_tokener_new_ex(8);
  if (tok == NULL) return sm_error_set(err, SM_ENOMEM, "egress: out of memory");
  json_object *o = json_tokener_parse_ex(tok, line, (int)len);
  int ok = o && json_tokener_get_error(tok) == json_tokener_success && json_object_is_type(o, json_type_object);
  json_tokener_free(tok);
  if (!ok) {
    json_object_put(o);
    return 0; /* not one of the proxy's lines (its stderr, say) */
  }
  const char *event = jstring(o, "event");
  if (event == NULL || (strcmp(event, "egress.allowed") != 0 && strcmp(event, "egress.denied") != 0 &&
                        strcmp(event, "egress.failed") != 0)) {
    json_object_put(o);
    return 0;
  }
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = event;
  json_object *t = NULL;
  if (json_object_object_get_ex(o, "time", &t)) ev.time = json_object_get_double(t);
  ev.sandbox = jstring(o, "sandbox");
  ev.agent = jstring(o, "agent");
  ev.project = jstring(o, "project");
  ev.run_id = jstring(o, "run_id");
  ev.worker = jstring(o, "worker");
  ev.src_ip = jstring(o, "src_ip");
  ev.dst_host = jstring(o, "dst_host");
  ev.dst_ip = jstring(o, "dst_ip");
  long long port = jint(o, "dst_port", 0);
  ev.dst_port = port > 0 && port < 65536 ? (int)port : 0;
  ev.rule = jstring(o, "rule");
  ev.message = jstring(o, "reason");
  ev.bytes_in = jint(o, "bytes_in", -1);
  ev.bytes_out = jint(o, "bytes_out", -1);
  ev.duration_ms = (double)jint(o, "duration_ms", -1);
  json_object *detail = json_object_new_object();
  const char *method = jstring(o, "method");
  if (method) json_object_object_add(detail, "method", json_object_new_string(method));
  long long status = jint(o, "status", 0);
  if (status > 0) json_object_object_add(detail, "http_status", json_object_new_int((int)status));
  ev.detail = detail;
  int rc = sm_audit_record(audit, &ev, err);
  json_object_put(detail);
  json_object_put(o);
  return rc == 0 ? 1 : rc;
}

typedef struct collector {
  sm_audit *audit;
  common_lines lines;
  long long sec;
  long nsec;
  size_t n;
  int rc;
  sm_error *err;
} collector;

static int later(long long s1, long n1, long long s2, long n2) { return s1 > s2 || (s1 == s2 && n1 > n2); }

/* One line of the proxy's log (NULL: one over the cap, skipped). */
static int take_line(void *ud, const char *s, size_t len) {
  collector *c = ud;
  if (s == NULL) return 0;
  const char *sp = memchr(s, ' ', len);
  long long sec = 0;
  long nsec = 0;
  if (sp == NULL || egress_parse_log_time(s, (size_t)(sp - s), &sec, &nsec) != 0) return 0;
  if (!later(sec, nsec, c->sec, c->nsec)) return 0; /* collected before */
  int rc = egress_collect_line(c->audit, sp + 1, len - (size_t)(sp + 1 - s), c->err);
  if (rc < 0) return rc;
  c->n += (size_t)rc;
  c->sec = sec;
  c->nsec = nsec;
  return 0;
}

static int on_log(void *ud, int stream, const char *data, size_t len) {
  collector *c = ud;
  (void)stream;
  return common_lines_feed(&c->lines, data, len, take_line, c);
}

static int cursor_path(const sm_egress_proxy_options *opts, const char *instance, const char *proxy_id, char *out,
                       size_t len, sm_error *err) {
  char dir[PATH_MAX];
  if (opts && opts->state_dir) snprintf(dir, sizeof dir, "%s", opts->state_dir);
  else if (sm_state_default_dir(dir, sizeof dir, err) != 0) return err ? err->code : SM_EINVAL;
  char sub[PATH_MAX + 16];
  snprintf(sub, sizeof sub, "%s/egress", dir);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", dir);
  if (mkdir(sub, 0700) != 0 && errno != EEXIST) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", sub);
  int w = snprintf(out, len, "%s/%s-%.12s.cursor", sub, instance, proxy_id);
  if (w < 0 || (size_t)w >= len) return sm_error_set(err, SM_EINVAL, "state path too long");
  return 0;
}

static void read_cursor(const char *path, long long *sec, long *nsec) {
  *sec = 0;
  *nsec = 0;
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  long long s = 0;
  long n = 0;
  if (fscanf(f, "%lld %ld", &s, &n) == 2 && s >= 0 && n >= 0 && n < 1000000000L) {
    *sec = s;
    *nsec = n;
  }
  fclose(f);
}

static int write_cursor(const char *path, long long sec, long nsec, sm_error *err) {
  char tmp[PATH_MAX + 8];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (f == NULL) return sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  fprintf(f, "%lld %ld\n", sec, nsec);
  if (fclose(f) != 0 || rename(tmp, path) != 0) return sm_error_set_errno(err, SM_EIO, errno, "writing %s", path);
  return 0;
}

int sm_egress_collect(sm_engine *e, const sm_egress_proxy_options *opts, sm_audit *audit, size_t *out_n,
                      sm_error *err) {
  if (out_n) *out_n = 0;
  if (audit == NULL) return 0;
  char instance[80], name[SM_EGRESS_NAME_MAX];
  int rc = egress_instance(opts, instance, sizeof instance, err);
  if (rc != 0) return rc;
  egress_proxy_name(instance, name, sizeof name);
  json_object *info = NULL;
  sm_error ierr = SM_ERROR_INIT;
  rc = sm_engine_container_inspect(e, name, &info, &ierr);
  if (rc == SM_ENOTFOUND) return 0; /* no proxy: nothing to collect */
  if (rc != 0) {
    if (err) *err = ierr;
    return rc;
  }
  json_object *idv = NULL;
  char id[SM_ENGINE_ID_MAX] = "";
  if (json_object_object_get_ex(info, "Id", &idv)) snprintf(id, sizeof id, "%s", json_object_get_string(idv));
  json_object_put(info);
  char path[PATH_MAX + 64], key[128];
  if ((rc = cursor_path(opts, instance, id, path, sizeof path, err)) != 0) return rc;
  snprintf(key, sizeof key, "egress-collect-%s", instance);
  sm_state_lock *lock = NULL;
  if ((rc = sm_state_key_lock(opts ? opts->state_dir : NULL, key, &lock, err)) != 0) return rc;
  collector c = {.audit = audit, .err = err};
  common_buf_init(&c.lines.line, LINE_CAP);
  read_cursor(path, &c.sec, &c.nsec);
  long long start_sec = c.sec;
  long start_nsec = c.nsec;
  rc = sm_engine_container_logs(e, id, (double)c.sec, 1, on_log, &c, err);
  /* What was recorded stays recorded: move the cursor even after an error. */
  if (later(c.sec, c.nsec, start_sec, start_nsec)) {
    sm_error werr = SM_ERROR_INIT;
    int wrc = write_cursor(path, c.sec, c.nsec, &werr);
    if (rc == 0 && wrc != 0) {
      rc = wrc;
      if (err) *err = werr;
    }
  }
  common_buf_dispose(&c.lines.line);
  sm_state_unlock(lock);
  if (out_n) *out_n = c.n;
  return rc;
}
