/* Pure parts of the operations: the engine's container summaries in, JSON
 * objects, tables and ages out. Nothing here talks to the engine. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/ops.h>
#include <sandman/util.h>

#include "common/buf.h"
#include "ops/format.h"

/* Text output caps: a listing of OPS_MAX_ITEMS lines fits easily. */
#define TEXT_MAX ((size_t)64 << 20)

void ops_copy(char *dst, size_t len, const char *src) {
  if (len == 0) return;
  snprintf(dst, len, "%s", src ? src : "");
}

const char *ops_label(json_object *labels, const char *key) {
  json_object *v = NULL;
  if (labels == NULL || !json_object_is_type(labels, json_type_object)) return NULL;
  if (!json_object_object_get_ex(labels, key, &v) || !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

/* ---- ages and durations ---- */

void sm_ops_format_ago(double seconds, char *buf, size_t len) {
  if (!(seconds > 0)) seconds = 0; /* also NaN: a clock skew is "just now" */
  long long s = (long long)seconds;
  long long minutes = s / 60;
  long long hours = (long long)(seconds / 3600.0 + 0.5);
  if (s < 1) snprintf(buf, len, "Less than a second ago");
  else if (s == 1) snprintf(buf, len, "1 second ago");
  else if (s < 60) snprintf(buf, len, "%lld seconds ago", s);
  else if (minutes == 1) snprintf(buf, len, "About a minute ago");
  else if (minutes < 60) snprintf(buf, len, "%lld minutes ago", minutes);
  else if (hours == 1) snprintf(buf, len, "About an hour ago");
  else if (hours < 48) snprintf(buf, len, "%lld hours ago", hours);
  else if (hours < 24 * 7 * 2) snprintf(buf, len, "%lld days ago", hours / 24);
  else if (hours < 24 * 30 * 2) snprintf(buf, len, "%lld weeks ago", hours / 24 / 7);
  else if (hours < 24 * 365 * 2) snprintf(buf, len, "%lld months ago", hours / 24 / 30);
  else snprintf(buf, len, "%lld years ago", s / 3600 / 24 / 365);
}

void sm_ops_format_duration(double seconds, char *buf, size_t len) {
  if (!(seconds > 0)) {
    snprintf(buf, len, "0s");
    return;
  }
  /* Sub-10-second fractions matter for "--older-than 0.5s"; beyond that,
   * whole seconds and at most two units read best. */
  if (seconds < 10 && seconds != floor(seconds)) {
    snprintf(buf, len, "%.1fs", seconds);
    return;
  }
  if (seconds > 1e12) seconds = 1e12;
  long long s = (long long)seconds;
  static const struct {
    long long size;
    char unit;
  } units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
  for (size_t i = 0; i < 4; i++) {
    if (s < units[i].size) continue;
    long long major = s / units[i].size, rest = s % units[i].size;
    if (i < 3 && rest / units[i + 1].size > 0)
      snprintf(buf, len, "%lld%c%lld%c", major, units[i].unit, rest / units[i + 1].size,
               units[i + 1].unit);
    else
      snprintf(buf, len, "%lld%c", major, units[i].unit);
    return;
  }
  snprintf(buf, len, "0s");
}

/* ---- sandboxes from the engine ---- */

static const char *get_string(json_object *o, const char *key) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

void ops_sandbox_labels(json_object *labels, sm_ops_sandbox *out) {
  ops_copy(out->mode, sizeof out->mode, ops_label(labels, SM_OPS_LABEL_MODE));
  ops_copy(out->project, sizeof out->project, ops_label(labels, SM_OPS_LABEL_PROJECT));
  ops_copy(out->run_id, sizeof out->run_id, ops_label(labels, SM_OPS_LABEL_RUN));
  ops_copy(out->worker_id, sizeof out->worker_id, ops_label(labels, SM_OPS_LABEL_WORKER));
  ops_copy(out->agent, sizeof out->agent, ops_label(labels, SM_OPS_LABEL_AGENT));
  ops_copy(out->owner, sizeof out->owner, ops_label(labels, SM_OPS_LABEL_OWNER));
  ops_sandbox_describe(labels, out);
}

int sm_ops_sandbox_from_engine(json_object *summary, sm_ops_sandbox *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  if (summary == NULL || !json_object_is_type(summary, json_type_object))
    return sm_error_set(err, SM_EPROTOCOL, "engine listed a container that is not an object");
  const char *id = get_string(summary, "Id");
  if (id == NULL || *id == '\0')
    return sm_error_set(err, SM_EPROTOCOL, "engine listed a container without an Id");
  ops_copy(out->id, sizeof out->id, id);

  json_object *names = NULL;
  if (json_object_object_get_ex(summary, "Names", &names) &&
      json_object_is_type(names, json_type_array) && json_object_array_length(names) > 0) {
    const char *n = json_object_get_string(json_object_array_get_idx(names, 0));
    if (n && *n == '/') n++;
    ops_copy(out->name, sizeof out->name, n);
  }
  json_object *all_labels = NULL;
  if (strstr(out->name, SM_OPS_FORKING_MARK) && json_object_object_get_ex(summary, "Labels", &all_labels))
    ops_copy(out->making, sizeof out->making, ops_label(all_labels, SM_OPS_LABEL_MAKING));
  /* A sandbox back from hibernation runs its image by id; the name it was
   * made with is its label. */
  const char *image_label = NULL;
  json_object *lab = NULL;
  if (json_object_object_get_ex(summary, "Labels", &lab)) image_label = ops_label(lab, "io.sandman.image");
  ops_copy(out->image, sizeof out->image, image_label ? image_label : get_string(summary, "Image"));
  ops_copy(out->state, sizeof out->state, get_string(summary, "State"));
  ops_copy(out->status_text, sizeof out->status_text, get_string(summary, "Status"));

  json_object *labels = NULL;
  json_object_object_get_ex(summary, "Labels", &labels);
  ops_sandbox_labels(labels, out);
  const char *volume = ops_label(labels, SM_OPS_LABEL_VOLUME);
  if (volume && *volume) {
    ops_copy(out->volume, sizeof out->volume, volume);
  } else if (out->name[0]) {
    /* The naming rule: the volume is "<container name>-ws". */
    snprintf(out->volume, sizeof out->volume, "%s-ws", out->name);
  }
  const char *pool = ops_label(labels, SM_OPS_LABEL_POOL);
  out->pool = pool != NULL && strcmp(pool, "true") == 0;

  double created = sm_parse_time(ops_label(labels, SM_OPS_LABEL_CREATED));
  if (created < 0) {
    json_object *c = NULL;
    if (json_object_object_get_ex(summary, "Created", &c)) created = (double)json_object_get_int64(c);
  }
  out->created_at = created > 0 ? created : 0;
  out->last_used_at = out->created_at;
  return 0;
}

void sm_ops_sandbox_list_dispose(sm_ops_sandbox_list *list) {
  if (list == NULL) return;
  free(list->items);
  list->items = NULL;
  list->n = 0;
}

/* ---- what a sandbox says about itself beyond its keys ---- */

static double number_label(json_object *labels, const char *key, double none) {
  const char *v = ops_label(labels, key);
  double d = 0;
  if (v == NULL || sm_parse_double(v, 0, 1e15, &d, NULL) != 0) return none;
  return d;
}

/* The owner's labels (io.sandman.label.<key>) as a JSON object's text. */
static void user_labels(json_object *labels, char *out, size_t len) {
  json_object *o = json_object_new_object();
  size_t plen = strlen(SM_OPS_LABEL_USER_PREFIX);
  if (o && labels && json_object_is_type(labels, json_type_object)) {
    json_object_object_foreach(labels, k, v) {
      if (strncmp(k, SM_OPS_LABEL_USER_PREFIX, plen) != 0 || k[plen] == '\0' ||
          !json_object_is_type(v, json_type_string))
        continue;
      json_object_object_add(o, k + plen, json_object_get(v));
    }
  }
  const char *text = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : "{}";
  /* Labels this sandman wrote fit; anything else is not shown cut. */
  snprintf(out, len, "%s", strlen(text) < len ? text : "{}");
  json_object_put(o);
}

void ops_sandbox_describe(json_object *labels, sm_ops_sandbox *out) {
  ops_copy(out->principal, sizeof out->principal, ops_label(labels, SM_OPS_LABEL_PRINCIPAL));
  const char *res = ops_label(labels, SM_OPS_LABEL_RESOURCE);
  out->resource = res && strcmp(res, "true") == 0;
  ops_copy(out->template_name, sizeof out->template_name, ops_label(labels, SM_OPS_LABEL_TEMPLATE));
  ops_copy(out->network, sizeof out->network, ops_label(labels, "io.sandman.network"));
  ops_copy(out->runtime, sizeof out->runtime, ops_label(labels, "io.sandman.runtime"));
  out->cpu = number_label(labels, "io.sandman.cpu", -1);
  out->memory = (int64_t)number_label(labels, "io.sandman.memory", -1);
  out->pids = (int64_t)number_label(labels, "io.sandman.pids", -1);
  out->disk = (int64_t)number_label(labels, "io.sandman.disk", -1);
  out->timeout_s = number_label(labels, SM_OPS_LABEL_TIMEOUT, 0);
  out->idle_timeout_s = number_label(labels, SM_OPS_LABEL_IDLE_TIMEOUT, 0);
  user_labels(labels, out->labels, sizeof out->labels);
}

static json_object *count_or_null(double v) {
  return v >= 0 ? json_object_new_int64((int64_t)v) : NULL;
}

void ops_sandbox_describe_json(json_object *o, const sm_ops_sandbox *sb) {
  json_object_object_add(o, "resource", json_object_new_boolean(sb->resource));
  json_object_object_add(o, "template", sb->template_name[0]
                                            ? json_object_new_string(sb->template_name)
                                            : NULL);
  json_object_object_add(o, "network", sb->network[0] ? json_object_new_string(sb->network) : NULL);
  json_object *r = json_object_new_object();
  json_object_object_add(r, "cpu", sb->cpu >= 0 ? json_object_new_double(sb->cpu) : NULL);
  json_object_object_add(r, "memory", count_or_null((double)sb->memory));
  json_object_object_add(r, "pids", count_or_null((double)sb->pids));
  json_object_object_add(r, "disk", count_or_null((double)sb->disk));
  json_object_object_add(o, "resources", r);
  json_object_object_add(o, "timeout_s",
                         sb->timeout_s > 0 ? json_object_new_double(sb->timeout_s) : NULL);
  json_object_object_add(o, "idle_timeout_s", sb->idle_timeout_s > 0
                                                  ? json_object_new_double(sb->idle_timeout_s)
                                                  : NULL);
  char t[40];
  if (sb->timeout_s > 0 && sb->created_at > 0) {
    sm_format_time(sb->created_at + sb->timeout_s, t, sizeof t);
    json_object_object_add(o, "expires_at", json_object_new_string(t));
  } else {
    json_object_object_add(o, "expires_at", NULL);
  }
  json_object *labels = json_tokener_parse(sb->labels[0] ? sb->labels : "{}");
  json_object_object_add(o, "labels", labels ? labels : json_object_new_object());
}

/* ---- JSON ---- */

static json_object *string_or_null(const char *s) {
  return s && *s ? json_object_new_string(s) : NULL;
}

static json_object *time_or_null(double epoch) {
  if (!(epoch > 0)) return NULL;
  char t[40];
  sm_format_time(epoch, t, sizeof t);
  return json_object_new_string(t);
}

json_object *sm_ops_sandbox_to_json(const sm_ops_sandbox *sb) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "id", json_object_new_string(sb->id));
  json_object_object_add(o, "name", string_or_null(sb->name));
  json_object_object_add(o, "mode", string_or_null(sb->mode));
  json_object_object_add(o, "project", string_or_null(sb->project));
  json_object_object_add(o, "run_id", string_or_null(sb->run_id));
  json_object_object_add(o, "worker_id", string_or_null(sb->worker_id));
  json_object_object_add(o, "agent", string_or_null(sb->agent));
  json_object_object_add(o, "image", string_or_null(sb->image));
  json_object_object_add(o, "status", string_or_null(sb->state));
  json_object_object_add(o, "state", string_or_null(sb->rest[0] ? sb->rest : sb->state));
  json_object_object_add(o, "state_since", time_or_null(sb->rest_since));
  json_object_object_add(o, "created_at", time_or_null(sb->created_at));
  json_object_object_add(o, "last_used_at", time_or_null(sb->last_used_at));
  json_object_object_add(o, "busy", json_object_new_boolean(sb->busy));
  json_object_object_add(o, "pool", json_object_new_boolean(sb->pool));
  json_object_object_add(o, "node", string_or_null(sb->node));
  ops_sandbox_describe_json(o, sb);
  return o;
}

