/* The sandbox's tools over MCP (`sandman mcp`, `/mcp` on the runner):
 * execute, read_file, write_file, edit_file, ls, glob, grep. Each call is
 * resolved by the caller's prepare function (the configuration's tool
 * policy, settings and keys: the same rules as any call), then runs with
 * sm_run (execute) or the files API (the rest), in the session's keyed
 * sandbox. A refused or failed call is a tool error the model can read. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/files.h>
#include <sandman/mcp.h>

#include "common/text.h"
#include "mcp/code_tool.h"
#include "mcp/snapshot_tools.h"
#include "mcp/terminal_tools.h"

#define DEFAULT_READ_MAX ((size_t)1 << 20)
#define DEFAULT_OUTPUT_MAX ((size_t)256 << 10)
#define DEFAULT_LINES 2000
#define LIST_MAX 1000

static const char schema_execute[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"description\":\"A shell command, run with /bin/sh -c in "
    "/workspace\"},"
    "\"timeout_s\":{\"type\":\"number\",\"minimum\":0.001,\"maximum\":86400,\"description\":"
    "\"Seconds before the command is killed (default: the configuration's)\"},"
    "\"stdin\":{\"type\":\"string\",\"description\":\"Standard input for the command\"}},"
    "\"required\":[\"command\"],\"additionalProperties\":false}";
static const char out_execute[] =
    "{\"type\":\"object\",\"properties\":{\"exit_code\":{\"type\":\"integer\"},"
    "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
    "\"timed_out\":{\"type\":\"boolean\"},\"truncated\":{\"type\":\"boolean\"},"
    "\"duration_ms\":{\"type\":\"number\"}},\"required\":[\"exit_code\",\"stdout\",\"stderr\"]}";
static const char schema_read[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"File path, relative to /workspace\"},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"First line to return, "
    "0-based (default 0)\"},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Lines to return at most "
    "(default 2000)\"}},"
    "\"required\":[\"path\"],\"additionalProperties\":false}";
static const char out_read[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"content\":{\"type\":\"string\",\"description\":\"The lines asked for (text), or the "
    "whole file in base64 (a binary file)\"},"
    "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]},"
    "\"size\":{\"type\":\"integer\",\"description\":\"The file's size in bytes\"},"
    "\"total_lines\":{\"type\":\"integer\"},\"truncated\":{\"type\":\"boolean\","
    "\"description\":\"Lines before offset or after offset+limit were left out\"}},"
    "\"required\":[\"path\",\"content\",\"encoding\",\"size\"]}";
static const char schema_write[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"File path, relative to /workspace; missing "
    "folders are made\"},"
    "\"content\":{\"type\":\"string\",\"description\":\"The whole new content\"},"
    "\"mode\":{\"type\":\"string\",\"pattern\":\"^0?[0-7]{3}$\",\"description\":\"Permission bits "
    "in octal, e.g. 0755 (default: kept, or 0644 for a new file)\"}},"
    "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}";
static const char out_write[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"size\":{\"type\":\"integer\",\"description\":\"Bytes written\"}},"
    "\"required\":[\"path\",\"size\"]}";
static const char schema_edit[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"File path, relative to /workspace\"},"
    "\"old_string\":{\"type\":\"string\",\"description\":\"Exact text to replace; it must occur "
    "exactly once unless replace_all\"},"
    "\"new_string\":{\"type\":\"string\",\"description\":\"The replacement\"},"
    "\"replace_all\":{\"type\":\"boolean\",\"description\":\"Replace every occurrence\"}},"
    "\"required\":[\"path\",\"old_string\",\"new_string\"],\"additionalProperties\":false}";
static const char out_edit[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"occurrences\":{\"type\":\"integer\",\"description\":\"Occurrences replaced\"}},"
    "\"required\":[\"path\",\"occurrences\"]}";
static const char schema_ls[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"Folder, relative to /workspace (default "
    "the workspace)\"}},\"additionalProperties\":false}";
static const char schema_glob[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"pattern\":{\"type\":\"string\",\"description\":\"Path pattern relative to path: * ? [..] "
    "within a name, ** for any folders, e.g. src/**/*.c\"},"
    "\"path\":{\"type\":\"string\",\"description\":\"Folder to search (default the "
    "workspace)\"}},\"required\":[\"pattern\"],\"additionalProperties\":false}";
