/* Benchmark helper: HTTP/1.1 over a unix socket, by hand, for the floor
 * client (bench/floor) and the runner's API client (bench/http). Only what
 * the Engine API and the runner answer with: Content-Length or chunked
 * bodies, 101/200 hijacked streams read to EOF. Not part of libsandman. */
#ifndef BENCH_RAWHTTP_H
#define BENCH_RAWHTTP_H

#include <stddef.h>
#include <stdint.h>

#define RH_BODY_MAX (4u << 20)

typedef struct rh_conn {
  int fd;
  char path[108];
  char buf[64 * 1024]; /* bytes read past the previous answer */
  size_t off, len;
  long requests;       /* requests sent on this client (all its connections) */
  long connects;       /* connections opened */
} rh_conn;

typedef struct rh_answer {
  int status;
  char *body;          /* NUL-terminated, owned by the caller (free) */
  size_t len;
  int close;           /* the server said Connection: close */
} rh_answer;

double rh_now_ms(void);
/* Opens a connection to the unix socket at path. 0 or -1 (errno). */
int rh_open(rh_conn *c, const char *path);
void rh_close(rh_conn *c);
/* One request on the kept-alive connection (reconnects when the server
 * closed it). extra_headers: "Name: value\r\n..." or NULL. 0 or -1. */
int rh_request(rh_conn *c, const char *method, const char *path, const char *extra_headers,
               const char *body, size_t body_len, rh_answer *out);
/* POST with Connection: Upgrade on a connection of its own; reads the
 * hijacked stream to EOF into *out_bytes (how many bytes arrived) and keeps
 * at most cap bytes in out (may be NULL). Returns the status or -1. */
int rh_hijack(const char *sock_path, const char *path, const char *body, char *out, size_t cap,
              size_t *out_bytes);
void rh_answer_dispose(rh_answer *a);
/* Finds "key": in a JSON text and returns the string value's start (copied
 * into out) or the number; crude but enough for Id/ExitCode/StatusCode. */
int rh_json_string(const char *json, const char *key, char *out, size_t len);
int rh_json_int(const char *json, const char *key, long long *out);

#endif
