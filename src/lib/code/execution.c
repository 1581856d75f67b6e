/* A run's events as JSON: one by one (the runner's NDJSON stream), and
 * gathered into one object shaped like E2B's Execution (results, logs,
 * error), for the MCP tool and the clients. See sandman/code.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/code.h>

static const char *const event_names[] = {"start",  "restarted", "stdout",    "stderr", "display",
                                          "result", "error",     "truncated", "notice", "end"};

const char *sm_code_event_name(sm_code_event_type t) {
  return (unsigned)t < sizeof event_names / sizeof event_names[0] ? event_names[t] : "unknown";
}

/* Milliseconds with 3 decimals (json-c would print 17 digits). */
static json_object *ms_json(double ms) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f", ms);
  return json_object_new_double_s(ms, buf);
}

static json_object *text_of(const char *s, size_t len) {
  return json_object_new_string_len(s ? s : "", s ? (int)len : 0);
}

json_object *sm_code_event_to_json(const sm_code_event *ev) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "event", json_object_new_string(sm_code_event_name(ev->type)));
  switch (ev->type) {
    case SM_CODE_EV_RESTARTED:
      json_object_object_add(o, "reason", text_of(ev->text, ev->text_len));
      json_object_object_add(o, "state_lost", json_object_new_boolean(1));
      break;
    case SM_CODE_EV_STDOUT:
    case SM_CODE_EV_STDERR:
      json_object_object_add(o, "text", text_of(ev->text, ev->text_len));
      break;
    case SM_CODE_EV_RESULT:
      json_object_object_add(o, "execution_count", ev->execution_count >= 0
                                                       ? json_object_new_int64(ev->execution_count)
                                                       : NULL);
      /* fall through */
    case SM_CODE_EV_DISPLAY:
      json_object_object_add(o, "data", json_object_get(ev->data));
      break;
    case SM_CODE_EV_ERROR:
      json_object_object_add(o, "name", json_object_new_string(ev->name ? ev->name : ""));
      json_object_object_add(o, "value", json_object_new_string(ev->value ? ev->value : ""));
      json_object_object_add(o, "traceback",
                             json_object_new_string(ev->traceback ? ev->traceback : ""));
      break;
    case SM_CODE_EV_NOTICE:
      json_object_object_add(o, "message", text_of(ev->text, ev->text_len));
      break;
    case SM_CODE_EV_END:
      json_object_object_add(o, "status", json_object_new_string(ev->status ? ev->status : ""));
      json_object_object_add(o, "execution_count", ev->execution_count >= 0
                                                       ? json_object_new_int64(ev->execution_count)
                                                       : NULL);
      json_object_object_add(o, "duration_ms", ms_json(ev->duration_ms));
      json_object_object_add(o, "truncated", json_object_new_boolean(ev->truncated));
      if (ev->text) json_object_object_add(o, "message", text_of(ev->text, ev->text_len));
      break;
    default:
      break;
  }
  return o;
}

/* ---- the gathered execution ---- */

struct sm_code_execution {
  json_object *results, *out, *err, *error;
  char *restarted;   /* the reason the state was lost, or NULL */
  size_t bytes, max;
  int truncated;
};

sm_code_execution *sm_code_execution_new(size_t max_bytes) {
  sm_code_execution *x = calloc(1, sizeof *x);
  if (x == NULL) return NULL;
  x->results = json_object_new_array();
  x->out = json_object_new_array();
  x->err = json_object_new_array();
  x->max = max_bytes ? max_bytes : SM_CODE_DEFAULT_MAX_OUTPUT;
  if (!x->results || !x->out || !x->err) {
    sm_code_execution_free(x);
    return NULL;
  }
  return x;
}

void sm_code_execution_free(sm_code_execution *x) {
  if (x == NULL) return;
  json_object_put(x->results);
  json_object_put(x->out);
  json_object_put(x->err);
  json_object_put(x->error);
  free(x->restarted);
  free(x);
}

/* E2B's field names for the MIME types. */
static const struct {
  const char *mime, *field;
} fields[] = {
    {"text/plain", "text"},        {"text/html", "html"},
    {"text/markdown", "markdown"}, {"text/latex", "latex"},
    {"image/png", "png"},          {"image/jpeg", "jpeg"},
    {"image/svg+xml", "svg"},      {"application/json", "json"},
    {"application/javascript", "javascript"}, {"application/pdf", "pdf"},
};