static const char schema_grep[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"pattern\":{\"type\":\"string\",\"description\":\"POSIX extended regular expression (or a "
    "plain string with fixed)\"},"
    "\"path\":{\"type\":\"string\",\"description\":\"File or folder to search (default the "
    "workspace)\"},"
    "\"include\":{\"type\":\"string\",\"description\":\"Only files whose path matches this glob, "
    "e.g. **/*.py\"},"
    "\"ignore_case\":{\"type\":\"boolean\"},\"fixed\":{\"type\":\"boolean\"},"
    "\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000}},"
    "\"required\":[\"pattern\"],\"additionalProperties\":false}";

/* ls and glob: entries as the runner's files API gives them. */
static const char out_list[] =
    "{\"type\":\"object\",\"properties\":{\"entries\":{\"type\":\"array\",\"items\":{"
    "\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"dir\",\"symlink\",\"other\"]},"
    "\"size\":{\"type\":\"integer\"},\"mode\":{\"type\":\"string\"},"
    "\"mtime\":{\"type\":\"string\"},\"link\":{\"type\":\"string\"}},"
    "\"required\":[\"path\",\"type\"]}},"
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"More entries were left out\"}},"
    "\"required\":[\"entries\",\"truncated\"]}";
static const char out_grep[] =
    "{\"type\":\"object\",\"properties\":{\"matches\":{\"type\":\"array\",\"items\":{"
    "\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"line\":{\"type\":\"integer\"},\"text\":{\"type\":\"string\"}},"
    "\"required\":[\"path\",\"line\",\"text\"]}},"
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"More matches were left out\"}},"
    "\"required\":[\"matches\",\"truncated\"]}";

typedef struct tools {
  sm_mcp_tool list[18];
  sm_mcp_sandbox_options o;
  mcp_terminals *terminals;
} tools;

/* ---- arguments ---- */

static const char *arg_string(json_object *args, const char *key) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(args, key, &v) || !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

/* Checks args against the keys a tool takes and their JSON types
 * ('s' string, 'i' integer, 'n' number, 'b' boolean); required keys are
 * upper case. A message for the model, or NULL when fine. */
static const char *check_args(json_object *args, const char *spec, char *why, size_t len) {
  json_object_object_foreach(args, key, val) {
    const char *p = strstr(spec, key);
    size_t klen = strlen(key);
    while (p && !((p == spec || p[-1] == ',') && p[klen] == ':')) p = strstr(p + 1, key);
    if (p == NULL) {
      snprintf(why, len, "unknown argument '%s'", key);
      return why;
    }
    char t = p[klen + 1] | 0x20;
    int ok = (t == 's' && json_object_is_type(val, json_type_string)) ||
             (t == 'i' && json_object_is_type(val, json_type_int)) ||
             (t == 'n' && (json_object_is_type(val, json_type_int) || json_object_is_type(val, json_type_double))) ||
             (t == 'b' && json_object_is_type(val, json_type_boolean));
    if (!ok) {
      snprintf(why, len, "argument '%s' must be %s", key,
               t == 's' ? "a string" : t == 'i' ? "an integer" : t == 'n' ? "a number" : "true or false");
      return why;
    }
  }
  for (const char *p = spec; *p;) {
    const char *colon = strchr(p, ':');
    if (colon == NULL) break;
    if (colon[1] >= 'A' && colon[1] <= 'Z') {
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)(colon - p), p);
      if (!json_object_object_get_ex(args, name, NULL)) {
        snprintf(why, len, "argument '%s' is required", name);
        return why;
      }
    }
    const char *comma = strchr(colon, ',');
    if (comma == NULL) break;
    p = comma + 1;
  }
  return NULL;
}

/* ---- the call's request ---- */

static int prepare(tools *t, const char *sandman_tool, volatile int *cancel, sm_run_request *req,
                   sm_mcp_result *out) {
  sm_run_request_init(req);
  sm_error err = SM_ERROR_INIT;
  if (t->o.prepare(t->o.prepare_ud, sandman_tool, req, &err) != 0) {
    sm_mcp_result_error(out, "%s", err.message);
    return -1;
  }
  req->cancel = cancel;
  return 0;
}

/* The failure of a files call, as a tool error. */
static int files_failed(sm_mcp_result *out, const char *what, const sm_error *err) {
  return sm_mcp_result_error(out, "%s: %s", what, err->message);
}

/* ---- execute ---- */

typedef struct text_feed {
  const char *p;
  size_t left;
} text_feed;

static ssize_t read_text(void *ud, char *buf, size_t len) {
  text_feed *f = ud;
  size_t n = f->left < len ? f->left : len;
  memcpy(buf, f->p, n);
  f->p += n;
  f->left -= n;
  return (ssize_t)n;
}

/* data[0..len) as JSON text, cut at cap (on a UTF-8 boundary). */
static json_object *capped_text(const char *data, size_t len, size_t cap, int *truncated) {
  if (len > cap) {
    len = cap;
    while (len > 0 && ((unsigned char)data[len] & 0xC0) == 0x80) len--;
    *truncated = 1;
  }
  return common_json_text(data ? data : "", len);
}

