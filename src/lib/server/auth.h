/* Authentication of the runner's requests: the control token and the
 * worker tokens derived from it (auth.c), and the principal a request
 * acts as. A leaf of src/lib/server: it includes nothing else of the server;
 * the server's view (server_token_ok) passes its control token in. */
#ifndef SANDMAN_SERVER_AUTH_H
#define SANDMAN_SERVER_AUTH_H

#include <stddef.h>

#include <sandman/server.h>

#define SM_SERVER_KEY_MAX 128     /* worker keys, run ids, agents, users, projects */

/* 1 when t is a usable control token (length, visible ASCII, no space). */
int server_token_valid(const char *t);
/* 1 when token is the control token. Constant time in the token. */
int server_auth_is_control(const char *control_token, const char *token);
/* 1 when token authorises a request about worker_key: the control token,
 * or that worker's derived token. Constant time in the token. */
int server_auth_token_ok(const char *control_token, const char *token, const char *worker_key);
/* Whose keyed sandboxes a request acts for: "worker:<key>" for a worker
 * key, SM_PRINCIPAL_CONTROL without one. -1 when the key is too long. */
int server_auth_principal(const char *worker_key, char *out, size_t len);
/* n random bytes as 2n lowercase hex digits + NUL. */
void server_random_hex(char *out, size_t n_bytes);

#endif