json_object *sm_ops_list_to_json(const sm_ops_sandbox_list *list) {
  json_object *a = json_object_new_array();
  if (a == NULL) return NULL;
  for (size_t i = 0; list && i < list->n; i++) {
    json_object *o = sm_ops_sandbox_to_json(&list->items[i]);
    if (o == NULL || json_object_array_add(a, o) != 0) {
      json_object_put(o);
      json_object_put(a);
      return NULL;
    }
  }
  return a;
}

/* ---- the table ---- */

#define NCOLS 10
static const char *const headings[NCOLS] = {"SANDBOX", "MODE",  "PROJECT", "RUN",     "WORKER",
                                            "AGENT",   "IMAGE", "STATUS",  "CREATED", "LAST USED"};
#define CELL_MAX 160

/* A label may hold anything: keep control characters off the terminal. */
static void cell(char *dst, const char *src) {
  size_t i = 0;
  if (src == NULL || *src == '\0') src = "-";
  for (; src[i] && i < CELL_MAX - 1; i++)
    dst[i] = ((unsigned char)src[i] < 0x20 || src[i] == 0x7f) ? '?' : src[i];
  dst[i] = '\0';
}

static void row_cells(const sm_ops_sandbox *sb, double now, char cells[NCOLS][CELL_MAX]) {
  char tmp[CELL_MAX];
  snprintf(tmp, sizeof tmp, "%.12s", sb->id);
  cell(cells[0], tmp);
  cell(cells[1], sb->mode);
  cell(cells[2], sb->project);
  cell(cells[3], sb->run_id);
  cell(cells[4], sb->worker_id);
  cell(cells[5], sb->agent);
  cell(cells[6], sb->image);
  /* On a swarm the status says where it runs. */
  /* At rest: its state and when it entered it after the engine's words
   * ("Exited (137) 2 minutes ago (stopped 2 minutes ago)"). */
  int rest = strcmp(sb->rest, "stopped") == 0 || strcmp(sb->rest, "hibernated") == 0 ||
             strcmp(sb->rest, "frozen") == 0;
  char since[48] = "";
  if (rest && sb->rest_since > 0) {
    since[0] = ' ';
    sm_ops_format_ago(now - sb->rest_since, since + 1, sizeof since - 1);
  }
  snprintf(tmp, sizeof tmp, "%s%s%.64s%s%s%s%s%s%s", sb->status_text[0] ? sb->status_text : sb->state,
           sb->node[0] ? " on " : "", sb->node, sb->pool ? " (pool)" : "", sb->busy ? " (busy)" : "",
           rest ? " (" : "", rest ? sb->rest : "", since, rest ? ")" : "");
  cell(cells[7], tmp);
  if (sb->created_at > 0) sm_ops_format_ago(now - sb->created_at, tmp, sizeof tmp);
  else snprintf(tmp, sizeof tmp, "-");
  cell(cells[8], tmp);
  if (sb->last_used_at > 0) sm_ops_format_ago(now - sb->last_used_at, tmp, sizeof tmp);
  else snprintf(tmp, sizeof tmp, "-");
  cell(cells[9], tmp);
}