static int tool_execute(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "shell", cancel, &req, out)) return 0;
  json_object *v = NULL;
  if (json_object_object_get_ex(args, "timeout_s", &v)) {
    double to = json_object_get_double(v);
    if (!(to >= 0.001 && to <= 86400)) return sm_mcp_result_error(out, "timeout_s must be 0.001 to 86400");
    req.settings.timeout_s = to;
  }
  const char *argv[] = {"/bin/sh", "-c", arg_string(args, "command")};
  req.argv = argv;
  req.argc = 3;
  const char *in = arg_string(args, "stdin");
  text_feed feed = {in, in ? strlen(in) : 0};
  if (in) {
    req.stdin_read = read_text;
    req.stdin_ud = &feed;
  }
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  if (sm_run(t->o.runner, &req, &r, &err) != 0 && r.error[0] == '\0')
    snprintf(r.error, sizeof r.error, "%s", err.message);
  int cancelled = cancel && *cancel;
  size_t cap = t->o.max_output_bytes ? t->o.max_output_bytes : DEFAULT_OUTPUT_MAX;
  int truncated = r.stdout_truncated || r.stderr_truncated;
  json_object *so = capped_text(r.stdout_data, r.stdout_len, cap, &truncated);
  json_object *se = capped_text(r.stderr_data, r.stderr_len, cap, &truncated);
  int ran = r.failure_kind == SM_FAIL_NONE || r.failure_kind == SM_FAIL_TOOL ||
            r.failure_kind == SM_FAIL_TIMEOUT;
  /* The text a model reads: output, then how it ended. */
  const char *o = json_object_get_string(so), *e = json_object_get_string(se);
  size_t olen = strlen(o), elen = strlen(e), tlen = olen + elen + sizeof r.error + 128;
  char *text = malloc(tlen);
  if (text) {
    int n = ran ? snprintf(text, tlen, "%s%s%s%s[exit code %d%s%s]", o,
                           olen && o[olen - 1] != '\n' ? "\n" : "", e,
                           elen && e[elen - 1] != '\n' ? "\n" : "", r.exit_code,
                           r.timed_out ? ", timed out" : "", truncated ? ", output truncated" : "")
                : snprintf(text, tlen, "the command could not run: %s", r.error);
    sm_mcp_result_text(out, text, n > 0 ? (size_t)n : 0);
    free(text);
  }
  json_object *st = json_object_new_object();
  json_object_object_add(st, "exit_code", json_object_new_int(r.exit_code));
  json_object_object_add(st, "stdout", so);
  json_object_object_add(st, "stderr", se);
  json_object_object_add(st, "timed_out", json_object_new_boolean(r.timed_out));
  json_object_object_add(st, "truncated", json_object_new_boolean(truncated));
  json_object_object_add(st, "duration_ms", json_object_new_double(r.duration_ms));
  if (r.error[0]) json_object_object_add(st, "error", common_json_text(r.error, strlen(r.error)));
  sm_mcp_result_structured(out, st);
  out->is_error = !r.ok;
  sm_run_result_dispose(&r);
  return cancelled ? SM_ECANCELLED : 0;
}

/* ---- files ---- */

/* A whole file, or a tool error (missing, too large); *binary set when it
 * is not UTF-8 text (a NUL, or not valid UTF-8). */
static char *read_whole_file(tools *t, const sm_run_request *req, const char *path, size_t *len,
                             int *binary, sm_mcp_result *out) {
  size_t max = t->o.max_read_bytes ? t->o.max_read_bytes : DEFAULT_READ_MAX;
  char *data = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_files_read_all(t->o.runner, req, path, 0, -1, max, &data, len, NULL, &err) != 0) {
    if (err.code == SM_ETOOBIG)
      sm_mcp_result_error(out, "%s is larger than %zu bytes: read it in parts with execute (e.g. "
                               "sed -n or head -c)", path, max);
    else
      files_failed(out, path, &err);
    return NULL;
  }
  *binary = !common_utf8_valid(data, *len) || memchr(data, '\0', *len) != NULL;
  return data;
}

/* data[0..len) in base64 (RFC 4648, padded); the caller frees it. */
static char *base64_of(const unsigned char *data, size_t len, size_t *out_len) {
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = (len + 2) / 3 * 4;
  char *o = malloc(n + 1);
  if (o == NULL) return NULL;
  size_t j = 0;
  for (size_t i = 0; i < len; i += 3) {
    unsigned v = (unsigned)data[i] << 16 | (i + 1 < len ? (unsigned)data[i + 1] << 8 : 0) |
                 (i + 2 < len ? data[i + 2] : 0);
    o[j++] = abc[v >> 18 & 63];
    o[j++] = abc[v >> 12 & 63];
    o[j++] = i + 1 < len ? abc[v >> 6 & 63] : '=';
    o[j++] = i + 2 < len ? abc[v & 63] : '=';
  }
  o[j] = '\0';
  *out_len = j;
  return o;
}

