/* The raw connection of a hijacked exec (conn.c): plain or TLS, non-blocking. */
#ifndef SANDMAN_ENGINE_CONN_H
#define SANDMAN_ENGINE_CONN_H

#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include <sandman/error.h>

#include "engine/engine_client.h"

/* A read or write that would block: conn->want says for what. */
enum { ENGINE_IO_AGAIN = 1 };

typedef struct engine_conn {
  int fd;
  SSL_CTX *ctx; /* borrowed from the client */
  SSL *ssl;
  int want; /* POLLIN/POLLOUT an SSL call waits for */
} engine_conn;

/* Monotonic milliseconds, the clock of every deadline here. */
int64_t engine_now_ms(void);
/* Connects to the client's engine (TLS shaken hands when the address has
 * it) before deadline; c->fd is -1 before. */
int engine_conn_open(sm_engine *e, engine_conn *c, int64_t deadline, sm_error *err);
void engine_conn_close(engine_conn *c);
/* >0 bytes, 0 end of stream, -ENGINE_IO_AGAIN, or a negative SM_E* code. */
ssize_t engine_conn_read(const char *host, engine_conn *c, char *buf, size_t len, sm_error *err);
ssize_t engine_conn_write(const char *host, engine_conn *c, const char *buf, size_t len,
                          sm_error *err);
/* Half-close: 0 done, -ENGINE_IO_AGAIN, or a negative SM_E* code. */
int engine_conn_shutdown_write(const char *host, engine_conn *c, sm_error *err);
/* Keeps the connection's TLS session on the client for the next exec. */
void engine_conn_keep_session(sm_engine *e, engine_conn *c);
/* Frees the client's TLS context and session (sm_engine_free). */
void engine_tls_dispose(sm_engine *e);

#endif