static int append_row(common_buf *b, char cells[NCOLS][CELL_MAX], const size_t width[NCOLS]) {
  for (int c = 0; c < NCOLS; c++) {
    int rc;
    /* Three spaces between columns, as docker's tabwriter pads; no
     * trailing blanks after the last one. */
    if (c < NCOLS - 1) rc = common_buf_printf(b, "%-*s   ", (int)width[c], cells[c]);
    else rc = common_buf_printf(b, "%s\n", cells[c]);
    if (rc) return rc;
  }
  return 0;
}

char *sm_ops_list_table(const sm_ops_sandbox_list *list, double now) {
  size_t width[NCOLS];
  char cells[NCOLS][CELL_MAX];
  for (int c = 0; c < NCOLS; c++) width[c] = strlen(headings[c]);
  size_t n = list ? list->n : 0;
  for (size_t i = 0; i < n; i++) {
    row_cells(&list->items[i], now, cells);
    for (int c = 0; c < NCOLS; c++)
      if (strlen(cells[c]) > width[c]) width[c] = strlen(cells[c]);
  }
  common_buf b;
  common_buf_init(&b, TEXT_MAX);
  for (int c = 0; c < NCOLS; c++) cell(cells[c], headings[c]);
  int rc = append_row(&b, cells, width);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    row_cells(&list->items[i], now, cells);
    rc = append_row(&b, cells, width);
  }
  if (rc) {
    common_buf_dispose(&b);
    return NULL;
  }
  return common_buf_steal(&b, NULL);
}

