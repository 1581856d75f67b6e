/* The agent protocol: frames between sandman (the host side) and
 * sandman-agent, a small static program that runs inside a sandbox as one
 * long-lived exec and starts tool calls there without a round trip to the
 * engine per call (see docs/agent.md).
 *
 * Both directions carry frames on the exec's stdin (host -> agent) and
 * stdout (agent -> host; the engine multiplexes it as stream 1). The agent's
 * stderr carries only its own diagnostics. A frame is a 9-byte header and a
 * payload:
 *
 *   type (1 byte) | call id (4 bytes, big endian) | length (4 bytes, BE)
 *
 * Host -> agent:
 *   SM_FRAME_CALL   payload: NUL-terminated strings: the working directory,
 *                   argc in decimal, argc arguments (argv[0] is a path, run
 *                   without a PATH search), then environment entries
 *                   "K=V" to the end (each replaces or adds to the agent's
 *                   own environment, as an exec's Env does).
 *   SM_FRAME_STDIN  bytes for the call's stdin.
 *   SM_FRAME_EOF    the call's stdin ends (empty payload). A call without
 *                   stdin gets this right after SM_FRAME_CALL.
 *   SM_FRAME_TTY    a call on a pseudo-terminal the agent opens (a terminal,
 *                   `sandman exec -t`): rows and columns (2 bytes each, BE),
 *                   then the payload of SM_FRAME_CALL. The program is a
 *                   session leader with the terminal as its controlling
 *                   terminal and fds 0-2; SM_FRAME_STDIN is what is typed,
 *                   its output comes back as SM_FRAME_STDOUT (the terminal
 *                   merges both streams); SM_FRAME_EOF is ignored (a terminal
 *                   has no end of input but ^D).
 *   SM_FRAME_RESIZE rows and columns (2 bytes each, BE) of the current
 *                   call's terminal: the program gets SIGWINCH. Ignored for
 *                   a call without one.
 *   SM_FRAME_NOT_AFTER  8 bytes, BE: a wall-clock time in ms since the
 *                   epoch. Sent right before the SM_FRAME_CALL (or _TTY)
 *                   of the same id: a call frame read after that time is
 *                   not started, and answered SM_FRAME_FAIL with ETIME
 *                   and SM_AGENT_LATE. The host sends a call to an agent
 *                   still frozen ahead of the thaw (docs/state.md): should
 *                   the thaw fail, the call can never start later, when
 *                   something else thaws the sandbox.
 * Agent -> host:
 *   SM_FRAME_HELLO  once, at start: "sandman-agent <protocol version>".
 *   SM_FRAME_STDOUT / SM_FRAME_STDERR   the call's output as it arrives.
 *   SM_FRAME_EXIT   4 bytes, BE: the exit code (128+n for signal n). The
 *                   call is over; the agent takes the next SM_FRAME_CALL.
 *   SM_FRAME_FAIL   the program could not be started: errno (4 bytes, BE)
 *                   then a message. The call is over.
 *
 * The host-tool route's relay (`sandman-agent route`, route.c) speaks the
 * same framing on its own exec; the id field is then a connection id:
 * Relay -> host:
 *   SM_FRAME_HELLO          once, when its socket listens: SM_ROUTE_HELLO,
 *                           a NUL, then the container's PATH.
 *   SM_FRAME_ROUTE_REQUEST  who connected (the peer block of route_peer.h:
 *                           the process the kernel names and its
 *                           ancestors), then one whole HTTP/1.1 request
 *                           (head and body, the bytes the sandbox's process
 *                           sent) of connection id.
 * Host -> relay:
 *   SM_FRAME_ROUTE_RESPONSE the whole HTTP/1.1 response for connection id;
 *                           the relay writes it and closes the connection.
 *
 * The ports relay (`sandman-agent ports`, port_relay.c) speaks it on its
 * own exec too; the id field is a connection id the host chose (never 0,
 * never used twice by one host). It carries TCP connections to the
 * sandbox's own loopback (docs/ports.md):
 * Relay -> host:
 *   SM_FRAME_HELLO       once, at start: SM_PORTS_HELLO.
 *   SM_FRAME_PORT_OPENED 4 bytes, BE: 0 when the connection asked for by
 *                        SM_FRAME_PORT_OPEN is up, else the errno of the
 *                        connect (the connection is then over).
 * Host -> relay:
 *   SM_FRAME_PORT_OPEN   2 bytes, BE: the port (1-65535) to connect to on
 *                        127.0.0.1 (then ::1) inside the sandbox.
 * Both ways:
 *   SM_FRAME_PORT_DATA   bytes of the connection (at most
 *                        SM_FRAME_DATA_MAX). A side never has more than
 *                        SM_PORT_WINDOW bytes of one connection sent and
 *                        not yet acknowledged: the other side's buffer.
 *   SM_FRAME_PORT_ACK    4 bytes, BE: that many more bytes were delivered
 *                        (written to the socket at the far end).
 *   SM_FRAME_PORT_EOF    this side sends nothing more (a half close).
 *   SM_FRAME_PORT_CLOSE  the connection is over (both halves closed, an
 *                        error, a reset): nothing more of it either way.
 * Frames of a connection that is over are dropped (they cross on the wire).
 *
 * One call at a time per agent. Stdin frames of a call id other than the
 * current one are dropped (they can cross an exit on the wire). Either side
 * ends the session by closing its end. */
#ifndef SANDMAN_AGENT_FRAME_H
#define SANDMAN_AGENT_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define SM_AGENT_PROTOCOL "3"
#define SM_AGENT_HELLO "sandman-agent " SM_AGENT_PROTOCOL
#define SM_ROUTE_HELLO "sandman-route 1"
#define SM_PORTS_HELLO "sandman-ports 1"