static int charge(sm_code_execution *x, size_t n) {
  if (x->truncated || n > x->max - x->bytes) {
    x->truncated = 1;
    return 0;
  }
  x->bytes += n;
  return 1;
}

static size_t bundle_size(json_object *data) {
  size_t n = 0;
  json_object_object_foreach(data, key, val) {
    (void)key;
    size_t len = 0;
    if (json_object_is_type(val, json_type_string)) len = (size_t)json_object_get_string_len(val);
    else json_object_to_json_string_length(val, JSON_C_TO_STRING_PLAIN, &len);
    n += len;
  }
  return n;
}

static void add_result(sm_code_execution *x, const sm_code_event *ev) {
  if (ev->data == NULL || !charge(x, bundle_size(ev->data))) return;
  json_object *r = json_object_new_object();
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    json_object *v = NULL;
    if (json_object_object_get_ex(ev->data, fields[i].mime, &v))
      json_object_object_add(r, fields[i].field, json_object_get(v));
  }
  json_object_object_add(r, "is_main_result",
                         json_object_new_boolean(ev->type == SM_CODE_EV_RESULT));
  json_object_array_add(x->results, r);
}

int sm_code_execution_add(void *ud, const sm_code_event *ev) {
  sm_code_execution *x = ud;
  switch (ev->type) {
    case SM_CODE_EV_STDOUT:
    case SM_CODE_EV_STDERR:
      if (charge(x, ev->text_len))
        json_object_array_add(ev->type == SM_CODE_EV_STDOUT ? x->out : x->err,
                              text_of(ev->text, ev->text_len));
      break;
    case SM_CODE_EV_DISPLAY:
    case SM_CODE_EV_RESULT:
      add_result(x, ev);
      break;
    case SM_CODE_EV_ERROR:
      json_object_put(x->error);
      x->error = json_object_new_object();
      json_object_object_add(x->error, "name", json_object_new_string(ev->name ? ev->name : ""));
      json_object_object_add(x->error, "value", json_object_new_string(ev->value ? ev->value : ""));
      json_object_object_add(x->error, "traceback",
                             json_object_new_string(ev->traceback ? ev->traceback : ""));
      break;
    case SM_CODE_EV_RESTARTED:
      free(x->restarted);
      x->restarted = strndup(ev->text ? ev->text : "", ev->text_len);
      break;
    case SM_CODE_EV_TRUNCATED:
      x->truncated = 1;
      break;
    default:
      break;
  }
  return 0;
}

json_object *sm_code_execution_to_json(const sm_code_execution *x, const sm_code_run_end *end) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object *logs = json_object_new_object();
  json_object_object_add(o, "results", json_object_get(x->results));
  json_object_object_add(logs, "stdout", json_object_get(x->out));
  json_object_object_add(logs, "stderr", json_object_get(x->err));
  json_object_object_add(o, "logs", logs);
  json_object_object_add(o, "error", x->error ? json_object_get(x->error) : NULL);
  json_object_object_add(o, "execution_count",
                         end->execution_count >= 0 ? json_object_new_int64(end->execution_count) : NULL);
  json_object_object_add(o, "status", json_object_new_string(end->status));
  json_object_object_add(o, "duration_ms", ms_json(end->duration_ms));
  json_object_object_add(o, "truncated", json_object_new_boolean(x->truncated || end->truncated));
  json_object_object_add(o, "state_lost",
                         x->restarted ? json_object_new_string(x->restarted) : NULL);
  json_object_object_add(o, "message",
                         end->message[0] ? json_object_new_string(end->message) : NULL);
  return o;
}

json_object *sm_code_context_to_json(const sm_code_context *c) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "name", json_object_new_string(c->name));
  json_object_object_add(o, "kernel", json_object_new_string(c->kernel));
  json_object_object_add(o, "language", json_object_new_string(c->language));
  json_object_object_add(o, "cwd", json_object_new_string(c->cwd));
  json_object_object_add(o, "state", json_object_new_string(c->state));
  json_object_object_add(o, "execution_count", json_object_new_int64(c->execution_count));
  json_object_object_add(o, "created_at", ms_json(c->created_at));
  json_object_object_add(o, "last_run_at",
                         c->last_run_at > 0 ? ms_json(c->last_run_at) : NULL);
  json_object_object_add(o, "queued", json_object_new_int64(c->queued));
  return o;
}
