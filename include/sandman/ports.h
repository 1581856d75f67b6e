/* sandman: TCP connections to ports on a keyed sandbox's own loopback,
 * carried through sandman's agent (`sandman sandbox port`; docs/ports.md).
 *
 * A relay is the host side of one `sandman-agent ports` program in the
 * sandbox. It runs as a call of its own: sm_run with the request that
 * sm_port_relay_request completes (the agent's program on pipes, as
 * `sandman exec -i` runs), on a thread of its own, while another thread
 * hands the relay connected sockets (sm_port_relay_add) and drives them
 * (sm_port_relay_step). The bytes travel in the agent's frames over the
 * call's stdin and stdout, so a port is reachable with network none: the
 * sandbox gains no network, and its port gets nothing but what comes in
 * through this relay.
 *
 * Flow control is a window per connection and direction (SM_PORT_WINDOW of
 * the agent's frame.h): the relay reads a socket only while the far side
 * has room for it, so a slow reader stops its own connection and never the
 * others, and memory stays bounded (SM_PORT_RELAY_CONNS_MAX windows). */
#ifndef SANDMAN_PORTS_H
#define SANDMAN_PORTS_H

#include <poll.h>
#include <stddef.h>

#include <sandman/error.h>
#include <sandman/export.h>
#include <sandman/run.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Connections one relay carries at once; sm_port_relay_add refuses more. */
#define SM_PORT_RELAY_CONNS_MAX 128

typedef struct sm_port_relay sm_port_relay;

/* What happened to a connection (sm_port_relay_on_event). */
typedef enum {
  SM_PORT_OPENED = 0,  /* connected to the port in the sandbox */
  SM_PORT_REFUSED = 1, /* the connect failed there: err_no says why (ECONNREFUSED...) */
  SM_PORT_CLOSED = 2,  /* over; bytes_in: from the client, bytes_out: to it */
} sm_port_event;

typedef void (*sm_port_event_fn)(void *ud, sm_port_event ev, unsigned port, int err_no,
                                 unsigned long long bytes_in, unsigned long long bytes_out);

/* A relay (the caller's: sm_port_relay_free once sm_run has returned). */
SM_API int sm_port_relay_new(sm_port_relay **out, sm_error *err);
SM_API void sm_port_relay_free(sm_port_relay *r);
/* Told on the stepping thread for each connection's events. */
SM_API void sm_port_relay_on_event(sm_port_relay *r, sm_port_event_fn fn, void *ud);

/* Completes req (its keys and settings already set, settings.mode per_run
 * or per_worker, req->existing or req->sandbox naming the sandbox) for the
 * relay's call: argv (borrowed from r), the input channel, the output hook,
 * no time limit. The caller sets req->cancel. */
SM_API void sm_port_relay_request(sm_port_relay *r, sm_run_request *req);

/* 1 once the program in the sandbox has said it runs; 0 before. */
SM_API int sm_port_relay_ready(sm_port_relay *r);
/* Relays fd (a connected stream socket; taken: closed whatever happens) to
 * port (1-65535) on the sandbox's loopback. SM_EBUSY past
 * SM_PORT_RELAY_CONNS_MAX connections, SM_EINVAL for a port out of range. */
SM_API int sm_port_relay_add(sm_port_relay *r, int fd, unsigned port, sm_error *err);
/* One round on the stepping thread: waits at most timeout_ms (-1: no limit)
 * for the connections' sockets, the relay's own frames or the caller's
 * descriptors (extra[0..n_extra), their revents set on return), and moves
 * what is ready. 0, or a negative code once the relay cannot go on (the
 * program in the sandbox broke its protocol). */
SM_API int sm_port_relay_step(sm_port_relay *r, struct pollfd *extra, size_t n_extra,
                              int timeout_ms, sm_error *err);
/* Connections carried now. */
SM_API size_t sm_port_relay_connections(sm_port_relay *r);
/* Ends the relay's input: the program in the sandbox ends and its call
 * returns (every connection is then closed). */
SM_API void sm_port_relay_end(sm_port_relay *r);

#ifdef __cplusplus
}
#endif

#endif