/* A binary file: its bytes in base64 (offset and limit count lines of text
 * and do not apply), with a line that says so before them. */
static int put_binary(sm_mcp_result *out, const char *path, const char *data, size_t len) {
  size_t blen = 0;
  char *b64 = base64_of((const unsigned char *)data, len, &blen);
  size_t tlen = blen + strlen(path) + 128;
  char *text = b64 ? malloc(tlen) : NULL;
  if (text == NULL) {
    free(b64);
    return SM_ENOMEM;
  }
  int n = snprintf(text, tlen, "%s is a binary file (%zu bytes), in base64:\n%s\n", path, len, b64);
  sm_mcp_result_text(out, text, n > 0 ? (size_t)n : 0);
  free(text);
  json_object *st = json_object_new_object();
  json_object_object_add(st, "path", json_object_new_string(path));
  json_object_object_add(st, "content", json_object_new_string_len(b64, (int)blen));
  json_object_object_add(st, "encoding", json_object_new_string("base64"));
  json_object_object_add(st, "size", json_object_new_int64((int64_t)len));
  json_object_object_add(st, "total_lines", json_object_new_int64(0));
  json_object_object_add(st, "truncated", json_object_new_boolean(0));
  sm_mcp_result_structured(out, st);
  free(b64);
  return 0;
}

static int tool_read(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "read_file", cancel, &req, out)) return 0;
  const char *path = arg_string(args, "path");
  json_object *v = NULL;
  int64_t offset = 0, limit = DEFAULT_LINES;
  if (json_object_object_get_ex(args, "offset", &v)) offset = json_object_get_int64(v);
  if (json_object_object_get_ex(args, "limit", &v)) limit = json_object_get_int64(v);
  if (offset < 0 || limit < 1) return sm_mcp_result_error(out, "offset must be >= 0 and limit >= 1");
  size_t len = 0;
  int binary = 0;
  char *data = read_whole_file(t, &req, path, &len, &binary, out);
  if (data == NULL) return 0;
  if (binary) {
    int rc = put_binary(out, path, data, len);
    free(data);
    return rc;
  }
  /* Lines [offset, offset + limit). */
  size_t start = 0, end = len;
  int64_t line = 0, total = 0;
  for (size_t i = 0; i < len; i++) {
    if (data[i] != '\n') continue;
    line++;
    if (line == offset) start = i + 1;
    if (line == offset + limit) end = i + 1;
  }
  total = line + (len > 0 && data[len - 1] != '\n');
  if (offset >= total) start = end = len;
  if (end < start) end = start;
  sm_mcp_result_text(out, data + start, end - start);
  json_object *st = json_object_new_object();
  json_object_object_add(st, "path", json_object_new_string(path));
  json_object_object_add(st, "content", common_json_text(data + start, end - start));
  json_object_object_add(st, "encoding", json_object_new_string("utf-8"));
  json_object_object_add(st, "size", json_object_new_int64((int64_t)len));
  json_object_object_add(st, "total_lines", json_object_new_int64(total));
  json_object_object_add(st, "truncated", json_object_new_boolean(end < len || start > 0));
  sm_mcp_result_structured(out, st);
  free(data);
  return 0;
}

static int parse_mode_arg(json_object *args, int *mode) {
  const char *m = arg_string(args, "mode");
  *mode = -1;
  if (m == NULL) return 0;
  char *end = NULL;
  long v = strtol(m, &end, 8);
  if (end == m || *end || v < 0 || v > 0777) return -1;
  *mode = (int)v;
  return 0;
}

static int tool_write(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "write_file", cancel, &req, out)) return 0;
  const char *path = arg_string(args, "path"), *content = arg_string(args, "content");
  int mode;
  if (parse_mode_arg(args, &mode)) return sm_mcp_result_error(out, "mode must be octal permission bits such as 0644");
  sm_error err = SM_ERROR_INIT;
  size_t len = strlen(content);
  if (sm_files_write_all(t->o.runner, &req, path, content, len, mode, NULL, &err) != 0)
    return files_failed(out, path, &err);
  char msg[SM_FILES_PATH_MAX + 64];
  int n = snprintf(msg, sizeof msg, "wrote %zu bytes to %s", len, path);
  json_object *st = json_object_new_object();
  json_object_object_add(st, "path", json_object_new_string(path));
  json_object_object_add(st, "size", json_object_new_int64((int64_t)len));
  sm_mcp_result_structured(out, st);
  return sm_mcp_result_text(out, msg, (size_t)n);
}

/* Occurrences of needle in hay[0..len). */
static size_t count_of(const char *hay, size_t len, const char *needle, size_t nlen) {
  size_t n = 0;
  for (const char *p = hay; (p = memmem(p, len - (size_t)(p - hay), needle, nlen)) != NULL; p += nlen) n++;
  return n;
}

