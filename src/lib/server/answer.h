/* The runner's answers: an HTTP status and a JSON body, error answers
 * ({"error", "failure_kind"}), and the status a call's result or a
 * library error code maps to. A leaf of src/lib/server: it includes nothing
 * else of the server, so every route and layer may use it. */
#ifndef SANDMAN_SERVER_ANSWER_H
#define SANDMAN_SERVER_ANSWER_H

#include <json-c/json.h>

#include <sandman/run.h>

/* An answer: HTTP status and a JSON body (owned). */
typedef struct server_answer {
  int status;
  json_object *body;
} server_answer;

/* Fills a {"error", "failure_kind"} answer. */
void server_answer_error(server_answer *a, int status, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The one conversion of a library error into an answer, used at the
 * route boundary: the status is the error table's column
 * (sm_error_http_status: 400, 401, 403, 404, 409, 413, 504, else 503;
 * 503 also for code 0), the failure_kind "policy" for a 4xx (the request
 * was refused), "timeout" for 504, else the table's kind ("engine" or
 * "sandbox"), the message the error's own words (the code's default when
 * empty). */
void server_answer_from_error(server_answer *a, const sm_error *err);
/* The same from a code and a message. */
void server_answer_error_code(server_answer *a, int code, const char *message);
/* The failure_kind of an error answer with this status stopped by code. */
const char *server_answer_kind_of_status(int status, int code);

/* The status of a call's result: 403 refused by policy, 503 when the
 * engine failed or the sandbox could not be made or used (nothing ran: an
 * isolation that cannot be had is refused, never weakened), else 200. */
int server_answer_status_of(const sm_run_result *res);

#endif