/* ---- reports ---- */

int ops_report_add(sm_ops_report *report, int removed, sm_ops_item_kind kind,
                   const char *id, const char *name, int failed, sm_error *err,
                   const char *fmt, ...) {
  sm_ops_item **items = removed ? &report->removed : &report->spared;
  size_t *n = removed ? &report->n_removed : &report->n_spared;
  if (*n >= OPS_MAX_ITEMS)
    return sm_error_set(err, SM_ETOOBIG, "more than %d sandboxes in one report", OPS_MAX_ITEMS);
  sm_ops_item *grown = realloc(*items, (*n + 1) * sizeof *grown);
  if (grown == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  *items = grown;
  sm_ops_item *it = &grown[*n];
  memset(it, 0, sizeof *it);
  it->kind = kind;
  it->failed = failed;
  ops_copy(it->id, sizeof it->id, id);
  ops_copy(it->name, sizeof it->name, name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(it->reason, sizeof it->reason, fmt, ap);
  va_end(ap);
  (*n)++;
  if (failed) report->n_failed++;
  return 0;
}

int ops_report_move(sm_ops_report *report, const char *id, const char *name, const char *state,
                    const char *reason, sm_error *err) {
  if (report->n_moved >= OPS_MAX_ITEMS)
    return sm_error_set(err, SM_ETOOBIG, "more than %d sandboxes in one report", OPS_MAX_ITEMS);
  sm_ops_item *grown = realloc(report->moved, (report->n_moved + 1) * sizeof *grown);
  if (grown == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  report->moved = grown;
  sm_ops_item *it = &grown[report->n_moved++];
  memset(it, 0, sizeof *it);
  ops_copy(it->id, sizeof it->id, id);
  ops_copy(it->name, sizeof it->name, name);
  ops_copy(it->state, sizeof it->state, state);
  ops_copy(it->reason, sizeof it->reason, reason);
  return 0;
}

static int merge_items(sm_ops_item **into, size_t *n_into, const sm_ops_item *from, size_t n,
                       sm_error *err) {
  if (n == 0) return 0;
  if (*n_into + n > OPS_MAX_ITEMS)
    return sm_error_set(err, SM_ETOOBIG, "more than %d sandboxes in one report", OPS_MAX_ITEMS);
  sm_ops_item *grown = realloc(*into, (*n_into + n) * sizeof *grown);
  if (grown == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  memcpy(grown + *n_into, from, n * sizeof *from);
  *into = grown;
  *n_into += n;
  return 0;
}

int sm_ops_report_merge(sm_ops_report *into, const sm_ops_report *from, sm_error *err) {
  int rc = merge_items(&into->removed, &into->n_removed, from->removed, from->n_removed, err);
  if (rc == 0) rc = merge_items(&into->spared, &into->n_spared, from->spared, from->n_spared, err);
  if (rc == 0) rc = merge_items(&into->moved, &into->n_moved, from->moved, from->n_moved, err);
  if (rc == 0) into->n_failed += from->n_failed;
  return rc;
}

void sm_ops_report_dispose(sm_ops_report *report) {
  if (report == NULL) return;
  free(report->moved);
  free(report->removed);
  free(report->spared);
  memset(report, 0, sizeof *report);
}

static json_object *items_to_json(const sm_ops_item *items, size_t n, int with_failed) {
  json_object *a = json_object_new_array();
  for (size_t i = 0; a && i < n; i++) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", string_or_null(items[i].id));
    json_object_object_add(o, "name", json_object_new_string(items[i].name));
    json_object_object_add(o, "reason", json_object_new_string(items[i].reason));
    json_object_object_add(o, "kind", json_object_new_string(
                                          items[i].kind == SM_OPS_ITEM_VOLUME    ? "volume"
                                          : items[i].kind == SM_OPS_ITEM_NETWORK ? "network"
                                                                                 : "sandbox"));
    if (with_failed) json_object_object_add(o, "failed", json_object_new_boolean(items[i].failed));
    if (items[i].state[0]) json_object_object_add(o, "state", json_object_new_string(items[i].state));
    json_object_array_add(a, o);
  }
  return a;
}

json_object *sm_ops_report_to_json(const sm_ops_report *report) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "removed", items_to_json(report->removed, report->n_removed, 0));
  json_object_object_add(o, "spared", items_to_json(report->spared, report->n_spared, 1));
  json_object_object_add(o, "moved", items_to_json(report->moved, report->n_moved, 0));
  json_object_object_add(o, "dry_run", json_object_new_boolean(report->dry_run));
  return o;
}

static int item_line(common_buf *b, const char *verb, const sm_ops_item *it) {
  char name[CELL_MAX], reason[sizeof it->reason];
  cell(name, it->name);
  snprintf(reason, sizeof reason, "%s", it->reason);
  for (char *p = reason; *p; p++)
    if ((unsigned char)*p < 0x20) *p = '?';
  if (it->kind == SM_OPS_ITEM_VOLUME)
    return common_buf_printf(b, "%s volume %s: %s\n", verb, name, reason);
  if (it->kind == SM_OPS_ITEM_NETWORK)
    return common_buf_printf(b, "%s network %s: %s\n", verb, name, reason);
  /* A name that matched nothing has no id: say so plainly. */
  if (it->id[0] == '\0') return common_buf_printf(b, "%s %s: %s\n", verb, name, reason);
  return common_buf_printf(b, "%s %s (%.12s): %s\n", verb, name, it->id, reason);
}

char *sm_ops_report_text(const sm_ops_report *report) {
  common_buf b;
  common_buf_init(&b, TEXT_MAX);
  int rc = 0;
  const char *verb = report->dry_run ? "would remove" : "removed";
  for (size_t i = 0; rc == 0 && i < report->n_moved; i++) {
    char v[48];
    snprintf(v, sizeof v, "%s%s", report->dry_run ? "would move to " : "", report->moved[i].state);
    rc = item_line(&b, v, &report->moved[i]);
  }
  for (size_t i = 0; rc == 0 && i < report->n_removed; i++)
    rc = item_line(&b, verb, &report->removed[i]);
  for (size_t i = 0; rc == 0 && i < report->n_spared; i++)
    rc = item_line(&b, report->spared[i].failed ? "failed" : "spared", &report->spared[i]);
  if (rc == 0)
    rc = common_buf_printf(&b, "%zu %s, %zu spared", report->n_removed,
                           report->dry_run ? "would be removed" : "removed",
                           report->n_spared - report->n_failed);
  if (rc == 0 && report->n_failed) rc = common_buf_printf(&b, ", %zu failed", report->n_failed);
  if (rc == 0 && report->n_moved)
    rc = common_buf_printf(&b, ", %zu %s to rest", report->n_moved,
                           report->dry_run ? "would be moved" : "moved");
  if (rc == 0)
    rc = common_buf_printf(&b, "%s\n", report->dry_run ? " (dry run: nothing changed)" : "");
  if (rc) {
    common_buf_dispose(&b);
    return NULL;
  }
  return common_buf_steal(&b, NULL);
}

/* ---- the reap request of the HTTP API ---- */

static int json_bool_field(json_object *body, const char *key, int *out, sm_error *err) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(body, key, &v) || v == NULL) return 0;
  if (!json_object_is_type(v, json_type_boolean))
    return sm_error_set(err, SM_EINVAL, "'%s' must be true or false", key);
  *out = json_object_get_boolean(v);
  return 0;
}