static int tool_edit(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "edit_file", cancel, &req, out)) return 0;
  const char *path = arg_string(args, "path");
  const char *old = arg_string(args, "old_string"), *new = arg_string(args, "new_string");
  json_object *v = NULL;
  int all = json_object_object_get_ex(args, "replace_all", &v) && json_object_get_boolean(v);
  size_t olen = strlen(old), nlen = strlen(new);
  if (olen == 0) return sm_mcp_result_error(out, "old_string must not be empty (use write_file for a new file)");
  size_t len = 0;
  int binary = 0;
  char *data = read_whole_file(t, &req, path, &len, &binary, out);
  if (data == NULL) return 0;
  if (binary) {
    free(data);
    return sm_mcp_result_error(out, "%s is a binary file (%zu bytes): edit_file changes text; "
                                    "write the whole file with write_file", path, len);
  }
  size_t n = count_of(data, len, old, olen);
  if (n == 0 || (n > 1 && !all)) {
    free(data);
    if (n == 0) return sm_mcp_result_error(out, "old_string was not found in %s", path);
    return sm_mcp_result_error(out, "old_string occurs %zu times in %s: give more context so that "
                                    "it occurs once, or set replace_all", n, path);
  }
  size_t rlen = len - n * olen + n * nlen;
  char *res = malloc(rlen + 1);
  if (res == NULL) {
    free(data);
    return SM_ENOMEM;
  }
  size_t o = 0;
  const char *p = data, *end = data + len;
  for (const char *hit; (hit = memmem(p, (size_t)(end - p), old, olen)) != NULL; p = hit + olen) {
    memcpy(res + o, p, (size_t)(hit - p));
    o += (size_t)(hit - p);
    memcpy(res + o, new, nlen);
    o += nlen;
  }
  memcpy(res + o, p, (size_t)(end - p));
  o += (size_t)(end - p);
  free(data);
  sm_error err = SM_ERROR_INIT;
  int rc = sm_files_write_all(t->o.runner, &req, path, res, o, -1, NULL, &err);
  free(res);
  if (rc) return files_failed(out, path, &err);
  char msg[SM_FILES_PATH_MAX + 64];
  int m = snprintf(msg, sizeof msg, "replaced %zu occurrence%s in %s", n, n == 1 ? "" : "s", path);
  json_object *st = json_object_new_object();
  json_object_object_add(st, "path", json_object_new_string(path));
  json_object_object_add(st, "occurrences", json_object_new_int64((int64_t)n));
  sm_mcp_result_structured(out, st);
  return sm_mcp_result_text(out, msg, (size_t)m);
}

/* Lists l as text lines and as structured entries. */
static int put_list(sm_mcp_result *out, const sm_file_list *l, const char *empty) {
  size_t cap = 64;
  for (size_t i = 0; i < l->n; i++) cap += strlen(l->v[i].path) + 48;
  char *text = malloc(cap);
  json_object *entries = json_object_new_array();
  if (text == NULL || entries == NULL) {
    free(text);
    json_object_put(entries);
    return SM_ENOMEM;
  }
  size_t o = 0;
  for (size_t i = 0; i < l->n; i++) {
    const sm_file_entry *e = &l->v[i];
    if (e->type == 'd') o += (size_t)snprintf(text + o, cap - o, "%s/\n", e->path);
    else if (e->type == 'l') o += (size_t)snprintf(text + o, cap - o, "%s -> %s\n", e->path, e->link ? e->link : "");
    else o += (size_t)snprintf(text + o, cap - o, "%s (%" PRId64 " bytes)\n", e->path, e->size);
    json_object_array_add(entries, sm_file_entry_to_json(e));
  }
  if (l->n == 0) o = (size_t)snprintf(text, cap, "%s\n", empty);
  if (l->truncated) o += (size_t)snprintf(text + o, cap - o, "(more entries left out)\n");
  sm_mcp_result_text(out, text, o);
  free(text);
  json_object *st = json_object_new_object();
  json_object_object_add(st, "entries", entries);
  json_object_object_add(st, "truncated", json_object_new_boolean(l->truncated));
  sm_mcp_result_structured(out, st);
  return 0;
}

/* The answer of a listing call that returned rc (what: its argument, for
 * the error). */
static int list_answer(sm_mcp_result *out, int rc, const char *what, const sm_error *err,
                       sm_file_list *l, const char *empty) {
  if (rc != 0) return files_failed(out, what, err);
  rc = put_list(out, l, empty);
  sm_file_list_dispose(l);
  return rc;
}

static int tool_ls(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "list_dir", cancel, &req, out)) return 0;
  const char *path = arg_string(args, "path");
  if (path == NULL) path = ".";
  sm_file_list l;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_files_list(t->o.runner, &req, path, 1, LIST_MAX, &l, NULL, &err);
  return list_answer(out, rc, path, &err, &l, "(empty)");
}

