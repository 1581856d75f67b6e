/* The files routes (/v1/files/...): the files of a keyed sandbox through
 * the files API (sandman/files.h), on a call thread.
 *
 * The sandbox is named by query parameters as execute's body names it
 * (run_id, worker_key, mode, project, agent) and the call is checked and
 * resolved by execute's own code (server_call_prepare: token, tool policy for
 * the tool "files", principal), so a worker token reaches only its own
 * sandboxes. Contents go through the request's stream (stream.h): a read or
 * a tar download is written to the answer as it comes, a write or a tar
 * upload reads the request body as it arrives, capped by --max-file-body. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/files.h>
#include <sandman/log.h>
#include <sandman/util.h>

#include "common/buf.h"
#include "common/text.h"
#include "server/files_route.h"
#include "server/stream.h"

#define FILES_PATHS_MAX 256 /* paths of one tar download */
#define LIST_MAX_DEFAULT 1000
#define TAR_HOLD (256 * 1024)

struct server_files_req {
  sm_server *srv;
  server_files_op op;
  char id[17];
  int control;
  char *token;
  server_execute_params p; /* keys of the sandbox: given to server_call_prepare */
  char *path;
  char **paths;      /* tar download */
  size_t n_paths;
  char *pattern, *include;
  int64_t offset, length, depth, max, mode;
  int parents, exclusive, recursive, ignore_case, fixed;
  server_stream *stream;
};

static const struct {
  const char *name;
  const char *method;
  server_files_op op;
} routes[] = {
    {"content", "GET", SM_FILES_READ},     {"content", "PUT", SM_FILES_WRITE},
    {"content", "DELETE", SM_FILES_DELETE}, {"mkdir", "POST", SM_FILES_MKDIR},
    {"stat", "GET", SM_FILES_STAT},        {"list", "GET", SM_FILES_LIST},
    {"glob", "GET", SM_FILES_GLOB},        {"grep", "GET", SM_FILES_GREP},
    {"archive", "PUT", SM_FILES_TAR_PUT},  {"archive", "GET", SM_FILES_TAR_GET},
    {"watch", "GET", SM_FILES_WATCH},
};

int server_files_route_op(const char *name, const char *method) {
  int known = 0;
  for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
    if (strcmp(routes[i].name, name) != 0) continue;
    known = 1;
    /* HEAD as GET, but for a watch: a stream without its body is no watch. */
    if (strcmp(routes[i].method, method) == 0 ||
        (strcmp(method, "HEAD") == 0 && strcmp(routes[i].method, "GET") == 0 &&
         routes[i].op != SM_FILES_WATCH))
      return (int)routes[i].op;
  }
  return known ? -2 : -1;
}

const char *server_files_route_allow(const char *name) {
  if (strcmp(name, "content") == 0) return "GET, PUT, DELETE";
  if (strcmp(name, "archive") == 0) return "GET, PUT";
  if (strcmp(name, "mkdir") == 0) return "POST";
  return "GET";
}

int server_files_op_uploads(server_files_op op) {
  return op == SM_FILES_WRITE || op == SM_FILES_TAR_PUT;
}

void server_files_req_free(server_files_req *r) {
  if (r == NULL) return;
  if (r->token) {
    memset(r->token, 0, strlen(r->token));
    free(r->token);
  }
  server_execute_params_dispose(&r->p);
  free(r->path);
  for (size_t i = 0; i < r->n_paths; i++) free(r->paths[i]);
  free(r->paths);
  free(r->pattern);
  free(r->include);
  server_stream_unref(r->stream);
  free(r);
}

server_files_op server_files_req_op(const server_files_req *r) { return r->op; }

void server_files_req_watch_args(server_files_req *r, server_files_watch_args *out) {
  *out = (server_files_watch_args){r->srv, r->id,   r->control,   r->token,
                                   &r->p,  r->path, r->recursive, r->stream};
}

void server_files_req_set_stream(server_files_req *r, server_stream *s) {
  server_stream_ref(s);
  r->stream = s;
}

/* ---- the query ---- */

typedef struct query_walk {
  server_files_req *r;
  char bad[96];
} query_walk;

static int bool_value(const char *v, int *out) {
  if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0) *out = 1;
  else if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0) *out = 0;
  else return -1;
  return 0;
}

static int take_string(char **slot, const char *v) {
  free(*slot);
  *slot = strdup(v);
  return *slot ? 0 : -1;
}

