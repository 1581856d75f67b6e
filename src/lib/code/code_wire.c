/* The code driver's answers, parsed against hard caps: see code_wire.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code/code_wire.h"
#include "common/json_keys.h"
#include "common/text.h"

#define DEPTH_MAX 64

static const char *const mime_types[] = {
    "text/plain",       "text/html",       "text/markdown",          "text/latex",
    "image/png",        "image/jpeg",      "image/svg+xml",          "application/json",
    "application/javascript", "application/pdf"};

static const char *const end_statuses[] = {"ok",   "error",    "timeout", "interrupted",
                                           "died", "cancelled"};

/* Public (sandman/code.h), here because the parser checks names too. */
int sm_code_name_valid(const char *s) {
  if (s == NULL || s[0] == '\0' || s[0] == '.' || s[0] == '-') return 0;
  size_t n = 0;
  for (const char *p = s; *p; p++, n++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.' || c == '-'))
      return 0;
  }
  return n <= SM_CODE_NAME_MAX;
}

void code_wire_init(code_wire *w, code_wire_mode mode, size_t max_output, sm_code_event_fn fn,
                    void *ud) {
  memset(w, 0, sizeof *w);
  w->mode = mode;
  common_buf_init(&w->line, SM_CODE_LINE_MAX);
  w->max_output = max_output ? max_output : SM_CODE_DEFAULT_MAX_OUTPUT;
  w->end.execution_count = -1;
  w->on_event = fn;
  w->ud = ud;
}

void code_wire_dispose(code_wire *w) {
  common_buf_dispose(&w->line);
  if (w->answer) json_object_put(w->answer);
  w->answer = NULL;
}

/* ---- fields ---- */

static int bad(sm_error *err, const char *event, const char *what) {
  return sm_error_set(err, SM_EPROTOCOL, "the sandbox's code driver sent a bad '%.32s' line: %s",
                      event, what);
}

/* A string field: 1 with *s (and *len), 0 when absent or null, -1 when of
 * another type. */
static int str_field(json_object *o, const char *key, const char **s, size_t *len) {
  json_object *v = NULL;
  *s = NULL;
  if (len) *len = 0;
  if (!json_object_object_get_ex(o, key, &v) || v == NULL) return 0;
  if (!json_object_is_type(v, json_type_string)) return -1;
  size_t n = (size_t)json_object_get_string_len(v);
  if (!common_utf8_valid(json_object_get_string(v), n)) return -1;
  *s = json_object_get_string(v);
  if (len) *len = n;
  return 1;
}

/* An integer field >= 0 or null: 0 (with *out, -1 for null or absent), -1 otherwise. */
static int count_field(json_object *o, const char *key, int64_t *out) {
  json_object *v = NULL;
  *out = -1;
  if (!json_object_object_get_ex(o, key, &v) || v == NULL) return 0;
  if (!json_object_is_type(v, json_type_int)) return -1;
  int64_t n = json_object_get_int64(v);
  if (n < 0) return -1;
  *out = n;
  return 0;
}

static int num_field(json_object *o, const char *key, double *out) {
  json_object *v = NULL;
  *out = 0;
  if (!json_object_object_get_ex(o, key, &v) || v == NULL) return 0;
  if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
    return -1;
  double d = json_object_get_double(v);
  if (!isfinite(d) || d < 0) return -1;
  *out = d;
  return 0;
}

static int bool_field(json_object *o, const char *key, int *out) {
  json_object *v = NULL;
  *out = 0;
  if (!json_object_object_get_ex(o, key, &v) || v == NULL) return 0;
  if (!json_object_is_type(v, json_type_boolean)) return -1;
  *out = json_object_get_boolean(v);
  return 0;
}

static int known_mime(const char *m) {
  for (size_t i = 0; i < sizeof mime_types / sizeof mime_types[0]; i++)
    if (strcmp(m, mime_types[i]) == 0) return 1;
  return 0;
}

/* The bundle of data keeping the known types only, in *out (owned), and
 * its size in bytes (strings' lengths; application/json as serialised). */
