/* The files routes of the runner (files_route.c). */
#ifndef SANDMAN_SERVER_FILES_ROUTE_H
#define SANDMAN_SERVER_FILES_ROUTE_H

#include <microhttpd.h>

#include "server/server_core.h"

typedef enum {
  SM_FILES_READ = 0,
  SM_FILES_WRITE,
  SM_FILES_DELETE,
  SM_FILES_MKDIR,
  SM_FILES_STAT,
  SM_FILES_LIST,
  SM_FILES_GLOB,
  SM_FILES_GREP,
  SM_FILES_TAR_PUT,
  SM_FILES_TAR_GET,
  SM_FILES_WATCH, /* file events: a watch of its own (server_watch.h), no call thread */
} server_files_op;

typedef struct server_files_req server_files_req;

/* The operation of /v1/files/<name> with method: >= 0, -1 no such route,
 * -2 a route that does not take the method (its Allow header:
 * server_files_route_allow). */
int server_files_route_op(const char *name, const char *method);
const char *server_files_route_allow(const char *name);
/* 1 when the request body is the content (streamed, --max-file-body). */
int server_files_op_uploads(server_files_op op);

/* Reads and checks the query on the I/O thread, the token first (control,
 * or the worker token of the query's worker_key): NULL with *a filled when
 * the request is refused. */
server_files_req *server_files_req_new(sm_server *srv, struct MHD_Connection *conn,
                                       server_files_op op, const char *id, int control,
                                       const char *token, server_answer *a);
void server_files_req_set_stream(server_files_req *r, server_stream *s);
void server_files_req_free(server_files_req *r);
server_files_op server_files_req_op(const server_files_req *r);

/* What a watch (server_watch.c) takes of its request. */
typedef struct server_files_watch_args {
  sm_server *srv;
  const char *id;        /* the request's */
  int control;
  const char *token;
  server_execute_params *p; /* the sandbox's keys */
  const char *path;
  int recursive;
  server_stream *stream;
} server_files_watch_args;
void server_files_req_watch_args(server_files_req *r, server_files_watch_args *out);
/* An error of the files API as the files routes answer it: what the
 * sandbox's file system said is failure_kind "tool", sandman's refusals
 * "policy". */
void server_files_answer_error(server_answer *a, int rc, const sm_error *err);
/* The call-thread job (arg: the request, freed at its end; it finishes the
 * stream with the answer). */
void server_files_job(void *arg);

#endif