int sm_ops_reap_options_from_json(json_object *body, sm_ops_reap_options *out, sm_error *err) {
  sm_ops_reap_options init = SM_OPS_REAP_OPTIONS_INIT;
  *out = init;
  if (body == NULL) return 0;
  if (!json_object_is_type(body, json_type_object))
    return sm_error_set(err, SM_EINVAL, "the reap request must be a JSON object");
  json_object *v = NULL;
  if (json_object_object_get_ex(body, "older_than_s", &v) && v != NULL) {
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
      return sm_error_set(err, SM_EINVAL, "'older_than_s' must be a number of seconds");
    double s = json_object_get_double(v);
    if (!isfinite(s) || s < 0)
      return sm_error_set(err, SM_EINVAL, "'older_than_s' must be zero or more");
    out->older_than_s = s;
  }
  int rc = json_bool_field(body, "dry_run", &out->dry_run, err);
  if (rc == 0) rc = json_bool_field(body, "force", &out->force, err);
  return rc;
}

/* Here rather than in reap.c: list, reap and rm of both backends use it. */
const char *sm_ops_scope_instance(const sm_ops_scope *scope) {
  if (scope && scope->instance && *scope->instance) return scope->instance;
  const char *env = getenv("SANDMAN_INSTANCE");
  return env && *env ? env : "default";
}