static int bundle(json_object *data, json_object **out, size_t *size) {
  *out = NULL;
  *size = 0;
  if (data == NULL || !json_object_is_type(data, json_type_object)) return -1;
  json_object *b = json_object_new_object();
  if (b == NULL) return -1;
  json_object_object_foreach(data, key, val) {
    if (!known_mime(key)) continue;
    if (strcmp(key, "application/json") == 0) {
      size_t n = 0;
      json_object_to_json_string_length(val, JSON_C_TO_STRING_PLAIN, &n);
      *size += n;
    } else if (val && json_object_is_type(val, json_type_string) &&
               common_utf8_valid(json_object_get_string(val),
                                 (size_t)json_object_get_string_len(val))) {
      *size += (size_t)json_object_get_string_len(val);
    } else {
      json_object_put(b);
      return -1;
    }
    json_object_object_add(b, key, json_object_get(val));
  }
  *out = b;
  return 0;
}

static int in_list(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(s, list[i]) == 0) return 1;
  return 0;
}

/* ---- run events ---- */

/* Output past the cap: TRUNCATED once, then nothing of it. 1 when ev may go. */
static int charge(code_wire *w, size_t size, int *rc) {
  *rc = 0;
  if (!w->truncated && size <= w->max_output - w->output) {
    w->output += size;
    return 1;
  }
  if (!w->truncated) {
    w->truncated = 1;
    w->end.truncated = 1;
    sm_code_event t;
    memset(&t, 0, sizeof t);
    t.type = SM_CODE_EV_TRUNCATED;
    t.execution_count = -1;
    if (w->on_event) *rc = w->on_event(w->ud, &t);
  }
  return 0;
}

static int deliver(code_wire *w, const sm_code_event *ev) {
  return w->on_event ? w->on_event(w->ud, ev) : 0;
}

static int on_end(code_wire *w, json_object *o, sm_code_event *ev, sm_error *err) {
  const char *msg = NULL;
  size_t mlen = 0;
  if (str_field(o, "status", &ev->status, NULL) != 1 ||
      !in_list(ev->status, end_statuses, sizeof end_statuses / sizeof end_statuses[0]))
    return bad(err, "end", "no known status");
  if (count_field(o, "execution_count", &ev->execution_count) != 0 ||
      num_field(o, "duration_ms", &ev->duration_ms) != 0 || str_field(o, "message", &msg, &mlen) < 0 ||
      bool_field(o, "truncated", &ev->truncated) != 0)
    return bad(err, "end", "a field of the wrong type");
  ev->text = msg;
  ev->text_len = mlen;
  ev->truncated = ev->truncated || w->truncated;
  sm_code_run_end *e = &w->end;
  snprintf(e->status, sizeof e->status, "%s", ev->status);
  e->execution_count = ev->execution_count;
  e->duration_ms = ev->duration_ms;
  e->truncated = ev->truncated;
  snprintf(e->message, sizeof e->message, "%.*s", (int)(mlen > 500 ? 500 : mlen), msg ? msg : "");
  w->done = 1;
  return deliver(w, ev);
}

static int on_output(code_wire *w, json_object *o, const char *name, sm_code_event *ev,
                     sm_error *err) {
  int rc = 0;
  if (ev->type == SM_CODE_EV_STDOUT || ev->type == SM_CODE_EV_STDERR) {
    if (str_field(o, "text", &ev->text, &ev->text_len) != 1) return bad(err, name, "no text");
    return charge(w, ev->text_len, &rc) ? deliver(w, ev) : rc;
  }
  json_object *data = NULL, *b = NULL;
  size_t size = 0;
  json_object_object_get_ex(o, "data", &data);
  if (bundle(data, &b, &size) != 0) return bad(err, name, "no MIME bundle of strings");
  if (count_field(o, "execution_count", &ev->execution_count) != 0) {
    json_object_put(b);
    return bad(err, name, "a bad execution_count");
  }
  ev->data = b;
  if (charge(w, size, &rc)) rc = deliver(w, ev);
  json_object_put(b);
  return rc;
}

