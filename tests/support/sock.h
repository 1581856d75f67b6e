/* Shared by the tests that play a server on a socket (the fake engine,
 * tests/unit/engine): whole writes, and the engine's 8-byte frame header
 * of a multiplexed exec stream. */
#ifndef SANDMAN_TESTS_SOCK_H
#define SANDMAN_TESTS_SOCK_H

#include <stddef.h>
#include <stdint.h>

/* Sends all of data (no SIGPIPE); 0, or -1 when the peer went. */
int ts_send_all(int fd, const void *data, size_t len);
/* The header of a frame of stream (1 stdout, 2 stderr) carrying len bytes:
 * stream, three zeros, the length big-endian. */
void ts_mux_head(unsigned char h[8], int stream, uint32_t len);

#endif
