/* A request whose body or answer is streamed between libmicrohttpd's I/O
 * thread and a call thread (streamed execute, the files routes).
 *
 * The I/O side (server_http.c) pushes the request body in as it arrives and gives
 * the answer to libmicrohttpd as a content reader; the call side reads the
 * body (server_stream_read, an sm_read_fn) and writes the answer
 * (server_stream_write). Both directions go through a bounded ring: a side that
 * finds it full (or empty) waits, the call side on a condition variable,
 * the I/O side by suspending its connection, which the other side resumes.
 * So a 1 GiB upload or download never holds more than the ring in memory.
 *
 * The stream outlives the request's connection: it is reference counted
 * (the connection's side and the call's side), and once the client is gone
 * (server_stream_detach, or a hang-up seen on the socket by the watcher) the
 * stream's cancel flag is set and the call side's reads and writes fail. */
#ifndef SANDMAN_SERVER_STREAM_H
#define SANDMAN_SERVER_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "server/server_core.h"

typedef struct server_stream server_stream;

/* begin(ud) is called once, from the call side, when the answer's head is
 * decided (server_stream_begin): the I/O side then queues the streamed answer. */
server_stream *server_stream_new(struct MHD_Connection *conn, void (*begin)(void *ud), void *ud);
void server_stream_ref(server_stream *s);
void server_stream_unref(server_stream *s);

/* The flag a call's sm_run_request.cancel points to: set when the client
 * is gone. */
volatile int *server_stream_cancel_flag(server_stream *s);
int server_stream_cancelled(server_stream *s);

/* Watches the connection's socket (a duplicate of its descriptor) for the client's
 * hang-up until the call side is done (server_stream_finish): a client that
 * disconnects while its call produces nothing is seen at once. */
int server_stream_watch(server_stream *s);

/* ---- the call side ---- */
/* Reads up to len bytes of the request body: 0 at its end, -1 when the
 * client is gone. */
ssize_t server_stream_read(void *s, char *buf, size_t len);
/* Bytes of the request body read so far. */
uint64_t server_stream_read_total(server_stream *s);
/* The answer's head: status, content type, length (-1: unknown, sent
 * chunked) and up to two extra headers (NULL names: none). */
int server_stream_begin(server_stream *s, int status, const char *content_type, int64_t length,
                        const char *h1, const char *v1, const char *h2, const char *v2);
int server_stream_begun(server_stream *s);
/* Appends to the answer's body, waiting while the ring is full: 0, or -1
 * when the client is gone. */
int server_stream_write(void *s, const char *data, size_t len);
/* The call is over: the answer's body ends (with error: the connection is
 * cut, so the client sees a short body, never a complete-looking one), or,
 * when the answer was not begun, answer is the JSON answer to send. The
 * stream takes answer's body. */
void server_stream_finish(server_stream *s, int error, server_answer *answer);

/* ---- the I/O side ---- */
typedef enum {
  SM_STREAM_TAKEN = 0, /* the bytes are in the ring */
  SM_STREAM_DROPPED,   /* the call is over (or no longer reads): drop them */
} server_stream_push_result;

/* A piece of the request body; the connection is suspended when the ring
 * is over its mark (the call side resumes it). */
server_stream_push_result server_stream_push(server_stream *s, const char *data, size_t len);

typedef enum {
  SM_STREAM_WAITING = 0, /* the connection is suspended until there is news */
  SM_STREAM_BEGUN,       /* the streamed answer can be queued (server_stream_head) */
  SM_STREAM_ANSWERED,    /* the call is over: server_stream_take_answer */
} server_stream_state;

/* Where the call stands, for the I/O side; body_done: the request body is
 * complete (its end is told to the reader). WAITING suspends the
 * connection: the call side resumes it when it begins or finishes. */
server_stream_state server_stream_wait(server_stream *s, int body_done);
/* The JSON answer of a call that did not begin a streamed one. */
void server_stream_take_answer(server_stream *s, server_answer *out);
/* The answer's head, for the response (valid once begun). */
void server_stream_head(server_stream *s, int *status, const char **content_type, int64_t *length,
                        const char **h1, const char **v1, const char **h2, const char **v2);
/* libmicrohttpd's content reader over the answer's ring (cls: the stream). */
ssize_t server_stream_reader(void *cls, uint64_t pos, char *buf, size_t max);
/* The connection is closed (libmicrohttpd's completion): nothing may touch
 * it any more; the call is cancelled if it still runs. Drops the
 * connection's reference. */
void server_stream_detach(server_stream *s);

/* ---- a proxied answer (port_route.c): a sandbox's server's own ---- */
/* Call side, before the answer begins: one of the server's headers, passed
 * on as it is (the runner then adds no Cache-Control of its own). -1 past
 * 32 KiB of them in all (the header is dropped). */
int server_stream_add_header(server_stream *s, const char *name, const char *value);
/* I/O side: 1 when the answer is a proxied one (headers added). */
int server_stream_proxied(server_stream *s);
typedef void (*server_stream_header_fn)(void *ud, const char *name, const char *value);
void server_stream_headers(server_stream *s, server_stream_header_fn fn, void *ud);

/* Call side: the answer is a 101 (a WebSocket's): the I/O side answers
 * with libmicrohttpd's upgrade (server_stream_on_upgrade as its handler,
 * the stream its cls), and the call side then takes the socket. */
int server_stream_begin_upgrade(server_stream *s);
int server_stream_upgrading(server_stream *s);
void server_stream_on_upgrade(void *cls, struct MHD_Connection *conn, void *req_cls,
                              const char *extra, size_t extra_len, MHD_socket sock,
                              struct MHD_UpgradeResponseHandle *urh);
/* Waits for the upgraded socket: 0 with *fd, *urh (for
 * server_stream_release_socket) and what the client sent after its head
 * (*extra, the caller's to free()); -1 when the client went away first. */
int server_stream_take_socket(server_stream *s, int *fd, void **urh, char **extra,
                              size_t *extra_len);
/* Gives the socket back to libmicrohttpd, which closes it. */
void server_stream_release_socket(void *urh);

#endif