static int on_event_line(code_wire *w, json_object *o, const char *name, sm_error *err) {
  sm_code_event ev;
  memset(&ev, 0, sizeof ev);
  ev.execution_count = -1;
  if (strcmp(name, "start") == 0) {
    if (w->started) return bad(err, name, "a second start");
    w->started = 1;
    ev.type = SM_CODE_EV_START;
    return deliver(w, &ev);
  }
  if (strcmp(name, "restarted") == 0) {
    if (w->started) return bad(err, name, "after the start");
    ev.type = SM_CODE_EV_RESTARTED;
    if (str_field(o, "reason", &ev.text, &ev.text_len) != 1) return bad(err, name, "no reason");
    w->end.restarted = 1;
    return deliver(w, &ev);
  }
  if (!w->started) return bad(err, name, "before the start");
  if (strcmp(name, "stdout") == 0 || strcmp(name, "stderr") == 0 ||
      strcmp(name, "display") == 0 || strcmp(name, "result") == 0) {
    ev.type = name[0] == 'd'                   ? SM_CODE_EV_DISPLAY
              : name[0] == 'r'                 ? SM_CODE_EV_RESULT
              : strcmp(name, "stdout") == 0 ? SM_CODE_EV_STDOUT
                                               : SM_CODE_EV_STDERR;
    return on_output(w, o, name, &ev, err);
  }
  if (strcmp(name, "error") == 0) {
    ev.type = SM_CODE_EV_ERROR;
    if (str_field(o, "name", &ev.name, NULL) != 1 || str_field(o, "value", &ev.value, NULL) < 0 ||
        str_field(o, "traceback", &ev.traceback, NULL) < 0)
      return bad(err, name, "no name, or a field of the wrong type");
    if (ev.value == NULL) ev.value = "";
    if (ev.traceback == NULL) ev.traceback = "";
    return deliver(w, &ev);
  }
  if (strcmp(name, "truncated") == 0) {
    /* The driver's own cap: ours says it once too. */
    int rc = 0;
    if (!w->truncated) charge(w, w->max_output + 1, &rc);
    return rc;
  }
  if (strcmp(name, "notice") == 0) {
    ev.type = SM_CODE_EV_NOTICE;
    if (str_field(o, "message", &ev.text, &ev.text_len) != 1) return bad(err, name, "no message");
    return deliver(w, &ev);
  }
  if (strcmp(name, "end") == 0) {
    ev.type = SM_CODE_EV_END;
    return on_end(w, o, &ev, err);
  }
  return bad(err, name, "an unknown event");
}

/* ---- lines ---- */

static int is_answer(const char *name) {
  return strcmp(name, "context") == 0 || strcmp(name, "list") == 0 || strcmp(name, "ok") == 0;
}

static int on_object(code_wire *w, json_object *o, sm_error *err) {
  const char *name = NULL;
  if (!json_object_is_type(o, json_type_object) || str_field(o, "event", &name, NULL) != 1)
    return sm_error_set(err, SM_EPROTOCOL, "the sandbox's code driver sent a line that is no event");
  if (w->done) return bad(err, name, "a line after the last one");
  if (strcmp(name, "fail") == 0) {
    const char *code = NULL, *msg = NULL;
    if (str_field(o, "code", &code, NULL) != 1 || str_field(o, "message", &msg, NULL) != 1)
      return bad(err, name, "no code or message");
    w->answer = json_object_get(o);
    w->done = 1;
    return 0;
  }
  if (w->mode == CODE_WIRE_ONE) {
    if (!is_answer(name)) return bad(err, name, "not an answer");
    w->answer = json_object_get(o);
    w->done = 1;
    return 0;
  }
  return on_event_line(w, o, name, err);
}

typedef struct line_ctx {
  code_wire *w;
  sm_error *err;
} line_ctx;