static enum MHD_Result on_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                              const char *value) {
  query_walk *w = cls;
  server_files_req *r = w->r;
  (void)kind;
  const char *v = value ? value : "";
  int rc = 0;
  int64_t n = 0;
  if (strcmp(key, "path") == 0) {
    if (r->op == SM_FILES_TAR_GET) {
      if (r->n_paths >= FILES_PATHS_MAX) rc = -1;
      else if ((r->paths[r->n_paths] = strdup(v)) != NULL) r->n_paths++;
    } else {
      rc = take_string(&r->path, v);
    }
  } else if (strcmp(key, "run_id") == 0) {
    rc = server_name_valid(v, SM_SERVER_KEY_MAX) ? take_string(&r->p.run_id, v) : -1;
  } else if (strcmp(key, "worker_key") == 0) {
    rc = server_name_valid(v, SM_SERVER_KEY_MAX) ? take_string(&r->p.worker_key, v) : -1;
  } else if (strcmp(key, "sandbox_id") == 0) {
    rc = server_sandbox_ref_valid(v) ? take_string(&r->p.sandbox_id, v) : -1;
  } else if (strcmp(key, "replace") == 0) {
    rc = bool_value(v, &r->p.replace);
  } else if (strcmp(key, "project") == 0) {
    rc = server_name_valid(v, SM_SERVER_KEY_MAX) ? take_string(&r->p.project, v) : -1;
  } else if (strcmp(key, "agent") == 0) {
    rc = server_name_valid(v, SM_SERVER_KEY_MAX) ? take_string(&r->p.agent, v) : -1;
  } else if (strcmp(key, "mode") == 0) {
    rc = sm_mode_parse(v, &r->p.mode, NULL);
    if (rc == 0 && r->p.mode != SM_MODE_PER_RUN && r->p.mode != SM_MODE_PER_WORKER) rc = -1;
    r->p.has_mode = 1;
  } else if (strcmp(key, "offset") == 0) {
    rc = sm_parse_int(v, 0, INT64_MAX, &r->offset, NULL);
  } else if (strcmp(key, "length") == 0) {
    rc = sm_parse_int(v, 0, INT64_MAX, &r->length, NULL);
  } else if (strcmp(key, "depth") == 0) {
    rc = sm_parse_int(v, 0, 1000, &r->depth, NULL);
  } else if (strcmp(key, "max") == 0) {
    rc = sm_parse_int(v, 1, SM_FILES_MAX_ENTRIES, &r->max, NULL);
  } else if (strcmp(key, "perm") == 0) {
    char *end = NULL;
    n = (int64_t)strtol(v, &end, 8);
    rc = (*v && end && *end == '\0' && n >= 0 && n <= 07777) ? 0 : -1;
    r->mode = n;
  } else if (strcmp(key, "parents") == 0) {
    rc = bool_value(v, &r->parents);
  } else if (strcmp(key, "exclusive") == 0) {
    rc = bool_value(v, &r->exclusive);
  } else if (strcmp(key, "recursive") == 0) {
    rc = bool_value(v, &r->recursive);
  } else if (strcmp(key, "ignore_case") == 0) {
    rc = bool_value(v, &r->ignore_case);
  } else if (strcmp(key, "fixed") == 0) {
    rc = bool_value(v, &r->fixed);
  } else if (strcmp(key, "pattern") == 0) {
    rc = take_string(&r->pattern, v);
  } else if (strcmp(key, "include") == 0) {
    rc = take_string(&r->include, v);
  } else {
    snprintf(w->bad, sizeof w->bad, "unknown query parameter '%.40s'", key);
    return MHD_NO;
  }
  if (rc != 0) {
    snprintf(w->bad, sizeof w->bad, "bad query parameter '%.40s'", key);
    return MHD_NO;
  }
  return MHD_YES;
}

