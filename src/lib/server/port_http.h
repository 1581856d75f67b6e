/* An HTTP/1.1 answer read whole from a sandbox's port (port_http.c), for
 * the runner's ports route (port_route.c): its status line and the few
 * headers passed on, and its body with any chunked coding undone. */
#ifndef SANDMAN_SERVER_PORT_HTTP_H
#define SANDMAN_SERVER_PORT_HTTP_H

#include <stddef.h>

#define PORT_HTTP_HEADER_MAX 1024 /* a passed-on header's value */

typedef struct port_http_answer {
  int status;                               /* 100-599 */
  char content_type[PORT_HTTP_HEADER_MAX];  /* "" none */
  char location[PORT_HTTP_HEADER_MAX];      /* "" none */
  char *body;                               /* owned (free()); NUL-terminated */
  size_t body_len;
} port_http_answer;

/* Parses data[0..len) (the whole answer, the server having closed its
 * end): 0, or -1 when it is not an HTTP/1.x answer (a bad status line,
 * a head without its end, a broken chunk, a body shorter than its
 * Content-Length). head: the answer of a HEAD request (no body, whatever
 * its Content-Length says); 1xx, 204 and 304 answers have none either. */
int server_port_http_parse(const char *data, size_t len, int head, port_http_answer *out);
void server_port_http_answer_dispose(port_http_answer *a);

/* 1 when a request header of this name is passed on to the sandbox's
 * server; those the runner owns (Authorization, Host, Connection and the
 * hop-by-hop ones, Content-Length, the worker key's) are not. */
int server_port_http_header_passed(const char *name);

#endif