static int on_line(void *ud, const char *line, size_t len) {
  line_ctx *c = ud;
  json_tokener *tok = json_tokener_new_ex(DEPTH_MAX);
  if (tok == NULL) return sm_error_set(c->err, SM_ENOMEM, "out of memory");
  json_object *o = json_tokener_parse_ex(tok, line, (int)len);
  int complete = o != NULL && json_tokener_get_error(tok) == json_tokener_success &&
                 json_tokener_get_parse_end(tok) == len;
  json_tokener_free(tok);
  const char *why = NULL;
  int rc;
  if (!complete || !common_utf8_valid(line, len))
    rc = sm_error_set(c->err, SM_EPROTOCOL, "the sandbox's code driver sent a line that is not "
                      "JSON in UTF-8");
  else if (common_json_keys_unique(line, len, o, &why) != 0)
    rc = sm_error_set(c->err, SM_EPROTOCOL, "the sandbox's code driver sent a line with %s", why);
  else
    rc = on_object(c->w, o, c->err);
  json_object_put(o);
  return rc;
}

int code_wire_feed(code_wire *w, const char *data, size_t len, sm_error *err) {
  line_ctx c = {w, err};
  while (len > 0) {
    const char *nl = memchr(data, '\n', len);
    size_t n = nl ? (size_t)(nl - data) : len;
    if (common_buf_append(&w->line, data, n) != 0)
      return sm_error_set(err, SM_EPROTOCOL, "the sandbox's code driver sent a line over %zu bytes",
                          (size_t)SM_CODE_LINE_MAX);
    if (nl == NULL) break;
    int rc = w->line.len ? on_line(&c, w->line.data, w->line.len) : 0;
    common_buf_reset(&w->line);
    if (rc != 0) return rc;
    data += n + 1;
    len -= n + 1;
  }
  return 0;
}

int code_wire_finish(code_wire *w, sm_error *err) {
  if (w->line.len > 0)
    return sm_error_set(err, SM_EPROTOCOL, "the sandbox's code driver's answer ended in a line");
  if (!w->done)
    return sm_error_set(err, SM_EPROTOCOL, "the sandbox's code driver's answer ended early");
  return 0;
}

/* ---- answers ---- */

const char *code_wire_fail_code(const code_wire *w) {
  const char *name = NULL, *code = NULL;
  if (w->answer == NULL || str_field(w->answer, "event", &name, NULL) != 1 ||
      strcmp(name, "fail") != 0)
    return NULL;
  str_field(w->answer, "code", &code, NULL);
  return code;
}

int code_wire_fail_error(const code_wire *w, sm_error *err) {
  const char *code = code_wire_fail_code(w), *msg = NULL;
  if (code == NULL) return 0;
  str_field(w->answer, "message", &msg, NULL);
  int rc = strcmp(code, "not_found") == 0   ? SM_ENOTFOUND
           : strcmp(code, "exists") == 0    ? SM_ECONFLICT
           : strcmp(code, "no_kernel") == 0 || strcmp(code, "bad_request") == 0 ? SM_EINVAL
           : strcmp(code, "limit") == 0 || strcmp(code, "busy") == 0 ? SM_EBUSY
                                                                   : SM_ESANDBOX;
  return sm_error_set(err, rc, "%.400s", msg ? msg : code);
}

static int copy_field(json_object *o, const char *key, char *out, size_t len, int required) {
  const char *s = NULL;
  int r = str_field(o, key, &s, NULL);
  if (r < 0 || (required && r == 0)) return -1;
  snprintf(out, len, "%s", s ? s : "");
  return 0;
}

int code_context_from_json(json_object *o, sm_code_context *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  if (o == NULL || !json_object_is_type(o, json_type_object) ||
      copy_field(o, "name", out->name, sizeof out->name, 1) != 0 ||
      !sm_code_name_valid(out->name) || copy_field(o, "kernel", out->kernel, sizeof out->kernel, 1) != 0 ||
      copy_field(o, "language", out->language, sizeof out->language, 0) != 0 ||
      copy_field(o, "cwd", out->cwd, sizeof out->cwd, 0) != 0 ||
      copy_field(o, "state", out->state, sizeof out->state, 1) != 0 ||
      count_field(o, "execution_count", &out->execution_count) != 0 ||
      num_field(o, "created_at", &out->created_at) != 0 ||
      num_field(o, "last_run_at", &out->last_run_at) != 0 ||
      count_field(o, "queued", &out->queued) != 0)
    return bad(err, "context", "a missing field or one of the wrong type");
  if (out->execution_count < 0) out->execution_count = 0;
  if (out->queued < 0) out->queued = 0;
  return 0;
}