server_files_req *server_files_req_new(sm_server *srv, struct MHD_Connection *conn,
                                       server_files_op op, const char *id, int control,
                                       const char *token, server_answer *a) {
  server_files_req *r = calloc(1, sizeof *r);
  if (r == NULL || (op == SM_FILES_TAR_GET &&
                    (r->paths = calloc(FILES_PATHS_MAX, sizeof *r->paths)) == NULL)) {
    free(r);
    server_answer_error(a, 503, "sandbox", "out of memory");
    return NULL;
  }
  r->srv = srv;
  r->op = op;
  snprintf(r->id, sizeof r->id, "%s", id);
  r->control = control;
  r->length = -1;
  r->depth = 1;
  r->mode = -1;
  r->parents = 1;
  query_walk w = {r, {0}};
  MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, on_arg, &w);
  /* Who may ask comes first: a worker token learns nothing else. */
  if (!control &&
      (r->p.worker_key == NULL || token == NULL || !server_token_ok(srv, token, r->p.worker_key))) {
    server_refuse_token(srv, "files", a);
    server_files_req_free(r);
    return NULL;
  }
  if (w.bad[0]) {
    server_answer_error(a, 400, "policy", "%s", w.bad);
    server_files_req_free(r);
    return NULL;
  }
  if (!r->p.has_mode && !r->p.sandbox_id) {
    if (r->p.run_id) r->p.mode = SM_MODE_PER_RUN;
    else r->p.mode = SM_MODE_PER_WORKER;
    r->p.has_mode = 1;
  }
  if (r->p.run_id == NULL && r->p.worker_key == NULL && r->p.sandbox_id == NULL) {
    server_answer_error(a, 400, "policy",
                        "name the sandbox: 'sandbox_id', 'run_id' (per_run) or 'worker_key' "
                        "(per_worker)");
    server_files_req_free(r);
    return NULL;
  }
  int needs_path = op != SM_FILES_TAR_GET && op != SM_FILES_LIST && op != SM_FILES_GLOB &&
                   op != SM_FILES_GREP;
  if ((needs_path && r->path == NULL) || (op == SM_FILES_TAR_GET && r->n_paths == 0)) {
    server_answer_error(a, 400, "policy", "missing query parameter 'path'");
    server_files_req_free(r);
    return NULL;
  }
  if ((op == SM_FILES_GLOB || op == SM_FILES_GREP) && r->pattern == NULL) {
    server_answer_error(a, 400, "policy", "missing query parameter 'pattern'");
    server_files_req_free(r);
    return NULL;
  }
  r->token = token ? strdup(token) : NULL;
  r->p.tool = strdup("files");
  r->p.argv = calloc(2, sizeof *r->p.argv);
  if (r->p.argv) r->p.argv[0] = strdup("files");
  r->p.argc = 1;
  if ((token && !r->token) || !r->p.tool || !r->p.argv || !r->p.argv[0]) {
    server_answer_error(a, 503, "sandbox", "out of memory");
    server_files_req_free(r);
    return NULL;
  }
  return r;
}

/* ---- answers ---- */

/* An error the sandbox's file system answered (no such path, a folder
 * where a file was expected, exists, not empty, permission denied or disk
 * full in the sandbox) is the operation's own failure: failure_kind "tool",
 * as a tool that ran and failed. sandman's refusals (a link on the path,
 * a path leaving the workspace, the configuration) stay "policy". */
void server_files_answer_error(server_answer *a, int rc, const sm_error *err) {
  int e = err->sys_errno;
  if (e == 0 || e == ELOOP || e == EXDEV || e == EPIPE) {
    server_answer_error_code(a, rc, err->message);
    return;
  }
  /* The table's status when it is the caller's (4xx), else 400. */
  int status = sm_error_http_status(rc);
  if (status < 400 || status >= 500) status = 400;
  server_answer_error(a, status, "tool", "%s", err->message);
}

static void add_sandbox(json_object *o, const sm_run_result *call) {
  json_object_object_add(o, "sandbox_id", call->sandbox_id[0]
                                              ? json_object_new_string(call->sandbox_id)
                                              : NULL);
}

static json_object *list_json(const sm_file_list *l) {
  json_object *o = json_object_new_object();
  json_object *arr = json_object_new_array();
  for (size_t i = 0; i < l->n; i++) json_object_array_add(arr, sm_file_entry_to_json(&l->v[i]));
  json_object_object_add(o, "entries", arr);
  json_object_object_add(o, "truncated", json_object_new_boolean(l->truncated));
  return o;
}

/* ---- streamed reads ---- */

typedef struct read_out {
  server_stream *s;
  int begun;
  const char *ctype;
  common_buf held; /* a tar's first bytes, until it is sure to go */
} read_out;

