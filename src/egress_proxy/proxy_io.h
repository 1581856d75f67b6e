/* What the two halves of sandman-egress share: the proxy (proxy_serve.c),
 * one per instance with the way out, and the relay (proxy_relay.c), one
 * per allowlist sandbox, in the sandbox's network namespace.
 *
 * The relay's connection to the proxy's unix socket starts with a preamble
 * the relay writes before it passes on any byte of the sandbox's:
 *
 *   "sandman-egress-relay 1 <length>\n" <the sandbox's policy file, length bytes>
 *
 * Only relays reach that socket (it lives in a volume no sandbox mounts), so
 * the policy a connection brings is the one sandman wrote into the relay of
 * the sandbox it came from. libc only. */
#ifndef SANDMAN_EGRESS_PROXY_IO_H
#define SANDMAN_EGRESS_PROXY_IO_H

#include <stddef.h>

#define EG_RELAY_MAGIC "sandman-egress-relay 1 "
#define EG_PREAMBLE_MAX 64 /* the line, with its newline */

double eg_now_s(void);   /* wall clock, for log lines */
double eg_mono_ms(void); /* for durations and deadlines */
void eg_nap_ms(int ms);

/* 0, or -1 (the peer went away). Never raises SIGPIPE. */
int eg_send_all(int fd, const char *p, size_t n);
/* poll() on one fd, retried on EINTR: >0 ready, 0 timeout, <0 error. */
int eg_wait_fd(int fd, short events, int ms);

/* Copies both ways between a (the client side) and b until both are done
 * or nothing moves for idle_s. a_budget: bytes a may still send to b (-1:
 * no limit, a tunnel; then each side's end is passed on as a half-close).
 * Counts into *a_to_b and *b_to_a. */
void eg_pump(int a, int b, int idle_s, long long a_budget, long long *a_to_b, long long *b_to_a);

/* A decimal option value within [min, max]: 0, or -1. */
int eg_int_arg(const char *s, int min, int max, int *out);

/* The two programs (argv after the mode word). Exit codes. */
int eg_serve_main(int argc, char **argv);
int eg_relay_main(int argc, char **argv);

#endif