static int tool_glob(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "glob", cancel, &req, out)) return 0;
  const char *path = arg_string(args, "path"), *pattern = arg_string(args, "pattern");
  if (path == NULL) path = ".";
  sm_file_list l;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_files_glob(t->o.runner, &req, path, pattern, LIST_MAX, &l, NULL, &err);
  return list_answer(out, rc, pattern, &err, &l, "(no match)");
}

static int tool_grep(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "grep", cancel, &req, out)) return 0;
  const char *path = arg_string(args, "path");
  if (path == NULL) path = ".";
  json_object *v = NULL;
  sm_grep_opts go = {.pattern = arg_string(args, "pattern"), .include = arg_string(args, "include")};
  if (json_object_object_get_ex(args, "ignore_case", &v)) go.ignore_case = json_object_get_boolean(v);
  if (json_object_object_get_ex(args, "fixed", &v)) go.fixed = json_object_get_boolean(v);
  go.max_matches = 200;
  if (json_object_object_get_ex(args, "max_results", &v)) {
    int64_t m = json_object_get_int64(v);
    if (m < 1 || m > 1000) return sm_mcp_result_error(out, "max_results must be 1 to 1000");
    go.max_matches = (size_t)m;
  }
  sm_grep_result g;
  sm_error err = SM_ERROR_INIT;
  if (sm_files_grep(t->o.runner, &req, path, &go, &g, NULL, &err) != 0)
    return files_failed(out, go.pattern, &err);
  size_t cap = 64;
  for (size_t i = 0; i < g.n; i++) cap += strlen(g.v[i].path) + g.v[i].text_len + 32;
  char *text = malloc(cap);
  json_object *matches = json_object_new_array();
  if (text == NULL || matches == NULL) {
    free(text);
    json_object_put(matches);
    sm_grep_result_dispose(&g);
    return SM_ENOMEM;
  }
  size_t o = 0;
  for (size_t i = 0; i < g.n; i++) {
    o += (size_t)snprintf(text + o, cap - o, "%s:%" PRId64 ": %s\n", g.v[i].path, g.v[i].line, g.v[i].text);
    json_object *m = json_object_new_object();
    json_object_object_add(m, "path", common_json_text(g.v[i].path, strlen(g.v[i].path)));
    json_object_object_add(m, "line", json_object_new_int64(g.v[i].line));
    json_object_object_add(m, "text", common_json_text(g.v[i].text, g.v[i].text_len));
    json_object_array_add(matches, m);
  }
  if (g.n == 0) o = (size_t)snprintf(text, cap, "(no match)\n");
  if (g.truncated) o += (size_t)snprintf(text + o, cap - o, "(more matches left out)\n");
  sm_mcp_result_text(out, text, o);
  free(text);
  json_object *st = json_object_new_object();
  json_object_object_add(st, "matches", matches);
  json_object_object_add(st, "truncated", json_object_new_boolean(g.truncated));
  sm_mcp_result_structured(out, st);
  sm_grep_result_dispose(&g);
  return 0;
}

/* ---- run_code (code_tool.c) ---- */

static int tool_code(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "code", cancel, &req, out)) return 0;
  size_t cap = t->o.max_output_bytes ? t->o.max_output_bytes : DEFAULT_OUTPUT_MAX;
  return mcp_code_tool_call(t->o.runner, &req, args, cap, out);
}

/* ---- terminals (terminal_tools.c) ---- */

static int terminal_prepare(void *ud, volatile int *cancel, sm_run_request *req,
                            sm_mcp_result *out) {
  return prepare(ud, "terminal", cancel, req, out);
}

static int tool_terminal_open(tools *t, json_object *args, volatile int *cancel,
                              sm_mcp_result *out) {
  return mcp_terminal_open(t->terminals, args, cancel, out);
}
static int tool_terminal_send(tools *t, json_object *args, volatile int *cancel,
                              sm_mcp_result *out) {
  return mcp_terminal_send(t->terminals, args, cancel, out);
}
static int tool_terminal_screen(tools *t, json_object *args, volatile int *cancel,
                                sm_mcp_result *out) {
  return mcp_terminal_screen(t->terminals, args, cancel, out);
}
static int tool_terminal_close(tools *t, json_object *args, volatile int *cancel,
                               sm_mcp_result *out) {
  return mcp_terminal_close(t->terminals, args, cancel, out);
}

/* ---- branches of the session's own sandbox (snapshot_tools.c) ---- */

