/* The HTTP/1.1 answer of a sandbox's server as it streams in
 * (port_http.c), for the runner's ports route (port_route.c): its head
 * (status, how its body ends, the headers passed on) and an incremental
 * decoder of a chunked body. Pure: no I/O here. */
#ifndef SANDMAN_SERVER_PORT_HTTP_H
#define SANDMAN_SERVER_PORT_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define PORT_HTTP_HEAD_MAX (64 * 1024) /* an answer's head, status line and headers */

typedef enum {
  PORT_BODY_NONE = 0,    /* HEAD, 1xx, 204, 304 */
  PORT_BODY_LENGTH,      /* Content-Length bytes */
  PORT_BODY_CHUNKED,     /* chunked: undone by the decoder below */
  PORT_BODY_CLOSE,       /* all that comes until the server closes */
} port_http_body;

typedef struct port_http_head {
  int status;        /* 100-599 */
  port_http_body body;
  uint64_t length;   /* PORT_BODY_LENGTH's */
} port_http_head;

/* The length of the head at the start of d[0..len) (through its empty
 * line): 0 when it is not whole yet, -1 when it is not whole within
 * PORT_HTTP_HEAD_MAX bytes. */
long server_port_http_head_end(const char *d, size_t len);
/* Parses the head d[0..hlen): 0, or -1 when it is no HTTP/1.x answer (a
 * bad status line, a bad Content-Length, both a length and chunked).
 * head_method: the answer of a HEAD request (no body, whatever it says). */
int server_port_http_head_parse(const char *d, size_t hlen, int head_method, port_http_head *out);

/* Each header of the head passed on to the client: all but the hop-by-hop
 * ones (Connection and those it names, Keep-Alive, Proxy-*, TE, Trailer,
 * Transfer-Encoding, Upgrade) and Content-Length (the runner frames the
 * body itself), values of at most 8 KiB, without CR or LF. */
typedef void (*port_http_header_fn)(void *ud, const char *name, const char *value);
void server_port_http_answer_headers(const char *d, size_t hlen, port_http_header_fn fn, void *ud);

/* 1 when a request header of this name is passed on to the sandbox's
 * server; those the runner owns (Authorization, Host, Connection and the
 * hop-by-hop ones, those the request's Connection names, Content-Length,
 * the worker key's) are not. connection: the request's Connection value
 * (NULL: none). */
int server_port_http_header_passed(const char *name, const char *connection);

/* A chunked body undone as it arrives. */
typedef struct port_http_dechunk {
  int state;
  uint64_t left;   /* of the chunk's data, or the size being read */
  size_t line;     /* bytes of the line being read (size or trailer) */
  int digits;
} port_http_dechunk;

/* Body bytes out of a chunked body (non-zero: stop, the feed fails). */
typedef int (*port_http_emit_fn)(void *ud, const char *data, size_t len);
/* Feeds data[0..len): 0 to go on, 1 once the last chunk and its trailer
 * are read (*used: the bytes taken), -1 when the coding is broken (a size
 * that is not hex or past 2^60, a line longer than 4 KiB) or emit failed. */
int server_port_http_dechunk(port_http_dechunk *d, const char *data, size_t len, size_t *used,
                             port_http_emit_fn emit, void *ud);

#endif