static int on_size(void *ud, int64_t file_size, int64_t count) {
  read_out *o = ud;
  char v[32];
  snprintf(v, sizeof v, "%" PRId64, file_size);
  o->begun = 1;
  return server_stream_begin(o->s, 200, "application/octet-stream", count, "X-Sandman-File-Size", v,
                             NULL, NULL);
}

/* A tar download holds its first TAR_HOLD bytes back: an error met by then
 * (a missing path, a link on a path) is still an ordinary JSON answer;
 * later, the answer is cut short. */
static int write_out(void *ud, const char *data, size_t len) {
  read_out *o = ud;
  if (!o->begun) {
    if (o->held.len + len <= TAR_HOLD) return common_buf_append(&o->held, data, len) == 0 ? 0 : -1;
    o->begun = 1;
    if (server_stream_begin(o->s, 200, o->ctype, -1, NULL, NULL, NULL, NULL) != 0 ||
        server_stream_write(o->s, o->held.data ? o->held.data : "", o->held.len) != 0)
      return -1;
  }
  return server_stream_write(o->s, data, len);
}

/* ---- the job ---- */

/* list, glob and grep: their JSON answer in *o. */
static int run_search(server_files_req *r, sm_runner *runner, const sm_run_request *base,
                      json_object **o, sm_run_result *call, sm_error *err) {
  int rc = 0;
  switch (r->op) {
    case SM_FILES_LIST:
    case SM_FILES_GLOB: {
      sm_file_list l = {NULL, 0, 0};
      size_t max = (size_t)(r->max ? r->max : LIST_MAX_DEFAULT);
      const char *path = r->path ? r->path : ".";
      rc = r->op == SM_FILES_LIST
               ? sm_files_list(runner, base, path, (int)r->depth, max, &l, call, err)
               : sm_files_glob(runner, base, path, r->pattern, max, &l, call, err);
      if (rc == 0) *o = list_json(&l);
      sm_file_list_dispose(&l);
      break;
    }
    case SM_FILES_GREP: {
      sm_grep_opts go = {r->pattern, r->fixed, r->ignore_case, r->include, (size_t)r->max};
      sm_grep_result g = {NULL, 0, 0};
      rc = sm_files_grep(runner, base, r->path ? r->path : ".", &go, &g, call, err);
      if (rc == 0) {
        *o = json_object_new_object();
        json_object *arr = json_object_new_array();
        for (size_t i = 0; i < g.n; i++) {
          json_object *m = json_object_new_object();
          json_object_object_add(m, "path", json_object_new_string(g.v[i].path));
          json_object_object_add(m, "line", json_object_new_int64(g.v[i].line));
          json_object_object_add(m, "text", common_json_text(g.v[i].text, g.v[i].text_len));
          json_object_array_add(arr, m);
        }
        json_object_object_add(*o, "matches", arr);
        json_object_object_add(*o, "truncated", json_object_new_boolean(g.truncated));
      }
      sm_grep_result_dispose(&g);
      break;
    }
    default:
      break;
  }
  return rc;
}