static int tool_snapshot(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "snapshot", cancel, &req, out)) return 0;
  return mcp_snapshot_call(&t->o, &req, args, out);
}
static int tool_fork(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "fork", cancel, &req, out)) return 0;
  return mcp_fork_call(t->o.runner, &req, args, out);
}
static int tool_rollback(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "rollback", cancel, &req, out)) return 0;
  return mcp_rollback_call(t->o.runner, &req, args, out);
}
static int tool_diff(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "diff", cancel, &req, out)) return 0;
  return mcp_diff_call(t->o.runner, &req, args, out);
}

static int tool_pause(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "pause", cancel, &req, out)) return 0;
  return mcp_rest_call(t->o.runner, &req, args, 1, out);
}
static int tool_resume(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out) {
  sm_run_request req;
  if (prepare(t, "resume", cancel, &req, out)) return 0;
  return mcp_rest_call(t->o.runner, &req, args, 0, out);
}

/* ---- the provider ---- */

typedef int (*tool_fn)(tools *t, json_object *args, volatile int *cancel, sm_mcp_result *out);

static const struct {
  const char *name;
  const char *args; /* check_args spec */
  tool_fn fn;
} table[] = {
    {"execute", "command:S,timeout_s:n,stdin:s", tool_execute},
    {"read_file", "path:S,offset:i,limit:i", tool_read},
    {"write_file", "path:S,content:S,mode:s", tool_write},
    {"edit_file", "path:S,old_string:S,new_string:S,replace_all:b", tool_edit},
    {"ls", "path:s", tool_ls},
    {"glob", "pattern:S,path:s", tool_glob},
    {"grep", "pattern:S,path:s,include:s,ignore_case:b,fixed:b,max_results:i", tool_grep},
    {"run_code", MCP_CODE_TOOL_ARGS, tool_code},
    {"terminal_open", "command:s,rows:i,cols:i,wait_ms:i", tool_terminal_open},
    {"terminal_send", "terminal:s,keys:S,wait_ms:i", tool_terminal_send},
    {"terminal_screen", "terminal:s,wait_ms:i", tool_terminal_screen},
    {"terminal_close", "terminal:S", tool_terminal_close},
    {"snapshot", MCP_SNAPSHOT_ARGS, tool_snapshot},
    {"fork", MCP_FORK_ARGS, tool_fork},
    {"rollback", MCP_ROLLBACK_ARGS, tool_rollback},
    {"diff", MCP_DIFF_ARGS, tool_diff},
    {"pause", MCP_PAUSE_ARGS, tool_pause},
    {"resume", MCP_RESUME_ARGS, tool_resume},
};

static const sm_mcp_tool *list_tools(void *ud, size_t *n) {
  tools *t = ud;
  *n = sizeof t->list / sizeof t->list[0];
  return t->list;
}

static int call_tool(void *ud, void *request, const char *name, json_object *args,
                     volatile int *cancel, sm_mcp_result *out, sm_error *err) {
  (void)request;
  tools *t = ud;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (strcmp(table[i].name, name) != 0) continue;
    char why[256];
    if (check_args(args, table[i].args, why, sizeof why)) return sm_mcp_result_error(out, "%s", why);
    int rc = table[i].fn(t, args, cancel, out);
    if (rc == SM_ENOMEM) return sm_error_set(err, rc, "out of memory");
    return rc == SM_ECANCELLED ? rc : 0;
  }
  return sm_error_set(err, SM_ENOTFOUND, "no tool %s", name);
}

static void free_tools(void *ud) {
  tools *t = ud;
  /* Before the session's sandbox may go (prepare_free). */
  mcp_terminals_free(t->terminals);
  if (t->o.prepare_free) t->o.prepare_free(t->o.prepare_ud);
  free(t);
}