#define SM_FRAME_HEADER 9
/* Hard caps: a call frame holds argv and the environment; output and stdin
 * travel in chunks of at most SM_FRAME_DATA_MAX. */
#define SM_FRAME_CALL_MAX (4u << 20)
#define SM_FRAME_DATA_MAX (64u << 10)
/* The route's caps: SM_ROUTE_REQUEST_MAX (and the peer block in front of
 * it, ROUTE_PEER_BLOCK_MAX of route_peer.h) and SM_ROUTE_RESPONSE_MAX of
 * sandman/hostroute.h (tool_route.c and route_peer.c check that they agree). */
#define SM_FRAME_ROUTE_PEER_MAX 1548u
#define SM_FRAME_ROUTE_REQUEST_MAX ((4u << 20) + SM_FRAME_ROUTE_PEER_MAX)
#define SM_FRAME_ROUTE_RESPONSE_MAX (8u << 20)

enum {
  SM_FRAME_CALL = 'C',
  SM_FRAME_STDIN = 'I',
  SM_FRAME_EOF = 'E',
  SM_FRAME_HELLO = 'H',
  SM_FRAME_STDOUT = 'O',
  SM_FRAME_STDERR = 'R',
  SM_FRAME_EXIT = 'X',
  SM_FRAME_FAIL = 'F',
  SM_FRAME_ROUTE_REQUEST = 'Q',
  SM_FRAME_ROUTE_RESPONSE = 'P',
  SM_FRAME_PORT_OPEN = 'N',
  SM_FRAME_PORT_OPENED = 'A',
  SM_FRAME_PORT_DATA = 'D',
  SM_FRAME_PORT_ACK = 'K',
  SM_FRAME_PORT_EOF = 'Z',
  SM_FRAME_PORT_CLOSE = 'Y',
  SM_FRAME_TTY = 'T',
  SM_FRAME_RESIZE = 'W',
  SM_FRAME_NOT_AFTER = 'L',
};

/* The message of a call refused after its SM_FRAME_NOT_AFTER (what
 * follows the errno in SM_FRAME_FAIL starts with it). */
#define SM_AGENT_LATE "call late"

/* An 8-byte big-endian number at p (SM_FRAME_NOT_AFTER). */
void agent_frame_put_u64(unsigned char *p, uint64_t v);
uint64_t agent_frame_get_u64(const unsigned char *p);

/* A terminal's size: 1..SM_FRAME_TTY_DIM_MAX in each direction. */
#define SM_FRAME_TTY_DIM_MAX 4096u

/* The bytes of one connection a side may have in flight (sent, not yet
 * acknowledged), each way. */
#define SM_PORT_WINDOW (256u << 10)

/* A 4-byte big-endian number at p (ids, lengths, the ports' counts). */
void agent_frame_put_u32(unsigned char *p, uint32_t v);
uint32_t agent_frame_get_u32(const unsigned char *p);

/* Writes the 9-byte header for a frame into out. */
void agent_frame_header(unsigned char out[SM_FRAME_HEADER], int type, uint32_t call_id,
                        uint32_t len);

/* An incremental reader: feed it bytes as they arrive; it calls on_frame
 * for each complete frame. A frame whose type is unknown or whose length
 * exceeds the cap for its type is a protocol error. */
typedef int (*agent_frame_fn)(void *ud, int type, uint32_t call_id, const unsigned char *payload,
                              uint32_t len);

typedef struct agent_frame_reader {
  unsigned char head[SM_FRAME_HEADER];
  size_t head_have;
  unsigned char *payload; /* malloc'd while a payload is being collected */
  uint32_t need, have;
  int type;
  uint32_t call_id;
  uint32_t max_len;       /* the largest payload accepted (any type) */
  agent_frame_fn on_frame;
  void *ud;
} agent_frame_reader;

void agent_frame_reader_init(agent_frame_reader *r, uint32_t max_len, agent_frame_fn on_frame,
                             void *ud);
/* 0, or -1 on a protocol error (bad type, over the cap, no memory), or what
 * on_frame returned when it was not 0 (reading stops there). */
int agent_frame_reader_feed(agent_frame_reader *r, const unsigned char *data, size_t len);
/* True between frames (nothing partial held). */
int agent_frame_reader_idle(const agent_frame_reader *r);
void agent_frame_reader_dispose(agent_frame_reader *r);

/* The largest payload a frame of this type may have, 0 for an unknown type. */
uint32_t agent_frame_type_max(int type);

/* A terminal's size as SM_FRAME_TTY and SM_FRAME_RESIZE carry it (4 bytes
 * at p). get: -1 when len < 4 or a dimension is 0 or over
 * SM_FRAME_TTY_DIM_MAX. */
void agent_frame_size_put(unsigned char p[4], unsigned rows, unsigned cols);
int agent_frame_size_get(const unsigned char *p, uint32_t len, unsigned *rows, unsigned *cols);

/* Splits a SM_FRAME_CALL payload in place. Fills *cwd, argv (argc entries
 * plus a NULL; room for max_argv + 1) and env (the rest plus a NULL; room
 * for max_env + 1) with pointers into payload. -1 when malformed (not NUL-terminated, argc
 * missing, zero or over max, too many env entries). */
int agent_frame_parse_call(unsigned char *payload, uint32_t len, const char **cwd, char **argv,
                           size_t max_argv, size_t *argc, char **env, size_t max_env, size_t *envc);

#endif