static int run_op(server_files_req *r, sm_runner *runner, const sm_run_request *base, read_out *ro,
                  server_answer *a, sm_run_result *call, sm_error *err) {
  int rc = 0;
  json_object *o = NULL;
  int64_t max_file = (int64_t)r->srv->opts.max_file_body;
  switch (r->op) {
    case SM_FILES_READ: {
      sm_files_read_opts ro_opts = {r->offset, r->length, on_size, write_out, ro};
      rc = sm_files_read(runner, base, r->path, &ro_opts, call, err);
      break;
    }
    case SM_FILES_WRITE: {
      sm_files_write_opts wo = SM_FILES_WRITE_OPTS_INIT;
      wo.mode = (int)r->mode;
      wo.parents = r->parents;
      wo.exclusive = r->exclusive;
      wo.max_bytes = max_file;
      wo.read = server_stream_read;
      wo.ud = r->stream;
      int64_t written = 0;
      rc = sm_files_write(runner, base, r->path, &wo, &written, call, err);
      if (rc == 0) {
        o = json_object_new_object();
        json_object_object_add(o, "path", json_object_new_string(r->path));
        json_object_object_add(o, "size", json_object_new_int64(written));
        add_sandbox(o, call);
      }
      break;
    }
    case SM_FILES_DELETE: {
      int64_t removed = 0;
      rc = sm_files_delete(runner, base, r->path, r->recursive, &removed, call, err);
      if (rc == 0) {
        o = json_object_new_object();
        json_object_object_add(o, "removed", json_object_new_int64(removed));
      }
      break;
    }
    case SM_FILES_MKDIR:
    case SM_FILES_STAT: {
      if (r->op == SM_FILES_MKDIR) {
        rc = sm_files_mkdir(runner, base, r->path, (int)r->mode, r->parents, call, err);
        if (rc == 0) {
          sm_run_result_dispose(call);
          memset(call, 0, sizeof *call);
        }
      }
      sm_file_entry e;
      memset(&e, 0, sizeof e);
      if (rc == 0) rc = sm_files_stat(runner, base, r->path, &e, call, err);
      if (rc == 0) o = sm_file_entry_to_json(&e);
      sm_file_entry_dispose(&e);
      break;
    }
    case SM_FILES_LIST:
    case SM_FILES_GLOB:
    case SM_FILES_GREP:
      rc = run_search(r, runner, base, &o, call, err);
      break;
    case SM_FILES_TAR_PUT: {
      sm_files_tar_stats st = {0, 0};
      rc = sm_files_upload_tar(runner, base, r->path, server_stream_read, r->stream, max_file, 0,
                               &st, call, err);
      if (rc == 0) {
        o = json_object_new_object();
        json_object_object_add(o, "files", json_object_new_int64(st.files));
        json_object_object_add(o, "bytes", json_object_new_int64(st.bytes));
      }
      break;
    }
    case SM_FILES_TAR_GET: {
      sm_files_tar_stats st = {0, 0};
      ro->ctype = "application/x-tar";
      rc = sm_files_download_tar(runner, base, (const char *const *)r->paths, r->n_paths,
                                 max_file, write_out, ro, &st, call, err);
      break;
    }
    case SM_FILES_WATCH: /* served by server_watch.c on threads of its own, never a job */
      rc = sm_error_set(err, SM_EINVAL, "file events are not a files job");
      break;
  }
  if (rc == 0 && o) {
    a->status = 200;
    a->body = o;
  }
  return rc;
}

void server_files_job(void *arg) {
  server_files_req *r = arg;
  sm_server *srv = r->srv;
  server_stream *s = r->stream;
  sm_log_set_request_id(r->id);
  double t0 = sm_monotonic_ms();
  server_answer a = {0, NULL};
  read_out ro = {s, 0, "application/octet-stream", {NULL, 0, 0, 0}};
  common_buf_init(&ro.held, TAR_HOLD);
  int failed_after_begin = 0;
  if (srv->opts.runner == NULL) {
    server_answer_error(&a, 503, "engine", "this runner has no engine");
  } else {
    server_call *k = server_call_prepare(srv, &r->p, r->control, r->token, &a);
    if (k) {
      sm_run_request *base = server_call_request(k);
      base->cancel = server_stream_cancel_flag(s);
      sm_run_result call;
      memset(&call, 0, sizeof call);
      sm_error err = SM_ERROR_INIT;
      int rc = run_op(r, srv->opts.runner, base, &ro, &a, &call, &err);
      if (rc != 0) {
        sm_log(SM_LOG_INFO, "files %s: %s", r->path ? r->path : "", err.message);
        if (ro.begun) failed_after_begin = 1;
        else server_files_answer_error(&a, rc, &err);
      } else if (!ro.begun && a.body == NULL) {
        /* A small tar, held whole (or a read that met no content). */
        ro.begun = 1;
        if (server_stream_begin(s, 200, ro.ctype, (int64_t)ro.held.len, NULL, NULL, NULL, NULL) ==
                0 &&
            ro.held.len > 0)
          server_stream_write(s, ro.held.data, ro.held.len);
      }
      json_object *kind = NULL;
      const char *outcome = "ok";
      if (rc != 0 && a.body && json_object_object_get_ex(a.body, "failure_kind", &kind))
        outcome = json_object_get_string(kind);
      else if (rc != 0)
        outcome = a.status == 503 ? "sandbox" : "policy";
      server_metrics_call(srv->metrics, "files", sm_mode_name(base->settings.mode), outcome,
                          (sm_monotonic_ms() - t0) / 1000.0);
      sm_run_result_dispose(&call);
      server_call_free(k);
    }
  }
  server_stream_finish(s, failed_after_begin, ro.begun ? NULL : &a);
  common_buf_dispose(&ro.held);
  if (a.body) json_object_put(a.body);
  server_files_req_free(r);
}