int sm_mcp_sandbox_provider(sm_mcp_provider *out, const sm_mcp_sandbox_options *opts,
                            sm_error *err) {
  memset(out, 0, sizeof *out);
  if (opts == NULL || opts->runner == NULL || opts->prepare == NULL)
    return sm_error_set(err, SM_EINVAL, "the sandbox's MCP tools need a runner and a prepare function");
  tools *t = calloc(1, sizeof *t);
  if (t == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  t->o = *opts;
  t->terminals = mcp_terminals_new(opts->runner, terminal_prepare, t);
  if (t->terminals == NULL) {
    free(t);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  unsigned exec_hints =
      SM_MCP_DESTRUCTIVE | SM_MCP_LONG_RUNNING | (opts->network ? SM_MCP_OPEN_WORLD : 0);
  /* A terminal tool answers within its wait (30 s at most): no task. */
  unsigned term_hints = SM_MCP_DESTRUCTIVE | (opts->network ? SM_MCP_OPEN_WORLD : 0);
  sm_mcp_tool list[] = {
      {"execute", "Run a command",
       "Runs a shell command (/bin/sh -c) in the sandbox, in /workspace, and returns its output "
       "and exit code. The sandbox keeps its files and installed packages between calls of "
       "this session.",
       schema_execute, out_execute, exec_hints},
      {"read_file", "Read a file",
       "Reads a file of the sandbox's workspace: a text file's lines offset to offset+limit, a "
       "binary file whole in base64.",
       schema_read, out_read, SM_MCP_READ_ONLY | SM_MCP_IDEMPOTENT},
      {"write_file", "Write a file",
       "Writes a whole file in the sandbox's workspace (made with its folders if missing, "
       "replaced if there).",
       schema_write, out_write, SM_MCP_DESTRUCTIVE | SM_MCP_IDEMPOTENT},
      {"edit_file", "Edit a file",
       "Replaces old_string with new_string in a file of the sandbox's workspace: the exact "
       "text, which must occur once unless replace_all.",
       schema_edit, out_edit, SM_MCP_DESTRUCTIVE},
      {"ls", "List a folder", "Lists a folder of the sandbox's workspace.", schema_ls, out_list,
       SM_MCP_READ_ONLY | SM_MCP_IDEMPOTENT},
      {"glob", "Find files", "Finds files of the sandbox's workspace by a path pattern.",
       schema_glob, out_list, SM_MCP_READ_ONLY | SM_MCP_IDEMPOTENT},
      {"grep", "Search files",
       "Searches the text files of the sandbox's workspace for lines matching a regular "
       "expression.",
       schema_grep, out_grep, SM_MCP_READ_ONLY | SM_MCP_IDEMPOTENT},
      {"run_code", "Run Python code",
       "Runs code in a live Python interpreter (a Jupyter kernel) in the sandbox, as a notebook "
       "cell: variables, imports and loaded data stay for the next call. Returns the output, "
       "the last expression's value, an exception's traceback, and figures (matplotlib) as "
       "images. Needs an image with a Jupyter kernel (sandman/general).",
       mcp_code_tool_schema, mcp_code_tool_output, exec_hints},
      {"terminal_open", "Open a terminal",
       "Starts a program on a terminal in the sandbox (default: a shell; e.g. python3, a "
       "debugger, vim) and returns its screen. The terminal keeps running between calls.",
       mcp_terminal_schema_open, mcp_terminal_out_screen, term_hints},
      {"terminal_send", "Type into a terminal",
       "Types keys into a terminal of this session (a shell is opened when none is) and "
       "returns its screen once it has settled: the visible text and the cursor.",
       mcp_terminal_schema_send, mcp_terminal_out_screen, term_hints},
      {"terminal_screen", "Read a terminal's screen",
       "Returns a terminal's screen as it is: its visible text and the cursor.",
       mcp_terminal_schema_screen, mcp_terminal_out_screen, SM_MCP_READ_ONLY | SM_MCP_IDEMPOTENT},
      {"terminal_close", "Close a terminal",
       "Ends a terminal's program (and whatever it started) and returns its last screen.",
       mcp_terminal_schema_close, mcp_terminal_out_screen, SM_MCP_DESTRUCTIVE},
      {"snapshot", "Snapshot the sandbox",
       "Saves this session's sandbox (its files, /workspace and installed packages) under a "
       "name, to compare with (diff), go back to (rollback) or start new sandboxes from (fork).",
       mcp_snapshot_schema, mcp_snapshot_out, 0},
      {"fork", "Fork a snapshot",
       "Starts new sandboxes from a snapshot of this session's and returns their run ids; this "
       "session's tools stay in its own sandbox.",
       mcp_fork_schema, mcp_fork_out, 0},
      {"rollback", "Go back to a snapshot",
       "Returns this session's sandbox to a snapshot: every file as it was then; what changed "
       "since is lost and running processes end.",
       mcp_rollback_schema, mcp_rollback_out, SM_MCP_DESTRUCTIVE},
      {"diff", "Changes since a snapshot",
       "Lists the files of the workspace added, modified and deleted since a snapshot.",
       mcp_diff_schema, mcp_diff_out, SM_MCP_READ_ONLY | SM_MCP_IDEMPOTENT},
      {"pause", "Put the sandbox to rest",
       "Puts this session's sandbox to rest while the agent does not need it: freeze (default; "
       "memory and processes kept, no CPU), stop (processes end; files kept) or hibernate. The "
       "next tool call brings it back by itself.",
       mcp_pause_schema, mcp_rest_out, SM_MCP_IDEMPOTENT},
      {"resume", "Bring the sandbox back",
       "Brings this session's sandbox back to running from any rest (a tool call does that by "
       "itself too).",
       mcp_resume_schema, mcp_rest_out, SM_MCP_IDEMPOTENT},
  };
  memcpy(t->list, list, sizeof list);
  out->tools = list_tools;
  out->call = call_tool;
  out->free = free_tools;
  out->ud = t;
  return 0;
}
